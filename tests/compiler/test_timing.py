"""``tensorc.compile(..., time_passes=True)``, ``module.compile_times`` and ``tensorc compile
--time-passes``: every phase present, the numbers non-negative and summing to the total.
Never asserts on speed."""
from __future__ import annotations

import pytest

import models
import tensorc
from tensorc.cli.main import main
from tensorc.compiler.timing import PHASES, CompileTimes

# what every CPU compile runs (kernel cache and nvcc phases depend on the cache and target)
ALWAYS = ("import and validation", "fusion", "scheduling", "lowering to loop IR",
          "loop passes", "memory plan", "LLVM IR emission", "LLVM optimization",
          "object emission", "module creation")


def test_compile_times_has_every_phase_and_sums_to_the_total(capsys) -> None:
    mod = tensorc.compile(str(models.path("lenet5")), time_passes=True, cache=False)
    times = mod.compile_times
    assert isinstance(times, CompileTimes)
    for phase in ALWAYS:
        assert phase in times.phases, phase
    graph_passes = [p for p in times.phases if p.startswith("graph pass ")]
    assert "graph pass fold_constants" in graph_passes and "graph pass alter_layout" in \
        graph_passes
    assert all(p in PHASES or p in graph_passes for p in times.phases)
    assert all(seconds >= 0 for seconds in times.phases.values())
    assert all(seconds >= 0 for seconds in times.kernels.values())
    # the phases cover the compile: what is left (signatures, kernel records) is small; the
    # kernels' phases add up the seconds of every process that built them, each of which
    # worked at most the parallel build's wall time
    assert times.total > 0
    workers, wall = times.parallel
    assert sum(times.phases.values()) <= times.total * 1.001 + (workers - 1) * wall
    assert sum(times.phases.values()) >= 0.5 * times.total
    # every distinct kernel is named, and the slowest come first
    assert set(times.kernels) == {k.name for k in mod.kernels}
    slowest = times.slowest_kernels(3)
    assert [s for _, s in slowest] == sorted((s for _, s in slowest), reverse=True)
    report = capsys.readouterr().err
    assert report == times.report() + "\n"
    assert "LLVM optimization" in report and "slowest kernels" in report
    assert slowest[0][0] in report


def test_compile_times_without_time_passes_prints_nothing(capsys) -> None:
    mod = tensorc.compile(str(models.path("mlp")), cache=False)
    assert mod.compile_times.total > 0
    assert capsys.readouterr().err == ""


def test_loaded_module_has_no_compile_times(tmp_path) -> None:
    path = tmp_path / "mlp.tcz"
    tensorc.compile(str(models.path("mlp")), cache=False).save(str(path))
    assert tensorc.load(str(path)).compile_times is None


def test_cli_time_passes(tmp_path, capsys) -> None:
    out = tmp_path / "mlp.tcz"
    assert main(["compile", str(models.path("mlp")), "-o", str(out), "--time-passes",
                 "--no-cache"]) == 0
    text = capsys.readouterr().out
    for phase in ("import and validation", "graph pass simplify", "scheduling",
                  "LLVM IR emission", "LLVM optimization", "object emission", "total",
                  "slowest kernels"):
        assert phase in text, phase


def test_report_orders_phases_as_they_run() -> None:
    times = CompileTimes()
    times.add("object emission", 0.5)
    times.add("graph pass simplify", 0.25)
    times.add("scheduling", 1.0, kernel="k0")
    times.add("LLVM IR emission", 2.0, kernel="k0")
    times.add("scheduling", 0.5, kernel="k1")
    times.total = 5.0
    assert [p for p, _ in times.ordered()] == ["graph pass simplify", "scheduling",
                                               "LLVM IR emission", "object emission"]
    assert times.slowest_kernels() == [("k0", 3.0), ("k1", 0.5)]
    report = times.report()
    assert "other" in report and "0.750 s" in report    # 5 - 4.25 unaccounted


@pytest.mark.parametrize("seconds", [0.0, 1e-9])
def test_phase_context_records_non_negative(seconds: float) -> None:
    times = CompileTimes()
    with times.phase("fusion"):
        pass
    times.add("fusion", seconds)
    assert times.phases["fusion"] >= seconds


def test_cuda_compile_records_its_phases() -> None:
    """The CUDA back end's phases (nvcc itself only where nvcc is installed: built here
    without it)."""
    from tensorc.compiler.cuda import compile_graph_cuda, cuda_module
    from tensorc.frontend.model import import_model
    from tensorc.target import Target
    target = Target.from_string("cuda")
    _, graph = import_model(str(models.path("mlp")), None)
    times = CompileTimes()
    compiled = compile_graph_cuda(graph, target, times=times)
    cuda_module(compiled, target, build=False, times=times)
    for phase in ("graph pass simplify", "fusion", "scheduling", "lowering to loop IR",
                  "loop passes", "memory plan", "CUDA C emission"):
        assert phase in times.phases, phase
    assert "nvcc" not in times.phases and "LLVM optimization" not in times.phases
    assert set(times.kernels) == set(compiled.device) and all(
        seconds >= 0 for seconds in times.phases.values())

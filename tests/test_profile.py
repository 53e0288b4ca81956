"""The per-kernel profiler: FLOPs and bytes of known kernels, the table, the JSON, the trace,
and ``tensorc profile`` end to end."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import models
import tensorc
from tensorc.cli.main import main
from tensorc.runtime.profile import KernelInfo, build_profile
from tensorc.runtime import machine, microbench
from tensorc.runtime.machine import MemoryLevel, Roofline
from tensorc.runtime.microbench import Best

# a fixed roofline: the tests check arithmetic, not this machine's speed
ROOFLINE = Roofline(peak_gflops=100.0, bandwidth_gbs=20.0, threads=1, source="given")


def _conv_relu_matmul():
    """conv 3->8 (3x3, pad 1) + relu on 1x3x10x10, then a matmul [1, 800] x [800, 5]."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((800, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "b"], ["y"])]
    return make_model(nodes, [tensor_info("x", "float32", (1, 3, 10, 10))], ["y"],
                      initializers={"w": w, "b": b, "shape": np.array([1, 800])})


@pytest.fixture(scope="module")
def profile():
    mod = tensorc.compile(_conv_relu_matmul(), num_threads=1)
    return mod, mod.profile(seconds=0.05, min_runs=5, roofline=ROOFLINE, model="cm")


def test_flops_and_bytes_of_conv_and_matmul(profile) -> None:
    _, prof = profile
    by_op = {k.info.ops[0]: k for k in prof.kernels}
    conv, matmul = by_op["conv"], by_op["matmul"]
    assert conv.info.ops == ("conv", "relu")
    assert conv.info.shape == (1, 8, 10, 10)
    # 2 * outputs * (C * KH * KW), and one operation per element for the relu
    assert conv.info.flops == 2 * (8 * 10 * 10) * (3 * 3 * 3) + 8 * 10 * 10
    # input + weights (packed, same element count) + output, float32
    assert conv.info.bytes == 4 * (3 * 10 * 10 + 8 * 3 * 3 * 3 + 8 * 10 * 10)
    assert matmul.info.flops == 2 * 5 * 800
    # A + B + output; the constant B is read as the column panels it was repacked into at
    # compile time: 5 columns padded to a whole panel of 8 (AVX2) or 16 (AVX-512) lanes
    lanes = tensorc.Target.from_string("llvm").vector_lanes("float32")
    assert matmul.info.bytes == 4 * (800 + 800 * lanes + 5)


def test_an_activation_with_no_instruction_counts_its_vector_arithmetic() -> None:
    # x * sigmoid(x) on 2 x 64: the sigmoid counts the 13 operations of its exp-based form
    # per element (MATH_FLOPS), the multiply one
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", (2, 64))], ["y"])
    prof = tensorc.compile(model, num_threads=1).profile(seconds=0.01, min_runs=2,
                                                         roofline=ROOFLINE, model="silu")
    (kernel,) = prof.kernels
    assert kernel.info.flops == (13 + 1) * 2 * 64


def test_timings_and_roofline_arithmetic(profile) -> None:
    _, prof = profile
    assert prof.runs >= 5 and prof.threads == 1
    for k in prof.kernels:
        assert k.seconds > 0
        assert k.gflops == pytest.approx(k.info.flops / k.seconds / 1e9)
        bound = max(k.info.flops / 100e9, k.info.bytes / 20e9)
        assert k.bound_seconds == pytest.approx(bound)
        assert k.roofline_fraction == pytest.approx(bound / k.seconds)   # never clipped
    assert prof.kernel_seconds == pytest.approx(sum(k.seconds for k in prof.kernels))
    assert prof.end_to_end_seconds > 0


def test_table_is_sorted_by_time(profile) -> None:
    _, prof = profile
    lines = prof.table().splitlines()
    assert lines[0].split() == ["#", "kernel", "ops", "shape", "ms", "share", "MFLOP", "KB",
                                "GFLOP/s", "GB/s", "level", "roofline"]
    rows = [line.split() for line in lines[2:2 + len(prof.kernels)]]
    times = [float(r[4]) for r in rows]
    assert times == sorted(times, reverse=True)
    assert {r[2] for r in rows} == {"conv+relu", "matmul"}
    assert sum(float(r[5].rstrip("%")) for r in rows) == pytest.approx(100, abs=0.5)
    assert "kernel calls" in lines[len(rows) + 2] and "end to end" in lines[len(rows) + 2]


def test_json_and_trace(profile, tmp_path: Path) -> None:
    _, prof = profile
    data = json.loads(json.dumps(prof.to_json()))
    assert [k["ms"] for k in data["kernels"]] == sorted((k["ms"] for k in data["kernels"]),
                                                         reverse=True)
    assert data["roofline"]["peak_gflops"] == 100.0
    path = tmp_path / "trace.json"
    prof.write_trace(path)
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(prof.kernels)
    for a, b in zip(events, events[1:]):       # laid out in execution order, no overlap
        assert b["ts"] == pytest.approx(a["ts"] + a["dur"])
    assert {e["name"] for e in events} == {k.info.name for k in prof.kernels}


def test_profile_survives_save_and_load(profile, tmp_path: Path) -> None:
    mod, prof = profile
    path = tmp_path / "cm.tcz"
    mod.save(path)
    loaded = tensorc.load(path)
    assert loaded.kernels == mod.kernels
    again = loaded.profile(seconds=0.01, min_runs=2, roofline=ROOFLINE)
    assert [k.info for k in again.kernels] == [k.info for k in prof.kernels]


def test_cli_profile_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    code = main(["profile", str(models.path("lenet5")), "--threads", "1", "--seconds", "0.05",
                 "--peak-gflops", "100", "--bandwidth", "20", "--json", "--trace", str(trace)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["threads"] == 1
    assert [k["ops"][0] for k in data["kernels"]].count("conv") == 2
    assert json.loads(trace.read_text())["traceEvents"]


def test_cli_profile_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", str(models.path("mlp")), "--threads", "1", "--seconds", "0.05",
                 "--peak-gflops", "100", "--bandwidth", "20", "--top", "2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out and "roofline" in out and "more kernels" in out


def test_cli_profile_needs_both_roofline_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", str(models.path("mlp")), "--peak-gflops", "100"])
    assert code == 2
    assert "--bandwidth" in capsys.readouterr().err


def test_roofline_plot(profile, tmp_path: Path) -> None:
    _, prof = profile
    path = tmp_path / "roofline.png"
    prof.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_plot_without_matplotlib_says_how_to_get_it(profile, monkeypatch, tmp_path) -> None:
    import sys
    _, prof = profile
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(tensorc.TensorcError, match="pip install"):
        prof.plot(tmp_path / "x.png")


def _two_kernels(roofline: Roofline):
    """A profile of two made-up kernels: one at 50% of ROOFLINE's compute bound, one at 250%."""
    infos = [KernelInfo("slow", ("conv",), (1, 8), "float32", flops=10**8, bytes=1000),
             KernelInfo("fast", ("matmul",), (1, 8), "float32", flops=10**8, bytes=1000)]
    # 1e8 FLOPs at 100 GFLOP/s take 1 ms: the slow one 2 ms, the fast one 0.4 ms
    samples = [[2_000_000, 400_000]] * 3
    return build_profile(infos, samples, [0.0025] * 3, roofline, model="made-up")


def test_a_kernel_faster_than_its_bound_shows_above_100_percent_and_a_warning() -> None:
    prof = _two_kernels(ROOFLINE)
    slow, fast = prof.kernels
    assert slow.roofline_fraction == pytest.approx(0.5) and not slow.above_bound
    assert fast.roofline_fraction == pytest.approx(2.5) and fast.above_bound
    table = prof.table()
    (fast_row,) = [line for line in table.splitlines() if line.startswith("1 ")]
    assert fast_row.split()[-1] == "250%!"
    assert "WARNING: 1 kernel ran faster than the roofline allows" in table
    assert "--remeasure" in table
    data = prof.to_json()
    assert [k["above_bound"] for k in data["kernels"]] == [False, True]
    assert data["kernels"][1]["roofline"] == pytest.approx(2.5)
    assert data["warnings"] and "faster than the roofline" in data["warnings"][0]
    assert "given, not measured" in table


def test_a_kernel_beating_a_cached_roofline_has_it_measured_again(monkeypatch, tmp_path
                                                                    ) -> None:
    monkeypatch.setenv("TENSORC_CACHE_DIR", str(tmp_path))
    measured = []

    def fake_peak(target, threads=1):
        measured.append(threads)
        return Best(300.0, 20, 24)
    monkeypatch.setattr(microbench, "measure_peak", fake_peak)
    monkeypatch.setattr(microbench, "measure_bandwidth", lambda target, threads=1, l3_bytes=0:
                        Best(20.0, 20, 24))
    monkeypatch.setattr(microbench, "measure_cache_bandwidth", lambda target, cache, threads=1:
                        Best(100.0, 20, 24))
    monkeypatch.setattr(machine, "isa_bound",
                        lambda target: machine.IsaBound(0.0, "no plausibility check: test"))
    cached = Roofline(100.0, 20.0, 1, "cached", method=machine.METHOD, runs=20,
                      version=machine.__version__)
    prof = _two_kernels(cached)
    assert measured == [1]
    assert prof.roofline.peak_gflops == 300.0 and prof.roofline.source == "measured"
    fast = prof.kernels[1]
    assert fast.roofline_fraction == pytest.approx(250 / 300) and not fast.above_bound
    assert any("250% of its bound by the cached roofline (100.0 GFLOP/s peak): measured "
               "again, 300.0 GFLOP/s" in n for n in prof.notes)
    # a given roofline is the user's: never measured over
    _two_kernels(ROOFLINE)
    assert measured == [1]


def test_a_profile_in_the_tests_does_not_write_the_users_cache(
        monkeypatch, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    users = Path.home() / ".cache" / "tensorc" / "machine.json"
    before = users.stat().st_mtime_ns if users.exists() else None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(microbench, "measure_peak", lambda target, threads=1:
                        Best(50.0 * threads, 20, 24))
    monkeypatch.setattr(microbench, "measure_bandwidth", lambda target, threads=1, l3_bytes=0:
                        Best(10.0, 20, 24))
    monkeypatch.setattr(microbench, "measure_cache_bandwidth", lambda target, cache, threads=1:
                        Best(100.0, 20, 24))
    assert main(["profile", str(models.path("mlp")), "--threads", "1", "--seconds", "0.01",
                 "--remeasure"]) == 0
    out = capsys.readouterr().out
    # the better of these fakes and what the session's cache may hold already
    assert "GFLOP/s peak" in out and "measured now" in out
    assert (users.stat().st_mtime_ns if users.exists() else None) == before
    assert not (tmp_path / "xdg").exists()
    assert (machine.cache_root() / "machine.json").exists()
    assert "tensorc-test-cache-" in str(machine.cache_root())


def test_cli_profile_help_lists_remeasure(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["profile", "--help"])
    assert exit_.value.code == 0
    assert "--remeasure" in capsys.readouterr().out


HIERARCHY = Roofline(100.0, 10.0, 1, "given", levels=(
    MemoryLevel("L1", 32 << 10, 200.0), MemoryLevel("L2", 512 << 10, 80.0),
    MemoryLevel("DRAM", 0, 10.0)))


def test_each_kernels_memory_bound_is_at_the_level_its_working_set_fits(tmp_path) -> None:
    # an elementwise kernel over 16 KB, one over 256 KB and one over 4 MB, each moving its
    # bytes at 40 GB/s; the part of a working set the faster levels hold counts at their speed
    infos = [KernelInfo(name, ("add",), (1,), "float32", flops=nbytes // 12, bytes=nbytes)
             for name, nbytes in [("small", 16 << 10), ("mid", 256 << 10), ("big", 4 << 20)]]
    samples = [[int(info.bytes / 40e9 * 1e9) for info in infos]] * 3
    prof = build_profile(infos, samples, [1e-3] * 3, HIERARCHY, model="levels")
    small, mid, big = prof.kernels
    assert [k.level for k in prof.kernels] == ["L1", "L2", "DRAM"]
    l1, l2 = 32 << 10, 512 << 10
    mid_bound = l1 / 200e9 + ((256 << 10) - l1) / 80e9           # 46% at 40 GB/s
    big_bound = l1 / 200e9 + (l2 - l1) / 80e9 + ((4 << 20) - l2) / 10e9     # 356%
    assert small.bound_seconds == pytest.approx((16 << 10) / 200e9)
    assert mid.bound_seconds == pytest.approx(mid_bound)
    assert big.bound_seconds == pytest.approx(big_bound)
    assert small.roofline_fraction == pytest.approx(0.2, rel=1e-2)
    assert mid.roofline_fraction == pytest.approx(mid_bound / mid.seconds)
    assert big.roofline_fraction == pytest.approx(big_bound / big.seconds) and big.above_bound
    rows = {line.split()[1]: line.split() for line in prof.table().splitlines()[2:5]}
    assert rows["small"][-2:] == ["L1", "20%"]
    assert rows["mid"][-2:] == ["L2", f"{mid.roofline_fraction:.0%}"]
    assert rows["big"][-2:] == ["DRAM", f"{big.roofline_fraction:.0%}!"]
    data = prof.to_json()
    by_name = {k["name"]: k for k in data["kernels"]}
    assert by_name["mid"]["level"] == "L2"
    assert by_name["mid"]["bound_gbs"] == pytest.approx((256 << 10) / mid_bound / 1e9)
    assert [x["name"] for x in data["roofline"]["levels"]] == ["L1", "L2", "DRAM"]
    path = tmp_path / "levels.png"
    prof.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_kernel_just_above_its_bound_never_reads_100_percent() -> None:
    info = KernelInfo("edge", ("add",), (1,), "float32", flops=10**8, bytes=1000)
    prof = build_profile([info], [[997_000]] * 3, [1e-3] * 3, ROOFLINE)   # bound 1 ms
    (kernel,) = prof.kernels
    assert kernel.above_bound
    assert prof.table().splitlines()[2].split()[-1] == "100.3%!"

"""The on-disk object cache (tensorc/compiler/object_cache.py) and the kernels built through
it (compiler/kernel_objects.py): hits and misses counted, one test per key field, a corrupt
entry refused and rebuilt, a kernel shared between models reused, workers that fail, the size
cap evicting the least recently used entry, and every way to disable it. Never asserts on
timing."""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
import numpy as np
import onnx
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import models
import tensorc
from tensorc.autotune.records import BestConfigs, workload_hash
from tensorc.cli.main import main
from tensorc.compiler import object_cache
from tensorc.compiler import kernel_objects
from tensorc.compiler.kernel_objects import kernel_jobs
from tensorc.compiler.llvm import compile_model
from tensorc.compiler.object_cache import STATS, ObjectCache, cached_emit_object, kernel_key
from tensorc.compiler.pipeline import optimize_graph
from tensorc.frontend.model import import_model
from tensorc.passes.graph.fuse import fuse
from tensorc.target import Target

IR = "define i32 @answer() {\n  ret i32 42\n}\n"


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """A fresh cache folder and zeroed counters; returns the kernels folder."""
    monkeypatch.setenv("TENSORC_CACHE_DIR", str(tmp_path))
    STATS.clear()
    return tmp_path / "kernels"


def entries(folder) -> list:
    return sorted(folder.glob("*.obj")) if folder.exists() else []


def _kernels_of(path: str) -> int:
    """How many distinct kernels a compile of the model builds."""
    return tensorc.compile(path, cache=False).info["kernels"]


def test_second_compile_of_a_model_hits(kernels) -> None:
    path = str(models.path("lenet5"))
    count = _kernels_of(path)
    first = tensorc.compile(path)
    # each kernel by its key, and the entry function by its IR: all missed, all stored
    assert (STATS["misses"], STATS["hits"], STATS["writes"]) == (count + 1, 0, count + 1)
    second = tensorc.compile(path)
    assert (STATS["misses"], STATS["hits"], STATS["writes"]) == (count + 1, count + 1,
                                                                 count + 1)
    assert second.object_code == first.object_code
    assert "kernel cache" in second.compile_times.phases
    # nothing of a kernel is built again: not its schedule, loops or LLVM
    for skipped in ("scheduling", "lowering to loop IR", "loop passes", "LLVM optimization",
                    "object emission"):
        assert skipped not in second.compile_times.phases
    x = {"x": np.random.default_rng(0).standard_normal((1, 1, 28, 28), np.float32)}
    name = first.outputs[0][0]
    np.testing.assert_array_equal(second.run(x)[name], first.run(x)[name])
    assert len(entries(kernels)) == count + 1


def _relu_model(extra: bool) -> onnx.ModelProto:
    """Relu over x (2, 3); with ``extra``, a second output: Softmax over another input."""
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    inputs = [tensor_info("x", "float32", (2, 3))]
    outputs = ["y"]
    if extra:
        nodes.append(helper.make_node("Softmax", ["z"], ["s"]))
        inputs.append(tensor_info("z", "float32", (4, 5)))
        outputs.append("s")
    return make_model(nodes, inputs, outputs, name="extra" if extra else "plain")


def test_a_model_sharing_a_kernel_reuses_it(kernels) -> None:
    tensorc.compile(_relu_model(False))
    STATS.clear()
    mod = tensorc.compile(_relu_model(True))
    # the Relu kernel from the first model; the Softmax and the new entry built
    assert (STATS["hits"], STATS["misses"]) == (1, 2)
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    z = np.random.default_rng(0).standard_normal((4, 5), np.float32)
    out = mod.run({"x": x, "z": z})
    np.testing.assert_array_equal(out["y"], np.maximum(x, 0))
    e = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(out["s"], e / e.sum(-1, keepdims=True), rtol=1e-5)


def _jobs(model: str, target: Target, configs=None) -> list:
    _, graph = import_model(str(models.path(model)), None)
    graph = optimize_graph(graph, target)
    jobs, _ = kernel_jobs(graph, fuse(graph), configs, target)
    return jobs


def test_kernel_key_is_stable_and_covers_workload_and_config() -> None:
    target = Target.host()
    jobs = _jobs("mlp", target)
    keys = [job.key for job in jobs]
    assert keys == [job.key for job in _jobs("mlp", target)]
    assert len(set(keys)) == len(keys)              # each workload its own key
    job = jobs[0]
    assert kernel_key(job.workload, None, target) == job.key
    assert kernel_key(job.workload, {"tile": 4}, target) != job.key
    assert kernel_key(job.workload, {"tile": 8}, target) != \
        kernel_key(job.workload, {"tile": 4}, target)
    assert job.symbol.startswith("tensorc_kernel_") and job.key.startswith(job.symbol[15:])


@pytest.mark.parametrize("change", ["cpu", "cpu_features", "tensorc_source", "llvm_version"])
def test_a_changed_target_or_version_changes_the_kernel_key(monkeypatch, change) -> None:
    target = Target.host()
    job = _jobs("mlp", target)[0]
    if change == "cpu":
        target = dataclasses.replace(target, mcpu="x86-64")
    elif change == "cpu_features":
        target = _host_without("avx2")
    elif change == "tensorc_source":
        monkeypatch.setattr(object_cache, "source_hash", lambda: "other")
    else:
        monkeypatch.setattr(llvm, "llvm_version_info", (1, 0, 0))
    assert kernel_key(job.workload, None, target) != job.key


def test_kernel_key_is_the_same_in_every_process(tmp_path) -> None:
    """String hashing is randomized per process: the key must not depend on it, or a warm
    compile in a new process would miss."""
    script = ("import models; from tensorc.frontend.model import import_model;"
              "from tensorc.compiler.pipeline import optimize_graph;"
              "from tensorc.compiler.kernel_objects import kernel_jobs;"
              "from tensorc.passes.graph.fuse import fuse;"
              "from tensorc.target import Target; t = Target.host();"
              "_, g = import_model(str(models.path('lenet5')), None); g = optimize_graph(g, t);"
              "print(','.join(j.key for j in kernel_jobs(g, fuse(g), None, t)[0]))")
    root = Path(__file__).resolve().parents[2]
    keys = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(root))
        out = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, check=True,
                             capture_output=True, text=True).stdout.split()
        keys.add(out[-1])
    assert len(keys) == 1


def _symbolic_relu():
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 77])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 77])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_kernel_over_symbolic_dims_is_keyed_by_their_ranges(kernels) -> None:
    """The ranges decide a symbolic kernel's code (guards they prove needless are dropped):
    one built for n in [1, 8] is not reused for n in [1, inf), and the same ranges hit."""
    model = _symbolic_relu()
    narrow = tensorc.compile(model, dim_ranges={"n": (1, 8)})
    assert (STATS["misses"], STATS.get("hits", 0)) == (2, 0)     # the kernel and the entry
    wide = tensorc.compile(model)
    assert (STATS["misses"], STATS.get("hits", 0)) == (4, 0)
    tensorc.compile(model)
    assert STATS["hits"] == 2
    x = np.random.default_rng(0).standard_normal((37, 77)).astype("float32")
    np.testing.assert_array_equal(wide.run({"x": x})["y"], np.maximum(x, 0))
    np.testing.assert_array_equal(narrow.run({"x": x[:5]})["y"], np.maximum(x[:5], 0))


def test_a_corrupt_kernel_entry_is_rebuilt(kernels) -> None:
    path = str(models.path("mlp"))
    first = tensorc.compile(path)
    job = _jobs("mlp", Target.host())[0]
    entry = kernels / f"{job.key}.obj"
    data = bytearray(entry.read_bytes())
    data[-7] ^= 0x04
    entry.write_bytes(bytes(data))
    STATS.clear()
    second = tensorc.compile(path)
    assert (STATS["corrupt"], STATS["misses"], STATS["writes"]) == (1, 1, 1)
    assert second.object_code == first.object_code
    x = {"x": np.random.default_rng(1).standard_normal((1, 784), np.float32)}
    np.testing.assert_array_equal(second.run(x)["y"], first.run(x)["y"])


def _dies(index: int):
    os._exit(3)             # what an LLVM assertion does to a worker


def _raises(index: int):
    raise RuntimeError("a worker's error")


@pytest.mark.parametrize("failure", [_dies, _raises])
def test_kernels_a_worker_fails_on_are_built_here(kernels, monkeypatch, failure) -> None:
    """A worker that dies or raises costs only its kernels' parallelism: they are built in
    this process (where a real error would be raised with its own message)."""
    monkeypatch.setattr(kernel_objects, "idle_cpus", lambda: 2)
    monkeypatch.setattr(kernel_objects, "_build_in_worker", failure)
    path = str(models.path("mlp"))
    mod = tensorc.compile(path)
    x = {"x": np.random.default_rng(2).standard_normal((1, 784), np.float32)}
    reference = tensorc.compile(path, cache=False)
    np.testing.assert_array_equal(mod.run(x)["y"], reference.run(x)["y"])


def test_workers_build_the_same_objects_as_one_process(monkeypatch) -> None:
    path = str(models.path("lenet5"))
    monkeypatch.setattr(kernel_objects, "idle_cpus", lambda: 1)
    alone = tensorc.compile(path, cache=False)
    monkeypatch.setattr(kernel_objects, "idle_cpus", lambda: 2)
    pooled = tensorc.compile(path, cache=False)
    assert pooled.compile_times.parallel[0] == 2 and alone.compile_times.parallel[0] == 1
    assert pooled.object_code == alone.object_code


@pytest.mark.parametrize("runnable, idle", [(1, 2), (2, 1), (7, 1), (None, 2)])
def test_a_pool_takes_only_the_cores_no_other_process_runs_on(monkeypatch, runnable,
                                                              idle) -> None:
    """On 2 cores, this process alone runnable: both; another process running: this one
    only (a forked pool there only adds its start-up costs); no figure: every core."""
    monkeypatch.setattr(kernel_objects, "usable_cpus", lambda: 2)
    monkeypatch.setattr(kernel_objects, "runnable_processes", lambda: runnable)
    assert kernel_objects.idle_cpus() == idle


def test_source_hash_covers_tensorc_own_files() -> None:
    assert object_cache.PACKAGE.name == "tensorc"
    assert (object_cache.PACKAGE / "api.py").is_file()
    assert (object_cache.PACKAGE / "codegen" / "llvm" / "codegen.py").is_file()


def _host_without(feature: str) -> Target:
    host = Target.host()
    return dataclasses.replace(host, features=host.features.replace(f"+{feature}",
                                                                    f"-{feature}"))


# each changes one field of the key; the second emission must miss
CHANGES = {
    "llvm_ir": lambda mp: (IR.replace("42", "43"), Target.host()),   # workload, config, trace
    "cpu": lambda mp: (IR, dataclasses.replace(Target.host(), mcpu="x86-64")),
    "cpu_features": lambda mp: (IR, _host_without("avx2")),
    "tensorc_source": lambda mp: (mp.setattr(object_cache, "source_hash", lambda: "other"),
                                  (IR, Target.host()))[1],
    "llvm_version": lambda mp: (mp.setattr(llvm, "llvm_version_info", (1, 0, 0)),
                                (IR, Target.host()))[1],
    "llvmlite_version": lambda mp: (mp.setattr(llvmlite, "__version__", "0.0.1"),
                                    (IR, Target.host()))[1],
}


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_a_changed_key_field_misses(kernels, monkeypatch, field: str) -> None:
    host = Target.host()
    cached_emit_object(IR, host)
    cached_emit_object(IR, host)
    assert (STATS["misses"], STATS["hits"]) == (1, 1)
    ir, target = CHANGES[field](monkeypatch)
    cached_emit_object(ir, target)
    assert (STATS["misses"], STATS["hits"]) == (2, 1)
    assert len(entries(kernels)) == 2
    cached_emit_object(ir, target)
    assert (STATS["misses"], STATS["hits"]) == (2, 2)


@pytest.mark.parametrize("damage", ["flip_payload", "flip_digest", "truncate", "magic",
                                    "empty"])
def test_a_corrupt_entry_is_refused_and_rebuilt(kernels, damage: str) -> None:
    host = Target.host()
    good = cached_emit_object(IR, host)
    (path,) = entries(kernels)
    data = bytearray(path.read_bytes())
    if damage == "flip_payload":
        data[-10] ^= 0x01
    elif damage == "flip_digest":
        data[len(object_cache.MAGIC) + 3] ^= 0x80
    elif damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "magic":
        data[0] ^= 0x20
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    assert cached_emit_object(IR, host) == good          # rebuilt, not the damaged bytes
    assert (STATS["corrupt"], STATS["misses"], STATS["hits"], STATS["writes"]) == (1, 2, 0, 2)
    assert cached_emit_object(IR, host) == good
    assert STATS["hits"] == 1


def test_size_cap_evicts_least_recently_used(tmp_path) -> None:
    STATS.clear()
    store = ObjectCache(tmp_path, max_bytes=2 * (1000 + 64) + 500)
    store.put("a", b"a" * 1000)
    store.put("b", b"b" * 1000)
    os.utime(store.path("a"), (1000, 1000))
    os.utime(store.path("b"), (2000, 2000))
    assert store.get("a") == b"a" * 1000                # now the most recently used
    store.put("c", b"c" * 1000)                         # over the cap: b goes
    assert STATS["evicted"] == 1
    assert store.get("b") is None
    assert store.get("a") == b"a" * 1000 and store.get("c") == b"c" * 1000
    assert not list(tmp_path.glob(".tmp-*"))


def test_eviction_lists_the_folder_once_per_sixteenth_of_the_cap(tmp_path, monkeypatch) -> None:
    store = ObjectCache(tmp_path, max_bytes=16 * 10_000)
    scans = []
    real = ObjectCache.evict
    monkeypatch.setattr(ObjectCache, "evict", lambda self: (scans.append(1), real(self)))
    for k in range(25):
        store.put(f"k{k}", bytes(1000))
    # the first write, then every 10 kB written (a sixteenth of the cap)
    assert len(scans) == 1 + 25 // 10
    assert object_cache.default_cache() is object_cache.default_cache()


def test_cache_false_reads_and_writes_nothing(kernels) -> None:
    tensorc.compile(str(models.path("mlp")), cache=False)
    tensorc.compile(str(models.path("mlp")), cache=False)
    assert sum(STATS.values()) == 0 and entries(kernels) == []


def test_empty_cache_dir_variable_disables_it(kernels, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TENSORC_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert object_cache.cache_dir() is None
    cached_emit_object(IR, Target.host())
    cached_emit_object(IR, Target.host())
    assert sum(STATS.values()) == 0
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_cli_no_cache(kernels, tmp_path, capsys) -> None:
    out = tmp_path / "mlp.tcz"
    assert main(["compile", str(models.path("mlp")), "-o", str(out), "--no-cache"]) == 0
    assert sum(STATS.values()) == 0 and entries(kernels) == []
    assert main(["compile", str(models.path("mlp")), "-o", str(out)]) == 0
    count = _kernels_of(str(models.path("mlp")))
    assert STATS["writes"] == count + 1 and len(entries(kernels)) == count + 1


def _put_many(folder: str, worker: int) -> None:
    store = ObjectCache(Path(folder), max_bytes=1 << 30)
    for _ in range(30):
        store.put("shared", bytes([worker]) * 5000)
        got = store.get("shared")
        assert got is None or len(got) == 5000 and len(set(got)) == 1


def test_processes_writing_one_entry_at_once_leave_a_whole_entry(tmp_path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_put_many, args=(str(tmp_path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    STATS.clear()
    got = ObjectCache(tmp_path, 1 << 30).get("shared")
    assert got is not None and len(set(got)) == 1 and STATS["corrupt"] == 0
    assert not list(tmp_path.glob(".tmp-*"))


def _configs_for(jobs: list, bogus: bool) -> BestConfigs:
    """A tuning log's configs: none recorded, or for every kernel a config with a knob no
    space has (rejected when scheduled; the default is used)."""
    best = {workload_hash(job.workload): {"config": {"no_such_knob": 1}} for job in jobs} \
        if bogus else {}
    return BestConfigs(log="tune.jsonl", best=best)


@pytest.mark.filterwarnings("ignore::tensorc.autotune.records.TuningLogNote")
@pytest.mark.parametrize("bogus", [False, True])
def test_a_cache_hit_tells_the_tuning_log_what_a_build_would(kernels, bogus) -> None:
    """Untunable kernels and rejected configs are remembered with the object: a warm compile
    reports the same tuning summary as the cold one."""
    target = Target.host()
    jobs = _jobs("lenet5", target)
    path = str(models.path("lenet5"))
    summaries = []
    for _ in range(2):
        STATS.clear()
        mod = compile_model(path, target, configs=_configs_for(jobs, bogus))
        summaries.append(mod.info["tuning"])
    assert STATS["hits"] == len(jobs) + 1 and STATS["misses"] == 0     # the second compile
    assert summaries[0] == summaries[1]
    assert summaries[1]["rejected_configs"] == (len(jobs) if bogus else 0)
    assert 0 < summaries[1]["default_kernels"] <= len(jobs)


def _compile_mlp_in_a_daemon(queue) -> None:
    mod = tensorc.compile(str(models.path("mlp")), cache=False)
    x = {"x": np.ones((1, 784), np.float32)}
    queue.put((mod.compile_times.parallel[0], mod.run(x)["y"]))


def test_a_daemonic_process_compiles_without_workers(monkeypatch) -> None:
    """A multiprocessing.Pool's worker may start no processes: its kernels are built in it."""
    monkeypatch.setattr(kernel_objects, "idle_cpus", lambda: 2)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_compile_mlp_in_a_daemon, args=(queue,), daemon=True)
    child.start()
    workers, y = queue.get(timeout=300)
    child.join()
    assert child.exitcode == 0 and workers == 1
    expected = tensorc.compile(str(models.path("mlp")), cache=False).run(
        {"x": np.ones((1, 784), np.float32)})["y"]
    np.testing.assert_array_equal(y, expected)

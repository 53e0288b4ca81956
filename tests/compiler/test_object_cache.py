"""The on-disk object cache (tensorc/compiler/object_cache.py): hits and misses counted,
one test per key field, a corrupt entry refused and rebuilt, the size cap evicting the least
recently used entry, and every way to disable it. Never asserts on timing."""
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
import pytest

import models
import tensorc
from tensorc.cli.main import main
from tensorc.compiler import object_cache
from tensorc.compiler.object_cache import (
    STATS, ObjectCache, cached_emit_object, loop_ir_key,
)
from tensorc.compiler.llvm import distinct_funcs, make_entry
from tensorc.compiler.pipeline import lower_graph
from tensorc.frontend.model import import_model
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


def test_second_compile_of_a_model_hits(kernels) -> None:
    path = str(models.path("lenet5"))
    first = tensorc.compile(path)
    # a miss by the loop IR, then by the LLVM IR; the object stored under both keys
    assert (STATS["misses"], STATS["hits"], STATS["writes"]) == (2, 0, 2)
    second = tensorc.compile(path)
    assert (STATS["misses"], STATS["hits"], STATS["writes"]) == (2, 1, 2)
    assert second.object_code == first.object_code
    assert "kernel cache" in second.compile_times.phases
    for skipped in ("LLVM IR emission", "LLVM optimization", "object emission"):
        assert skipped not in second.compile_times.phases
    x = {"x": np.random.default_rng(0).standard_normal((1, 1, 28, 28), np.float32)}
    name = first.outputs[0][0]
    np.testing.assert_array_equal(second.run(x)[name], first.run(x)[name])
    assert len(entries(kernels)) == 2


def test_loop_ir_key_is_stable_and_covers_every_attr_and_the_name() -> None:
    """The same loop IR gives the same key; any attr changes it (even one the code generator
    ignores: then the LLVM IR key still finds the object), and so does the module name."""
    _, graph = import_model(str(models.path("mlp")), None)
    target = Target.host()
    lowered = lower_graph(graph, target)
    entry = make_entry(lowered.graph, lowered.kernels, lowered.plan)
    funcs = distinct_funcs(lowered)
    key = loop_ir_key(lowered.graph.name, funcs, entry, target)
    assert key == loop_ir_key(lowered.graph.name, funcs, entry, target)
    funcs[0].attrs["note"] = "not read by the code generator"
    assert loop_ir_key(lowered.graph.name, funcs, entry, target) != key
    assert loop_ir_key("other", funcs, entry, target) != key


@pytest.mark.parametrize("change", ["config", "entry offset", "buffer shape", "target"])
def test_a_changed_loop_ir_field_changes_the_key(change: str) -> None:
    _, graph = import_model(str(models.path("mlp")), None)
    target = Target.host()
    lowered = lower_graph(graph, target)
    entry = make_entry(lowered.graph, lowered.kernels, lowered.plan)
    funcs = distinct_funcs(lowered)
    key = loop_ir_key(lowered.graph.name, funcs, entry, target)
    if change == "config":
        funcs[0].attrs["config"] = {**funcs[0].attrs["config"], "tile": -1}
    elif change == "entry offset":
        call = entry.body.stmts[0] if hasattr(entry.body, "stmts") else entry.body
        buffer, offset = call.args[0]
        call.args[0] = (buffer, offset + 64)
    elif change == "buffer shape":
        funcs[0].params[0].shape = (*funcs[0].params[0].shape[:-1],
                                    funcs[0].params[0].shape[-1] + 1)
    else:
        target = dataclasses.replace(target, mcpu="x86-64")
    assert loop_ir_key(lowered.graph.name, funcs, entry, target) != key


def test_loop_ir_key_is_the_same_in_every_process(tmp_path) -> None:
    """String hashing is randomized per process: the key must not depend on it, or a warm
    compile in a new process would miss."""
    script = ("import models; from tensorc.frontend.model import import_model;"
              "from tensorc.compiler.pipeline import lower_graph;"
              "from tensorc.compiler.llvm import make_entry, distinct_funcs;"
              "from tensorc.compiler.object_cache import loop_ir_key;"
              "from tensorc.target import Target; t = Target.host();"
              "_, g = import_model(str(models.path('lenet5')), None); l = lower_graph(g, t);"
              "print(loop_ir_key(l.graph.name, distinct_funcs(l),"
              " make_entry(l.graph, l.kernels, l.plan), t))")
    root = Path(__file__).resolve().parents[2]
    keys = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(root))
        out = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, check=True,
                             capture_output=True, text=True).stdout.split()
        keys.add(out[-1])
    assert len(keys) == 1


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
    assert STATS["writes"] == 2 and len(entries(kernels)) == 2


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

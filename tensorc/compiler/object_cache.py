"""Compiled object code cached on disk, so that compiling a model again (in a new process
too) skips scheduling, lowering, LLVM IR emission and LLVM for every kernel it holds.

An entry is keyed by everything that decides its object code: what the code generator is
given, the target (string, triple, CPU and its features), a hash of tensorc's own source files
(the schedules, the code generator, the pass pipeline and the target machine settings live
there), and the LLVM and llvmlite versions. What the code generator is given is either a
kernel's workload key and tuned config (:func:`kernel_key`, known before scheduling: a
model's kernels, one object each, compiler/kernel_objects.py) or LLVM IR text before
optimization (:func:`object_key`: the entry function, and the tuner's builders). Entries
live in ``cache_root()/kernels`` (``$TENSORC_CACHE_DIR`` moves it; set to an empty string it
disables the cache), hold a checksum of their bytes (a corrupt entry is counted, deleted and
rebuilt, never loaded), are written to a temporary file and renamed into place (several
processes may compile at once; a reader sees a whole entry or none), and are evicted least
recently used first once the folder holds more than ``max_bytes``
(``$TENSORC_CACHE_MAX_MB``, default 1024; checked on a process's first write and then once per
sixteenth of the cap it writes).

>>> obj = cached_emit_object(llvm_ir, target)         # emit_object, through the cache
>>> STATS["hits"], STATS["misses"]
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import llvmlite
import llvmlite.binding as llvm

from tensorc.codegen.llvm.objects import emit_object
from tensorc.runtime.cache_dir import cache_root
from tensorc.target import Target

MAGIC = b"tensorc-object-1\n"
DIGEST_BYTES = 32
DEFAULT_MAX_MB = 1024
PACKAGE = Path(__file__).resolve().parents[1]      # tensorc/

# hits, misses, writes, corrupt (entries refused and deleted), evicted: read by the tests
STATS: Counter = Counter()


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """A hash of every .py file of tensorc (path and bytes): a changed tensorc is a new key.
    Computed once per process (some 400 files, a few milliseconds)."""
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def llvm_versions() -> str:
    return f"llvmlite {llvmlite.__version__}, LLVM {llvm.llvm_version_info}"


def object_key(llvm_ir: str, target: Target) -> str:
    """The cache key of ``llvm_ir`` compiled for ``target``: a hex digest."""
    return _key("llvm-ir", llvm_ir.encode(), target)


def kernel_key(workload: tuple, config: dict | None, target: Target) -> str:
    """The cache key of one kernel (compiler/kernel_objects.py), known before it is
    scheduled: its workload key (the group's ops, attrs, shapes, dtypes and inlined scalars;
    equal keys already mean one kernel within a model) and its tuned config (None: the
    template's default, itself decided by the rest of the key)."""
    config_text = "default" if config is None else json.dumps(config, sort_keys=True)
    return _key("kernel", f"{workload!r}\0{config_text}".encode(), target)


def _key(kind: str, data: bytes, target: Target) -> str:
    h = hashlib.sha256()
    for part in (kind, str(target), target.triple, target.mcpu, target.features,
                 source_hash(), llvm_versions()):
        h.update(part.encode())
        h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def cache_dir() -> Path | None:
    """``cache_root()/kernels``, or None when ``$TENSORC_CACHE_DIR`` is set but empty."""
    if os.environ.get("TENSORC_CACHE_DIR") == "":
        return None
    return cache_root() / "kernels"


def max_bytes() -> int:
    return int(float(os.environ.get("TENSORC_CACHE_MAX_MB") or DEFAULT_MAX_MB) * (1 << 20))


class ObjectCache:
    """Object code by key in ``folder``; ``max_bytes`` caps the folder's size.

    Evicting lists the folder, so it runs on this object's first write and then once its
    writes since add up to a sixteenth of the cap: a tuner building thousands of candidates
    does not list a folder of thousands of entries per build, and the folder overshoots the
    cap by at most a sixteenth per process."""

    def __init__(self, folder: Path, max_bytes: int):
        self.folder = folder
        self.max_bytes = max_bytes
        self._unchecked: int | None = None     # bytes written since the last eviction

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.obj"

    def get(self, key: str) -> bytes | None:
        """The object stored under ``key``, or None (missing, or corrupt: then deleted)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            STATS["misses"] += 1
            return None
        head = len(MAGIC) + DIGEST_BYTES
        digest, payload = data[len(MAGIC):head], data[head:]
        if not data.startswith(MAGIC) or _digest(payload) != digest:
            STATS["corrupt"] += 1
            STATS["misses"] += 1
            _unlink(path)
            return None
        STATS["hits"] += 1
        try:
            os.utime(path)              # most recently used: evicted last
        except OSError:
            pass
        return payload

    def put(self, key: str, obj: bytes) -> None:
        """Store ``obj`` atomically (a temporary file renamed into place), then evict when
        due (see the class). A full or read-only disk only costs the caching."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".obj")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(MAGIC + _digest(obj) + obj)
                os.replace(tmp, self.path(key))
            except BaseException:
                _unlink(Path(tmp))
                raise
        except OSError:
            return
        STATS["writes"] += 1
        first = self._unchecked is None
        self._unchecked = (self._unchecked or 0) + len(obj)
        if first or self._unchecked * 16 >= self.max_bytes:
            self.evict()

    def evict(self) -> None:
        """Delete the least recently used entries while the folder is over the cap."""
        self._unchecked = 0
        entries = []
        for path in self.folder.glob("*.obj"):
            try:
                st = path.stat()
            except OSError:
                continue                # another process evicted it
            entries.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            _unlink(path)
            STATS["evicted"] += 1
            total -= size


def default_cache() -> ObjectCache | None:
    """This process's cache in :func:`cache_dir` (None when disabled), one per folder and
    cap, so that its eviction bookkeeping lasts across compiles."""
    folder = cache_dir()
    if folder is None:
        return None
    return _cache_for(folder, max_bytes())


@functools.lru_cache(maxsize=8)
def _cache_for(folder: Path, cap: int) -> ObjectCache:
    return ObjectCache(folder, cap)


def cached_emit_object(llvm_ir: str, target: Target,
                       on_phase: Callable[[str, float], None] | None = None,
                       cache: bool = True, emit: Callable[..., bytes] = emit_object) -> bytes:
    """``emit`` (:func:`~tensorc.codegen.llvm.objects.emit_object`, or a function of the same
    arguments) through the cache: a hit returns the stored object without running LLVM;
    ``cache=False`` neither reads nor writes it. ``on_phase`` also hears the seconds of the
    "kernel cache" (key, lookup, write)."""
    store = default_cache() if cache else None
    if store is None:
        return emit(llvm_ir, target, on_phase)
    start = time.perf_counter()
    key = object_key(llvm_ir, target)
    obj = store.get(key)
    spent = time.perf_counter() - start
    if obj is None:
        obj = emit(llvm_ir, target, on_phase)
        start = time.perf_counter()
        store.put(key, obj)
        spent += time.perf_counter() - start
    if on_phase is not None:
        on_phase("kernel cache", spent)
    return obj


def _digest(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=DIGEST_BYTES).digest()


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass

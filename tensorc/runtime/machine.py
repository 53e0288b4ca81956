"""This machine's roofline: peak arithmetic rate and memory bandwidth, measured once and cached.

The peak comes from a generated kernel of independent vector FMA chains (the widest vectors
the target has; on Zen 4 a 512-bit FMA costs two 256-bit issues, on Zen 5 one, and this is
what tells them apart); the bandwidth from copying arrays far larger than the caches. Both are
measured per thread count, since two cores share one memory bus. The result is cached in
``$XDG_CACHE_HOME/tensorc/machine.json`` (default ``~/.cache``), keyed by CPU name, features
and core count, so only the first profile on a machine pays the ~1 s it takes.

>>> roofline = machine_roofline(threads=1)
>>> roofline.peak_gflops, roofline.bandwidth_gbs      # e.g. (102.3, 18.9) on a Zen 3 core
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tensorc.target import Target

CHAINS = 12          # independent accumulators: enough to cover FMA latency x pipes


@dataclass(frozen=True)
class Roofline:
    """Peak FLOP/s and memory bandwidth at some thread count."""

    peak_gflops: float
    bandwidth_gbs: float
    threads: int = 1
    source: str = "measured"

    def bound_seconds(self, flops: float, nbytes: float) -> float:
        """The least time a kernel doing ``flops`` and moving ``nbytes`` can take."""
        return max(flops / (self.peak_gflops * 1e9), nbytes / (self.bandwidth_gbs * 1e9))

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOP/byte) where compute becomes the bound."""
        return self.peak_gflops / self.bandwidth_gbs


def _fma_kernel(target: Target):
    """``void peak(int64 iterations, float *sink)``: CHAINS independent FMA chains."""
    from llvmlite import ir

    from tensorc.codegen.llvm.objects import emit_object
    from tensorc.runtime.cpu import NativeLibrary

    lanes = target.vector_lanes("float32")
    f32 = ir.FloatType()
    vec = ir.VectorType(f32, lanes)
    i64 = ir.IntType(64)
    module = ir.Module("peak")
    module.triple = target.triple
    fma = ir.Function(module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{lanes}f32")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, ir.PointerType(f32)]), "peak")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    accs = []
    for k in range(CHAINS):
        phi = b.phi(vec)
        phi.add_incoming(ir.Constant(vec, [1.0 + k * 1e-3] * lanes), entry)
        accs.append(phi)
    scale = ir.Constant(vec, [0.999999] * lanes)
    step = ir.Constant(vec, [1e-7] * lanes)
    values = list(accs)
    for _ in range(4):           # 4 x CHAINS FMAs per trip, so loop overhead is negligible
        values = [b.call(fma, [v, scale, step]) for v in values]
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    for phi, v in zip(accs, values):
        phi.add_incoming(v, loop)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = values[0]
    for v in values[1:]:
        total = b.fadd(total, v)
    b.store(b.extract_element(total, ir.Constant(ir.IntType(32), 0)), fn.args[1])
    b.ret_void()
    library = NativeLibrary(emit_object(str(module), target))
    proto = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_float))
    return library, proto(library.address("peak")), 4 * CHAINS * lanes * 2


def _concurrently(threads: int, work) -> float:
    """Run ``work()`` on ``threads`` Python threads at once (the work releases the GIL);
    returns the wall time."""
    barrier = threading.Barrier(threads + 1)

    def run():
        barrier.wait()
        work()
    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - start


def measure_peak_gflops(target: Target, threads: int = 1, seconds: float = 0.15) -> float:
    library, peak, flops_per_trip = _fma_kernel(target)
    sink = ctypes.c_float()
    peak(1000, ctypes.byref(sink))
    start = time.perf_counter()
    peak(100_000, ctypes.byref(sink))
    per_trip = (time.perf_counter() - start) / 100_000
    trips = max(1000, int(seconds / max(per_trip, 1e-12)))
    best = 0.0
    for _ in range(3):
        elapsed = _concurrently(threads, lambda: peak(trips, ctypes.byref(ctypes.c_float())))
        best = max(best, threads * trips * flops_per_trip / elapsed / 1e9)
    del library
    return best


def measure_bandwidth_gbs(threads: int = 1, megabytes: int = 128) -> float:
    """Copy bandwidth (bytes read + bytes written per second) over arrays much larger than
    the caches."""
    n = megabytes * (1 << 20) // 4 // threads
    pairs = [(np.ones(n, np.float32), np.empty(n, np.float32)) for _ in range(threads)]
    for src, dst in pairs:
        np.copyto(dst, src)   # first touch: page faults are not bandwidth
    index = iter(range(1 << 30))
    lock = threading.Lock()

    def copy():
        with lock:
            src, dst = pairs[next(index) % threads]
        np.copyto(dst, src)
    best = 0.0
    for _ in range(5):
        elapsed = _concurrently(threads, copy)
        best = max(best, 2 * n * 4 * threads / elapsed / 1e9)
    return best


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tensorc" / "machine.json"


def _machine_key(target: Target) -> str:
    text = f"{target.mcpu}|{target.features}|{os.cpu_count()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def machine_roofline(target: Target | None = None, threads: int = 1, remeasure: bool = False
                     ) -> Roofline:
    """The measured roofline of this machine at ``threads`` threads (cached). A busy machine
    measures low, so ``remeasure`` keeps the better of the cached and the new figures."""
    target = target or Target.host()
    threads = max(1, threads)
    key = f"{_machine_key(target)}/{threads}"
    path = _cache_file()
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    cache = cache if isinstance(cache, dict) else {}
    cached = None
    if isinstance(cache.get(key), dict):
        try:
            cached = Roofline(**cache[key])
        except TypeError:
            pass
    if cached is not None and not remeasure:
        return cached
    roofline = Roofline(measure_peak_gflops(target, threads), measure_bandwidth_gbs(threads),
                        threads)
    if cached is not None:
        roofline = Roofline(max(roofline.peak_gflops, cached.peak_gflops),
                            max(roofline.bandwidth_gbs, cached.bandwidth_gbs), threads)
    cache[key] = asdict(roofline)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1))
        tmp.replace(path)
    except OSError:
        pass      # an unwritable cache only costs a measurement next time
    return roofline

"""Microbenchmarks of this machine's limits, built to survive a busy machine: many short runs,
each timed by the wall clock and by every thread's CPU time; a run in which some thread lost
its core (CPU time under ``KEPT`` of the run's wall time) is dropped, and the best clean run
is the figure. A run of a few milliseconds usually fits between two preemptions, so even with
other processes on every core some runs are clean; when none is, the figure is the best run
and ``Best.clean`` is 0, so the caller knows not to trust it.

The peak comes from a generated kernel of independent vector FMA chains (the widest vectors
the target has; on Zen 4 a 512-bit FMA costs two 256-bit issues, on Zen 5 one, and this is
what tells them apart); the bandwidth of each cache level from a generated vector copy of
arrays that fit in it, and that of memory from copying arrays far larger than the caches, a
chunk per run, so each run reads memory the previous runs have pushed out of the caches.

>>> measure_peak(Target.host(), threads=1).rate      # GFLOP/s, e.g. 92.9 on a Zen 3 core
"""
from __future__ import annotations

import ctypes
import functools
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from llvmlite import ir

from tensorc.codegen.llvm.objects import emit_object
from tensorc.runtime.cpu import NativeLibrary
from tensorc.runtime.cpu_limits import Cache
from tensorc.target import Target

CHAINS = 12           # independent accumulators: enough to cover FMA latency x pipes
RUN_SECONDS = 0.002   # one run: short enough to fit between preemptions on a busy machine
RUNS = 16             # runs per figure, all clean on a quiet machine
MAX_RUNS = 32         # on a busy one, more runs until MIN_CLEAN are clean
MIN_CLEAN = 4
KEPT = 0.9            # a clean run: every thread's CPU time is at least this share of wall time
DRAM_BYTES = 64 << 20  # the least the copy's two arrays span (2x L3 is used where larger)
CHUNK_BYTES = 8 << 20  # copied per thread per run (~1 ms)
COPY_UNROLL = 4


@dataclass(frozen=True)
class Best:
    """The best rate (units of work per second) of several short runs."""

    rate: float
    clean: int          # runs in which every thread kept its core
    runs: int


def _timed(threads: int, work: Callable[[int], None]) -> tuple[list[float], bool]:
    """Run ``work(i)`` on ``threads`` threads at once (the work releases the GIL); returns
    each thread's wall time and whether the run was clean: every thread on a core for
    ``KEPT`` of its time, and the threads running together for ``KEPT`` of the longest."""
    marks: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * threads

    def run(i: int) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        work(i)
        marks[i] = (wall, time.perf_counter(), time.thread_time() - cpu)
    if threads == 1:
        run(0)
    else:
        barrier = threading.Barrier(threads)

        def start(i: int) -> None:
            barrier.wait()
            run(i)
        pool = [threading.Thread(target=start, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    walls = [max(end - begin, 1e-9) for begin, end, _ in marks]
    together = min(m[1] for m in marks) - max(m[0] for m in marks)
    clean = (all(cpu >= KEPT * wall for (_, _, cpu), wall in zip(marks, walls))
             and together >= KEPT * max(walls))
    return walls, clean


def best_of_runs(threads: int, work: Callable[[int], None], units: float) -> Best:
    """The best ``units`` per second over short runs of ``work`` (each of the ``threads``
    threads doing ``units / threads`` a run; their rates add up), clean runs only where
    there are ``MIN_CLEAN`` of them."""
    best_clean = best_any = 0.0
    clean = runs = 0
    while runs < RUNS or (clean < MIN_CLEAN and runs < MAX_RUNS):
        walls, kept = _timed(threads, work)
        rate = sum(units / threads / wall for wall in walls)
        runs += 1
        best_any = max(best_any, rate)
        if kept:
            clean += 1
            best_clean = max(best_clean, rate)
    return Best(best_clean if clean else best_any, clean, runs)


@functools.lru_cache(maxsize=4)
def _fma_kernel(target: Target) -> tuple[NativeLibrary, Callable, int]:
    """``void peak(int64 iterations, float *sink)``: CHAINS independent FMA chains; returns
    the library, the function and its FLOPs per iteration."""
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


def measure_peak(target: Target, threads: int = 1) -> Best:
    """fp32 GFLOP/s of ``threads`` threads of FMA chains, best of short runs."""
    _, peak, flops_per_trip = _fma_kernel(target)
    sinks = [ctypes.c_float() for _ in range(threads)]
    peak(1000, ctypes.byref(sinks[0]))
    start = time.thread_time()
    peak(20_000, ctypes.byref(sinks[0]))
    per_trip = max(time.thread_time() - start, 1e-6) / 20_000
    trips = max(1000, int(RUN_SECONDS / per_trip))
    best = best_of_runs(threads, lambda i: peak(trips, ctypes.byref(sinks[i])),
                        threads * trips * flops_per_trip / 1e9)
    return best


@functools.lru_cache(maxsize=4)
def _copy_kernel(target: Target) -> tuple[NativeLibrary, Callable, int]:
    """``void copy(float *src, float *dst, int64 vectors, int64 reps)``: copy ``vectors``
    vectors (a multiple of COPY_UNROLL, at least one) ``reps`` times (at least once); returns
    the library, the function and the bytes of one vector. The stores are volatile so that
    LLVM neither turns the loop into a memcpy call nor drops the repeated copies."""
    lanes = target.vector_lanes("float32")
    vec = ir.VectorType(ir.FloatType(), lanes)
    i64 = ir.IntType(64)
    ptr = ir.PointerType(vec)
    module = ir.Module("copy")
    module.triple = target.triple
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64, i64]), "copy")
    src, dst, vectors, reps = fn.args
    entry, outer, inner, latch, done = (fn.append_basic_block(n) for n in
                                        ("entry", "outer", "inner", "latch", "done"))
    b = ir.IRBuilder(entry)
    b.branch(outer)
    b.position_at_end(outer)
    r = b.phi(i64)
    r.add_incoming(ir.Constant(i64, 0), entry)
    b.branch(inner)
    b.position_at_end(inner)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), outer)
    for k in range(COPY_UNROLL):
        at = b.add(i, ir.Constant(i64, k))
        value = b.load(b.gep(src, [at]), align=4)
        store = b.store(value, b.gep(dst, [at]), align=4)
        store.volatile = True
    nxt = b.add(i, ir.Constant(i64, COPY_UNROLL))
    i.add_incoming(nxt, inner)
    b.cbranch(b.icmp_signed("<", nxt, vectors), inner, latch)
    b.position_at_end(latch)
    r_next = b.add(r, ir.Constant(i64, 1))
    r.add_incoming(r_next, latch)
    b.cbranch(b.icmp_signed("<", r_next, reps), outer, done)
    b.position_at_end(done)
    b.ret_void()
    library = NativeLibrary(emit_object(str(module), target))
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_int64)
    return library, proto(library.address("copy")), lanes * 4


def measure_cache_bandwidth(target: Target, cache: Cache, threads: int = 1) -> Best:
    """Copy bandwidth in GB/s (bytes read + bytes written per second) of arrays that fit in
    ``cache``: each thread copies, over and over, two arrays that fill a quarter of its share
    (other data takes the rest, and a shared L3 in a virtual machine has other tenants)."""
    _, copy, vector_bytes = _copy_kernel(target)
    share = cache.capacity(threads) // threads
    vectors = max(COPY_UNROLL, share // 8 // vector_bytes // COPY_UNROLL * COPY_UNROLL)
    arrays = [(np.ones(vectors * vector_bytes // 4, np.float32),
               np.zeros(vectors * vector_bytes // 4, np.float32)) for _ in range(threads)]
    pointers = [(src.ctypes.data, dst.ctypes.data) for src, dst in arrays]
    trial = max(1, (4 << 20) // (vectors * vector_bytes))     # ~4 MB copied
    copy(*pointers[0], vectors, trial)
    start = time.thread_time()
    copy(*pointers[0], vectors, trial)
    per_rep = max(time.thread_time() - start, 1e-6) / trial
    reps = max(1, int(RUN_SECONDS / per_rep))
    best = best_of_runs(threads, lambda i: copy(*pointers[i], vectors, reps),
                        2 * vectors * vector_bytes * reps * threads / 1e9)
    del arrays
    return best


def measure_bandwidth(target: Target, threads: int = 1, l3_bytes: int = 0) -> Best:
    """Copy bandwidth in GB/s (bytes read + bytes written per second) of memory beyond the
    caches: each thread copies a chunk per run, cycling through two arrays of 2x L3 together
    (at least DRAM_BYTES), so a chunk was last touched that many bytes of traffic ago."""
    _, copy, vector_bytes = _copy_kernel(target)
    total = max(DRAM_BYTES, 2 * l3_bytes)
    n = total // 8 // threads
    chunk = min(CHUNK_BYTES, n * 4) // vector_bytes // COPY_UNROLL * COPY_UNROLL
    pairs = [(np.ones(n, np.float32), np.empty(n, np.float32)) for _ in range(threads)]
    for src, dst in pairs:
        np.copyto(dst, src)   # first touch: page faults are not bandwidth
    step = chunk * vector_bytes
    starts = [[(src.ctypes.data + at, dst.ctypes.data + at)
               for at in range(0, n * 4 - step + 1, step)] for src, dst in pairs]
    turn = [0] * threads

    def run(i: int) -> None:
        copy(*starts[i][turn[i] % len(starts[i])], chunk, 1)
        turn[i] += 1
    best = best_of_runs(threads, run, 2 * step * threads / 1e9)
    del pairs
    return best

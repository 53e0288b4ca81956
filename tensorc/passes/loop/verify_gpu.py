"""Check a device kernel against its target before any code is built.

A schedule the GPU cannot run is rejected here, with what is wrong and how to fix it, rather
than by nvcc, the driver, or a silently wrong result: too many threads per block, too much
shared memory, a loop that is bound to no thread axis so that one thread runs all of it, a
store that every thread of a block repeats, a barrier some threads of a block skip.

>>> verify_gpu(kernel, Target.from_string("cuda"))   # raises ScheduleError, or returns
"""
from __future__ import annotations

from tensorc.errors import ScheduleError
from tensorc.ir import arith
from tensorc.ir.loop import (
    Allocate, Barrier, For, IfThenElse, PrimFunc, Seq, Stmt, Store, ThreadReduce, itemsize,
)
from tensorc.target import Target

AXES = ("x", "y", "z")
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = ((1 << 31) - 1, 65535, 65535)
# a kernel bound to no thread axis runs on one GPU thread: tolerable for a handful of elements
SINGLE_THREAD_WORK = 1 << 14
# CUDA's limit on the local memory of one thread
MAX_LOCAL_BYTES = 512 * 1024


def reduce_scratch_bytes(s: ThreadReduce, block: tuple[int, int, int]) -> int:
    """Shared memory a cross-thread reduction combines its warps' partials in."""
    if s.extent <= 32:
        return 0
    return (s.extent // 32) * block[1] * block[2] * max(4, itemsize(s.buffer.dtype))


def shared_bytes(kernel: PrimFunc) -> int:
    """Static shared memory of a device kernel: its shared buffers and reduction scratch."""
    block = kernel.attrs.get("block", (1, 1, 1))
    total = 0
    for st in _walk(kernel.body):
        if isinstance(st, Allocate) and st.buffer.scope == "shared":
            total += -(-st.buffer.nbytes // 16) * 16
        elif isinstance(st, ThreadReduce):
            total += reduce_scratch_bytes(st, block)
    return total


def verify_gpu(kernel: PrimFunc, target: Target) -> None:
    """Raise ScheduleError if ``kernel`` (a device kernel with attrs grid and block) breaks
    ``target``'s limits or cannot run correctly as CUDA threads."""
    name = kernel.name
    grid, block = kernel.attrs["grid"], kernel.attrs["block"]
    for k, axis in enumerate(AXES):
        if block[k] > MAX_BLOCK_DIMS[k]:
            raise ScheduleError(f"kernel {name}: {block[k]} threads along threadIdx.{axis}, "
                                f"more than the {MAX_BLOCK_DIMS[k]} CUDA allows; split the "
                                f"loop bound to it")
        if grid[k] > MAX_GRID_DIMS[k]:
            raise ScheduleError(f"kernel {name}: {grid[k]} blocks along blockIdx.{axis}, "
                                f"more than the {MAX_GRID_DIMS[k]} CUDA allows; bind the "
                                f"loop to blockIdx.x or split it")
    threads = block[0] * block[1] * block[2]
    if threads > target.max_threads_per_block:
        raise ScheduleError(f"kernel {name}: a block of {block[0]}x{block[1]}x{block[2]} = "
                            f"{threads} threads is more than {target}'s "
                            f"{target.max_threads_per_block}; use fewer threads per block "
                            f"(smaller thread-bound loops)")
    smem = shared_bytes(kernel)
    if smem > target.max_shared_memory_per_block:
        raise ScheduleError(f"kernel {name}: {smem} bytes of shared memory per block, more "
                            f"than {target}'s {target.max_shared_memory_per_block} (static "
                            f"shared memory); use smaller shared tiles")
    _Checker(kernel, target, grid, block).check()


class _Checker:
    def __init__(self, kernel: PrimFunc, target: Target, grid, block):
        self.kernel, self.target, self.grid, self.block = kernel, target, grid, block
        self.name = kernel.name
        self.local_bytes = 0
        self.any_bound = any(d > 1 for d in (*grid, *block))

    def error(self, message: str) -> ScheduleError:
        return ScheduleError(f"kernel {self.name}: {message}")

    def check(self) -> None:
        self.visit(self.kernel.body, [], divergent=None)
        if self.local_bytes > MAX_LOCAL_BYTES:
            raise self.error(f"{self.local_bytes} bytes of local memory per thread, more than "
                             f"CUDA's {MAX_LOCAL_BYTES}; compute smaller blocks per thread")

    def visit(self, s: Stmt, loops: list[For], divergent: str | None) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.visit(c, loops, divergent)
        elif isinstance(s, For):
            self.check_loop(s, loops)
            n = arith.as_const_int(s.extent)
            if s.kind.startswith("threadIdx") and n is not None and \
                    n < self.block[AXES.index(s.kind[-1])]:
                divergent = divergent or f"loop {s.var.name} ({s.kind}, extent {n} of " \
                                         f"{self.block[AXES.index(s.kind[-1])]} threads)"
            self.visit(s.body, [*loops, s], divergent)
        elif isinstance(s, IfThenElse):
            inner = divergent or "a conditional"
            self.visit(s.then_case, loops, inner)
            if s.else_case is not None:
                self.visit(s.else_case, loops, inner)
        elif isinstance(s, Allocate):
            if s.buffer.scope == "global":
                raise self.error(f"{s.buffer.name} is a global buffer allocated inside the "
                                 f"kernel; compute that stage at the root (workspace) or in "
                                 f"shared or local memory")
            if s.buffer.scope == "local":
                self.local_bytes += s.buffer.nbytes
            self.visit(s.body, loops, divergent)
        elif isinstance(s, (Barrier, ThreadReduce)):
            what = "a barrier" if isinstance(s, Barrier) else \
                f"the cross-thread reduction of {s.buffer.name}"
            if divergent is not None:
                raise self.error(f"{what} sits inside {divergent}, which some threads of the "
                                 f"block skip, so they would wait forever; bind loops so that "
                                 f"every thread reaches it")
            if isinstance(s, ThreadReduce):
                self.check_reduce(s)
        elif isinstance(s, Store):
            self.check_store(s, loops)

    def check_loop(self, s: For, loops: list[For]) -> None:
        if s.kind == "parallel":
            raise self.error(f"loop {s.var.name} is a parallel (CPU thread) loop; bind it to "
                             f"blockIdx.x or threadIdx.x instead")
        if s.kind.startswith(("blockIdx", "threadIdx")) and arith.as_const_int(s.extent) is None:
            raise self.error(f"loop {s.var.name} is bound to {s.kind} with a non-constant "
                             f"extent")
        if s.kind.startswith("blockIdx"):
            outer = [f for f in loops if not f.kind.startswith("blockIdx")]
            if outer:
                raise self.error(f"loop {s.var.name} is bound to {s.kind} inside loop "
                                 f"{outer[-1].var.name} ({outer[-1].kind}); block loops must "
                                 f"be outermost: reorder them")
        if not self.any_bound:
            work = 1
            for f in [*loops, s]:
                work *= arith.as_const_int(f.extent) or 1
            if work > SINGLE_THREAD_WORK:
                raise self.error(f"loop {s.var.name} (extent {arith.as_const_int(s.extent)}) is "
                                 f"bound to no GPU axis, so one thread would run all {work} "
                                 f"iterations; bind the outer loops to blockIdx.x and "
                                 f"threadIdx.x")

    def check_store(self, s: Store, loops: list[For]) -> None:
        scope = s.buffer.scope
        if scope == "local":
            return
        bound = {f.kind for f in loops}
        dims = [("threadIdx", self.block)] + ([("blockIdx", self.grid)] if scope == "global"
                                               else [])
        for prefix, sizes in dims:
            for k, axis in enumerate(AXES):
                if sizes[k] > 1 and f"{prefix}.{axis}" not in bound:
                    raise self.error(
                        f"the store to {s.buffer.name} is outside every loop bound to "
                        f"{prefix}.{axis} ({sizes[k]} of them), so each of them would repeat "
                        f"it; bind one of its loops to {prefix}.{axis}, or compute the stage "
                        f"in local memory")

    def check_reduce(self, s: ThreadReduce) -> None:
        if s.thread_axis != "threadIdx.x":
            raise self.error(f"the cross-thread reduction of {s.buffer.name} runs along "
                             f"{s.thread_axis}; bind the reduction loop to threadIdx.x")
        if s.extent != self.block[0]:
            raise self.error(f"the cross-thread reduction of {s.buffer.name} combines "
                             f"{s.extent} threads but the block has {self.block[0]} along "
                             f"threadIdx.x; give every loop bound to threadIdx.x the same "
                             f"extent")
        n = s.extent
        if (n <= 32 and n & (n - 1)) or (n > 32 and n % 32):
            raise self.error(f"the cross-thread reduction of {s.buffer.name} combines {n} "
                             f"threads; use a power of two up to 32 or a multiple of 32")


def _walk(s: Stmt):
    stack = [s]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(x.children()))

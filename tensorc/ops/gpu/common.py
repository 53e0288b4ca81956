"""Helpers the GPU schedule templates share."""
from __future__ import annotations

from tensorc.ir.schedule import Schedule, Stage, SVar

THREADS = (32, 64, 128, 256, 512, 1024)


def pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def size_of(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def default_threads(work: int, most: int = 256) -> int:
    """Threads per block for ``work`` independent items: ``most``, fewer for little work."""
    return min(most, max(32, pow2_at_least(work)))


def bind_threads(stage: Stage, threads: int, loops: list[SVar] | None = None
                 ) -> tuple[SVar, SVar] | None:
    """Fuse ``loops`` (default: the stage's spatial leaf loops) into one and run it as
    blocks of ``threads`` threads: (blockIdx.x loop, threadIdx.x loop). None when the stage
    has no loops (a 0-d tensor)."""
    loops = [sv for sv in stage.leaf_vars if sv.kind == "spatial"] if loops is None else loops
    if not loops:
        return None
    fused = stage.fuse(*loops) if len(loops) > 1 else loops[0]
    block, thread = stage.split(fused, threads)
    stage.bind(block, "blockIdx.x")
    stage.bind(thread, "threadIdx.x")
    return block, thread


def root_stages(sch: Schedule) -> list[Stage]:
    """The computed stages that are neither inlined nor attached, producers first."""
    return [st for st in sch.compute_stages if st.attach == "root"]

"""Python's cyclic garbage collector held back while a model compiles.

A compile allocates millions of small objects (expressions, loop IR, llvmlite's IR) and keeps
most of them until its kernels are emitted. With the default thresholds the collector runs a
young collection every 700 allocations and a full one (over every object of the process, the
caller's too: a test session's heap, a notebook's) some ten times per model; that was 10-25%
of the Python side of a compile (cProfile and gc.callbacks, SqueezeNet and ResNet cold, one
core). So, while compiling, what the process held before is frozen (gc.freeze: never scanned,
still freed by reference counting) and young collections run 30x less often; both are
restored afterwards. Garbage cycles are still collected, later; the generated code does not
depend on any of this.

>>> @fewer_collections()
... def compile_llvm_module(...): ...
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# allocations between young collections while compiling (Python's default: 700)
YOUNG_THRESHOLD = 20_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the block with the heap before it frozen and rarer young collections."""
    old = gc.get_threshold()
    # a process that froze its heap itself (before forking workers, say) keeps it frozen:
    # unfreezing would hand its objects back to the collector
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    gc.set_threshold(max(old[0], YOUNG_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if freeze:
            gc.unfreeze()

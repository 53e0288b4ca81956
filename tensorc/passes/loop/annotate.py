"""The passes that run on each kernel just before the LLVM code generator, read top to bottom:
each records a decision about a loop or block as an annotation that codegen reads, so that
codegen only maps nodes to instructions."""
from __future__ import annotations

from tensorc.ir.loop import PrimFunc
from tensorc.passes.loop.allocations import annotate_allocations
from tensorc.passes.loop.padded_loads import shift_symbolic_clamps
from tensorc.passes.loop.parallel_work import annotate_parallel_loops
from tensorc.passes.loop.register_tiles import annotate_register_tiles
from tensorc.passes.loop.vector_loops import annotate_vector_loops

LLVM_ANNOTATIONS = (
    shift_symbolic_clamps,     # a padded load's clamp to a symbolic bound, as codegen reads it
    annotate_allocations,      # heap or stack; local blocks whose padding lanes are zeroed
    annotate_parallel_loops,   # the work of a parallel loop's iteration (its chunk size)
    annotate_register_tiles,   # interleaved, transposed, horizontally reduced register tiles
    annotate_vector_loops,     # a vector loop's width; its guards that run lane by lane
)


def annotate_for_llvm(func: PrimFunc) -> PrimFunc:
    """``func`` with the annotations the LLVM code generator reads."""
    for p in LLVM_ANNOTATIONS:
        func = p(func)
    return func

"""Loop-IR passes, each a plain function PrimFunc -> PrimFunc, and their pipeline."""
from __future__ import annotations

from tensorc.ir.loop import PrimFunc
from tensorc.passes.loop.clamps import resolve_clamps
from tensorc.passes.loop.flatten import flatten_buffers
from tensorc.passes.loop.narrow_tails import narrow_symbolic_tails
from tensorc.passes.loop.partition import partition_loops
from tensorc.passes.loop.simplify import simplify
from tensorc.passes.loop.single_tails import single_tails_as_ifs
from tensorc.passes.loop.symbolic_tails import split_symbolic_tails

# The lowering pipeline, read top to bottom; `tensorc inspect --stage loops` prints the result.
PIPELINE = (
    simplify,          # canonical affine indices, decided guards, unit loops dropped
    partition_loops,   # split loops where a select or guard inside them changes value
    split_symbolic_tails,  # whole tiles without guards, then the tail, for symbolic dims
    resolve_clamps,    # drop the clamps of loads that their selects guard, where they can
    flatten_buffers,   # B[i, j] -> B[i*J + j]
    simplify,          # fold the flattened index arithmetic
    narrow_symbolic_tails,  # half-width vectors for a symbolic tail that fits half a tile
    single_tails_as_ifs,    # a symbolic tail loop that runs once or never, as an if
)


def optimize(func: PrimFunc) -> PrimFunc:
    for p in PIPELINE:
        func = p(func)
    return func


__all__ = ["PIPELINE", "optimize", "simplify", "flatten_buffers", "partition_loops",
           "narrow_symbolic_tails", "resolve_clamps", "single_tails_as_ifs", "split_symbolic_tails"]

"""branch_select{counts, writes}: the result of an If whose condition is known only at run time
and whose branches give outputs of different shapes: cond (one element), then, else (the same
rank and dtype) -> the branch the condition picks. Each axis on which the branches differ is a
data-dependent dim (``counts``, one entry per axis: the dim, or None where the branches
agree), bounded by the larger of the two; the kernel writes the picked branch's sizes and
copies its elements (a dense tensor of the picked shape is its elements in order).

Where the branches agree in shape the frontend selects with ``where`` instead.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir.loop import Buffer, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.compaction import is_nonzero
from tensorc.ops.loop_kernels import extent, loop, put, read, seq, when, write
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity

branch_select = define("branch_select", Pattern.OPAQUE)


@branch_select.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("branch_select", input_types, 3)
    cond, then, other = input_types
    if cond.size != 1:
        raise ShapeError(f"branch_select: the condition must hold one element, got {cond}")
    if then.ndim != other.ndim or then.dtype != other.dtype:
        raise ShapeError(f"branch_select: the branches give {then} and {other}; they must "
                         f"agree in rank and dtype")
    counts = attrs["counts"]
    shape = tuple(a if d is None else d for a, d in zip(then.shape, counts))
    return [TensorType(shape, then.dtype)]


@branch_select.reference
def _reference(attrs: dict, cond, then, other) -> list[np.ndarray]:
    return [np.array(then if bool(np.asarray(cond).reshape(-1)[0]) else other)]


@branch_select.kernel
def _kernel(attrs: dict, operands: list, out: Buffer, writes: list[Buffer]) -> Stmt:
    cond, then, other = operands
    axes = [k for k, d in enumerate(attrs["counts"]) if d is not None]

    def pick(branch: Buffer) -> Stmt:
        sizes = [put(w, extent(branch.shape[k])) for w, k in zip(writes, axes)]
        return seq(*sizes, loop(extent(branch.size), lambda i: write(out, i, read(branch, i)),
                                "i"))
    return when(is_nonzero(read(cond, 0)), pick(then), pick(other))

"""value_dim{count, writes, bound}: a data-dependent dim read off the value of a tensor (TopK's
k given at run time): x (one integer) -> int64[1], x itself, and the dim ``count`` (named in
``writes``) set to it; with a second input ``payload``, that input instead (a Range's step, a
ConstantOfShape's fill). The kernel fails the run where the value lies outside [0, bound]
(ONNX's TopK needs 0 <= k <= the axis' length), through the index check of gathers
(``check_index``), so that no kernel sized by the dim reads past its input. Where the bound
is a capacity (ir/dim_table.py), the runtime grows it and runs again instead.

The ops sized by the dim take this op's output as an input of theirs: the data edge orders
them after the kernel that writes the dim (and keeps it from dead-code elimination).
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.loop_kernels import extent, loop, put, read, seq, write
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity

value_dim = define("value_dim", Pattern.OPAQUE)


@value_dim.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    if len(input_types) != 2:
        expect_arity("value_dim", input_types, 1)
    x = input_types[0]
    if x.size != 1 or x.dtype not in ("int32", "int64"):
        raise ShapeError(f"value_dim: a size is one int32 or int64 element, got {x}")
    if len(input_types) == 2:
        if not isinstance(input_types[1].size, int):
            raise ShapeError(f"value_dim: the payload must have a static shape, got "
                             f"{input_types[1]}")
        return [input_types[1]]
    return [TensorType((1,), "int64")]


@value_dim.reference
def _reference(attrs: dict, x: np.ndarray, payload: np.ndarray | None = None
               ) -> list[np.ndarray]:
    return [x.reshape(1).astype(np.int64) if payload is None else payload.copy()]


@value_dim.kernel
def _kernel(attrs: dict, operands: list, out: Buffer, writes: list[Buffer]) -> Stmt:
    x = operands[0]
    value = E.cast("int64", read(x, 0))
    size = extent(attrs["bound"]) + 1
    # a negative value is moved below -size, where the check fails too
    shifted = E.select(E.Compare("lt", value, E.const(0)), value - size, value)
    checked = E.Call("check_index", (shifted, size), E.INDEX)
    # a failed check only marks the run failed: the kernels after it still run, so the dim
    # is clamped into its range, where they read and write within their buffers
    clamped = E.minimum(E.maximum(checked, E.const(0)), size - 1)
    if len(operands) == 1:
        return seq(write(out, 0, clamped), put(writes[0], clamped))
    payload = operands[1]
    return seq(loop(out.size, lambda i: write(out, i, read(payload, i)), "i"),
               put(writes[0], clamped))

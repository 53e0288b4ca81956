"""softmax along one axis (ONNX opset-13 semantics); attr axis (non-negative).

The frontend expresses opset < 13 softmax (which flattens to 2-D at ``axis``) with reshapes.
"""
from __future__ import annotations

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import (
    PARALLEL_MIN_ELEMENTS,
)
from tensorc.ops.shape_rules import expect_arity, expect_axis, expect_float
from tensorc.target import Target

softmax = define("softmax", Pattern.REDUCTION)


@softmax.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("softmax", input_types, 1)
    (x,) = input_types
    expect_float("softmax", x)
    expect_axis("softmax", attrs["axis"], x.ndim)
    return [x]


@softmax.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axis = attrs["axis"]
    # Subtracting the max keeps exp from overflowing; the result is unchanged.
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return [(shifted / np.sum(shifted, axis=axis, keepdims=True)).astype(x.dtype)]


# ---------------------------------------------------------------------------------------------
# kernel: max, exp, sum, divide along one axis

@softmax.compute
def _softmax_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    axis = attrs["axis"]
    shape = x.shape
    reduced = shape[:axis] + (1,) + shape[axis + 1:]

    def along(o, k):
        return tuple(k if d == axis else o[d] for d in range(len(shape)))
    rmax = te.reduce_axis(shape[axis], "k")
    peak = te.compute(reduced, lambda *o: te.max_(x[along(o, rmax.var)], axis=rmax),
                      name="softmax_max", tag="anchor:softmax_max")
    zero = E.const(0)
    expo = te.compute(shape, lambda *o: E.call("exp", x[o] - peak[along(o, zero)]),
                      name="softmax_exp")
    rsum = te.reduce_axis(shape[axis], "k")
    total = te.compute(reduced, lambda *o: te.sum_(expo[along(o, rsum.var)], axis=rsum),
                       name="softmax_sum", tag="anchor:softmax_sum")
    return te.compute(shape, lambda *o: expo[o] / total[along(o, zero)], name="softmax")


@softmax.schedule
def _softmax_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                      attrs: dict) -> None:
    """Softmax along the last axis: each row's max and sum are computed inside the row loop,
    rows run in parallel, the division is vectorized. Other axes keep whole-tensor stages."""
    if attrs["axis"] != len(out.shape) - 1 or len(out.shape) < 2:
        return
    stages = {s.op.name: s for s in sch.stages}
    st = sch[out]
    *rows, col = st.op_axis
    row = st.fuse(*rows)
    lanes = target.vector_lanes(out.dtype)
    if out.shape[-1] >= lanes:
        st.vectorize(st.split(col, lanes)[1])
    if np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS:
        st.parallel(row)
    stages["softmax_max"].compute_at(st, row)
    stages["softmax_sum"].compute_at(st, row)

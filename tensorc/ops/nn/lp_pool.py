"""lp_pool: (sum over each window of |x| ** p) ** (1 / p), over 1 to 3 spatial dims, NCHW.

attrs: kernel_shape, strides, pads, dilations, ceil_mode (as max_pool), p (a positive number).
Padding contributes zeros, so it never changes a window's norm.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.nn.conv import padded_input
from tensorc.ops.nn.pool import output_spatial
from tensorc.ops.nn.windows import pad_spatial, window_slices
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import schedule_reduction
from tensorc.ops.shape_rules import check_window_attrs, expect_arity, expect_float
from tensorc.target import Target

lp_pool = define("lp_pool", Pattern.REDUCTION)


def _overhang(attrs: dict, shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """How far the last ceil-mode window reaches past the end padding, per spatial dim."""
    spatial = len(shape) - 2
    kernel, strides, pads, dilations = (attrs["kernel_shape"], attrs["strides"], attrs["pads"],
                                        attrs["dilations"])
    return tuple(max(0, (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                     - (shape[2 + i] + pads[i] + pads[i + spatial]))
                 for i in range(spatial))


@lp_pool.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("lp_pool", input_types, 1)
    (x,) = input_types
    expect_float("lp_pool", x)
    if not 1 <= x.ndim - 2 <= 3:
        raise ShapeError(f"lp_pool: input must be [N, C, spatial...] with 1 to 3 spatial dims, "
                         f"got {x}")
    check_window_attrs("lp_pool", x, attrs["kernel_shape"], attrs["strides"], attrs["pads"],
                       attrs["dilations"])
    if attrs["p"] <= 0:
        raise ShapeError(f"lp_pool: p must be positive, got {attrs['p']}")
    out = output_spatial(attrs, x.shape)
    if min(out) < 1:
        raise ShapeError(f"lp_pool: kernel {attrs['kernel_shape']} does not fit in input {x} "
                         f"padded by {attrs['pads']}")
    return [TensorType(x.shape[:2] + out, x.dtype)]


@lp_pool.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    out = output_spatial(attrs, x.shape)
    p = float(attrs["p"])
    powered = np.abs(x.astype(np.float64)) ** p
    padded = pad_spatial(powered, attrs["pads"], 0.0, _overhang(attrs, x.shape, out))
    total = np.zeros(x.shape[:2] + out)
    for _, view in window_slices(padded, attrs["kernel_shape"], attrs["strides"],
                                 attrs["dilations"], out):
        total += view
    return [(total ** (1.0 / p)).astype(x.dtype)]


def _power(v: E.Expr, p: float) -> E.Expr:
    if p == 2:
        return v * v
    if p == 1:
        return E.call("fabs", v)
    return E.call("pow", E.call("fabs", v), E.Const(p, v.dtype))


def _root(s: E.Expr, p: float) -> E.Expr:
    if p == 2:
        return E.call("sqrt", s)
    if p == 1:
        return s
    return E.call("pow", s, E.Const(1.0 / p, s.dtype))


@lp_pool.compute
def _compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    spatial = x.ndim - 2
    out = output_spatial(attrs, x.shape)
    strides, dilations, p = attrs["strides"], attrs["dilations"], float(attrs["p"])
    padded = padded_input(x, attrs["pads"], _overhang(attrs, x.shape, out), 0.0)
    rk = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(attrs["kernel_shape"])]

    def body(n, c, *o):
        pos = [o[d] * strides[d] + rk[d].var * dilations[d] for d in range(spatial)]
        return te.sum_(_power(padded[(n, c, *pos)], p), axis=rk)
    total = te.compute(x.shape[:2] + out, body, name="lp_pool_sum", tag="anchor:lp_pool_sum")
    return te.compute(total.shape, lambda *i: _root(total[i], p), name="lp_pool")


@lp_pool.schedule
def _schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
              attrs: dict) -> None:
    schedule_reduction(target, sch, out, anchor.op.input_tensors()[0])

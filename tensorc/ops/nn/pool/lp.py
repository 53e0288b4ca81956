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
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.nn.pool.shapes import infer_pool, output_spatial, overhang
from tensorc.ops.nn.window_schedule import schedule_window, window_space
from tensorc.ops.nn.windows import pad_spatial, window_slices
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity, expect_float
from tensorc.target import Target

lp_pool = define("lp_pool", Pattern.REDUCTION)


@lp_pool.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("lp_pool", input_types, 1)
    expect_float("lp_pool", input_types[0])
    if attrs["p"] <= 0:
        raise ShapeError(f"lp_pool: p must be positive, got {attrs['p']}")
    return infer_pool("lp_pool", attrs, input_types)


@lp_pool.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    out = output_spatial(attrs, x.shape)
    p = float(attrs["p"])
    powered = np.abs(x.astype(np.float64)) ** p
    padded = pad_spatial(powered, attrs["pads"], 0.0, overhang(attrs, x.shape, out))
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
    padded = padded_input(x, attrs["pads"], overhang(attrs, x.shape, out), 0.0)
    rk = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(attrs["kernel_shape"])]

    def body(n, c, *o):
        pos = [o[d] * strides[d] + rk[d].var * dilations[d] for d in range(spatial)]
        return te.sum_(_power(padded[(n, c, *pos)], p), axis=rk)
    total = te.compute(x.shape[:2] + out, body, name="lp_pool_sum", tag="anchor:lp_pool_sum")
    return te.compute(total.shape, lambda *i: _root(total[i], p), name="lp_pool")


@lp_pool.schedule(space=window_space)
def _schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
              attrs: dict, config) -> None:
    schedule_window(target, sch, out, anchor.op.input_tensors()[0], config)

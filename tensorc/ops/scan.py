"""Scans: cumsum.

cumsum{axis, exclusive, reverse}(x): ONNX CumSum with the axis normalized.
"""
from __future__ import annotations

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import schedule_reduction
from tensorc.ops.shape_rules import expect_arity, expect_axis
from tensorc.target import Target

cumsum = define("cumsum", Pattern.REDUCTION)


@cumsum.infer
def _cumsum_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("cumsum", input_types, 1)
    expect_axis("cumsum", attrs["axis"], input_types[0].ndim)
    return [input_types[0]]


@cumsum.reference
def _cumsum_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axis = attrs["axis"]
    if attrs["reverse"]:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs["exclusive"]:
        out = out - x
    return [np.ascontiguousarray(np.flip(out, axis) if attrs["reverse"] else out)]


@cumsum.compute
def _cumsum_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    # Each output sums the prefix (or suffix) it covers: a reduction over the whole axis
    # with a select, O(n^2) along the axis but one parallel, vectorized kernel.
    axis = attrs["axis"]
    r = te.reduce_axis(x.shape[axis], "r")
    keep = {(False, False): "le", (False, True): "lt", (True, False): "ge",
            (True, True): "gt"}[(bool(attrs["reverse"]), bool(attrs["exclusive"]))]
    zero = E.Const(0, x.dtype)

    def body(*o):
        value = x[tuple(r.var if d == axis else o[d] for d in range(x.ndim))]
        return te.sum_(E.select(E.Compare(keep, r.var, o[axis]), value, zero), axis=r)
    return te.compute(x.shape, body, name="cumsum")


@cumsum.schedule
def _cumsum_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                     attrs: dict) -> None:
    schedule_reduction(target, sch, out, anchor)

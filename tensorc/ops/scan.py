"""Scans: cumsum, cumprod.

cumsum{axis, exclusive, reverse}(x): ONNX CumSum with the axis normalized.
cumprod{axis, exclusive, reverse}(x): ONNX CumProd with the axis normalized.
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
cumprod = define("cumprod", Pattern.REDUCTION)

# scan -> (numpy scan, combiner of the reduction that computes it, its identity)
SCANS = {"cumsum": (np.cumsum, "sum", 0), "cumprod": (np.cumprod, "prod", 1)}


def _infer(name: str):
    def infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
        expect_arity(name, input_types, 1)
        expect_axis(name, attrs["axis"], input_types[0].ndim)
        return [input_types[0]]
    return infer


def _reference(name: str):
    scan, _, identity = SCANS[name]

    def reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
        axis = attrs["axis"]
        if attrs["reverse"]:
            x = np.flip(x, axis)
        if attrs["exclusive"] and x.shape[axis]:
            # shift by one along the axis, the identity entering first (no division or
            # subtraction, which a zero or an overflow would spoil)
            first = np.full_like(np.take(x, [0], axis=axis), identity)
            x = np.concatenate([first, np.delete(x, -1, axis=axis)], axis=axis)
        out = scan(x, axis=axis, dtype=x.dtype)
        return [np.ascontiguousarray(np.flip(out, axis) if attrs["reverse"] else out)]
    return reference


def _compute(name: str):
    _, combiner, identity = SCANS[name]

    def compute(attrs: dict, x: te.Tensor) -> te.Tensor:
        # Each output combines the prefix (or suffix) it covers: a reduction over the whole
        # axis with a select, O(n^2) along the axis but one parallel, vectorized kernel.
        axis = attrs["axis"]
        r = te.reduce_axis(x.shape[axis], "r")
        keep = {(False, False): "le", (False, True): "lt", (True, False): "ge",
                (True, True): "gt"}[(bool(attrs["reverse"]), bool(attrs["exclusive"]))]
        neutral = E.Const(identity, x.dtype)

        def body(*o):
            value = x[tuple(r.var if d == axis else o[d] for d in range(x.ndim))]
            return E.Reduce(combiner, E.select(E.Compare(keep, r.var, o[axis]), value, neutral),
                            [r], neutral)
        return te.compute(x.shape, body, name=name)
    return compute


def _schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
              attrs: dict, config) -> None:
    schedule_reduction(target, sch, out, anchor)


for _op in (cumsum, cumprod):
    _op.infer(_infer(_op.name))
    _op.reference(_reference(_op.name))
    _op.compute(_compute(_op.name))
    _op.schedule(_schedule)

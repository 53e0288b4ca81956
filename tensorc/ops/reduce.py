"""Reductions over a set of axes: reduce_sum, reduce_mean, reduce_max, reduce_min.

attrs: axes (sorted tuple of distinct non-negative axes; empty reduces nothing), keepdims.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define, get_op
from tensorc.ops.schedules import (
    schedule_reduction,
)
from tensorc.ops.shape_rules import expect_arity, expect_axis
from tensorc.target import Target

REDUCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "reduce_sum": np.sum,
    "reduce_mean": np.mean,
    "reduce_max": np.max,
    "reduce_min": np.min,
}


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
                  ) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _register(name: str, fn: Callable[..., np.ndarray]) -> None:
    op = define(name, Pattern.REDUCTION)

    @op.infer
    def infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
        expect_arity(name, input_types, 1)
        (x,) = input_types
        axes = tuple(attrs["axes"])
        for axis in axes:
            expect_axis(name, axis, x.ndim)
        if list(axes) != sorted(set(axes)):
            raise ShapeError(f"{name}: axes {axes} must be sorted and distinct")
        if name in ("reduce_max", "reduce_min") and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{name}: cannot reduce the empty axes of {x}")
        return [TensorType(reduced_shape(x.shape, axes, attrs["keepdims"]), x.dtype)]

    @op.reference
    def reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
        result = fn(x, axis=tuple(attrs["axes"]), keepdims=bool(attrs["keepdims"]))
        return [np.asarray(result).astype(x.dtype, copy=False)]


for _name, _fn in REDUCTIONS.items():
    _register(_name, _fn)


# ---------------------------------------------------------------------------------------------
# kernel: compute and schedule

_COMBINER = {"reduce_sum": te.sum_, "reduce_mean": te.sum_, "reduce_max": te.max_,
             "reduce_min": te.min_}


def _reduce_compute(name: str):
    combine = _COMBINER[name]

    def compute(attrs: dict, x: te.Tensor) -> te.Tensor:
        axes, keepdims = tuple(attrs["axes"]), bool(attrs["keepdims"])
        out_shape = reduced_shape(x.shape, axes, keepdims)
        raxes = [te.reduce_axis(x.shape[a], f"r{a}") for a in axes]

        def body(*o):
            it = iter(o)
            index, r = [], iter(raxes)
            for d in range(x.ndim):
                if d in axes:
                    index.append(next(r).var)
                    if keepdims:
                        next(it)
                else:
                    index.append(next(it))
            return combine(x[tuple(index)], axis=raxes)
        if name != "reduce_mean":
            return te.compute(out_shape, body, name=name)
        total = te.compute(out_shape, body, name="reduce_sum", tag="anchor:reduce_sum")
        count = int(np.prod([x.shape[a] for a in axes]))
        return te.compute(out_shape, lambda *o: total[o] / E.Const(count, x.dtype),
                          name=name)
    return compute


def _reduce_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                     attrs: dict) -> None:
    if anchor.op.name == "reduce_mean":
        anchor = anchor.op.input_tensors()[0]
    schedule_reduction(target, sch, out, anchor)


for _name in _COMBINER:
    get_op(_name).compute(_reduce_compute(_name))
    get_op(_name).schedule(_reduce_schedule)

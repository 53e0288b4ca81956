"""Reductions over a set of axes: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod,
reduce_l1, reduce_l2, reduce_sum_square, reduce_log_sum, reduce_log_sum_exp.

attrs: axes (sorted tuple of distinct non-negative axes; empty reduces nothing), keepdims.

Each reduction is one row of a table: a map applied to every element, a combiner, and a
finish applied to the combined value (reduce_l2 = sqrt(sum(x * x))), so that one kernel
computes it without separate elementwise passes over the input.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import reduction_space, schedule_reduction
from tensorc.ops.shape_rules import expect_arity, expect_axis, expect_float
from tensorc.target import Target


def _log_sum_exp(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    # shifting by the maximum keeps exp from overflowing; the result is unchanged
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    total = np.sum(np.exp(x - peak), axis=axis, keepdims=True)
    result = np.log(total) + peak
    return result if keepdims else np.squeeze(result, axis=axis)


@dataclass(frozen=True)
class Reduction:
    """numpy semantics, then the kernel: ``finish(combine(map(x)))``."""

    numpy: Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]
    combiner: str
    map: Callable[[E.Expr], E.Expr] | None = None
    finish: Callable[[E.Expr, int], E.Expr] | None = None   # (combined, element count)
    floats_only: bool = False


def _np(fn: Callable) -> Callable:
    return lambda x, axis, keepdims: fn(x, axis=axis, keepdims=keepdims)


def _square(x: E.Expr) -> E.Expr:
    return x * x


def _abs(x: E.Expr) -> E.Expr:
    if E.is_float(x.dtype):
        return E.call("fabs", x)
    return E.select(E.Compare("lt", x, E.const(0, x.dtype)), E.const(0, x.dtype) - x, x)


def _mean(total: E.Expr, count: int | E.Expr) -> E.Expr:
    if isinstance(count, E.Expr):      # over symbolic dims: the count at run time
        return total / E.cast(total.dtype, count)
    return total / E.Const(count, total.dtype)


REDUCTIONS: dict[str, Reduction] = {
    "reduce_sum": Reduction(_np(np.sum), "sum"),
    "reduce_mean": Reduction(_np(np.mean), "sum", finish=_mean),
    "reduce_max": Reduction(_np(np.max), "max"),
    "reduce_min": Reduction(_np(np.min), "min"),
    "reduce_prod": Reduction(_np(np.prod), "prod"),
    "reduce_l1": Reduction(lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis,
                                                            keepdims=keepdims),
                           "sum", map=_abs),
    "reduce_sum_square": Reduction(lambda x, axis, keepdims: np.sum(x * x, axis=axis,
                                                                    keepdims=keepdims),
                                   "sum", map=_square),
    "reduce_l2": Reduction(lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis,
                                                                    keepdims=keepdims)),
                           "sum", map=_square, finish=lambda s, n: E.call("sqrt", s),
                           floats_only=True),
    "reduce_log_sum": Reduction(lambda x, axis, keepdims: np.log(np.sum(x, axis=axis,
                                                                        keepdims=keepdims)),
                                "sum", finish=lambda s, n: E.call("log", s), floats_only=True),
    "reduce_log_sum_exp": Reduction(_log_sum_exp, "sum", floats_only=True),
}

# the reductions that have no identity element, so cannot reduce an empty axis
_NEEDS_ELEMENTS = ("reduce_max", "reduce_min", "reduce_mean")


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
                  ) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _register(name: str, rule: Reduction) -> None:
    op = define(name, Pattern.REDUCTION)

    @op.infer
    def infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
        expect_arity(name, input_types, 1)
        (x,) = input_types
        if rule.floats_only:
            expect_float(name, x)
        axes = tuple(attrs["axes"])
        for axis in axes:
            expect_axis(name, axis, x.ndim)
        if list(axes) != sorted(set(axes)):
            raise ShapeError(f"{name}: axes {axes} must be sorted and distinct")
        if name in _NEEDS_ELEMENTS and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{name}: cannot reduce the empty axes of {x}")
        return [TensorType(reduced_shape(x.shape, axes, attrs["keepdims"]), x.dtype)]

    @op.reference
    def reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            result = rule.numpy(x, tuple(attrs["axes"]), bool(attrs["keepdims"]))
        return [np.asarray(result).astype(x.dtype, copy=False)]

    op.compute(_reduce_compute(name, rule))
    op.schedule(_reduce_schedule, space=reduction_space)


# ---------------------------------------------------------------------------------------------
# kernel: compute and schedule

def _combine(combiner: str, source: E.Expr, axes: list[te.IterVar]) -> E.Expr:
    if combiner == "sum":
        return te.sum_(source, axis=axes)
    if combiner == "max":
        return te.max_(source, axis=axes)
    if combiner == "min":
        return te.min_(source, axis=axes)
    return E.Reduce("prod", source, axes, E.Const(1, source.dtype))


def reduce_over(x: te.Tensor, axes: tuple[int, ...], keepdims: bool, combiner: str,
                map_fn: Callable[[tuple, E.Expr], E.Expr] | None = None, name: str = "reduce",
                tag: str = "", dtype: str | None = None) -> te.Tensor:
    """``combiner`` of ``map_fn(index, x[index])`` over ``axes``, for other op families too
    (softmax, normalization): the output keeps or drops the reduced axes. With ``dtype`` the
    elements are cast to it first (and so is the result)."""
    out_shape = reduced_shape(x.shape, axes, keepdims)
    raxes = [te.reduce_axis(x.shape[a], f"r{a}") for a in axes]

    def body(*o):
        it, r = iter(o), iter(raxes)
        index = []
        for d in range(x.ndim):
            if d in axes:
                index.append(next(r).var)
                if keepdims:
                    next(it)
            else:
                index.append(next(it))
        value = x[tuple(index)] if dtype is None else E.cast(dtype, x[tuple(index)])
        if map_fn is not None:
            value = map_fn(tuple(index), value)
        return _combine(combiner, value, raxes)
    return te.compute(out_shape, body, name=name, tag=tag)


def _reduce_compute(name: str, rule: Reduction):
    def compute(attrs: dict, x: te.Tensor) -> te.Tensor:
        axes, keepdims = tuple(attrs["axes"]), bool(attrs["keepdims"])
        count = 1
        for a in axes:
            count = count * x.shape[a]
        count = te.extent_of(count)
        if name == "reduce_log_sum_exp":
            return _log_sum_exp_compute(x, axes, keepdims)
        map_fn = (lambda index, v: rule.map(v)) if rule.map else None
        acc = te.accumulator_dtype(x.dtype) if rule.combiner in ("sum", "prod") else x.dtype
        if rule.finish is None and acc == x.dtype:
            return reduce_over(x, axes, keepdims, rule.combiner, map_fn, name=name)
        total = reduce_over(x, axes, keepdims, rule.combiner, map_fn, name=f"{name}_acc",
                            tag=f"anchor:{name}_acc", dtype=acc)

        def finish(*o):
            value = total[o] if rule.finish is None else rule.finish(total[o], count)
            return E.cast(x.dtype, value)
        return te.compute(total.shape, finish, name=name)
    return compute


def _log_sum_exp_compute(x: te.Tensor, axes: tuple[int, ...], keepdims: bool) -> te.Tensor:
    """log(sum(exp(x - peak))) + peak, with the peak of the reduced elements (0 where it is
    infinite, so that all -inf gives -inf and not NaN)."""
    peak = reduce_over(x, axes, True, "max", name="lse_peak", tag="anchor:lse_peak")
    zero = E.Const(0, x.dtype)

    def shift_at(index: tuple) -> E.Expr:
        p = peak[tuple(E.const(0) if d in axes else i for d, i in enumerate(index))]
        finite = E.Logical("and", E.Compare("gt", p, te.min_value(x.dtype)),
                           E.Compare("lt", p, te.max_value(x.dtype)))
        return E.select(finite, p, zero)

    total = reduce_over(x, axes, keepdims, "sum",
                        lambda index, v: E.call("exp", v - shift_at(index)),
                        name="reduce_log_sum_exp_acc", tag="anchor:reduce_log_sum_exp_acc")

    def finish(*o):
        if keepdims:
            index = o
        else:  # put the dropped axes back (the peak keeps them)
            it = iter(o)
            index = tuple(E.const(0) if d in axes else next(it) for d in range(x.ndim))
        return E.call("log", total[o]) + shift_at(index)
    return te.compute(total.shape, finish, name="reduce_log_sum_exp")


def _reduce_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                     attrs: dict, config) -> None:
    if not anchor.op.reduce_axis:  # a finish stage: schedule the accumulation under it
        anchor = next(t for t in anchor.op.input_tensors() if t.op.name.endswith("_acc"))
    schedule_reduction(target, sch, out, anchor, attrs, config)


for _name, _rule in REDUCTIONS.items():
    _register(_name, _rule)

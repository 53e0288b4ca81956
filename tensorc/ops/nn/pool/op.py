"""max_pool and avg_pool over 1 to 3 spatial dims, NCHW layout, with ONNX's ceil_mode rule.

max_pool attrs: kernel_shape, strides, pads, dilations, ceil_mode.
avg_pool attrs: kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad.

The kernel is one of the formulations in ``pool/formulations.py`` (one pass over each window,
two separable passes, the NaN split, blocked), the one ``pool/strategy.py`` picks.
"""
from __future__ import annotations

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.nn import blocked_layout
from tensorc.ops.nn.pool import strategy
from tensorc.ops.nn.pool.formulations import FORMULATIONS, formulation_of
from tensorc.ops.nn.pool.shapes import dilations, infer_pool, output_spatial, overhang
from tensorc.ops.nn.window_blocked import (
    schedule_window_blocked_symbolic, window_blocked_symbolic_space,
)
from tensorc.ops.nn.windows import pad_spatial, window_slices
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity, expect_float
from tensorc.ops.space import SearchSpace
from tensorc.ops.symbolic import GENERIC
from tensorc.target import Target

max_pool = define("max_pool", Pattern.REDUCTION)
avg_pool = define("avg_pool", Pattern.REDUCTION)


@max_pool.infer
def _max_pool_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    return infer_pool("max_pool", attrs, input_types)


@avg_pool.infer
def _avg_pool_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("avg_pool", input_types, 1)
    expect_float("avg_pool", input_types[0])
    return infer_pool("avg_pool", attrs, input_types)


def _blocked_reference(reference):
    """A pool's reference that also takes blocked tensors (attr layout_block)."""
    def on_blocks(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
        b = attrs.get("layout_block")
        if not b:
            return reference(attrs, x)
        return [blocked_layout.block(reference(attrs, blocked_layout.unblock(x, b))[0], b)]
    return on_blocks


@max_pool.reference
@_blocked_reference
def _max_pool_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    out = output_spatial(attrs, x.shape)
    lowest = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    padded = pad_spatial(x, attrs["pads"], lowest, overhang(attrs, x.shape, out))
    result = np.full(x.shape[:2] + out, lowest, dtype=x.dtype)
    for _, view in window_slices(padded, attrs["kernel_shape"], attrs["strides"],
                                 dilations(attrs, x.ndim - 2), out):
        # acc > x ? acc : x, as the kernel and onnxruntime (see te.max_ordered)
        result = np.where(result > view, result, view)
    return [result]


@avg_pool.reference
@_blocked_reference
def _avg_pool_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    out = output_spatial(attrs, x.shape)
    pads, extra = attrs["pads"], overhang(attrs, x.shape, out)
    spatial = x.ndim - 2
    padded = pad_spatial(x.astype(np.float64), pads, 0.0, extra)
    # The divisor counts the window's input elements, plus its explicit padding with
    # count_include_pad; the ceil-mode overhang never counts.
    ones = np.ones((1, 1) + x.shape[2:])
    counted = pad_spatial(ones, pads, float(bool(attrs["count_include_pad"])))
    counted = pad_spatial(counted, (0,) * spatial + tuple(extra), 0.0)
    total = np.zeros(x.shape[:2] + out)
    count = np.zeros((1, 1) + out)
    strides, dilation = attrs["strides"], dilations(attrs, spatial)
    for _, view in window_slices(padded, attrs["kernel_shape"], strides, dilation, out):
        total += view
    for _, view in window_slices(counted, attrs["kernel_shape"], strides, dilation, out):
        count += view
    return [(total / np.maximum(count, 1)).astype(x.dtype)]


def _compute(kind: str, attrs: dict, x: te.Tensor) -> te.Tensor:
    name = strategy.formulation(kind, attrs, x.shape, E.is_float(x.dtype))
    return FORMULATIONS[name].compute(kind, attrs, x)


@max_pool.compute
def _max_pool_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    return _compute("max_pool", attrs, x)


@avg_pool.compute
def _avg_pool_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    return _compute("avg_pool", attrs, x)


def _symbolic_form(out: te.Tensor, attrs: dict) -> str | None:
    """Over symbolic dims: "blocked" for a pool on blocked tensors (its own symbolic
    schedule), "generic" for the others (``ops/symbolic.py``); None for static shapes."""
    if te.is_static(out.shape):
        return None
    return "blocked" if attrs.get("layout_block") else "generic"


def pool_space(target: Target, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> SearchSpace:
    """The space of the group's formulation (blocked pools: row tiles; the two-pass forms:
    ``separable_space``; the single pass: ``window_space``)."""
    form = _symbolic_form(out, attrs)
    if form == "generic":
        return GENERIC.search_space(target, out, anchor, attrs)
    if form == "blocked":
        return window_blocked_symbolic_space(target, out)
    return formulation_of(anchor, attrs).space(target, out, anchor, attrs)


def _schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor, window,
              attrs: dict, config) -> None:
    form = _symbolic_form(out, attrs)
    if form == "generic":
        GENERIC.apply(target, sch, out, anchor, attrs, config)
    elif form == "blocked":
        schedule_window_blocked_symbolic(target, sch, out, window, config)
    else:
        formulation_of(anchor, attrs).schedule(target, sch, out, window, config)


@max_pool.schedule(space=pool_space, symbolic=True)
def _max_pool_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                       attrs: dict, config) -> None:
    _schedule(target, sch, out, anchor, anchor, attrs, config)


@avg_pool.schedule(space=pool_space, symbolic=True)
def _avg_pool_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                       attrs: dict, config) -> None:
    # (the anchor divides the window sums: the window is the stage it reads)
    _schedule(target, sch, out, anchor, anchor.op.input_tensors()[0], attrs, config)

"""Converters of ONNX reductions, ArgMax / ArgMin and TopK."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.converters.common import normalize_axis
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.dims import Dim
from tensorc.ir.graph import Value
from tensorc.ops.reduce import REDUCTIONS, reduced_shape

# ONNX reduction -> (core op, the first opset that takes axes as an input)
REDUCE = {"ReduceSum": ("reduce_sum", 13), "ReduceMean": ("reduce_mean", 18),
          "ReduceMax": ("reduce_max", 18), "ReduceMin": ("reduce_min", 18),
          "ReduceProd": ("reduce_prod", 18), "ReduceL1": ("reduce_l1", 18),
          "ReduceL2": ("reduce_l2", 18), "ReduceLogSum": ("reduce_log_sum", 18),
          "ReduceLogSumExp": ("reduce_log_sum_exp", 18),
          "ReduceSumSquare": ("reduce_sum_square", 18)}

# what a reduction of no elements gives (ONNX: the combiner's identity; the mean of nothing
# is undefined there, and onnxruntime gives 0 where numpy gives NaN: tensorc gives 0 too)
_EMPTY = {"reduce_sum": 0, "reduce_l1": 0, "reduce_l2": 0, "reduce_sum_square": 0,
          "reduce_prod": 1, "reduce_log_sum": -np.inf, "reduce_log_sum_exp": -np.inf,
          "reduce_mean": 0, "reduce_max": "lowest", "reduce_min": "highest"}


def _empty_value(op: str, dtype: np.dtype):
    value = _EMPTY[op]
    if value not in ("lowest", "highest"):
        return value
    low = value == "lowest"
    if dtype == np.bool_:
        return not low
    if np.issubdtype(dtype, np.floating):
        return -np.inf if low else np.inf
    return np.iinfo(dtype).min if low else np.iinfo(dtype).max


def _reduce(ctx: ImportContext, x: Value, op: str, axes: Sequence[int] | None, keepdims: int,
            noop_with_empty_axes: int) -> Value:
    if axes is None or len(axes) == 0:
        if noop_with_empty_axes:
            return x
        axes = range(x.type.ndim)
    axes = tuple(sorted({normalize_axis(int(a), x.type.ndim) for a in axes}))
    shape = reduced_shape(x.type.shape, axes, bool(keepdims))
    if x.type.size == 0:  # nothing to compute: the result is known now
        dtype = np.dtype(x.type.dtype)
        value = ctx.const(np.array(_empty_value(op, dtype), dtype=dtype))
        return ctx.emit("broadcast_to", [value], shape=shape)  # folds unless it is huge
    if x.type.dtype == "bool":
        # max / min of booleans are any / all: reduce them as 0 / 1 bytes
        if op not in ("reduce_max", "reduce_min"):
            raise ShapeError(f"{op} of a bool tensor is not defined; cast it first")
        as_bytes = ctx.emit("cast", [x], dtype="uint8")
        y = ctx.emit(op, [as_bytes], axes=axes, keepdims=bool(keepdims))
        return ctx.emit("cast", [y], dtype="bool")
    if REDUCTIONS[op].floats_only and x.type.dtype not in ("float16", "float32", "float64"):
        # integer L2 / log-sums: computed in float64, rounded back as ONNX's reference does
        wide = ctx.emit("cast", [x], dtype="float64")
        y = ctx.emit(op, [wide], axes=axes, keepdims=bool(keepdims))
        return ctx.emit("cast", [y], dtype=x.type.dtype)
    return ctx.emit(op, [x], axes=axes, keepdims=bool(keepdims))


def _reduce_with_attribute(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, axes: Sequence[int] | None = None,
                keepdims: int = 1) -> Value:
        return _reduce(ctx, inputs[0], op, axes, keepdims, 0)
    return convert


def _reduce_with_input(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, keepdims: int = 1,
                noop_with_empty_axes: int = 0) -> Value:
        axes = inputs[1] if len(inputs) > 1 else None
        values = None if axes is None else ctx.require_constant(axes, "axes")
        return _reduce(ctx, inputs[0], op, None if values is None else values.tolist(),
                       keepdims, noop_with_empty_axes)
    return convert


for _onnx_op, (_core_op, _input_since) in REDUCE.items():
    converter(_onnx_op, since=1, until=_input_since - 1)(_reduce_with_attribute(_core_op))
    converter(_onnx_op, since=_input_since)(_reduce_with_input(_core_op))


# positions ------------------------------------------------------------------------------------
def _arg(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, axis: int = 0, keepdims: int = 1,
                select_last_index: int = 0) -> Value:
        x = inputs[0]
        if x.type.dtype == "bool":
            x = ctx.emit("cast", [x], dtype="uint8")
        return ctx.emit(op, [x], axis=normalize_axis(axis, x.type.ndim),
                        keepdims=bool(keepdims), select_last_index=bool(select_last_index))
    return convert


converter("ArgMax", since=1)(_arg("argmax"))
converter("ArgMin", since=1)(_arg("argmin"))


def _topk(ctx: ImportContext, x: Value, k: int, axis: int, largest: int
          ) -> tuple[Value, Value]:
    axis = normalize_axis(axis, x.type.ndim)
    attrs = dict(axis=axis, k=k if isinstance(k, Dim) else int(k), largest=bool(largest))
    return _values_at(ctx, x, ctx.emit("topk", [x], **attrs), axis)


def _values_at(ctx: ImportContext, x: Value, indices: Value, axis: int
               ) -> tuple[Value, Value]:
    """ONNX's two outputs from one topk (its indices): the values gathered at them."""
    return ctx.emit("gather_elements", [x, indices], axis=axis), indices


@converter("TopK", since=1, until=9)
def topk_attribute(ctx: ImportContext, inputs: list[Value], *, axis: int = -1, k: int
                   ) -> tuple[Value, Value]:
    return _topk(ctx, inputs[0], k, axis, 1)


@converter("TopK", since=10)
def topk(ctx: ImportContext, inputs: list[Value], *, axis: int = -1, largest: int = 1,
         sorted: int = 1) -> tuple[Value, Value]:
    # sorted=0 leaves the order to the implementation: sorted is one valid order
    if inputs[1].type.size != 1:
        raise ShapeError(f"TopK: k must hold one value, got {inputs[1].type}")
    k = ctx.value_of(inputs[1])
    if k is None:
        return _runtime_topk(ctx, inputs[0], inputs[1], axis, largest)
    return _topk(ctx, inputs[0], k.reshape(-1)[0], axis, largest)


def _runtime_topk(ctx: ImportContext, x: Value, k: Value, axis: int, largest: int
                  ) -> tuple[Value, Value]:
    """TopK whose k is computed at run time (the number of detections kept): k is a
    data-dependent dim in [0, the axis' length], written by a value_dim kernel that checks
    it, which the topk takes as an input (ops/value_dim.py)."""
    axis = normalize_axis(axis, x.type.ndim)
    n = x.type.shape[axis]
    count = ctx.graph.dims.declare_data("topk", n, ctx.node_name or "TopK")
    written = ctx.emit("value_dim", [k], count=count, writes=(count.expr.name,), bound=n)
    attrs = dict(axis=axis, k=count, largest=bool(largest))
    return _values_at(ctx, x, ctx.emit("topk", [x, written], **attrs), axis)

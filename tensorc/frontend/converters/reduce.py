"""Converters of ONNX reductions."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence


from tensorc.frontend.converters import (
    converter, normalize_axis,
)
from tensorc.ir.graph import Value

if TYPE_CHECKING:
    from tensorc.frontend.onnx import ImportContext

# ONNX reduction -> (core op, the first opset that takes axes as an input)
REDUCE = {"ReduceSum": ("reduce_sum", 13), "ReduceMean": ("reduce_mean", 18),
          "ReduceMax": ("reduce_max", 18), "ReduceMin": ("reduce_min", 18)}



def _reduce(ctx: ImportContext, x: Value, op: str, axes: Sequence[int] | None, keepdims: int,
            noop_with_empty_axes: int) -> Value:
    if not axes:
        if noop_with_empty_axes:
            return x
        axes = range(x.type.ndim)
    axes = tuple(sorted({normalize_axis(a, x.type.ndim) for a in axes}))
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

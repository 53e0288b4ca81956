"""Converters of elementwise ONNX ops: activations, arithmetic, casts."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from tensorc.frontend.converters import (
    converter,
)
from tensorc.ir.graph import Value

if TYPE_CHECKING:
    from tensorc.frontend.onnx import ImportContext


# elementwise ----------------------------------------------------------------------------------
UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
         "Sqrt": "sqrt", "Neg": "neg", "Abs": "abs"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum"}


def _unary(op: str) -> Callable:
    return lambda ctx, inputs: ctx.emit(op, inputs[:1])


def _binary(op: str) -> Callable:
    return lambda ctx, inputs: ctx.emit(op, inputs[:2])


def _variadic(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value]) -> Value:
        result = inputs[0]
        for other in inputs[1:]:
            result = ctx.emit(op, [result, other])
        return result
    return convert


# Opsets before 6/7 had legacy attributes (consumed_inputs, broadcast) we do not read.
for _onnx_op, _core_op in UNARY.items():
    converter(_onnx_op, since=6)(_unary(_core_op))
for _onnx_op, _core_op in BINARY.items():
    converter(_onnx_op, since=7)(_binary(_core_op))
for _onnx_op, _core_op in VARIADIC.items():
    converter(_onnx_op, since=8)(_variadic(_core_op))


@converter("Pow", since=7)
def pow_(ctx: ImportContext, inputs: list[Value]) -> Value:
    base, exponent = inputs
    if exponent.type.dtype != base.type.dtype:  # allowed by ONNX; the result has base's dtype
        exponent = ctx.emit("cast", [exponent], dtype=base.type.dtype)
    return ctx.emit("pow", [base, exponent])


@converter("LeakyRelu", since=6)
def leaky_relu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 0.01) -> Value:
    return ctx.emit("leaky_relu", inputs, alpha=float(alpha))


_FLOAT_LIMIT = float(np.finfo(np.float32).max)


@converter("Clip", since=6, until=10)
def clip_attributes(ctx: ImportContext, inputs: list[Value], *, min: float = -_FLOAT_LIMIT,
                    max: float = _FLOAT_LIMIT) -> Value:
    low = None if min <= -_FLOAT_LIMIT else float(min)
    high = None if max >= _FLOAT_LIMIT else float(max)
    return ctx.emit("clip", inputs[:1], min=low, max=high)


@converter("Clip", since=11)
def clip_inputs(ctx: ImportContext, inputs: list[Value]) -> Value:
    x, low, high = (list(inputs) + [None, None])[:3]
    bounds: dict[str, float | None] = {"min": None, "max": None}
    for key, bound, op in (("min", low, "maximum"), ("max", high, "minimum")):
        if bound is None:
            continue
        array = ctx.constant(bound)
        if array is not None:
            bounds[key] = array.item()
        else:  # a computed bound: clip with a broadcasting maximum / minimum instead
            x = ctx.emit(op, [x, bound])
    if bounds["min"] is None and bounds["max"] is None:
        return x
    return ctx.emit("clip", [x], **bounds)


@converter("Cast", since=6)
def cast(ctx: ImportContext, inputs: list[Value], *, to: int, saturate: int = 1,
         round_mode: str = "up") -> Value:
    dtype = ctx.dtype_name(to)
    x = inputs[0]
    return x if x.type.dtype == dtype else ctx.emit("cast", [x], dtype=dtype)

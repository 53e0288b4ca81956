"""Converters of elementwise ONNX ops: arithmetic, math, activations, logic, casts."""
from __future__ import annotations

from typing import Callable

import numpy as np

from tensorc.errors import InvalidModelError, ShapeError
from tensorc.frontend.converters.common import scalar
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value

# ONNX op -> (core op, first opset converted). Earlier opsets had legacy attributes
# (consumed_inputs, broadcast) or lacked broadcasting; they are not converted.
UNARY = {
    "Relu": ("relu", 6), "Sigmoid": ("sigmoid", 6), "Tanh": ("tanh", 6), "Exp": ("exp", 6),
    "Log": ("log", 6), "Sqrt": ("sqrt", 6), "Neg": ("neg", 6), "Abs": ("abs", 6),
    "Reciprocal": ("reciprocal", 6), "Floor": ("floor", 6), "Ceil": ("ceil", 6),
    "Round": ("round", 11), "Sign": ("sign", 9), "Erf": ("erf", 9),
    "Sin": ("sin", 7), "Cos": ("cos", 7), "Tan": ("tan", 7), "Asin": ("asin", 7),
    "Acos": ("acos", 7), "Atan": ("atan", 7), "Sinh": ("sinh", 9), "Cosh": ("cosh", 9),
    "Asinh": ("asinh", 9), "Acosh": ("acosh", 9), "Atanh": ("atanh", 9),
    "Softplus": ("softplus", 1), "Softsign": ("softsign", 1), "Mish": ("mish", 18),
    "HardSwish": ("hard_swish", 14), "IsNaN": ("isnan", 9), "Not": ("logical_not", 1),
    "BitwiseNot": ("bitwise_not", 18),
}
BINARY = {
    "Add": ("add", 7), "Sub": ("sub", 7), "Mul": ("mul", 7), "Div": ("div", 7),
    "PRelu": ("prelu", 7), "BitwiseAnd": ("bitwise_and", 18), "BitwiseOr": ("bitwise_or", 18),
    "BitwiseXor": ("bitwise_xor", 18), "Equal": ("equal", 7), "Less": ("less", 7),
    "Greater": ("greater", 7), "LessOrEqual": ("less_equal", 12),
    "GreaterOrEqual": ("greater_equal", 12), "And": ("logical_and", 7),
    "Or": ("logical_or", 7), "Xor": ("logical_xor", 7),
}
VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum"}


def _unary(op: str) -> Callable:
    return lambda ctx, inputs: ctx.emit(op, inputs[:1])


def _binary(op: str) -> Callable:
    return lambda ctx, inputs: ctx.emit(op, inputs[:2])


def _fold(ctx: ImportContext, op: str, inputs: list[Value]) -> Value:
    """``op`` over every input, left to right (numpy broadcasting at each step)."""
    result = inputs[0]
    for other in inputs[1:]:
        result = ctx.emit(op, [result, other])
    return result


def _variadic(op: str) -> Callable:
    return lambda ctx, inputs: _fold(ctx, op, list(inputs))


for _onnx_op, (_core_op, _since) in UNARY.items():
    converter(_onnx_op, since=_since)(_unary(_core_op))
for _onnx_op, (_core_op, _since) in BINARY.items():
    converter(_onnx_op, since=_since)(_binary(_core_op))
for _onnx_op, _core_op in VARIADIC.items():
    converter(_onnx_op, since=6)(_variadic(_core_op))


@converter("Mean", since=6)
def mean(ctx: ImportContext, inputs: list[Value]) -> Value:
    total = _fold(ctx, "add", list(inputs))
    if len(inputs) == 1:
        return total
    return ctx.emit("div", [total, scalar(ctx, len(inputs), total)])


@converter("Pow", since=7)
def pow_(ctx: ImportContext, inputs: list[Value]) -> Value:
    """ONNX lets the exponent have another dtype; the result has the base's dtype. An integer
    base with a float exponent is computed in float64 (2 ** 0.5 is not 2 ** 0)."""
    base, exponent = inputs
    dtype = base.type.dtype
    if exponent.type.dtype == dtype:
        return ctx.emit("pow", [base, exponent])
    if dtype.startswith(("int", "uint")) and exponent.type.dtype.startswith(("float", "bfloat")):
        wide = ctx.emit("pow", [ctx.emit("cast", [base], dtype="float64"),
                                ctx.emit("cast", [exponent], dtype="float64")])
        return ctx.emit("cast", [wide], dtype=dtype)
    return ctx.emit("pow", [base, ctx.emit("cast", [exponent], dtype=dtype)])


@converter("Mod", since=10)
def mod(ctx: ImportContext, inputs: list[Value], *, fmod: int = 0) -> Value:
    return ctx.emit("mod", inputs[:2], fmod=int(fmod))


@converter("BitShift", since=11)
def bit_shift(ctx: ImportContext, inputs: list[Value], *, direction: str) -> Value:
    if direction not in ("LEFT", "RIGHT"):
        raise ShapeError(f"direction must be LEFT or RIGHT, got {direction!r}")
    return ctx.emit("bit_shift", inputs[:2], direction=direction)


@converter("Where", since=9)
def where(ctx: ImportContext, inputs: list[Value]) -> Value:
    return ctx.emit("where", inputs[:3])


@converter("IsInf", since=10)
def isinf(ctx: ImportContext, inputs: list[Value], *, detect_negative: int = 1,
          detect_positive: int = 1) -> Value:
    return ctx.emit("isinf", inputs[:1], detect_negative=int(detect_negative),
                    detect_positive=int(detect_positive))


# activations ----------------------------------------------------------------------------------
@converter("LeakyRelu", since=6)
def leaky_relu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 0.01) -> Value:
    return ctx.emit("leaky_relu", inputs, alpha=float(alpha))


@converter("HardSigmoid", since=6)
def hard_sigmoid(ctx: ImportContext, inputs: list[Value], *, alpha: float = 0.2,
                 beta: float = 0.5) -> Value:
    return ctx.emit("hard_sigmoid", inputs, alpha=float(alpha), beta=float(beta))


@converter("Elu", since=6)
def elu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1.0) -> Value:
    return ctx.emit("elu", inputs, alpha=float(alpha))


@converter("Selu", since=6)
def selu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1.67326319217681884765625,
         gamma: float = 1.05070102214813232421875) -> Value:
    return ctx.emit("selu", inputs, alpha=float(alpha), gamma=float(gamma))


@converter("Celu", since=12)
def celu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1.0) -> Value:
    return ctx.emit("celu", inputs, alpha=float(alpha))


@converter("Gelu", since=20)
def gelu(ctx: ImportContext, inputs: list[Value], *, approximate: str = "none") -> Value:
    if approximate not in ("none", "tanh"):
        raise ShapeError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return ctx.emit("gelu", inputs, approximate=approximate)


@converter("ThresholdedRelu", since=10)
def thresholded_relu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1.0) -> Value:
    return ctx.emit("thresholded_relu", inputs, alpha=float(alpha))


@converter("Shrink", since=9)
def shrink(ctx: ImportContext, inputs: list[Value], *, bias: float = 0.0,
           lambd: float = 0.5) -> Value:
    return ctx.emit("shrink", inputs, bias=float(bias), lambd=float(lambd))


@converter("Swish", since=24)
def swish(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1.0) -> Value:
    return ctx.emit("swish", inputs, alpha=float(alpha))


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
        if bound.type.shape not in ((), (1,)):
            raise InvalidModelError(f"its {key} input is {bound.type}, but Clip takes a "
                                    f"scalar there (shape [] or [1]); give one {key} value for "
                                    f"the whole tensor (or use Max/Min for an elementwise "
                                    f"bound)")
        array = ctx.constant(bound)
        if array is not None:
            bounds[key] = array.item()
        else:  # a computed bound: clip with a broadcasting maximum / minimum instead
            x = ctx.emit(op, [x, bound])
    if bounds["min"] is None and bounds["max"] is None:
        return x
    return ctx.emit("clip", [x], **bounds)


# casts ----------------------------------------------------------------------------------------
# float8 formats with infinity or NaN, where ONNX's saturate=1 clips to the largest finite value
# (the core cast rounds to infinity / NaN like ml_dtypes); float4_e2m1fn always saturates
SATURATING_FLOAT8 = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0,
                     "float8_e5m2": 57344.0, "float8_e5m2fnuz": 57344.0}


def _cast_to(ctx: ImportContext, x: Value, dtype: str, saturate: int = 1) -> Value:
    if x.type.dtype == dtype:
        return x
    if saturate and dtype in SATURATING_FLOAT8:
        if not x.type.dtype.startswith(("float", "bfloat")):
            x = ctx.emit("cast", [x], dtype="float32")   # exact for every integer in range
        limit = SATURATING_FLOAT8[dtype]
        x = ctx.emit("clip", [x], min=-limit, max=limit)  # NaN stays NaN
    return ctx.emit("cast", [x], dtype=dtype)


def _cast_e8m0(ctx: ImportContext, x: Value, saturate: int, round_mode: str) -> Value:
    """A cast to float8_e8m0fnu: the compiled conversion rounds up and saturates."""
    if round_mode != "up" or not saturate:
        raise ShapeError(f"a cast to FLOAT8E8M0 supports round_mode='up' with saturate=1 "
                         f"only, got round_mode={round_mode!r}, saturate={saturate}")
    array = ctx.constant(x)
    if array is None:
        return _cast_to(ctx, x, "float8_e8m0fnu")
    # folded here, as compiled (codegen/narrow_dtypes.py): ml_dtypes rounds to nearest
    bits = np.abs(array.astype(np.float32)).view(np.uint32)
    exponent = (bits >> 23) & 0xFF
    up = ((bits & 0x7FFFFF) != 0) & (exponent < 0xFE) & (bits != 0x400000)
    return ctx.const((exponent + up).astype(np.uint8).view("float8_e8m0fnu"))


@converter("Cast", since=6)
def cast(ctx: ImportContext, inputs: list[Value], *, to: int, saturate: int = 1,
         round_mode: str = "up") -> Value:
    dtype = ctx.dtype_name(to)
    if dtype == "float8_e8m0fnu" and inputs[0].type.dtype != dtype:
        return _cast_e8m0(ctx, inputs[0], saturate, round_mode)
    return _cast_to(ctx, inputs[0], dtype, saturate)


@converter("CastLike", since=15)
def cast_like(ctx: ImportContext, inputs: list[Value], *, saturate: int = 1,
              round_mode: str = "up") -> Value:
    dtype = inputs[1].type.dtype
    if dtype == "float8_e8m0fnu" and inputs[0].type.dtype != dtype:
        return _cast_e8m0(ctx, inputs[0], saturate, round_mode)
    return _cast_to(ctx, inputs[0], dtype, saturate)

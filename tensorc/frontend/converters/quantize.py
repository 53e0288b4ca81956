"""Converters of ONNX's quantization ops, decomposed into core ops.

QuantizeLinear divides by the scale, rounds half to even, adds the zero point and clips to
the output type's range (float8 outputs: a saturating or plain cast); DequantizeLinear
subtracts the zero point and multiplies by the scale, in float32. Scales and zero points are
per tensor, per axis (a 1-D tensor along ``axis``) or blocked (``block_size`` consecutive
elements along ``axis`` share one). The integer ops (MatMulInteger, ConvInteger and the
QLinear ones) subtract zero points in int32 and accumulate with the core int32 matmul / conv;
QLinear ops requantize the accumulator in float64, as ONNX's reference does, so that rounding
ties land where its test data expects them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.converters.common import normalize_axis, reshape
from tensorc.frontend.converters.elementwise import SATURATING_FLOAT8, _cast_to
from tensorc.frontend.converters.nn import conv as _conv
from tensorc.frontend.converters.nn import matmul as _matmul
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value
from tensorc.ops.build import emit

# integer output dtype -> (smallest, largest) value
INTEGER_RANGES = {
    "uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
    "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1),
}
FLOAT_OUTPUTS = tuple(SATURATING_FLOAT8) + ("float4_e2m1fn",)


def _cast(ctx: ImportContext, x: Value, dtype: str) -> Value:
    return x if x.type.dtype == dtype else ctx.emit("cast", [x], dtype=dtype)


def _const(ctx: ImportContext, value: float, dtype: str) -> Value:
    return ctx.const(np.array(value, dtype=dtype))


def _per_axis(ctx: ImportContext, param: Value, shape: Sequence[int], axis: int,
              block_size: int = 0) -> Value:
    """``param`` (a scale or zero point) shaped to broadcast against a tensor of ``shape``:
    a scalar stays one, a 1-D tensor lies along ``axis``, a blocked one is repeated
    ``block_size`` times along ``axis`` (the last block may be cut short)."""
    ptype = param.type
    if ptype.ndim == 0 or (ptype.size == 1 and not block_size):
        return reshape(ctx, param, ())
    axis = normalize_axis(axis, len(shape))
    if not block_size:
        if ptype.ndim != 1 or ptype.shape[0] != shape[axis]:
            raise ShapeError(f"a per-axis scale or zero point must be 1-D of size "
                             f"{shape[axis]} (axis {axis}), got {ptype}")
        return reshape(ctx, param, tuple(shape[axis] if k == axis else 1
                                         for k in range(len(shape))))
    blocks = -(-shape[axis] // block_size)
    expected = tuple(blocks if k == axis else d for k, d in enumerate(shape))
    if ptype.shape != expected:
        raise ShapeError(f"a blocked scale or zero point must have shape {list(expected)} "
                         f"(block_size {block_size} along axis {axis}), got {ptype}")
    # [.., blocks, ..] -> [.., blocks, 1, ..] -> [.., blocks, block_size, ..] -> [.., D', ..]
    split = expected[:axis + 1] + (1,) + expected[axis + 1:]
    spread = split[:axis + 1] + (block_size,) + split[axis + 2:]
    x = ctx.emit("broadcast_to", [reshape(ctx, param, split)], shape=spread)
    x = reshape(ctx, x, expected[:axis] + (blocks * block_size,) + expected[axis + 1:])
    if blocks * block_size != shape[axis]:
        x = ctx.emit("slice", [x], starts=(0,) * len(shape), steps=(1,) * len(shape),
                     shape=tuple(shape))
    return x


def _clip_cast(ctx: ImportContext, x: Value, dtype: str) -> Value:
    """``x`` (a float holding an integer) clipped to the range of the integer ``dtype`` (in
    float, so that nothing overflows) and cast."""
    low, high = INTEGER_RANGES[dtype]
    x = ctx.emit("clip", [x], min=float(low), max=float(high))
    return ctx.emit("cast", [x], dtype=dtype)


# QuantizeLinear / DequantizeLinear --------------------------------------------------------------
@converter("QuantizeLinear", since=10)
def quantize_linear(ctx: ImportContext, inputs: list[Value], *, axis: int = 1,
                    saturate: int = 1, block_size: int = 0, output_dtype: int = 0,
                    precision: int = 0) -> Value:
    x, scale = inputs[:2]
    zero_point = inputs[2] if len(inputs) > 2 else None
    dtype = ctx.dtype_name(output_dtype) if output_dtype else "uint8"
    if zero_point is not None:
        if output_dtype and zero_point.type.dtype != dtype:
            raise ShapeError(f"output_dtype {dtype} differs from the zero point's dtype "
                             f"{zero_point.type.dtype}")
        dtype = zero_point.type.dtype
    if dtype not in INTEGER_RANGES and dtype not in FLOAT_OUTPUTS:
        raise ShapeError(f"QuantizeLinear cannot produce {dtype}; it produces "
                         f"{', '.join((*INTEGER_RANGES, *FLOAT_OUTPUTS))}")
    shape = x.type.shape
    # the division is in x's float dtype, or in `precision` (an int32 x: in float32)
    compute = ctx.dtype_name(precision) if precision else x.type.dtype
    if not compute.startswith(("float", "bfloat")):
        compute = "float32"
    scaled = ctx.emit("div", [_cast(ctx, x, compute),
                              _cast(ctx, _per_axis(ctx, scale, shape, axis, block_size),
                                    compute)])
    if dtype in SATURATING_FLOAT8:  # a zero point of a float8 type must be zero
        return _cast_to(ctx, scaled, dtype, int(saturate))
    wide = "float64" if compute == "float64" else "float32"
    scaled = _cast(ctx, scaled, wide)
    if dtype not in INTEGER_RANGES:  # float4: plus the zero point, then a saturating cast
        if zero_point is not None:
            zp = _per_axis(ctx, zero_point, shape, axis, block_size)
            scaled = ctx.emit("add", [scaled, _cast(ctx, zp, wide)])
        return ctx.emit("cast", [scaled], dtype=dtype)
    rounded = ctx.emit("round", [scaled])  # before the zero point: ties go to even
    if zero_point is not None:
        zp = _per_axis(ctx, zero_point, shape, axis, block_size)
        rounded = ctx.emit("add", [rounded, _cast(ctx, zp, wide)])
    return _clip_cast(ctx, rounded, dtype)


@converter("DequantizeLinear", since=10)
def dequantize_linear(ctx: ImportContext, inputs: list[Value], *, axis: int = 1,
                      block_size: int = 0, output_dtype: int = 0) -> Value:
    x, scale = inputs[:2]
    zero_point = inputs[2] if len(inputs) > 2 else None
    shape = x.type.shape
    if _kept_for_qdq(ctx, x, scale, zero_point, block_size, output_dtype):
        # int8 weights / int32 biases stay integers until the QDQ pass has seen them
        zp = zero_point if zero_point is not None else \
            ctx.const(np.zeros((), x.type.dtype))
        y = emit(ctx.graph, "dequantize", [
            x, _per_axis(ctx, scale, shape, axis), _per_axis(ctx, zp, shape, axis)])
        y.producer.name = ctx.node_name
        return y
    dx = _cast(ctx, x, "float32")
    # float8 and float4 zero points are zero by definition (ONNX's reference ignores them)
    if zero_point is not None and x.type.dtype not in FLOAT_OUTPUTS:
        zp = _per_axis(ctx, zero_point, shape, axis, block_size)
        dx = ctx.emit("sub", [dx, _cast(ctx, zp, "float32")])
    scale32 = _cast(ctx, _per_axis(ctx, scale, shape, axis, block_size), "float32")
    y = ctx.emit("mul", [dx, scale32])
    dtype = ctx.dtype_name(output_dtype) if output_dtype else scale.type.dtype
    return _cast(ctx, y, dtype)


def _kept_for_qdq(ctx: ImportContext, x: Value, scale: Value, zero_point: Value | None,
                  block_size: int, output_dtype: int) -> bool:
    """Whether a DequantizeLinear becomes the core ``dequantize`` rather than float ops: a
    constant int8 / uint8 / int32 tensor, a float32 scale (per tensor or per axis)."""
    return ctx.constant(x) is not None and x.type.dtype in ("int8", "uint8", "int32") and \
        not block_size and scale.type.dtype == "float32" and \
        (not output_dtype or ctx.dtype_name(output_dtype) == "float32") and \
        (zero_point is None or zero_point.type.dtype == x.type.dtype) and \
        ctx.constant(scale) is not None and \
        (zero_point is None or ctx.constant(zero_point) is not None)


@converter("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: ImportContext, inputs: list[Value]
                            ) -> tuple[Value, Value, Value]:
    """uint8 quantization over the range of x widened to include 0; returns (y, scale, zp)."""
    x = _cast(ctx, inputs[0], "float32")
    axes = tuple(range(x.type.ndim))
    zero = _const(ctx, 0.0, "float32")
    high = ctx.emit("maximum", [ctx.emit("reduce_max", [x], axes=axes, keepdims=False), zero])
    low = ctx.emit("minimum", [ctx.emit("reduce_min", [x], axes=axes, keepdims=False), zero])
    span = ctx.emit("sub", [high, low])
    # an all-zero x would give a zero scale: ONNX then uses a span of 1
    span = ctx.emit("where", [ctx.emit("equal", [span, zero]), _const(ctx, 1.0, "float32"),
                              span])
    scale = ctx.emit("div", [span, _const(ctx, 255.0, "float32")])
    initial = ctx.emit("sub", [zero, ctx.emit("div", [low, scale])])
    zp = ctx.emit("round", [ctx.emit("clip", [initial], min=0.0, max=255.0)])
    y = ctx.emit("add", [ctx.emit("round", [ctx.emit("div", [x, scale])]), zp])
    y = _clip_cast(ctx, y, "uint8")
    return y, _cast(ctx, scale, inputs[0].type.dtype), ctx.emit("cast", [zp], dtype="uint8")


# integer matmul and convolution --------------------------------------------------------------
def _minus_zero_point(ctx: ImportContext, x: Value, zero_point: Value | None,
                      shape: Sequence[int] | None = None) -> Value:
    """``x - zero_point`` in int32; ``shape``: how to lay a non-scalar zero point out."""
    x32 = _cast(ctx, x, "int32")
    if zero_point is None:
        return x32
    zp = _cast(ctx, zero_point, "int32")
    if zp.type.size == 1:
        zp = reshape(ctx, zp, ())
    elif shape is not None:
        zp = reshape(ctx, zp, shape)
    return ctx.emit("sub", [x32, zp])


def _optional(inputs: list[Value | None], index: int) -> Value | None:
    return inputs[index] if len(inputs) > index else None


def _row_layout(a: Value, param: Value | None) -> tuple[int, ...] | None:
    """A per-row parameter of matmul operand ``a`` ([M] or [..., M, 1]) laid along its rows."""
    if param is None or param.type.size == 1 or a.type.ndim < 2:
        return None
    if param.type.ndim == 1:
        return (param.type.size, 1)
    return param.type.shape


def _integer_matmul(ctx: ImportContext, a: Value, b: Value, a_zp: Value | None,
                    b_zp: Value | None) -> Value:
    """(a - a_zp) @ (b - b_zp) in int32: a's zero point per row, b's per column."""
    a32 = _minus_zero_point(ctx, a, a_zp, _row_layout(a, a_zp))
    b32 = _minus_zero_point(ctx, b, b_zp)
    return _matmul(ctx, [a32, b32])


def _integer_conv(ctx: ImportContext, x: Value, w: Value, x_zp: Value | None,
                  w_zp: Value | None, attrs: dict) -> Value:
    """conv(x - x_zp, w - w_zp) in int32 (padding is zero after the shift); w's zero point
    is per output channel."""
    x32 = _minus_zero_point(ctx, x, x_zp)
    w_layout = (w.type.shape[0],) + (1,) * (w.type.ndim - 1)
    w32 = _minus_zero_point(ctx, w, w_zp, w_layout)
    return _conv(ctx, [x32, w32], **attrs)


@converter("MatMulInteger", since=10)
def matmul_integer(ctx: ImportContext, inputs: list[Value]) -> Value:
    return _integer_matmul(ctx, inputs[0], inputs[1], _optional(inputs, 2),
                           _optional(inputs, 3))


def _conv_attrs(auto_pad: str, dilations, group: int, kernel_shape, pads, strides) -> dict:
    return dict(auto_pad=auto_pad, dilations=dilations, group=group,
                kernel_shape=kernel_shape, pads=pads, strides=strides)


@converter("ConvInteger", since=10)
def conv_integer(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
                 dilations: Sequence[int] | None = None, group: int = 1,
                 kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
                 strides: Sequence[int] | None = None) -> Value:
    attrs = _conv_attrs(auto_pad, dilations, group, kernel_shape, pads, strides)
    return _integer_conv(ctx, inputs[0], inputs[1], _optional(inputs, 2),
                         _optional(inputs, 3), attrs)


def _requantize(ctx: ImportContext, acc: Value, scale: Value, zero_point: Value | None,
                dtype: str) -> Value:
    """round(acc * scale + zero_point), clipped to ``dtype`` (acc int32; computed in
    float64, where int32 accumulators and the float scales are exact)."""
    y = ctx.emit("mul", [_cast(ctx, acc, "float64"), _cast(ctx, scale, "float64")])
    if zero_point is not None:
        y = ctx.emit("add", [y, _cast(ctx, reshape(ctx, zero_point, ()), "float64")])
    return _clip_cast(ctx, ctx.emit("round", [y]), dtype)


def _multiplier(ctx: ImportContext, a_scale: Value, b_scale: Value, y_scale: Value) -> Value:
    """a_scale * b_scale / y_scale in the scales' dtype (rounded as ONNX's reference does)."""
    product = ctx.emit("mul", [a_scale, b_scale])
    return ctx.emit("div", [product, y_scale])


@converter("QLinearMatMul", since=10)
def qlinear_matmul(ctx: ImportContext, inputs: list[Value]) -> Value:
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = (list(inputs) + [None] * 8)[:8]
    acc = _integer_matmul(ctx, a, b, a_zp, b_zp)
    a_layout = _row_layout(a, a_scale)
    a_scale = reshape(ctx, a_scale, a_layout or ())
    b_scale = reshape(ctx, b_scale, () if b_scale.type.size == 1 else b_scale.type.shape)
    scale = _multiplier(ctx, a_scale, b_scale, reshape(ctx, y_scale, ()))
    dtype = y_zp.type.dtype if y_zp is not None else a.type.dtype
    return _requantize(ctx, acc, scale, y_zp, dtype)


@converter("QLinearConv", since=10)
def qlinear_conv(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
                 dilations: Sequence[int] | None = None, group: int = 1,
                 kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
                 strides: Sequence[int] | None = None) -> Value:
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias = (list(inputs) + [None] * 9)[:9]
    attrs = _conv_attrs(auto_pad, dilations, group, kernel_shape, pads, strides)
    acc = _integer_conv(ctx, x, w, x_zp, w_zp, attrs)
    channels = (1, w.type.shape[0]) + (1,) * (acc.type.ndim - 2)
    if bias is not None:
        acc = ctx.emit("add", [acc, reshape(ctx, _cast(ctx, bias, "int32"), channels)])
    w_scale = reshape(ctx, w_scale, () if w_scale.type.size == 1 else channels)
    scale = _multiplier(ctx, reshape(ctx, x_scale, ()), w_scale, reshape(ctx, y_scale, ()))
    dtype = y_zp.type.dtype if y_zp is not None else x.type.dtype
    return _requantize(ctx, acc, scale, y_zp, dtype)

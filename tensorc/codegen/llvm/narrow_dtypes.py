"""LLVM conversions of the sub-16-bit dtypes: 8- and 4-bit minifloats, 4- and 2-bit integers.

Each element takes one byte in memory (as ml_dtypes lays out its numpy arrays). A minifloat is
computed in float32 (like bfloat16): loading decodes its bits, storing encodes a float32 value
rounded to nearest, ties to even. Encoding does not saturate: a value past the largest finite
one becomes infinity where the format has it, else NaN (ONNX's Cast with saturate=0; the
frontend clips first for saturate=1). A sub-byte integer is computed in an 8-bit register,
sign- or zero-extended from its bits.

>>> encode(builder, float32_value, "float8_e4m3fn")   # an i8: its bits    # doctest: +SKIP
"""
from __future__ import annotations

import struct

from llvmlite import ir

from tensorc.codegen.llvm.ir_types import F32, I8, I32, like, splat

# dtype -> (exponent bits, mantissa bits, exponent bias, special values), special values:
#   "ieee":   all-ones exponent is infinity (mantissa 0) or NaN
#   "fn":     no infinity; all-ones exponent and mantissa is NaN
#   "fnuz":   no infinity, no negative zero; 0x80 (negative zero's bits) is the NaN
#   "finite": no infinity, no NaN; overflow saturates
MINIFLOATS = {
    "float8_e4m3fn": (4, 3, 7, "fn"),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz"),
    "float4_e2m1fn": (2, 1, 1, "finite"),
}
# float8_e8m0fnu: a power of two 2^(bits - 127) (no sign, no zero), 0xFF is NaN. Encoding
# rounds up and saturates (ONNX Cast's defaults, round_mode="up", saturate=1) and, like ONNX's
# reference, keeps the exponent of |x|.
E8M0 = "float8_e8m0fnu"
# sub-byte integers -> (bits, signed)
SMALL_INTS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}
FLOAT_FORMATS = (*MINIFLOATS, E8M0)
NARROW_DTYPES = FLOAT_FORMATS + tuple(SMALL_INTS)
_NAN32 = 0x7FC00000
_INF32 = 0x7F800000


def container(dtype: str) -> str:
    """The dtype whose register holds ``dtype``'s values: float32, int8 or uint8."""
    if dtype in FLOAT_FORMATS:
        return "float32"
    return "int8" if SMALL_INTS[dtype][1] else "uint8"


def decode(b: ir.IRBuilder, bits: ir.Value, dtype: str) -> ir.Value:
    """The value of the stored bits (i8, or a vector of them): float32 or an 8-bit integer."""
    if dtype in SMALL_INTS:
        return wrap_int(b, bits, dtype)
    if dtype == E8M0:
        return _decode_e8m0(b, bits)
    exp_bits, man_bits, bias, special = MINIFLOATS[dtype]
    t = bits.type

    def c(value: int) -> ir.Constant:
        return splat(t, I32, value)
    u = b.zext(bits, like(t, I32))
    magnitude_bits = exp_bits + man_bits
    magnitude = b.and_(u, c((1 << magnitude_bits) - 1))
    # a normal number: move exponent and mantissa into float32's fields, rebias the exponent
    normal = b.add(b.shl(magnitude, c(23 - man_bits)), c((127 - bias) << 23))
    # a subnormal number is its mantissa times the smallest subnormal (exact in float32)
    tiny = b.fmul(b.uitofp(magnitude, like(t, F32)), splat(t, F32, 2.0 ** (1 - bias - man_bits)))
    result = b.select(b.icmp_unsigned("<", magnitude, c(1 << man_bits)),
                      b.bitcast(tiny, like(t, I32)), normal)
    if special == "ieee":
        inf_code = ((1 << exp_bits) - 1) << man_bits
        result = b.select(b.icmp_unsigned("==", magnitude, c(inf_code)), c(_INF32), result)
        result = b.select(b.icmp_unsigned(">", magnitude, c(inf_code)), c(_NAN32), result)
    elif special == "fn":
        result = b.select(b.icmp_unsigned("==", magnitude, c((1 << magnitude_bits) - 1)),
                          c(_NAN32), result)
    sign = b.shl(b.and_(b.lshr(u, c(magnitude_bits)), c(1)), c(31))
    result = b.or_(result, sign)
    if special == "fnuz":
        result = b.select(b.icmp_unsigned("==", u, c(0x80)), c(_NAN32), result)
    return b.bitcast(result, like(t, F32))


def encode(b: ir.IRBuilder, value: ir.Value, dtype: str) -> ir.Value:
    """The stored bits (i8) of a float32 value (minifloat) or an 8-bit integer (sub-byte)."""
    if dtype in SMALL_INTS:
        bits, _ = SMALL_INTS[dtype]
        return b.and_(value, splat(value.type, I8, (1 << bits) - 1))
    if dtype == E8M0:
        return _encode_e8m0(b, value)
    exp_bits, man_bits, bias, special = MINIFLOATS[dtype]
    t = value.type

    def c(v: int) -> ir.Constant:
        return splat(t, I32, v)
    u = b.bitcast(value, like(t, I32))
    sign = b.lshr(u, c(31))
    a = b.and_(u, c(0x7FFFFFFF))
    # normal results: round float32's mantissa to man_bits (nearest, ties to even) in the
    # integer bits, where a carry out of the mantissa correctly bumps the exponent
    shift = 23 - man_bits
    halfway = b.add(c((1 << (shift - 1)) - 1), b.and_(b.lshr(a, c(shift)), c(1)))
    normal = b.sub(b.lshr(b.add(a, halfway), c(shift)), c((127 - bias) << man_bits))
    # subnormal results: adding 2^(emin - man_bits + 23) makes the FPU round |x| at the
    # subnormal step, leaving the code in the sum's low mantissa bits
    magic = 2.0 ** (1 - bias - man_bits + 23)
    absolute = b.bitcast(a, like(t, F32))
    summed = b.bitcast(b.fadd(absolute, splat(t, F32, magic)), like(t, I32))
    tiny = b.sub(summed, c(_f32_bits(magic)))
    min_normal = _f32_bits(2.0 ** (1 - bias))
    code = b.select(b.icmp_unsigned("<", a, c(min_normal)), tiny, normal)
    # past the largest finite code (infinity included): infinity, NaN or saturation
    magnitude_mask = (1 << (exp_bits + man_bits)) - 1
    inf_code = ((1 << exp_bits) - 1) << man_bits
    largest, overflow, nan = {
        "ieee": (inf_code - 1, inf_code, inf_code | (1 << (man_bits - 1))),
        "fn": (magnitude_mask - 1, magnitude_mask, magnitude_mask),
        "fnuz": (magnitude_mask, 0x80, 0x80),
        # ml_dtypes turns NaN into a zero of the opposite sign (set below)
        "finite": (magnitude_mask, magnitude_mask, 0),
    }[special]
    big = b.icmp_unsigned(">", a, c(_f32_bits(2.0 ** 30)))   # keeps `normal` from wrapping
    too_large = b.or_(big, b.icmp_signed(">", code, c(largest)))
    code = b.select(too_large, c(overflow), code)
    is_nan = b.icmp_unsigned(">", a, c(_INF32))
    code = b.select(is_nan, c(nan), code)
    if special == "finite":
        sign = b.select(is_nan, b.xor(sign, c(1)), sign)
    signed = b.or_(code, b.shl(sign, c(exp_bits + man_bits)))
    if special == "fnuz":
        # no negative zero, and the NaN code already has the sign bit
        keep = b.and_(b.icmp_unsigned("!=", code, c(0)), b.icmp_unsigned("!=", code, c(0x80)))
        signed = b.select(keep, signed, code)
    return b.trunc(signed, like(t, I8))


def _decode_e8m0(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    t = bits.type
    u = b.zext(bits, like(t, I32))
    result = b.shl(u, splat(t, I32, 23))
    # 2^-127 is a float32 subnormal; 0xFF would read as infinity
    result = b.select(b.icmp_unsigned("==", u, splat(t, I32, 0)),
                      splat(t, I32, 0x00400000), result)
    result = b.select(b.icmp_unsigned("==", u, splat(t, I32, 0xFF)),
                      splat(t, I32, _NAN32), result)
    return b.bitcast(result, like(t, F32))


def _encode_e8m0(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    t = value.type
    u = b.bitcast(value, like(t, I32))
    exponent = b.and_(b.lshr(u, splat(t, I32, 23)), splat(t, I32, 0xFF))
    fraction = b.and_(u, splat(t, I32, 0x7FFFFF))
    # round up: any fraction takes the next power of two, except past the largest (0xFE);
    # infinity and NaN (exponent 0xFF) stay 0xFF; 2^-127 (a float32 subnormal) is exact
    up = b.and_(b.icmp_unsigned("!=", fraction, splat(t, I32, 0)),
                b.icmp_unsigned("<", exponent, splat(t, I32, 0xFE)))
    magnitude = b.and_(u, splat(t, I32, 0x7FFFFFFF))
    up = b.and_(up, b.icmp_unsigned("!=", magnitude, splat(t, I32, 0x400000)))
    return b.trunc(b.add(exponent, b.zext(up, like(t, I32))), like(t, I8))


def wrap_int(b: ir.IRBuilder, value: ir.Value, dtype: str) -> ir.Value:
    """An 8-bit integer reduced to the sub-byte ``dtype``: its low bits, sign-extended where
    the dtype is signed (the wrap-around of a narrowing integer cast)."""
    bits, signed = SMALL_INTS[dtype]
    if not signed:
        return b.and_(value, splat(value.type, I8, (1 << bits) - 1))
    up = splat(value.type, I8, 8 - bits)
    return b.ashr(b.shl(value, up), up)


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]

"""Arithmetic on LLVM values for the LLVM code generator: scalar and vector binary ops,
casts between every dtype (half, bfloat16 and the narrow float and int formats are computed in
wider registers and converted on load and store), bit casts and math intrinsics.

:class:`ValueOps` is a helper of the code generator (``codegen.py``), which walks the loop IR
and hands it the values to combine; it uses the generator's builder ``b``, ``expr``,
``declare``, ``intrinsic`` and ``check_index``.
"""
from __future__ import annotations

import math

from llvmlite import ir

from tensorc.codegen.llvm import narrow_dtypes
from tensorc.codegen.llvm.int8_dot import emit_dot4
from tensorc.codegen.llvm.ir_types import I1, I8, I32, I64, constant, like, splat
from tensorc.codegen.llvm.part import CodegenPart
from tensorc.codegen.llvm.vector_math import INLINE, MathOps
from tensorc.errors import TensorcError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import itemsize

_SCALAR = {
    "float16": ir.HalfType(), "bfloat16": ir.FloatType(), "float32": ir.FloatType(),
    "float64": ir.DoubleType(),
    "int8": I8, "int16": ir.IntType(16), "int32": I32, "int64": I64,
    "uint8": I8, "uint16": ir.IntType(16), "uint32": I32, "uint64": I64, "bool": I1,
    # float8 / float4 are computed in float32, int4 / int2 in 8 bits (narrow_dtypes.py)
    **{d: ir.FloatType() for d in narrow_dtypes.FLOAT_FORMATS},
    **{d: I8 for d in narrow_dtypes.SMALL_INTS},
}
# LLVM intrinsics by expression intrinsic name (the rest call libm)
_LLVM_INTRINSIC = {"exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt",
                   "fabs": "llvm.fabs", "floor": "llvm.floor", "ceil": "llvm.ceil",
                   "round": "llvm.roundeven", "trunc": "llvm.trunc", "sin": "llvm.sin",
                   "cos": "llvm.cos", "pow": "llvm.pow", "tanh": "llvm.tanh",
                   "tan": "llvm.tan", "asin": "llvm.asin", "acos": "llvm.acos",
                   "atan": "llvm.atan", "sinh": "llvm.sinh", "cosh": "llvm.cosh"}
_LIBM = {"erf", "asinh", "acosh", "atanh", "fmod"}
ICMP = {"lt": "<", "le": "<=", "eq": "==", "ne": "!=", "gt": ">", "ge": ">="}
# 'reassoc' lets LLVM reorder reductions into vector form; 'contract' allows FMAs.
_FAST = ("contract", "reassoc")


def value_type(dtype: str) -> ir.Type:
    try:
        return _SCALAR[dtype]
    except KeyError:
        raise TensorcError(f"the LLVM backend does not support dtype {dtype}") from None


def storage_type(dtype: str) -> ir.Type:
    if dtype in narrow_dtypes.NARROW_DTYPES:
        return I8
    if dtype == "bfloat16":
        return ir.IntType(16)
    return I8 if dtype == "bool" else value_type(dtype)


def is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


class ValueOps(CodegenPart):
    """Emit arithmetic on scalar or vector LLVM values (see the module docstring)."""

    def __init__(self, gen):
        super().__init__(gen)
        self.math = MathOps(gen)


    def from_storage(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype in narrow_dtypes.NARROW_DTYPES:
            return narrow_dtypes.decode(self.b, v, dtype)
        if dtype == "bfloat16":  # the 16 bits are the high half of a float32
            wide = self.b.shl(self.b.zext(v, like(v.type, I32)), splat(v.type, I32, 16))
            return self.b.bitcast(wide, like(v.type, ir.FloatType()))
        if dtype == "bool":
            zero = constant(v.type, None)
            return self.b.icmp_unsigned("!=", v, zero)
        return v

    def to_storage(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype in narrow_dtypes.NARROW_DTYPES:
            return narrow_dtypes.encode(self.b, v, dtype)
        if dtype == "bfloat16":
            bits = self.b.lshr(self._round_bfloat16_bits(v), splat(v.type, I32, 16))
            return self.b.trunc(bits, like(v.type, ir.IntType(16)))
        if dtype == "bool":
            ty = ir.VectorType(I8, v.type.count) if isinstance(v.type, ir.VectorType) else I8
            return self.b.zext(v, ty)
        return v

    def broadcast(self, v: ir.Value, lanes: int) -> ir.Value:
        if isinstance(v.type, ir.VectorType):
            return v
        vty = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant):
            return constant(vty, [v.constant] * lanes)
        undef = constant(vty, ir.Undefined)
        one = self.b.insert_element(undef, v, constant(I32, 0))
        return self.b.shuffle_vector(one, undef, constant(ir.VectorType(I32, lanes),
                                                          [0] * lanes))

    def pair(self, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        xv, yv = isinstance(x.type, ir.VectorType), isinstance(y.type, ir.VectorType)
        if xv and not yv:
            y = self.broadcast(y, x.type.count)
        elif yv and not xv:
            x = self.broadcast(x, y.type.count)
        return x, y

    def binary(self, op: str, dtype: str, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        if E.is_float(dtype):
            if op == "add":
                return b.fadd(x, y, flags=_FAST)
            if op == "sub":
                return b.fsub(x, y, flags=_FAST)
            if op == "mul":
                return b.fmul(x, y, flags=_FAST)
            if op == "div":
                return b.fdiv(x, y)
            if op in ("min", "max"):
                # NaN-propagating, as numpy's minimum/maximum and ONNX's Min/Max; which zero
                # max(-0, +0) gives is left open (nsz), as numpy's order-dependent answer
                # does: x86 then needs 3 instructions instead of 6 (the sign tests go)
                name = "llvm.minimum" if op == "min" else "llvm.maximum"
                return b.call(self.gen.intrinsic(name, x.type, 2), [x, y], fastmath=("nsz",))
            if op == "pow":
                return self._intr2("llvm.pow", x, y)
            if op in ("floormod", "truncmod"):
                r = b.frem(x, y)
                if op == "truncmod":
                    return r
                # floor semantics: fix the sign when r and y differ in sign
                zero = constant(r.type, None)
                fix = b.and_(b.fcmp_ordered("!=", r, zero),
                             b.xor(b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", y, zero)))
                return b.select(fix, b.fadd(r, y), r)
            if op == "floordiv":
                return self._intr1("llvm.floor", b.fdiv(x, y))
            raise TensorcError(f"float op {op} is not supported")
        signed = is_signed(dtype) or dtype == "bool"
        folded = _fold_int(op, x, y) if signed else None
        if folded is not None:
            return folded
        if op == "add":
            return b.add(x, y)
        if op == "sub":
            return b.sub(x, y)
        if op == "mul":
            return b.mul(x, y)
        if op in ("div", "truncdiv"):
            return b.sdiv(x, y) if signed else b.udiv(x, y)
        if op == "truncmod":
            return b.srem(x, y) if signed else b.urem(x, y)
        if op == "floordiv":
            if not signed:
                return b.udiv(x, y)
            q = b.sdiv(x, y)
            r = b.srem(x, y)
            zero = constant(r.type, None)
            fix = b.and_(b.icmp_signed("!=", r, zero),
                         b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))
            return b.sub(q, b.zext(fix, q.type))
        if op == "floormod":
            if not signed:
                return b.urem(x, y)
            r = b.srem(x, y)
            zero = constant(r.type, None)
            fix = b.and_(b.icmp_signed("!=", r, zero),
                         b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))
            return b.select(fix, b.add(r, y), r)
        if op in ("min", "max"):
            cmp = (b.icmp_signed if signed else b.icmp_unsigned)("<" if op == "min" else ">",
                                                                 x, y)
            return b.select(cmp, x, y)
        if op == "pow":
            raise TensorcError("integer pow is computed in floating point by the op layer")
        if op in ("bitand", "bitor", "bitxor"):
            return {"bitand": b.and_, "bitor": b.or_, "bitxor": b.xor}[op](x, y)
        if op == "shl":
            return b.shl(x, y)
        if op == "shr":
            return b.ashr(x, y) if signed else b.lshr(x, y)
        raise TensorcError(f"integer op {op} is not supported")

    def _intr1(self, name: str, x: ir.Value) -> ir.Value:
        return self.b.call(self.gen.intrinsic(name, x.type, 1), [x])

    def _intr2(self, name: str, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.call(self.gen.intrinsic(name, x.type, 2), [x, y])

    def call(self, e: E.Call, lanes: int | None) -> ir.Value:
        inline = self._inline_math_call(e, lanes)
        if inline is not None:
            return inline
        args = [self.gen.expr(a, lanes) for a in e.args]
        if len(args) == 2:
            args = list(self.pair(*args))
        x = args[0]
        if e.name.startswith("dot4_"):
            first, second = args if e.name in ("dot4_u8s8", "dot4_s8s8") else args[::-1]
            return emit_dot4(self.gen, first, second, signed=e.name.startswith("dot4_s8s8"))
        if e.name == "bitcast":
            return self._bitcast(x, e.args[0].dtype, e.dtype)
        if e.name == "check_index":
            size = arith.as_const_int(e.args[1])
            return self.gen.check_index(x, size if size is not None else
                                        self.gen.expr(e.args[1]))
        if e.name in ("isnan", "isinf"):
            if e.name == "isnan":
                return self.b.fcmp_unordered("uno", x, x)
            inf = constant(x.type.element if isinstance(x.type, ir.VectorType) else x.type,
                              float("inf"))
            if isinstance(x.type, ir.VectorType):
                inf = self.broadcast(inf, x.type.count)
            return self.b.fcmp_ordered("==", self._intr1("llvm.fabs", x), inf)
        if e.name in _LLVM_INTRINSIC:
            return self.b.call(self.gen.intrinsic(_LLVM_INTRINSIC[e.name], x.type, len(args)),
                               args)
        # libm has no half functions: call the float ones
        if like(x.type, ir.HalfType()) == x.type:
            wide = [self.cast(a, "float16", "float32") for a in args]
            return self.cast(self._libm(e.name, wide), "float32", "float16")
        return self._libm(e.name, args)

    def _inline_math_call(self, e: E.Call, lanes: int | None) -> ir.Value | None:
        """exp, log, tanh, erf, sin, cos of float32 (and of the formats computed in float32,
        and of half, widened) as inline vector code (vector_math.py); log(1 + y) as log1p(y).
        None for the rest (float64 keeps LLVM's intrinsics and libm)."""
        if e.dtype == "float64" or not E.is_float(e.dtype):
            return None
        name, arg = e.name, e.args[0]
        if name == "pow" and isinstance(e.args[1], E.Const) and math.isfinite(e.args[1].value):
            x = self.gen.expr(arg, lanes)
            if like(x.type, ir.HalfType()) == x.type:
                wide = self.math.pow_by_constant(self.cast(x, "float16", "float32"),
                                                 e.args[1].value)
                return self.cast(wide, "float32", "float16")
            return self.math.pow_by_constant(x, e.args[1].value)
        if name not in INLINE:
            return None
        if name == "exp" and _negated_abs(arg):
            name = "exp_nonpositive"     # exp(-|y|), as sigmoid computes it: no overflow
        if name == "log" and isinstance(arg, E.Binary) and arg.op == "add":
            for one, rest in ((arg.a, arg.b), (arg.b, arg.a)):
                if isinstance(one, E.Const) and one.value == 1.0:
                    name, arg = "log1p", rest
                    break
        x = self.gen.expr(arg, lanes)
        if like(x.type, ir.HalfType()) == x.type:
            wide = self.math.inline_math(name, self.cast(x, "float16", "float32"))
            return self.cast(wide, "float32", "float16")
        return self.math.inline_math(name, x)

    def _libm(self, name: str, args: list[ir.Value]) -> ir.Value:
        """A libm function on float or double values; libm is scalar: call once per lane."""
        x = args[0]
        scalar_ty = x.type.element if isinstance(x.type, ir.VectorType) else x.type
        suffix = "f" if scalar_ty == ir.FloatType() else ""
        fn = self.gen.declare(name + suffix, scalar_ty, [scalar_ty] * len(args))
        if not isinstance(x.type, ir.VectorType):
            return self.b.call(fn, args)
        out = constant(x.type, ir.Undefined)
        for k in range(x.type.count):
            lane = [self.b.extract_element(a, constant(I32, k)) for a in args]
            out = self.b.insert_element(out, self.b.call(fn, lane), constant(I32, k))
        return out

    def _bitcast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """The bits of ``v`` (a ``src`` value) as a ``dst`` value of the same width."""
        b = self.b
        i16 = ir.IntType(16)
        if src == "bool":
            v = b.zext(v, like(v.type, I8))           # bool values are i1, stored as bytes
        elif src == "bfloat16":                        # computed in float32, stored as i16
            bits = b.lshr(b.bitcast(v, like(v.type, I32)), splat(v.type, I32, 16))
            v = b.trunc(bits, like(v.type, i16))
        if dst == "bool":
            return b.icmp_unsigned("!=", v, constant(v.type, None))
        if dst == "bfloat16":
            wide = b.shl(b.zext(v, like(v.type, I32)), splat(v.type, I32, 16))
            return b.bitcast(wide, like(v.type, ir.FloatType()))
        target = like(v.type, value_type(dst))
        return v if v.type == target else b.bitcast(v, target)

    def cast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        if src == dst:
            return v
        if src in narrow_dtypes.NARROW_DTYPES:  # held as float32, int8 or uint8 already
            return self.cast(v, narrow_dtypes.container(src), dst)
        if dst in narrow_dtypes.FLOAT_FORMATS:  # round to the format, keep it in float32
            wide = self._float32_odd(v) if src == "float64" else self.cast(v, src, "float32")
            return narrow_dtypes.decode(self.b, narrow_dtypes.encode(self.b, wide, dst), dst)
        if dst in narrow_dtypes.SMALL_INTS:  # through int64: wraps like numpy, never poison
            wide = self.cast(v, src, "int64" if E.is_float(src) else src)
            narrow = self.cast(wide, "int64" if E.is_float(src) else src,
                               narrow_dtypes.container(dst))
            return narrow_dtypes.wrap_int(self.b, narrow, dst)
        if src == "bfloat16":  # its values are float32 already
            return self.cast(v, "float32", dst)
        if dst == "bfloat16":
            wide = self._float32_odd(v) if src == "float64" else self.cast(v, src, "float32")
            return self.b.bitcast(self._round_bfloat16_bits(wide), wide.type)
        b = self.b
        vec = v.type.count if isinstance(v.type, ir.VectorType) else None
        dty = value_type(dst)
        if vec:
            dty = ir.VectorType(dty, vec)
        sf, df = E.is_float(src), E.is_float(dst)
        if dst == "bool":
            zero = constant(v.type, None)
            return b.fcmp_unordered("!=", v, zero) if sf else b.icmp_unsigned("!=", v, zero)
        if sf and df:
            if src == "float64" and dst == "float16":  # no such instruction (a libcall)
                return b.fptrunc(self._float32_odd(v), dty)
            return b.fpext(v, dty) if _bits(dst) > _bits(src) else b.fptrunc(v, dty)
        if sf:
            return b.fptosi(v, dty) if is_signed(dst) else b.fptoui(v, dty)
        if df:
            return b.sitofp(v, dty) if is_signed(src) else b.uitofp(v, dty)
        if _bits(dst) > _bits(src):
            return b.sext(v, dty) if is_signed(src) else b.zext(v, dty)
        if _bits(dst) < _bits(src):
            return b.trunc(v, dty)
        return v

    def _float32_odd(self, v: ir.Value) -> ir.Value:
        """double -> float rounded to odd (an inexact result gets an odd last bit): rounding
        that again to a narrower float (half, bfloat16) is exactly one correct rounding."""
        b = self.b
        t = b.fptrunc(v, like(v.type, ir.FloatType()))
        back = b.fpext(t, v.type)
        bits = b.bitcast(t, like(v.type, I32))
        one = splat(v.type, I32, 1)
        even = b.icmp_unsigned("==", b.and_(bits, one), splat(v.type, I32, 0))
        fix = b.and_(b.fcmp_ordered("!=", back, v), even)
        # step the magnitude one ulp toward v
        away = b.fcmp_ordered(">", self._intr1("llvm.fabs", back), self._intr1("llvm.fabs", v))
        stepped = b.select(away, b.sub(bits, one), b.add(bits, one))
        return b.bitcast(b.select(fix, stepped, bits), t.type)

    def _round_bfloat16_bits(self, f: ir.Value) -> ir.Value:
        """The float32 bits of ``f`` rounded to bfloat16 (nearest, ties to even; NaN stays a
        quiet NaN), low 16 bits zero."""
        b = self.b
        bits = b.bitcast(f, like(f.type, I32))
        lsb = b.and_(b.lshr(bits, splat(f.type, I32, 16)), splat(f.type, I32, 1))
        rounded = b.add(b.add(bits, splat(f.type, I32, 0x7FFF)), lsb)
        high = splat(f.type, I32, -0x10000)
        quiet = b.or_(bits, splat(f.type, I32, 0x400000))
        return b.and_(b.select(b.fcmp_unordered("uno", f, f), quiet, rounded), high)


def _bits(dtype: str) -> int:
    return 1 if dtype == "bool" else itemsize(dtype) * 8


def type_suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    if isinstance(ty, ir.PointerType):
        return "p0"
    return {"float": "f32", "double": "f64", "half": "f16"}.get(str(ty), str(ty))


def _negated_abs(e: E.Expr) -> bool:
    """Whether ``e`` is -|y| (written 0 - fabs(y)): never above zero."""
    return isinstance(e, E.Binary) and e.op == "sub" and isinstance(e.a, E.Const) and \
        e.a.value == 0 and isinstance(e.b, E.Call) and e.b.name == "fabs"


# Integer arithmetic of two constants (an unrolled loop's index in an address: k % 4, k // 4)
# is folded here rather than emitted for LLVM to fold: the unrolled transforms of a Winograd
# kernel emitted thousands of such instructions, a third of its compile time.
_INT_FOLDS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
              "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "min": min,
              "max": max}


def _fold_int(op: str, x: ir.Value, y: ir.Value) -> ir.Constant | None:
    """``x op y`` as a constant where both are signed integer constants (None otherwise)."""
    fold = _INT_FOLDS.get(op)
    if fold is None or not isinstance(x, ir.Constant) or not isinstance(y, ir.Constant) or \
            not isinstance(x.type, ir.IntType) or x.type != y.type or x.type.width < 8 or \
            not isinstance(x.constant, int) or not isinstance(y.constant, int):
        return None
    if op in ("floordiv", "floormod") and y.constant == 0:
        return None
    half = 1 << (x.type.width - 1)
    return constant(x.type, (fold(x.constant, y.constant) + half) % (2 * half) - half)

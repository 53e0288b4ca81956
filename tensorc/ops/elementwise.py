"""Elementwise ops: arithmetic, math functions, bitwise ops and cast.

Every op is one :class:`Rule` (numpy semantics, expression builder, allowed dtypes), and
:func:`define_elementwise` turns a rule into a registry entry: unary rules are elementwise,
rules over several inputs broadcast like numpy. Activations live in ``ops/activations.py``,
comparisons, logic and ``where`` in ``ops/logic.py``; both use the same machinery.

float16 and bfloat16 are computed in float32 and rounded once per op (as onnxruntime does):
libm has no half functions, and one rounding per op is what the numpy references do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.registry import OpDef, Pattern, define
from tensorc.ops.shape_rules import (
    broadcast_shapes,
    expect_arity,
    expect_dtype_name,
    expect_float,
    expect_same_dtype,
)

# dtype groups ---------------------------------------------------------------------------------
FLOATS = ("float16", "bfloat16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
SIGNED_NUMERIC = FLOATS + SIGNED
ALL = NUMERIC + ("bool",)
HALVES = ("float16", "bfloat16")


@dataclass(frozen=True)
class Rule:
    """One elementwise op: ``numpy(attrs, *arrays)`` is its meaning (constant folding,
    tests), ``expr(attrs, *exprs)`` its scalar expression, ``dtypes`` the input dtypes it
    accepts, ``out_dtype`` a fixed result dtype (bool for predicates; None: the input's).
    ``widen`` computes float16 / bfloat16 inputs in float32."""

    numpy: Callable[..., np.ndarray]
    expr: Callable[..., E.Expr]
    dtypes: tuple[str, ...] = NUMERIC
    out_dtype: str | None = None
    widen: bool = True


def broadcast_index(t: te.Tensor, out_index: tuple, out_shape: tuple[int, ...]) -> list:
    """Index of ``t`` for output position ``out_index`` under numpy broadcasting. An axis of
    size 1 that is not broadcast keeps the output's index (always 0), so that a guarded
    index a consumer substitutes for it (a concat's, see E.guarded_clamp) is not lost."""
    offset = len(out_shape) - t.ndim
    return [E.const(0) if d == 1 and out_shape[offset + k] != 1 else out_index[offset + k]
            for k, d in enumerate(t.shape)]


def widened_expr(rule: Rule, attrs: dict, *xs: E.Expr) -> E.Expr:
    """``rule.expr`` on ``xs``, computed in float32 where the inputs are half floats."""
    dtype = xs[-1].dtype  # the value operand (where's condition comes first)
    if not (rule.widen and dtype in HALVES):
        return rule.expr(attrs, *xs)
    result = rule.expr(attrs, *[E.cast("float32", x) if x.dtype == dtype else x for x in xs])
    return E.cast(dtype, result) if result.dtype == "float32" else result


def widened_numpy(rule: Rule, attrs: dict, *arrays: np.ndarray) -> np.ndarray:
    """``rule.numpy`` on ``arrays``, computed in float32 where they are half floats."""
    dtype = arrays[-1].dtype.name
    if not (rule.widen and dtype in HALVES):
        out = rule.numpy(attrs, *arrays)
        return np.asarray(out).astype(rule.out_dtype or dtype, copy=False)
    wide = [a.astype(np.float32) if a.dtype.name == dtype else a for a in arrays]
    return np.asarray(rule.numpy(attrs, *wide)).astype(rule.out_dtype or dtype)


def check_dtype(op: str, rule: Rule, t: TensorType, which: str = "input 0") -> None:
    if rule.dtypes == FLOATS:
        expect_float(op, t, which)
    elif t.dtype not in rule.dtypes:
        raise ShapeError(f"{op}: {which} has dtype {t.dtype}, but the op takes "
                         f"{', '.join(rule.dtypes)}")


def define_elementwise(name: str, rule: Rule, arity: int) -> OpDef:
    """Register op ``name`` of ``arity`` inputs (one dtype, numpy broadcasting) for ``rule``.

    >>> define_elementwise("reciprocal", Rule(lambda a, x: 1 / x, lambda a, x: 1 / x,
    ...                                       FLOATS), 1)                # doctest: +SKIP
    """
    op = define(name, Pattern.ELEMWISE if arity == 1 else Pattern.BROADCAST)

    @op.infer
    def infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
        expect_arity(name, input_types, arity)
        dtype = expect_same_dtype(name, input_types)
        check_dtype(name, rule, input_types[0])
        return [TensorType(broadcast_shapes(name, input_types), rule.out_dtype or dtype)]

    @op.reference
    def reference(attrs: dict, *arrays: np.ndarray) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [widened_numpy(rule, attrs, *arrays)]

    op.compute(broadcast_compute(name, rule))
    return op


def broadcast_compute(name: str, rule: Rule) -> Callable:
    """The compute of a broadcasting elementwise op: one expression per output element."""
    def compute(attrs: dict, *inputs: te.Tensor) -> te.Tensor:
        shape = te.broadcast_shape(*(t.shape for t in inputs))
        return te.compute(shape, lambda *i: widened_expr(
            rule, attrs, *(t[tuple(broadcast_index(t, i, shape))] for t in inputs)), name=name)
    return compute


# expression helpers ---------------------------------------------------------------------------
def zero(x: E.Expr) -> E.Const:
    return E.Const(0, x.dtype)


def const_like(value: float, x: E.Expr) -> E.Const:
    return E.Const(value, x.dtype)


def negative(x: E.Expr) -> E.Expr:
    return zero(x) - x


def exp(x: E.Expr) -> E.Expr:
    return E.call("exp", x)


def abs_expr(x: E.Expr) -> E.Expr:
    if E.is_float(x.dtype):
        return E.call("fabs", x)
    if x.dtype in UNSIGNED or x.dtype == "bool":
        return x
    return E.select(E.Compare("lt", x, zero(x)), negative(x), x)


def sign_expr(x: E.Expr) -> E.Expr:
    """-1, 0 or 1; a float NaN stays NaN (the last branch returns x itself)."""
    one = const_like(1, x)
    rest = x if E.is_float(x.dtype) else zero(x)
    if x.dtype not in UNSIGNED:
        rest = E.select(E.Compare("lt", x, zero(x)), const_like(-1, x), rest)
    return E.select(E.Compare("gt", x, zero(x)), one, rest)


def safe_divisor(x: E.Expr, y: E.Expr, op: str, at_zero: E.Expr) -> E.Expr:
    """Integer ``x op y`` that never traps: division by 0 gives ``at_zero`` (numpy gives 0)
    and MIN / -1, which overflows x86's idiv, is computed without dividing."""
    is_zero = E.eq(y, 0)
    if y.dtype in UNSIGNED:
        return E.select(is_zero, at_zero, E.Binary(op, x, E.select(is_zero, const_like(1, y), y)))
    minus_one = E.eq(y, -1)
    divisor = E.select(E.Logical("or", is_zero, minus_one), const_like(1, y), y)
    by_minus_one = negative(x) if op in ("truncdiv", "floordiv") else zero(x)
    return E.select(is_zero, at_zero,
                    E.select(minus_one, by_minus_one, E.Binary(op, x, divisor)))


def float_floormod(x: E.Expr, y: E.Expr) -> E.Expr:
    """numpy's float ``mod``: the remainder takes the divisor's sign, and a zero remainder is
    a zero of the divisor's sign."""
    r = E.Binary("truncmod", x, y)
    differ = E.Logical("or", E.Logical("and", E.Compare("lt", r, zero(r)),
                                       E.Compare("gt", y, zero(y))),
                       E.Logical("and", E.Compare("gt", r, zero(r)),
                                 E.Compare("lt", y, zero(y))))
    signed_zero = E.select(E.Compare("lt", y, zero(y)), const_like(-0.0, y), zero(y))
    return E.select(E.eq(r, 0), signed_zero, E.select(differ, r + y, r))


# numpy references -----------------------------------------------------------------------------
def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C and ONNX), not numpy's floor."""
    if np.issubdtype(a.dtype, np.floating):
        return a / b
    quotient = np.floor_divide(a, b)
    remainder = np.remainder(a, b)
    # floor and trunc differ when the division is inexact and the signs differ.
    fix = (remainder != 0) & ((a < 0) != (b < 0))
    return quotient + fix.astype(quotient.dtype)


def _mod(attrs: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if attrs["fmod"]:
        return np.fmod(a, b)
    return np.mod(a, b)


def _clip(attrs: dict, x: np.ndarray) -> np.ndarray:
    low, high = attrs.get("min"), attrs.get("max")
    if low is not None:
        x = np.maximum(x, np.asarray(low).astype(x.dtype))
    if high is not None:
        x = np.minimum(x, np.asarray(high).astype(x.dtype))
    return x


def _clip_expr(a: dict, x: E.Expr) -> E.Expr:
    if a.get("min") is not None:
        x = E.maximum(x, E.Const(a["min"], x.dtype))
    if a.get("max") is not None:
        x = E.minimum(x, E.Const(a["max"], x.dtype))
    return x


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):  # as compiled: in float64, then truncated
        return np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return np.power(a, b)


def _pow_expr(x: E.Expr, y: E.Expr) -> E.Expr:
    if E.is_float(x.dtype):
        return E.call("pow", x, y)
    # integer powers are computed in float64, exact for the results int64 can hold
    wide = E.call("pow", E.cast("float64", x), E.cast("float64", y))
    return E.cast(x.dtype, E.cast("int64", wide))


def _shift(attrs: dict, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # numpy saturates out-of-range shifts (negative or at least the bit width) like ONNX
    return np.left_shift(x, y) if attrs["direction"] == "LEFT" else np.right_shift(x, y)


def _shift_expr(attrs: dict, x: E.Expr, y: E.Expr) -> E.Expr:
    """x << y or x >> y. A shift out of range (negative, or the bit width or more), which
    LLVM leaves undefined, gives ONNX's full-width result: 0, or the sign for a right shift
    of a signed value."""
    bits = np.dtype(x.dtype).itemsize * 8
    in_range = E.Compare("lt", y, const_like(bits, y))
    if y.dtype in SIGNED:
        in_range = E.Logical("and", in_range, E.Compare("ge", y, zero(y)))
    if attrs["direction"] == "LEFT":
        op, saturated = "shl", zero(x)
    else:
        op = "shr"
        saturated = E.Binary("shr", x, const_like(bits - 1, x)) if x.dtype in SIGNED else zero(x)
    return E.select(in_range, E.Binary(op, x, E.select(in_range, y, zero(y))), saturated)


def _vectorized(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """A float function of the math module over an array (for references only)."""
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: ufunc(x).astype(x.dtype)


_erf = _vectorized(math.erf)


def _unary(numpy_fn: Callable, expr_fn: Callable, dtypes=FLOATS, **kw) -> Rule:
    """A rule without attributes."""
    return Rule(lambda a, x: numpy_fn(x), lambda a, x: expr_fn(x), dtypes, **kw)


def _binary(numpy_fn: Callable, expr_fn: Callable, dtypes=NUMERIC, **kw) -> Rule:
    return Rule(lambda a, x, y: numpy_fn(x, y), lambda a, x, y: expr_fn(x, y), dtypes, **kw)


def _math(name: str) -> Rule:
    """A libm / LLVM intrinsic function of the same name in numpy."""
    fn = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan",
                      "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh"}.get(name, name))
    return _unary(fn, lambda x: E.call(name, x))


def sigmoid_expr(x: E.Expr) -> E.Expr:
    """1 / (1 + exp(-x)) as (x >= 0 ? 1 : e) / (1 + e) with e = exp(-|x|): one exp, no
    overflow, and the tiny results of very negative x (down to the normal range; denormal
    ones flush to 0, see codegen/llvm/vector_math.py's exp_nonpositive) are kept instead of
    1 / (1 + inf) = 0."""
    one = const_like(1, x)
    e = exp(negative(E.call("fabs", x)))
    return E.select(E.Compare("ge", x, zero(x)), one, e) / (one + e)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


UNARY: dict[str, Rule] = {
    "relu": _unary(lambda x: np.maximum(x, np.zeros((), x.dtype)),
                   lambda x: E.maximum(x, zero(x)), NUMERIC),
    "leaky_relu": Rule(lambda a, x: np.where(x >= 0, x, x * a["alpha"]),
                       lambda a, x: E.select(E.Compare("ge", x, zero(x)), x,
                                             x * const_like(a["alpha"], x)), FLOATS),
    "sigmoid": _unary(_sigmoid, lambda x: sigmoid_expr(x)),
    "exp": _math("exp"),
    "log": _math("log"),
    "sqrt": _math("sqrt"),
    "tanh": _math("tanh"),
    "neg": _unary(np.negative, negative, SIGNED_NUMERIC),
    "abs": _unary(np.abs, abs_expr, NUMERIC),
    "sign": _unary(np.sign, sign_expr, NUMERIC),
    "clip": Rule(_clip, _clip_expr, NUMERIC),
    "reciprocal": _unary(lambda x: 1 / x, lambda x: const_like(1, x) / x),
    "floor": _math("floor"),
    "ceil": _math("ceil"),
    "round": _unary(np.round, lambda x: E.call("round", x)),  # both round half to even
    "erf": _unary(_erf, lambda x: E.call("erf", x)),
    "bitwise_not": _unary(np.invert, lambda x: E.Binary("bitxor", x, const_like(-1, x)), INTS),
    **{name: _math(name) for name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh",
                                      "cosh", "asinh", "acosh", "atanh")},
}

BINARY: dict[str, Rule] = {
    "add": _binary(np.add, lambda x, y: x + y),
    "sub": _binary(np.subtract, lambda x, y: x - y),
    "mul": _binary(np.multiply, lambda x, y: x * y),
    "div": _binary(_int_div, lambda x, y: x / y if E.is_float(x.dtype)
                   else safe_divisor(x, y, "truncdiv", zero(x))),
    "pow": _binary(_pow, _pow_expr),
    "maximum": _binary(np.maximum, E.maximum),
    "minimum": _binary(np.minimum, E.minimum),
    "mod": Rule(_mod, lambda a, x, y: (
        E.Binary("truncmod", x, y) if a["fmod"] else float_floormod(x, y))
        if E.is_float(x.dtype) else
        safe_divisor(x, y, "truncmod" if a["fmod"] else "floormod", zero(x))),
    "bitwise_and": _binary(np.bitwise_and, lambda x, y: E.Binary("bitand", x, y), INTS),
    "bitwise_or": _binary(np.bitwise_or, lambda x, y: E.Binary("bitor", x, y), INTS),
    "bitwise_xor": _binary(np.bitwise_xor, lambda x, y: E.Binary("bitxor", x, y), INTS),
    "bit_shift": Rule(_shift, _shift_expr, INTS),
}

for _name, _rule in UNARY.items():
    define_elementwise(_name, _rule, 1)
for _name, _rule in BINARY.items():
    define_elementwise(_name, _rule, 2)


# cast -----------------------------------------------------------------------------------------
cast = define("cast", Pattern.ELEMWISE)


@cast.infer
def _cast_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("cast", input_types, 1)
    expect_dtype_name("cast", attrs["dtype"])
    return [TensorType(input_types[0].shape, attrs["dtype"])]


@cast.reference
def _cast_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    dtype = attrs["dtype"]
    with np.errstate(invalid="ignore", over="ignore"):
        if x.dtype.name == "bfloat16":
            x = x.astype(np.float32)
        if x.dtype.kind == "f" and dtype in INTS and dtype != "uint64":
            # as compiled: truncate to int64, then wrap (what C compilers do on x86)
            return [x.astype(np.int64).astype(dtype)]
        return [x.astype(dtype)]


def cast_expr(dtype: str, x: E.Expr) -> E.Expr:
    """ONNX Cast of one element: floats truncate toward zero into integers; a narrow integer
    takes the low bits of the int64 result (LLVM leaves out-of-range conversions undefined,
    numpy and onnxruntime wrap)."""
    if not (E.is_float(x.dtype) and dtype in INTS) or dtype == "int64":
        return E.cast(dtype, x)
    if dtype == "uint64":  # values past int64's range need the unsigned conversion
        negative_value = E.Compare("lt", x, zero(x))
        return E.select(negative_value, E.cast(dtype, E.cast("int64", x)), E.cast(dtype, x))
    return E.cast(dtype, E.cast("int64", x))


@cast.compute
def _cast_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    dtype = attrs["dtype"]
    return te.compute(x.shape, lambda *i: cast_expr(dtype, x[i]), name="cast")

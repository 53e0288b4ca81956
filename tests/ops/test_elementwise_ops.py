"""Elementwise, activation, logic and cast ops, compiled by tensorc, against numpy.

Each test builds a one-node ONNX model, compiles it with ``tensorc.compile`` and compares
with a numpy reference written here (independent of tensorc's own ``reference`` functions),
on odd shapes, on every dtype ONNX allows for the op, and on attribute edge cases.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorc

FLOATS = ("float16", "bfloat16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
ALL = FLOATS + INTS + ("bool",)
SHAPES = [(1,), (7,), (3, 17), (2, 3, 33)]
# tolerance of a result rounded to the dtype (float16 / bfloat16 keep 11 / 8 bits); ONNX
# stores float attributes (alpha, beta) as float32, which bounds float64's accuracy
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5, "float64": 1e-7}


# ---------------------------------------------------------------------------------------------
# harness

def np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def run(op: str, feeds: dict[str, np.ndarray], opset: int = 20, outputs: int = 1,
        **attrs) -> list[np.ndarray]:
    """Compile a one-node model of ONNX ``op`` over ``feeds`` and run it."""
    names = [f"y{k}" for k in range(outputs)]
    node = helper.make_node(op, list(feeds), names, **attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in feeds.items()]
    graph = helper.make_graph([node], op, inputs,
                              [helper.make_empty_tensor_value_info(n) for n in names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=10)
    result = tensorc.compile(model).run(feeds)
    return [result[n] for n in names]


def run1(op: str, *arrays: np.ndarray, opset: int = 20, **attrs) -> np.ndarray:
    return run(op, {f"x{k}": a for k, a in enumerate(arrays)}, opset=opset, **attrs)[0]


def rand(shape, dtype="float32", low=-3.0, high=3.0, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in FLOATS:
        return rng.uniform(low, high, shape).astype(np_dtype(dtype))
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, int(low)), min(info.max, int(high)), shape, dtype=dtype,
                        endpoint=True)


def check(got: np.ndarray, want, dtype: str | None = None, tol: float | None = None) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f" or want.dtype == np_dtype("bfloat16"):
        tol = tol if tol is not None else TOL[dtype or want.dtype.name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def in_float64(fn, x: np.ndarray, *rest: np.ndarray) -> np.ndarray:
    """``fn`` evaluated in float64 and rounded to x's dtype: the exact answer."""
    return np.asarray(fn(x.astype(np.float64), *(r.astype(np.float64) for r in rest))
                      ).astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# math functions

erf = np.frompyfunc(math.erf, 1, 1)

MATH = {  # ONNX op: (numpy in float64, input range)
    "Sin": (np.sin, -6, 6), "Cos": (np.cos, -6, 6), "Tan": (np.tan, -1.4, 1.4),
    "Asin": (np.arcsin, -0.99, 0.99), "Acos": (np.arccos, -0.99, 0.99),
    "Atan": (np.arctan, -9, 9), "Sinh": (np.sinh, -4, 4), "Cosh": (np.cosh, -4, 4),
    "Asinh": (np.arcsinh, -9, 9), "Acosh": (np.arccosh, 1, 9), "Atanh": (np.arctanh, -0.99, 0.99),
    "Erf": (lambda x: erf(x).astype(np.float64), -3, 3), "Reciprocal": (lambda x: 1 / x, 0.5, 4),
    "Floor": (np.floor, -9, 9), "Ceil": (np.ceil, -9, 9), "Exp": (np.exp, -5, 5),
    "Log": (np.log, 0.1, 9), "Sqrt": (np.sqrt, 0, 9), "Tanh": (np.tanh, -4, 4),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -8, 8),
}


@pytest.mark.parametrize("op", sorted(MATH))
@pytest.mark.parametrize("shape", SHAPES[1:3])
def test_math_float32(op, shape):
    fn, low, high = MATH[op]
    x = rand(shape, low=low, high=high)
    check(run1(op, x), in_float64(fn, x))


@pytest.mark.parametrize("op", ["Sin", "Erf", "Acosh", "Reciprocal", "Floor", "Exp"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_math_other_floats(op, dtype):
    fn, low, high = MATH[op]
    x = rand((5, 13), dtype, low=low, high=high)
    check(run1(op, x), in_float64(fn, x), dtype)


def test_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.49, 2.51, -0.0, 7.0], np.float32)
    want = np.array([0, 2, 2, -0, -2, -2, 2, 3, 0, 7], np.float32)
    check(run1("Round", x), want)
    check(run1("Round", x.astype(np.float16)), want.astype(np.float16))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_sign_abs(dtype):
    x = rand((4, 9), dtype, low=-9, high=9)
    x.flat[0] = 0
    want_sign = np.where(x.astype(np.float64) > 0, 1, np.where(x.astype(np.float64) < 0, -1, 0))
    check(run1("Sign", x), want_sign.astype(x.dtype), dtype)
    check(run1("Abs", x), np.abs(x.astype(np.float64)).astype(x.dtype), dtype)


def test_sign_nan_and_neg():
    x = np.array([np.nan, -np.inf, 3.0, -0.0], np.float32)
    got = run1("Sign", x)
    assert np.isnan(got[0]) and got[1:].tolist() == [-1.0, 1.0, 0.0]
    check(run1("Neg", np.array([-128, 5, 127], np.int8)), np.array([-128, -5, -127], np.int8))


# ---------------------------------------------------------------------------------------------
# activations

SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


ACTIVATIONS = [  # (ONNX op, attributes, numpy in float64, opset)
    ("HardSigmoid", {}, lambda x: np.clip(0.2 * x + 0.5, 0, 1), 6),
    ("HardSigmoid", {"alpha": 0.5, "beta": 0.1}, lambda x: np.clip(0.5 * x + 0.1, 0, 1), 6),
    ("HardSwish", {}, lambda x: x * np.clip(x / 6 + 0.5, 0, 1), 14),
    ("Elu", {}, lambda x: np.where(x < 0, np.exp(x) - 1, x), 6),
    ("Elu", {"alpha": 2.5}, lambda x: np.where(x < 0, 2.5 * (np.exp(x) - 1), x), 6),
    ("Selu", {}, lambda x: SELU_GAMMA * np.where(x > 0, x, SELU_ALPHA * (np.exp(x) - 1)), 6),
    ("Selu", {"alpha": 2.0, "gamma": 3.0}, lambda x: 3 * np.where(x > 0, x, 2 * np.exp(x) - 2), 6),
    ("Celu", {}, lambda x: np.maximum(x, 0) + np.minimum(0, np.exp(x) - 1), 12),
    ("Celu", {"alpha": 2.0}, lambda x: np.maximum(x, 0) + np.minimum(0, 2 * (np.exp(x / 2) - 1)),
     12),
    ("Gelu", {}, lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2)).astype(np.float64)), 20),
    ("Gelu", {"approximate": "tanh"},
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), 20),
    ("Mish", {}, lambda x: x * np.tanh(softplus(x)), 18),
    ("Softplus", {}, softplus, 1),
    ("Softsign", {}, lambda x: x / (1 + np.abs(x)), 1),
    ("ThresholdedRelu", {}, lambda x: np.where(x > 1, x, 0), 10),
    ("ThresholdedRelu", {"alpha": -0.5}, lambda x: np.where(x > -0.5, x, 0), 10),
    ("Shrink", {}, lambda x: np.where(x < -0.5, x, np.where(x > 0.5, x, 0)), 9),
    ("Shrink", {"bias": 1.5, "lambd": 1.0},
     lambda x: np.where(x < -1, x + 1.5, np.where(x > 1, x - 1.5, 0)), 9),
    ("Swish", {}, lambda x: x / (1 + np.exp(-x)), 24),
    ("Swish", {"alpha": 2.0}, lambda x: x / (1 + np.exp(-2 * x)), 24),
    ("LeakyRelu", {"alpha": 0.3}, lambda x: np.where(x < 0, 0.3 * x, x), 6),
    ("Relu", {}, lambda x: np.maximum(x, 0), 14),
]


@pytest.mark.parametrize("op, attrs, fn, opset", ACTIVATIONS,
                         ids=[f"{a[0]}-{k}" for k, a in enumerate(ACTIVATIONS)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_activation(op, attrs, fn, opset, dtype):
    x = rand((3, 17), dtype, low=-5, high=5)
    check(run1(op, x, opset=opset, **attrs), in_float64(fn, x), dtype)


@pytest.mark.parametrize("shape", SHAPES)
def test_activation_shapes(shape):
    x = rand(shape, low=-4, high=4)
    check(run1("Gelu", x), in_float64(ACTIVATIONS[9][2], x))


def test_softplus_mish_do_not_overflow():
    x = np.array([-100.0, -20.0, 0.0, 20.0, 100.0, 1e30], np.float32)
    check(run1("Softplus", x), in_float64(softplus, x))
    check(run1("Mish", x), in_float64(ACTIVATIONS[11][2], x))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_shrink_integers(dtype):
    # bias and lambd act in float: on unsigned tensors x < -lambd never holds
    x = np.array([0, 1, 2, 3, 5, 9, 100], dtype)
    if dtype in SIGNED:
        x = np.concatenate([x, -x]).astype(dtype)
    want = np.where(x < -1.5, x + 1.0, np.where(x > 1.5, x - 1.0, 0)).astype(dtype)
    check(run1("Shrink", x, opset=9, bias=1.0, lambd=1.5), want)


@pytest.mark.parametrize("x_shape, slope_shape", [((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4, 5), (5,)),
                                                  ((3, 17), (1,)), ((7,), (7,)),
                                                  ((2, 3, 4), ())])
def test_prelu_slope_broadcasting(x_shape, slope_shape):
    x = rand(x_shape, seed=1)
    slope = rand(slope_shape, low=0, high=1, seed=2)
    check(run1("PRelu", x, slope, opset=16), np.where(x < 0, x * slope, x))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float16", "float64"])
def test_prelu_dtypes(dtype):
    x = rand((4, 6), dtype, low=-9, high=9)
    slope = rand((6,), dtype, low=-3, high=3, seed=3)
    check(run1("PRelu", x, slope, opset=16),
          in_float64(lambda a, s: np.where(a < 0, a * s, a), x, slope), dtype)


# ---------------------------------------------------------------------------------------------
# arithmetic: Mod, Div, Pow, variadic Min / Max / Sum / Mean

@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integers(dtype, fmod):
    x = rand((5, 11), dtype, low=-50, high=50)
    y = rand((11,), dtype, low=-9, high=9, seed=4)
    y[y == 0] = 3
    a, b = x.astype(np.int64), y.astype(np.int64)
    trunc = a - b * np.trunc(a / b).astype(np.int64)
    want = trunc if fmod else np.where((trunc != 0) & ((trunc < 0) != (b < 0)), trunc + b, trunc)
    check(run1("Mod", x, y, fmod=fmod), want.astype(dtype))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_mod_floats(dtype):
    x = rand((4, 9), dtype, low=-9, high=9)
    y = rand((4, 9), dtype, low=0.5, high=4, seed=5) * np.where(rand((4, 9), seed=6) > 0, 1, -1
                                                                   ).astype(dtype)
    check(run1("Mod", x, y, fmod=1), in_float64(np.fmod, x, y), dtype)
    check(run1("Mod", x, y, fmod=0), in_float64(np.mod, x, y), dtype)


def test_mod_float_edge_cases():
    # the floor remainder takes the divisor's sign, zeros included; x mod +-inf keeps x or
    # gives the infinity when signs differ, as Python's %
    x = np.array([0.0, -0.0, 0.0, -0.0, -3.0, 3.0, 3.0, -3.0, 5.0], np.float32)
    y = np.array([-2.0, 2.0, 2.0, -2.0, np.inf, np.inf, -np.inf, -np.inf, 2.5], np.float32)
    got = run1("Mod", x, y, fmod=0)
    want = [math.copysign(0, -1), 0.0, 0.0, math.copysign(0, -1), math.inf, 3.0, -math.inf,
            -3.0, 0.0]
    assert got.tolist() == want
    assert np.signbit(got).tolist() == [True, False, False, True, False, False, True, True,
                                        False]
    assert np.isnan(run1("Mod", np.array([np.inf, 1.0], np.float32),
                         np.array([2.0, 0.0], np.float32), fmod=0)).all()


@pytest.mark.parametrize("op", ["Div", "Mod"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16"])
def test_integer_division_by_zero_and_overflow_do_not_trap(op, dtype):
    # division by zero gives 0 (as numpy); MIN / -1 wraps instead of raising SIGFPE
    low = np.iinfo(dtype).min
    x = np.array([7, low, low, -7 if low else 9], dtype)
    y = np.array([0, 0, -1 if low else 1, 2], dtype)
    got = run1(op, x, y, **({"fmod": 1} if op == "Mod" else {}))
    if op == "Div":
        want = [0, 0, low, -3 if low else 4]
    else:
        want = [0, 0, 0, -1 if low else 1]
    check(got, np.array(want).astype(dtype))


@pytest.mark.parametrize("dtype", INTS)
def test_div_integers_truncate(dtype):
    x = rand((3, 8), dtype, low=-100, high=100)
    y = rand((8,), dtype, low=1, high=9, seed=7)
    want = np.trunc(x.astype(np.float64) / y.astype(np.float64))
    check(run1("Div", x, y), want.astype(dtype))


def test_pow_mixed_dtypes():
    base = np.array([[1.5, 2.0, -3.0], [0.5, 4.0, 9.0]], np.float32)
    for exp_dtype in ["int64", "int32", "float64", "float16"]:
        exponent = np.array([2, 3, 2], exp_dtype)
        check(run1("Pow", base, exponent, opset=15), np.power(base, exponent.astype(np.float32)))
    ints = np.array([4, 9, 2, 3], np.int64)
    check(run1("Pow", ints, np.array([0.5, 0.5, 3.0, 2.0], np.float32), opset=15),
          np.array([2, 3, 8, 9], np.int64))
    check(run1("Pow", ints.astype(np.int32), np.array([2], np.int64), opset=15),
          np.array([16, 81, 4, 9], np.int32))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int8",
                                   "uint8", "int32", "uint32", "int64", "uint64"])
def test_variadic_min_max_sum(dtype):
    a = rand((2, 3, 5), dtype, low=0 if dtype in UNSIGNED else -40, high=90, seed=1)
    b = rand((3, 1), dtype, low=0 if dtype in UNSIGNED else -40, high=90, seed=2)
    c = rand((5,), dtype, low=0 if dtype in UNSIGNED else -40, high=90, seed=3)
    if dtype in UNSIGNED:
        a[0, 0, 0] = np.iinfo(dtype).max  # past the signed range: compared unsigned
    wide = [v.astype(np.float64) if dtype in FLOATS else v for v in (a, b, c)]
    check(run1("Max", a, b, c), np.maximum(np.maximum(*wide[:2]), wide[2]).astype(a.dtype), dtype)
    check(run1("Min", a, b, c), np.minimum(np.minimum(*wide[:2]), wide[2]).astype(a.dtype), dtype)
    check(run1("Sum", a, b, c), (wide[0] + wide[1] + wide[2]).astype(a.dtype), dtype)
    check(run1("Max", a), a)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_mean(dtype):
    a, b, c = (rand(s, dtype, seed=k) for k, s in enumerate([(4, 6), (6,), (4, 1)]))
    check(run1("Mean", a, b, c), in_float64(lambda x, y, z: (x + y + z) / 3, a, b, c), dtype)
    check(run1("Mean", a), a)


def test_min_max_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, np.nan, 1.0], np.float32)
    assert np.isnan(run1("Max", a, b)[:2]).all() and run1("Min", a, b)[2] == 1.0


# ---------------------------------------------------------------------------------------------
# bitwise ops

@pytest.mark.parametrize("dtype", INTS)
def test_bitwise(dtype):
    info = np.iinfo(dtype)
    a = rand((3, 16), dtype, low=info.min, high=info.max, seed=1)
    b = rand((16,), dtype, low=info.min, high=info.max, seed=2)
    check(run1("BitwiseAnd", a, b, opset=18), a & b)
    check(run1("BitwiseOr", a, b, opset=18), a | b)
    check(run1("BitwiseXor", a, b, opset=18), a ^ b)
    check(run1("BitwiseNot", a, opset=18), ~a)


def shift_reference(x: np.ndarray, y: np.ndarray, left: bool) -> np.ndarray:
    """ONNX BitShift with Python integers: an out-of-range shift (negative, or at least the
    bit width) gives 0, or -1 for a right shift of a negative number."""
    bits = x.dtype.itemsize * 8
    out = []
    for a, s in zip(x.tolist(), y.tolist()):
        if not 0 <= s < bits:
            value = -1 if (not left and a < 0) else 0
        else:
            value = a << s if left else a >> s
        value &= (1 << bits) - 1  # wrap into the dtype
        if x.dtype.kind == "i" and value >= 1 << (bits - 1):
            value -= 1 << bits
        out.append(value)
    return np.array(out, x.dtype)


@pytest.mark.parametrize("dtype", UNSIGNED)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(dtype, direction):
    bits = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    x = rand((40,), dtype, low=info.min, high=info.max, seed=1)
    y = rand((40,), dtype, low=0, high=bits + 3, seed=2)
    got = run1("BitShift", x, y, opset=11, direction=direction)
    check(got, shift_reference(x, y, direction == "LEFT"))


@pytest.mark.parametrize("dtype", SIGNED)
def test_bit_shift_of_signed_integers_is_refused_as_its_schema_and_onnxruntime_do(dtype):
    x = rand((4,), dtype, low=-5, high=5, seed=1)
    with pytest.raises(tensorc.errors.InvalidModelError, match="takes tensor\\(uint8\\)"):
        run1("BitShift", x, x, opset=11, direction="LEFT")


# ---------------------------------------------------------------------------------------------
# comparisons, logic, predicates, where

COMPARE = {"Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
           "Greater": np.greater, "GreaterOrEqual": np.greater_equal}


@pytest.mark.parametrize("op", sorted(COMPARE))
@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_compare(op, dtype):
    high = np.iinfo(dtype).max if dtype in INTS else 5
    a = rand((3, 1, 7), dtype, low=-5, high=high, seed=1)
    b = rand((4, 7), dtype, low=-5, high=high, seed=2)
    b[0] = a[0, 0]  # equal elements
    want = COMPARE[op](a.astype(np.float64) if dtype == "bfloat16" else a,
                       b.astype(np.float64) if dtype == "bfloat16" else b)
    check(run1(op, a, b, opset=16), want)


def test_compare_nan_and_bool():
    a = np.array([np.nan, np.nan, 1.0], np.float32)
    b = np.array([np.nan, 1.0, np.nan], np.float32)
    for op in COMPARE:
        assert run1(op, a, b, opset=16).tolist() == [False, False, False]
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    check(run1("Equal", p, q, opset=16), p == q)


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)),
                                    ((1,), (2, 2, 3))])
def test_logic(shapes):
    a, b = rand(shapes[0], "bool", seed=1), rand(shapes[1], "bool", seed=2)
    check(run1("And", a, b), a & b)
    check(run1("Or", a, b), a | b)
    check(run1("Xor", a, b), a ^ b)
    check(run1("Not", a), ~a)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_isnan_isinf(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5, 3e3], np.float64).astype(np_dtype(dtype))
    check(run1("IsNaN", x), np.array([1, 0, 0, 0, 0, 0], bool))
    check(run1("IsInf", x), np.array([0, 1, 1, 0, 0, 0], bool))
    check(run1("IsInf", x, detect_negative=0), np.array([0, 1, 0, 0, 0, 0], bool))
    check(run1("IsInf", x, detect_positive=0), np.array([0, 0, 1, 0, 0, 0], bool))
    check(run1("IsInf", x, detect_positive=0, detect_negative=0), np.zeros(6, bool))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((3, 1), (1, 4), (4,)),
                                    ((4,), (2, 3, 1), ()), ((), (5,), (3, 1))])
def test_where_broadcasts_all_three(dtype, shapes):
    cond = rand(shapes[0], "bool", seed=1)
    x = rand(shapes[1], dtype, low=0, high=90, seed=2)
    y = rand(shapes[2], dtype, low=0, high=90, seed=3)
    check(run1("Where", cond, x, y, opset=16), np.where(cond, x, y), dtype)


# ---------------------------------------------------------------------------------------------
# casts

def cast_source(dtype: str) -> np.ndarray:
    """Values every dtype can hold, so that a cast of them is well defined in ONNX: small
    integers, and for floats also fractions (truncated toward zero by float -> int)."""
    if dtype == "bool":
        return np.array([True, False, True, True, False, False, True, False])
    values = [0, 1, 2, 7, 100, 127, 3, 5]
    if dtype in FLOATS:
        values = [0.0, 1.0, 2.75, 7.5, 100.25, 127.0, 3.9, 0.5]
    if dtype in SIGNED or dtype in FLOATS:
        values = [v if k % 2 else -v for k, v in enumerate(values)]
    return np.array(values, np.float64).astype(np_dtype(dtype))


@pytest.mark.parametrize("source", ALL)
def test_cast_all_pairs(source):
    """One model per source dtype with one Cast to every dtype."""
    x = cast_source(source)
    targets = list(ALL)
    nodes = [helper.make_node("Cast", ["x"], [f"to_{t}"],
                              to=helper.np_dtype_to_tensor_dtype(np_dtype(t))) for t in targets]
    graph = helper.make_graph(nodes, "casts", [helper.make_tensor_value_info(
        "x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_empty_tensor_value_info(f"to_{t}") for t in targets])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    got = tensorc.compile(model).run({"x": x})
    wide = x.astype(np.float64)
    for target in targets:
        got_target = got[f"to_{target}"]
        if target == "bool":
            check(got_target, wide != 0)
        elif target in INTS:
            # floats truncate toward zero; negative values are checked for signed targets
            keep = wide >= 0 if target in UNSIGNED else np.ones(len(x), bool)
            check(got_target[keep], np.trunc(wide[keep]).astype(target))
        else:
            check(got_target, wide.astype(np_dtype(target)), target, tol=0)


def test_cast_float_to_int_truncates():
    x = np.array([-2.7, -0.5, 0.5, 2.7, 1e9, -1e9], np.float32)
    check(run1("Cast", x, to=TensorProto.INT32), np.array([-2, 0, 0, 2, 10 ** 9, -10 ** 9],
                                                          np.int32))
    check(run1("Cast", x[:4], to=TensorProto.INT8), np.array([-2, 0, 0, 2], np.int8))
    big = np.array([1.5e19, 3.0, 9.2e18], np.float64)
    check(run1("Cast", big, to=TensorProto.UINT64),
          np.array([15000000000000000000, 3, 9200000000000000000], np.uint64))


def test_cast_float_specials():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 65520.0, 1e-8, 70000.0], np.float32)
    got = run1("Cast", x, to=TensorProto.FLOAT16)
    with np.errstate(over="ignore"):  # 70000 overflows to inf, as it should
        check(got, x.astype(np.float16), tol=0)
    check(run1("Cast", x, to=TensorProto.BOOL), np.array([1, 1, 1, 0, 1, 1, 1], bool))


def test_cast_float64_to_float16_rounds_once():
    # values just past a float16 tie: rounding to float32 first would land on the tie and
    # then round to even, the wrong way; the double -> half cast rounds once
    tie = 1 + 2.0 ** -11  # halfway between float16 1.0 and its successor
    x = np.array([tie + 2.0 ** -40, tie - 2.0 ** -40, -(tie + 2.0 ** -40), 65519.99999999,
                  2.0 ** -25 + 2.0 ** -50, 1e-9, np.nan, -np.inf, 3.14159265358979])
    check(run1("Cast", x, to=TensorProto.FLOAT16), x.astype(np.float16), tol=0)


def test_cast_bfloat16_round_to_nearest_even():
    # ties between two bfloat16 values go to the even one; NaN stays NaN; overflow -> inf
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF, 0x7F7FFFFF, 0xFF800000,
                     0x7FC00001, 0x00000001, 0x80000000], np.uint32)
    x = bits.view(np.float32)
    got = run1("Cast", x, to=TensorProto.BFLOAT16)
    assert got.dtype == np_dtype("bfloat16")
    want = x.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    x64 = np.array([1 + 2.0 ** -8 + 2.0 ** -40, 1 + 2.0 ** -8 - 2.0 ** -40, -3.3e38, 1e-300])
    got = run1("Cast", x64, to=TensorProto.BFLOAT16)
    np.testing.assert_array_equal(got.astype(np.float64),
                                  np.array([1 + 2.0 ** -7, 1.0, -3.3e38, 0.0]).astype(
                                      ml_dtypes.bfloat16).astype(np.float64))


def test_bfloat16_arithmetic_and_constants():
    x = rand((3, 9), "bfloat16", seed=1)
    w = rand((9,), "bfloat16", seed=2)
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["y"])]
    graph = helper.make_graph(
        nodes, "bf16", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, x.shape)],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    got = tensorc.compile(model).run({"x": x})["y"]
    # each op rounds to bfloat16, as the fused kernel does at the end only: allow 2 roundings
    m = (x.astype(np.float32) * w.astype(np.float32)).astype(ml_dtypes.bfloat16)
    want = (np.maximum(m.astype(np.float32), 0) + x.astype(np.float32)).astype(
        ml_dtypes.bfloat16)
    check(got, want, "bfloat16")


def test_castlike():
    x = np.array([1.7, -2.2, 300.0], np.float32)
    like = np.zeros((1,), np.int16)
    check(run1("CastLike", x, like, opset=15), np.array([1, -2, 300], np.int16))
    like = np.zeros((2,), ml_dtypes.bfloat16)
    check(run1("CastLike", x, like, opset=19), x.astype(ml_dtypes.bfloat16), tol=0)


def test_complex_is_a_clear_unsupported_dtype_error():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.COMPLEX64)
    graph = helper.make_graph([node], "c64", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (3,))], [helper.make_tensor_value_info(
            "y", TensorProto.COMPLEX64, (3,))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    with pytest.raises(tensorc.TensorcError, match="COMPLEX64, which tensorc does not"):
        tensorc.compile(model)


# ---------------------------------------------------------------------------------------------
# type errors name the op and the dtype

def test_dtype_errors():
    # the importer checks element kinds against the op's schema (frontend/validate.py)
    with pytest.raises(tensorc.TensorcError, match=r"input 0 \('A'\) is tensor\(float\), "
                                                   r"but BitwiseAnd-18 takes tensor\(uint8\)"):
        run1("BitwiseAnd", np.ones(3, np.float32), np.ones(3, np.float32), opset=18)
    with pytest.raises(tensorc.TensorcError, match=r"input 0 \('condition'\) is "
                                                   r"tensor\(int32\), but Where-16 takes "
                                                   r"tensor\(bool\)"):
        run1("Where", np.ones(3, np.int32), np.ones(3, np.float32), np.ones(3, np.float32),
             opset=16)
    with pytest.raises(tensorc.TensorcError, match="gelu: input 0 must be a float tensor"):
        run1("Gelu", np.ones(3, np.int32))


def test_fused_chain_of_new_ops():
    """Mul -> Gelu -> Greater -> Where in one kernel, against numpy."""
    x = rand((4, 33), seed=1)
    s = rand((33,), seed=2)
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Gelu", ["m"], ["g"]),
             helper.make_node("Greater", ["g", "s"], ["c"]),
             helper.make_node("Where", ["c", "g", "x"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, s.shape)],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)
    got = tensorc.compile(model).run({"x": x, "s": s})["y"]
    m = x.astype(np.float64) * s
    g = ACTIVATIONS[9][2](m)
    check(got, np.where(g > s, g, x).astype(np.float32))


def test_bfloat16_artifact_round_trip(tmp_path):
    x = np.array([-1.5, 2.25, -3.0, 4.0], ml_dtypes.bfloat16)
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "relu", [helper.make_tensor_value_info(
        "x", TensorProto.BFLOAT16, x.shape)], [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    tensorc.compile(model).save(tmp_path / "relu.tcz")
    got = tensorc.load(tmp_path / "relu.tcz").run({"x": x})["y"]
    check(got, np.array([0, 2.25, 0, 4], ml_dtypes.bfloat16), tol=0)

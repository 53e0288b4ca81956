"""Elementwise ops: unary (relu, exp, clip, ...), binary with numpy broadcasting, and cast.

The ops are tables: adding a unary or binary op is one line here (plus its compute rule).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define, get_op
from tensorc.ops.shape_rules import (
    broadcast_shapes,
    expect_arity,
    expect_dtype_name,
    expect_float,
    expect_same_dtype,
)


@dataclass(frozen=True)
class UnaryRule:
    """numpy semantics of a unary op; ``floats_only`` ops reject integer tensors."""

    numpy: Callable[[dict, np.ndarray], np.ndarray]
    floats_only: bool = False


def _sigmoid(attrs: dict, x: np.ndarray) -> np.ndarray:
    # exp(-x) overflows to inf for very negative x, and 1 / (1 + inf) is the right answer 0.
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _clip(attrs: dict, x: np.ndarray) -> np.ndarray:
    low, high = attrs.get("min"), attrs.get("max")
    if low is not None:
        x = np.maximum(x, np.asarray(low).astype(x.dtype))
    if high is not None:
        x = np.minimum(x, np.asarray(high).astype(x.dtype))
    return x


UNARY: dict[str, UnaryRule] = {
    "relu": UnaryRule(lambda a, x: np.maximum(x, np.zeros((), x.dtype))),
    "leaky_relu": UnaryRule(lambda a, x: np.where(x >= 0, x, x * a["alpha"]), floats_only=True),
    "sigmoid": UnaryRule(_sigmoid, floats_only=True),
    "tanh": UnaryRule(lambda a, x: np.tanh(x), floats_only=True),
    "exp": UnaryRule(lambda a, x: np.exp(x), floats_only=True),
    "log": UnaryRule(lambda a, x: np.log(x), floats_only=True),
    "sqrt": UnaryRule(lambda a, x: np.sqrt(x), floats_only=True),
    "neg": UnaryRule(lambda a, x: np.negative(x)),
    "abs": UnaryRule(lambda a, x: np.abs(x)),
    "clip": UnaryRule(_clip),
}


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C and ONNX), not numpy's floor."""
    if np.issubdtype(a.dtype, np.floating):
        return a / b
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = np.floor_divide(a, b)
        remainder = np.remainder(a, b)
    # floor and trunc differ when the division is inexact and the signs differ.
    fix = (remainder != 0) & ((a < 0) != (b < 0))
    return quotient + fix.astype(quotient.dtype)


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _int_div,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def _register_unary(name: str, rule: UnaryRule) -> None:
    op = define(name, Pattern.ELEMWISE)

    @op.infer
    def infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
        expect_arity(name, input_types, 1)
        if rule.floats_only:
            expect_float(name, input_types[0])
        return [input_types[0]]

    @op.reference
    def reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            return [np.asarray(rule.numpy(attrs, x)).astype(x.dtype, copy=False)]


def _register_binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    op = define(name, Pattern.BROADCAST)

    @op.infer
    def infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
        expect_arity(name, input_types, 2)
        dtype = expect_same_dtype(name, input_types)
        return [TensorType(broadcast_shapes(name, input_types), dtype)]

    @op.reference
    def reference(attrs: dict, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [np.asarray(fn(a, b)).astype(a.dtype, copy=False)]


for _name, _rule in UNARY.items():
    _register_unary(_name, _rule)
for _name, _fn in BINARY.items():
    _register_binary(_name, _fn)


cast = define("cast", Pattern.ELEMWISE)


@cast.infer
def _cast_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("cast", input_types, 1)
    expect_dtype_name("cast", attrs["dtype"])
    return [TensorType(input_types[0].shape, attrs["dtype"])]


@cast.reference
def _cast_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    with np.errstate(invalid="ignore"):
        return [x.astype(attrs["dtype"])]


# ---------------------------------------------------------------------------------------------
# compute rules: one expression builder per op, shared by every kernel that fuses the op

def _float_const(value: float, dtype: str) -> E.Expr:
    return E.Const(value, dtype)


def _abs(a: dict, x: E.Expr) -> E.Expr:
    if E.is_float(x.dtype):
        return E.call("fabs", x)
    return E.select(E.Compare("lt", x, E.const(0, x.dtype)), E.const(0, x.dtype) - x, x)


def _clip_expr(a: dict, x: E.Expr) -> E.Expr:
    if a.get("min") is not None:
        x = E.maximum(x, E.Const(a["min"], x.dtype))
    if a.get("max") is not None:
        x = E.minimum(x, E.Const(a["max"], x.dtype))
    return x


UNARY_EXPR: dict[str, Callable[[dict, E.Expr], E.Expr]] = {
    "relu": lambda a, x: E.maximum(x, E.Const(0, x.dtype)),
    "leaky_relu": lambda a, x: E.select(E.Compare("ge", x, E.Const(0, x.dtype)), x,
                                        x * E.Const(a["alpha"], x.dtype)),
    "sigmoid": lambda a, x: E.Const(1, x.dtype) / (E.Const(1, x.dtype)
                                                   + E.call("exp", E.Const(0, x.dtype) - x)),
    "tanh": lambda a, x: E.call("tanh", x),
    "exp": lambda a, x: E.call("exp", x),
    "log": lambda a, x: E.call("log", x),
    "sqrt": lambda a, x: E.call("sqrt", x),
    "neg": lambda a, x: E.Const(0, x.dtype) - x,
    "abs": _abs,
    "clip": _clip_expr,
}


def _pow_expr(x: E.Expr, y: E.Expr) -> E.Expr:
    if E.is_float(x.dtype):
        return E.call("pow", x, y)
    # integer powers are computed in float64, exact for the results int64 can hold
    return E.cast(x.dtype, E.call("pow", E.cast("float64", x), E.cast("float64", y)))


BINARY_EXPR: dict[str, Callable[[E.Expr, E.Expr], E.Expr]] = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y if E.is_float(x.dtype) else E.Binary("truncdiv", x, y),
    "pow": _pow_expr,
    "maximum": E.maximum,
    "minimum": E.minimum,
}


def broadcast_index(t: te.Tensor, out_index: tuple, out_ndim: int) -> list:
    """Index of ``t`` for output position ``out_index`` under numpy broadcasting."""
    offset = out_ndim - t.ndim
    return [E.const(0) if d == 1 else out_index[offset + k] for k, d in enumerate(t.shape)]


def _unary_compute(name: str):
    rule = UNARY_EXPR[name]

    def compute(attrs: dict, x: te.Tensor) -> te.Tensor:
        return te.compute(x.shape, lambda *i: rule(attrs, x[i]), name=name)
    return compute


def _binary_compute(name: str):
    rule = BINARY_EXPR[name]

    def compute(attrs: dict, a: te.Tensor, b: te.Tensor) -> te.Tensor:
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        n = len(shape)
        return te.compute(shape, lambda *i: rule(a[tuple(broadcast_index(a, i, n))],
                                                 b[tuple(broadcast_index(b, i, n))]),
                          name=name)
    return compute


for _name in UNARY:
    get_op(_name).compute(_unary_compute(_name))
for _name in BINARY:
    get_op(_name).compute(_binary_compute(_name))


@cast.compute
def _cast_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    dtype = attrs["dtype"]
    return te.compute(x.shape, lambda *i: E.cast(dtype, x[i]), name="cast")

"""Activation functions: hard_sigmoid, hard_swish, prelu, elu, selu, celu, gelu, mish,
softplus, softsign, thresholded_relu, shrink, swish.

Each is one :class:`~tensorc.ops.elementwise.Rule` (numpy meaning + scalar expression), so an
activation fuses into its producer's kernel like any elementwise op. Attributes are floats
named as in ONNX; relu, leaky_relu, sigmoid and tanh live with the math functions in
``ops/elementwise.py``.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.ir import expr as E
from tensorc.ops.elementwise import (
    FLOATS, NUMERIC, Rule, cast_expr, const_like, define_elementwise, exp, negative,
    sigmoid_expr, zero,
)


def _softplus(x: np.ndarray) -> np.ndarray:
    # log(1 + exp(x)) without overflow for large x
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def softplus_expr(x: E.Expr) -> E.Expr:
    """max(x, 0) + log(1 + exp(-|x|)): log(1 + exp(x)) that does not overflow."""
    one = const_like(1, x)
    return E.maximum(x, zero(x)) + E.call("log", one + exp(negative(E.call("fabs", x))))


def _hard_sigmoid_expr(alpha: float, beta: float, x: E.Expr) -> E.Expr:
    linear = x * const_like(alpha, x) + const_like(beta, x)
    return E.maximum(zero(x), E.minimum(const_like(1, x), linear))


def _elu_expr(a: dict, x: E.Expr) -> E.Expr:
    below = const_like(a["alpha"], x) * (exp(x) - const_like(1, x))
    return E.select(E.Compare("lt", x, zero(x)), below, x)


def _selu_expr(a: dict, x: E.Expr) -> E.Expr:
    alpha, gamma = const_like(a["alpha"], x), const_like(a["gamma"], x)
    return E.select(E.Compare("gt", x, zero(x)), gamma * x, gamma * (alpha * exp(x) - alpha))


def _celu_expr(a: dict, x: E.Expr) -> E.Expr:
    alpha = const_like(a["alpha"], x)
    below = alpha * (exp(x / alpha) - const_like(1, x))
    return E.maximum(x, zero(x)) + E.minimum(zero(x), below)


def _gelu(a: dict, x: np.ndarray) -> np.ndarray:
    if a["approximate"] == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1 + np.tanh(inner))
    erf = np.frompyfunc(math.erf, 1, 1)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)).astype(x.dtype))


def _gelu_expr(a: dict, x: E.Expr) -> E.Expr:
    half, one = const_like(0.5, x), const_like(1, x)
    if a["approximate"] == "tanh":
        cube = x * x * x
        inner = const_like(math.sqrt(2 / math.pi), x) * (x + const_like(0.044715, x) * cube)
        return half * x * (one + E.call("tanh", inner))
    return half * x * (one + E.call("erf", x * const_like(1 / math.sqrt(2), x)))


def _shrink(a: dict, x: np.ndarray) -> np.ndarray:
    wide = x if x.dtype.kind == "f" else x.astype(np.float64)
    return np.where(wide < -a["lambd"], wide + a["bias"],
                    np.where(wide > a["lambd"], wide - a["bias"], 0))


def _shrink_expr(a: dict, x: E.Expr) -> E.Expr:
    """ONNX Shrink; integers are compared and shifted in float64 (-lambd on an unsigned
    tensor must not wrap around), as ONNX's reference and onnxruntime do."""
    wide = x if E.is_float(x.dtype) else E.cast("float64", x)
    bias, lambd = const_like(a["bias"], wide), const_like(a["lambd"], wide)
    out = E.select(E.Compare("lt", wide, negative(lambd)), wide + bias,
                   E.select(E.Compare("gt", wide, lambd), wide - bias, zero(wide)))
    return cast_expr(x.dtype, out)


def _prelu_expr(a: dict, x: E.Expr, slope: E.Expr) -> E.Expr:
    return E.select(E.Compare("lt", x, zero(x)), x * slope, x)


ACTIVATIONS: dict[str, Rule] = {
    "hard_sigmoid": Rule(lambda a, x: np.clip(x * a["alpha"] + a["beta"], 0, 1),
                         lambda a, x: _hard_sigmoid_expr(a["alpha"], a["beta"], x), FLOATS),
    "hard_swish": Rule(lambda a, x: x * np.clip(x / 6 + 0.5, 0, 1),
                       lambda a, x: x * _hard_sigmoid_expr(1 / 6, 0.5, x), FLOATS),
    "elu": Rule(lambda a, x: np.where(x < 0, a["alpha"] * (np.exp(x) - 1), x), _elu_expr,
                FLOATS),
    "selu": Rule(lambda a, x: np.where(x > 0, a["gamma"] * x,
                                       a["gamma"] * (a["alpha"] * np.exp(x) - a["alpha"])),
                 _selu_expr, FLOATS),
    "celu": Rule(lambda a, x: np.maximum(x, 0) + np.minimum(
        0, a["alpha"] * (np.exp(x / a["alpha"]) - 1)), _celu_expr, FLOATS),
    "gelu": Rule(_gelu, _gelu_expr, FLOATS),
    "mish": Rule(lambda a, x: x * np.tanh(_softplus(x)),
                 lambda a, x: x * E.call("tanh", softplus_expr(x)), FLOATS),
    "softplus": Rule(lambda a, x: _softplus(x), lambda a, x: softplus_expr(x), FLOATS),
    "softsign": Rule(lambda a, x: x / (1 + np.abs(x)),
                     lambda a, x: x / (const_like(1, x) + E.call("fabs", x)), FLOATS),
    "thresholded_relu": Rule(lambda a, x: np.where(x > a["alpha"], x, 0),
                             lambda a, x: E.select(E.Compare("gt", x, const_like(a["alpha"], x)),
                                                   x, zero(x)), FLOATS),
    "shrink": Rule(_shrink, _shrink_expr, NUMERIC),
    "swish": Rule(lambda a, x: x / (1 + np.exp(-a["alpha"] * x)),
                  lambda a, x: x * sigmoid_expr(const_like(a["alpha"], x) * x), FLOATS),
}

for _name, _rule in ACTIVATIONS.items():
    define_elementwise(_name, _rule, 1)

# slope broadcasts to x (ONNX: unidirectionally); integer PRelu is allowed since opset 16
define_elementwise("prelu", Rule(lambda a, x, slope: np.where(x < 0, x * slope, x),
                                 _prelu_expr, NUMERIC), 2)

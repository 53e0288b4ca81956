"""batch_norm in inference mode: y = (x - mean) / sqrt(var + epsilon) * scale + bias.

Inputs x[N, C, ...], scale[C], bias[C], mean[C], var[C]; attr epsilon. The channel axis is 1.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity, expect_float, expect_same_dtype

batch_norm = define("batch_norm", Pattern.BROADCAST)

_PARAMETERS = ("scale", "bias", "mean", "var")


@batch_norm.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("batch_norm", input_types, 5)
    x = input_types[0]
    expect_float("batch_norm", x)
    expect_same_dtype("batch_norm", input_types)
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: input must be [N, C, ...], got {x}")
    for name, t in zip(_PARAMETERS, input_types[1:]):
        if t.shape != (x.shape[1],):
            raise ShapeError(f"batch_norm: {name} must have shape [{x.shape[1]}] (the channels "
                             f"of x {x}), got {t}")
    return [x]


def channel_affine(attrs: dict, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
                   var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """batch_norm as y = x * a + b per channel; returns (a, b) in float64."""
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + attrs["epsilon"])
    b = bias.astype(np.float64) - mean.astype(np.float64) * a
    return a, b


@batch_norm.reference
def _reference(attrs: dict, x: np.ndarray, *params: np.ndarray) -> list[np.ndarray]:
    a, b = channel_affine(attrs, *params)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    return [(x * a.reshape(shape) + b.reshape(shape)).astype(x.dtype)]


@batch_norm.compute
def _compute(attrs: dict, x: te.Tensor, scale: te.Tensor, bias: te.Tensor, mean: te.Tensor,
             var: te.Tensor) -> te.Tensor:
    eps = E.Const(attrs["epsilon"], x.dtype)

    def body(n, c, *rest):
        inv = scale[c] / E.call("sqrt", var[c] + eps)
        return (x[(n, c, *rest)] - mean[c]) * inv + bias[c]
    return te.compute(x.shape, body, name="batch_norm")

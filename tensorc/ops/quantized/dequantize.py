"""dequantize: ``(x - zero_point) * scale`` in float32, numpy broadcasting.

The importer emits it, unfolded, for a DequantizeLinear of a constant (int8 weights, int32
biases), so that the QDQ pass (passes/graph/quantize_qdq.py) still sees the integers and their
scales; the constant folding after that pass folds the ones it leaves. Its arithmetic is the
importer's decomposition of DequantizeLinear (frontend/converters/quantize.py).
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.elementwise import broadcast_index
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import broadcast_shapes, expect_arity

dequantize = define("dequantize", Pattern.BROADCAST)
INPUT_DTYPES = ("uint8", "int8", "int32")


@dequantize.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("dequantize", input_types, 3)
    x, scale, zero_point = input_types
    if x.dtype not in INPUT_DTYPES or zero_point.dtype != x.dtype or scale.dtype != "float32":
        raise ShapeError(f"dequantize: takes {'/'.join(INPUT_DTYPES)} values, a float32 scale "
                         f"and a zero point of the values' dtype, got {x.dtype}, "
                         f"{scale.dtype} and {zero_point.dtype}")
    return [TensorType(broadcast_shapes("dequantize", input_types), "float32")]


@dequantize.reference
def _reference(attrs: dict, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray
               ) -> list[np.ndarray]:
    return [((x.astype(np.float32) - zero_point.astype(np.float32)) * scale)
            .astype(np.float32)]


@dequantize.compute
def _compute(attrs: dict, x: te.Tensor, scale: te.Tensor, zero_point: te.Tensor) -> te.Tensor:
    shape = te.broadcast_shape(x.shape, scale.shape, zero_point.shape)

    def body(*i):
        xs, s, z = (t[tuple(broadcast_index(t, i, shape))] for t in (x, scale, zero_point))
        return (E.cast("float32", xs) - E.cast("float32", z)) * s
    return te.compute(shape, body, name="dequantize")

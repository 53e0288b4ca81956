"""bitcast{dtype}: the same bits read as another dtype of the same width (ONNX BitCast)."""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.loop import itemsize
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity, expect_dtype_name

bitcast = define("bitcast", Pattern.ELEMWISE)


@bitcast.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("bitcast", input_types, 1)
    (x,) = input_types
    dtype = attrs["dtype"]
    expect_dtype_name("bitcast", dtype)
    if itemsize(dtype) != itemsize(x.dtype):
        raise ShapeError(f"bitcast: {x.dtype} and {dtype} differ in width; BitCast needs "
                         f"equal bit widths")
    return [TensorType(x.shape, dtype)]


@bitcast.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return [np.ascontiguousarray(x).view(np.dtype(attrs["dtype"]))]


@bitcast.compute
def _compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    dtype = attrs["dtype"]
    return te.compute(x.shape, lambda *i: E.Call("bitcast", [x[i]], dtype), name="bitcast")

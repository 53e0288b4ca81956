"""dim_values{values, shape, dtype}: a small tensor of symbolic dims' run-time values.

The importer keeps the shape arithmetic of symbolic models as known values
(frontend/shape_values.py); where one is read as data (a sequence length cast to float, the
positions ``past + arange(seq)`` start from), it stays in the graph as this op, whose kernel
evaluates each element's expression from the dims the kernel is passed.
"""
from __future__ import annotations

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.dims import as_expr
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define

dim_values = define("dim_values", Pattern.INJECTIVE)


@dim_values.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    return [TensorType(attrs["shape"], attrs.get("dtype", "int64"))]


@dim_values.compute
def _compute(attrs: dict) -> te.Tensor:
    dtype = attrs.get("dtype", "int64")
    shape = tuple(attrs["shape"])
    values = [E.cast(dtype, as_expr(v)) if not isinstance(v, int) else E.Const(v, dtype)
              for v in attrs["values"]]
    strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]

    def body(*index):
        flat = E.const(0)
        for i, stride in zip(index, strides):
            flat = flat + i * stride
        value = values[-1]
        for k in range(len(values) - 2, -1, -1):
            value = E.select(E.Compare("eq", flat, E.const(k)), values[k], value)
        return value
    return te.compute(shape, body, name="dim_values")

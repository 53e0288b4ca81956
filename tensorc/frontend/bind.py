"""Steps on the ModelProto before conversion that make real exported models importable.

- ``negative_dims_as_symbols``: an input dim declared with a negative dim_value (Paddle writes
  -1 for "any") becomes a symbolic dim, so that ``input_shapes`` binds it like any other.
- ``bind_input_values``: inputs given a value become initializers (constants), so that an
  input deciding a shape or a branch (a sample rate choosing an If branch) can be fixed at
  compile time; the input leaves the signature.

>>> proto = bind_input_values(negative_dims_as_symbols(proto), {"sr": 16000}, "model")
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tensorc.errors import ConstantRequiredError, ShapeError


def negative_dims_as_symbols(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with each negative dim_value of a graph input made a symbolic dim named
    ``<input>_dim<k>`` (a copy; ``proto`` itself when it has none).

    >>> # input x: float32[-1, 3]  ->  float32[x_dim0, 3]
    """
    def negative(value: onnx.ValueInfoProto) -> list[int]:
        if not value.type.HasField("tensor_type") or \
                not value.type.tensor_type.HasField("shape"):
            return []
        return [k for k, d in enumerate(value.type.tensor_type.shape.dim)
                if d.HasField("dim_value") and d.dim_value < 0]

    if not any(negative(v) for v in proto.graph.input):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for value in copy.graph.input:
        for k in negative(value):
            dim = value.type.tensor_type.shape.dim[k]
            dim.Clear()
            dim.dim_param = f"{value.name}_dim{k}"
    return copy


def input_value_hint(error: ConstantRequiredError, proto: onnx.ModelProto) -> str | None:
    """How to fix ``error`` where it depends on the value of graph inputs: fix them at
    compile time with ``input_values`` (CLI: ``--input-value``); None where it does not."""
    constants = {t.name for t in proto.graph.initializer}
    inputs = {v.name for v in proto.graph.input}
    names = [n for n in error.inputs if n not in constants and n in inputs]
    if not names:
        return None
    example = ", ".join(f"{name!r}: VALUE" for name in names)
    flags = " ".join(f"--input-value {name}=VALUE" for name in names)
    return (f"This depends on the value of input {', '.join(map(repr, names))}: fix it at "
            f"compile time with input_values={{{example}}} (CLI: {flags})")


def bind_input_values(proto: onnx.ModelProto, values: Mapping[str, Any] | None,
                      label: str) -> onnx.ModelProto:
    """``proto`` with the inputs named in ``values`` turned into initializers holding those
    values (a copy; ``proto`` itself when ``values`` is empty). A value is converted to the
    input's declared dtype and must fit its declared shape; a scalar fills a one-element
    shape.

    >>> bind_input_values(proto, {"sr": 16000}, "model 'vad.onnx'")  # doctest: +SKIP
    """
    if not values:
        return proto
    initializers = {t.name for t in proto.graph.initializer}
    inputs = {v.name: v for v in proto.graph.input if v.name not in initializers}
    unknown = [name for name in values if name not in inputs]
    if unknown:
        raise ShapeError(f"{label}: input_values names {', '.join(map(repr, unknown))}, but "
                         f"the model's inputs are {', '.join(map(repr, inputs)) or 'none'}")
    arrays = {name: _value_for(inputs[name], value, label) for name, value in values.items()}
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    kept = [v for v in copy.graph.input if v.name not in arrays]
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    copy.graph.initializer.extend(numpy_helper.from_array(a, n) for n, a in arrays.items())
    return copy


def _value_for(spec: onnx.ValueInfoProto, value: Any, label: str) -> np.ndarray:
    where = f"{label}: input_values[{spec.name!r}]"
    if not spec.type.HasField("tensor_type"):
        raise ShapeError(f"{where}: the input is not a tensor; only tensor inputs can be bound")
    tensor = spec.type.tensor_type
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    except (KeyError, TypeError, ValueError):
        raise ShapeError(f"{where}: the input's dtype ({tensor.elem_type}) is unknown") \
            from None
    try:
        given = np.asarray(value)
        array = np.array(given, dtype=dtype, order="C")
    except (TypeError, ValueError, OverflowError) as error:
        raise ShapeError(f"{where}: cannot make {value!r} a {dtype.name} tensor ({error})") \
            from None
    if given.dtype.kind in "fc" and dtype.kind in "iub" and \
            not np.array_equal(array.astype(given.dtype), given):
        raise ShapeError(f"{where}: {value!r} is not a whole number, and the input is "
                         f"{dtype.name}")
    if given.dtype.kind in "iu" and dtype.kind in "iu" and \
            not np.array_equal(array.astype(np.int64), given.astype(np.int64)):
        raise ShapeError(f"{where}: {value!r} does not fit the input's dtype {dtype.name}")
    if tensor.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                for d in tensor.shape.dim]
        if array.ndim == 0 and dims and all(d == 1 for d in dims):
            array = array.reshape(dims)           # a scalar for a one-element input
        fits = len(dims) == array.ndim and all(d is None or d == s
                                               for d, s in zip(dims, array.shape))
        if not fits:
            declared = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
            raise ShapeError(f"{where}: the input is {dtype.name}{declared}, the value given "
                             f"has shape {list(array.shape)}")
    return array

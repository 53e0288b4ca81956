"""Shape arithmetic over symbolic dims: the values of shape tensors that hold Dims.

Exporters compute shapes in the graph (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``).
With static shapes those fold to constants. With symbolic dims, ``Shape(x)`` of an
``x[batch, seq, 768]`` is a *known value*: a 1-D int64 tensor whose elements are
``(batch, seq, 768)``, an object array of ``int | Dim``. The importer keeps such values in
``ImportContext.known`` and evaluates the ONNX ops of shape arithmetic on them with this
module's table (ONNX semantics, elementwise on ints and Dims), so ``Reshape`` and ``Expand``
receive targets such as ``(batch, seq, 12, 64)``. A known value that ends in all ints becomes an
ordinary constant.

In the graph a known value is a node ``dim_values {values=(...), shape=(...)}`` without
inputs: it is dead once its consumers folded it; where a run-time computation reads it
(a Cast to float of a sequence length), it stays, a tensor of the dims' run-time values.

An op not in the table that reads a known value is converted as usual: ops that need a
constant (Reshape's target, ...) get the known value through ``require_dims`` or refuse
with an error naming the op and the dims; the others compute on it at run time.

>>> apply_shape_op("Gather", [np.array([Dim("b"), Dim("s"), 768], object), np.array(1)],
...                {"axis": 0}, 13)    # doctest: +SKIP
array(Dim('s'), dtype=object)
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from onnx import helper

from tensorc.errors import ShapeError, SymbolicDimError
from tensorc.ir.dims import Dim, bounds, decide, dim_max, dim_min

Op = Callable[[list, dict, int], "np.ndarray | None"]
SHAPE_OPS: dict[str, Op] = {}

# dtypes a shape value keeps its Dims in; a Cast to any other dtype is computed at run time
INT_DTYPES = ("int64", "int32", "uint64", "uint32", "int16")


def shape_op(*names: str):
    def register(fn: Op) -> Op:
        for name in names:
            SHAPE_OPS[name] = fn
        return fn
    return register


def has_dims(array: np.ndarray) -> bool:
    return array.dtype == object and any(isinstance(v, Dim) for v in array.reshape(-1))


def as_object(array: np.ndarray) -> np.ndarray:
    """An int array as an object array of Python ints (so that Dims mix in)."""
    if array.dtype == object:
        return array
    out = np.empty(array.shape, object)
    out.reshape(-1)[:] = [int(v) for v in array.reshape(-1)]
    return out


def apply_shape_op(op_type: str, arrays: list[np.ndarray | None], attrs: dict[str, Any],
                   opset: int) -> np.ndarray | None:
    """The known value of ONNX ``op_type`` on known values and constants; None where this
    table does not evaluate it (the converter then runs as usual)."""
    fn = SHAPE_OPS.get(op_type)
    if fn is None:
        return None
    return fn([None if a is None else as_object(a) if a.dtype.kind in "iub" else a
               for a in arrays], attrs, opset)


def _ints(array: np.ndarray, what: str) -> list[int]:
    if has_dims(array):
        raise SymbolicDimError(f"its {what} holds symbolic dims "
                               f"{[str(v) for v in array.reshape(-1)]}, where tensorc needs "
                               f"constants")
    return [int(v) for v in array.reshape(-1)]


# elementwise ---------------------------------------------------------------------------------
def _elementwise(fn: Callable[[Any, Any], Any]) -> Op:
    def apply(arrays, attrs, opset):
        a, b = np.broadcast_arrays(arrays[0], arrays[1])
        out = np.empty(a.shape, object)
        out.reshape(-1)[:] = [fn(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1))]
        return out
    return apply


def _truncdiv(a, b):
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    # floor and truncation agree when both are non-negative
    if bounds(a)[0] is not None and bounds(a)[0] >= 0 and \
            bounds(b)[0] is not None and bounds(b)[0] > 0:
        return a // b
    raise SymbolicDimError(f"the integer division {a} / {b} rounds differently for negative "
                           f"values, and the ranges do not say its sign")


def _equal(a, b):
    decided = decide("eq", a, b)
    if decided is None:
        raise SymbolicDimError(f"whether {a} == {b} is known only at run time (the model "
                               f"branches on a shape value); give the dims narrower "
                               f"dim_ranges or concrete input_shapes", a)
    return decided


def _compare(op: str):
    def fn(a, b):
        decided = decide(op, a, b)
        if decided is None:
            raise SymbolicDimError(f"whether {a} {op} {b} is known only at run time", a)
        return decided
    return fn


SHAPE_OPS.update({
    "Add": _elementwise(lambda a, b: a + b),
    "Sub": _elementwise(lambda a, b: a - b),
    "Mul": _elementwise(lambda a, b: a * b),
    "Div": _elementwise(_truncdiv),
    "Max": _elementwise(dim_max),
    "Min": _elementwise(dim_min),
    "Equal": _elementwise(_equal),
    "Less": _elementwise(_compare("lt")),
    "Greater": _elementwise(_compare("gt")),
    "LessOrEqual": _elementwise(_compare("le")),
    "GreaterOrEqual": _elementwise(_compare("ge")),
})


@shape_op("Mod")
def _mod(arrays, attrs, opset):
    if attrs.get("fmod", 0):
        return None
    return _elementwise(lambda a, b: a % b)(arrays, attrs, opset)


@shape_op("Neg")
def _neg(arrays, attrs, opset):
    return np.negative(arrays[0])


@shape_op("Identity")
def _identity(arrays, attrs, opset):
    return arrays[0]


@shape_op("Where")
def _where(arrays, attrs, opset):
    cond, x, y = arrays
    if has_dims(cond):
        return None
    return np.where(cond.astype(bool), x, y)


@shape_op("Cast")
def _cast(arrays, attrs, opset):
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"])).name
    if dtype not in INT_DTYPES and has_dims(arrays[0]):
        return None  # a float or bool of a symbolic dim: computed at run time
    if dtype in ("bool",):
        return None
    return arrays[0]


# data movement -------------------------------------------------------------------------------
@shape_op("Gather")
def _gather(arrays, attrs, opset):
    data, indices = arrays
    axis = attrs.get("axis", 0)
    index = np.array(_ints(indices, "indices"), np.int64).reshape(indices.shape)
    size = data.shape[axis]
    if index.size and (index.min() < -size or index.max() >= size):
        raise ShapeError(f"Gather indices {index.reshape(-1).tolist()} are out of range for "
                         f"a shape value of {size} elements")
    return np.take(data, index, axis=axis)


@shape_op("Concat")
def _concat(arrays, attrs, opset):
    present = [a for a in arrays if a is not None]
    return np.concatenate(present, axis=attrs.get("axis", 0))


@shape_op("Unsqueeze")
def _unsqueeze(arrays, attrs, opset):
    axes = attrs.get("axes") if opset < 13 else _ints(arrays[1], "axes")
    out = arrays[0]
    ndim = out.ndim + len(axes)
    for axis in sorted(a % ndim for a in axes):
        out = np.expand_dims(out, axis)
    return out


@shape_op("Squeeze")
def _squeeze(arrays, attrs, opset):
    axes = attrs.get("axes") if opset < 13 else (
        None if len(arrays) < 2 or arrays[1] is None else _ints(arrays[1], "axes"))
    x = arrays[0]
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    return np.squeeze(x, axis=tuple(a % x.ndim for a in axes))


@shape_op("Reshape")
def _reshape(arrays, attrs, opset):
    x = arrays[0]
    target = _ints(arrays[1], "shape") if opset >= 5 else list(attrs["shape"])
    target = [x.shape[i] if d == 0 and not attrs.get("allowzero", 0) else d
              for i, d in enumerate(target)]
    return x.reshape(target)


@shape_op("Flatten")
def _flatten(arrays, attrs, opset):
    x = arrays[0]
    axis = attrs.get("axis", 1) % (x.ndim + 1) if x.ndim else 0
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


@shape_op("Slice")
def _slice(arrays, attrs, opset):
    x = arrays[0]
    if opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        given = [None if a is None else _ints(a, name)
                 for a, name in zip(arrays[1:], ("starts", "ends", "axes", "steps"))]
        given += [None] * (4 - len(given))
        starts, ends, axes, steps = given
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        index[axis % x.ndim] = slice(start, end, step)
    return x[tuple(index)]


def _reduction(combine: Callable[[Any, Any], Any]) -> Op:
    """A Reduce* over the one axis of a 1-D shape value (ReduceProd of a shape: the element
    count), axes as an attribute or absent."""
    def apply(arrays, attrs, opset):
        x = arrays[0]
        axes = attrs.get("axes")
        if x.ndim != 1 or not x.size or (axes is not None and list(axes) not in ([0], [-1])) \
                or (len(arrays) > 1 and arrays[1] is not None):
            return None
        total = x[0]
        for v in x[1:]:
            total = combine(total, v)
        out = np.empty((1,) if attrs.get("keepdims", 1) else (), object)
        out.reshape(-1)[0] = total
        return out
    return apply


SHAPE_OPS.update({
    "ReduceProd": _reduction(lambda a, b: a * b),
    "ReduceSum": _reduction(lambda a, b: a + b),
    "ReduceMax": _reduction(dim_max),
    "ReduceMin": _reduction(dim_min),
})

"""Converters of ONNX indexing ops: the gather and scatter families, OneHot, Trilu,
ReverseSequence, CumSum. Indices may be computed at run time; constant ones fold."""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.converters.common import normalize_axis
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.dims import Dim
from tensorc.ir.graph import Value
from tensorc.ops.shape_rules import require_dims
from tensorc.ops.indexing import checked_indices

INDEX_DTYPES = ("int32", "int64")


def _check_indices(ctx: ImportContext, op: str, indices: Value, sizes: list[int],
                   per_component: bool = False) -> None:
    """What can be known of the indices before a run: they index ``sizes[0]`` (with
    ``per_component``, the last axis of the indices holds one index per data axis in
    ``sizes``). Constant ones must lie within their axes, and no index is valid for an axis
    of size 0. The kernels check every index they read, but one whose output is empty reads
    none, where onnxruntime still refuses them."""
    depth = (indices.type.shape[-1] if indices.type.ndim else 0) if per_component else 1
    count = indices.type.size
    if not (isinstance(count, int) and count == 0) and any(
            isinstance(s, int) and s == 0 for s in sizes[:depth]):
        raise ShapeError(f"{op}: indices {indices.type} index an axis of size 0, where no "
                         f"index is valid; give the data elements along it, or no indices")
    array = ctx.constant(indices)
    if array is None:
        return
    if not per_component and isinstance(sizes[0], Dim):
        _require_in_symbolic_axis(op, array, sizes[0])
        return
    if not per_component:
        checked_indices(op, array, sizes[0])
        return
    for j, size in enumerate(sizes[:depth]):
        checked_indices(op, array[..., j], size)


def _require_in_symbolic_axis(op: str, array: np.ndarray, size: Dim) -> None:
    """Constant indices into an axis of symbolic size need the axis to hold them (the first
    token, x[:, 0]; the last, x[:, -1]), a run-time constraint where the ranges do not prove
    it. A negative one counts from the end, which the kernels wrap at run time as they do
    every index (ops/indexing.py)."""
    if not array.size:
        return
    if array.max() >= 0:
        require_dims(size, ">=", int(array.max()) + 1,
                     f"{op}: constant index {int(array.max())} lies in the axis")
    if array.min() < 0:
        require_dims(size, ">=", -int(array.min()),
                     f"{op}: constant index {int(array.min())} lies in the axis")


def _as_index(ctx: ImportContext, indices: Value) -> Value:
    """Indices in a dtype the core ops take (int32 or int64)."""
    if indices.type.dtype in INDEX_DTYPES:
        return indices
    return ctx.emit("cast", [indices], dtype="int64")


@converter("Gather", since=1)
def gather(ctx: ImportContext, inputs: list[Value], *, axis: int = 0) -> Value:
    data, indices = inputs
    axis = normalize_axis(axis, data.type.ndim)
    _check_indices(ctx, "gather", indices, [data.type.shape[axis]])
    return ctx.emit("gather", [data, _as_index(ctx, indices)], axis=axis)


@converter("GatherElements", since=11)
def gather_elements(ctx: ImportContext, inputs: list[Value], *, axis: int = 0) -> Value:
    data, indices = inputs
    axis = normalize_axis(axis, data.type.ndim)
    _check_indices(ctx, "gather_elements", indices, [data.type.shape[axis]])
    return ctx.emit("gather_elements", [data, _as_index(ctx, indices)], axis=axis)


@converter("GatherND", since=11)
def gather_nd(ctx: ImportContext, inputs: list[Value], *, batch_dims: int = 0) -> Value:
    data, indices = inputs
    _check_indices(ctx, "gather_nd", indices, list(data.type.shape[batch_dims:]), True)
    return ctx.emit("gather_nd", [data, _as_index(ctx, indices)], batch_dims=batch_dims)


@converter("Scatter", since=9, until=10)
def scatter(ctx: ImportContext, inputs: list[Value], *, axis: int = 0) -> Value:
    return scatter_elements(ctx, inputs, axis=axis)


@converter("ScatterElements", since=11)
def scatter_elements(ctx: ImportContext, inputs: list[Value], *, axis: int = 0,
                     reduction: str = "none") -> Value:
    data, indices, updates = inputs
    axis = normalize_axis(axis, data.type.ndim)
    _check_indices(ctx, "scatter_elements", indices, [data.type.shape[axis]])
    return ctx.emit("scatter_elements", [data, _as_index(ctx, indices), updates], axis=axis,
                    reduction=reduction)


@converter("ScatterND", since=11)
def scatter_nd(ctx: ImportContext, inputs: list[Value], *, reduction: str = "none") -> Value:
    data, indices, updates = inputs
    _check_indices(ctx, "scatter_nd", indices, list(data.type.shape), True)
    return ctx.emit("scatter_nd", [data, _as_index(ctx, indices), updates],
                    reduction=reduction)


@converter("OneHot", since=9)
def one_hot(ctx: ImportContext, inputs: list[Value], *, axis: int = -1) -> Value:
    indices, depth, values = inputs
    count = ctx.require_constant(depth, "depth").reshape(-1)
    if count.size != 1:
        raise ShapeError(f"OneHot depth must hold one value, got {count.size}")
    # a float depth counts whole classes (ONNX casts it to an integer)
    size = int(count[0])
    axis = normalize_axis(axis, indices.type.ndim + 1)
    if values.type.shape != (2,):
        values = ctx.emit("reshape", [values], shape=(2,))
    return ctx.emit("one_hot", [_as_index(ctx, indices), values], axis=axis, depth=size)


@converter("Trilu", since=14)
def trilu(ctx: ImportContext, inputs: list[Value], *, upper: int = 1) -> Value:
    k = inputs[1] if len(inputs) > 1 else None
    offset = 0 if k is None else int(ctx.require_constant(k, "k").reshape(-1)[0])
    return ctx.emit("trilu", [inputs[0]], upper=bool(upper), k=offset)


@converter("ReverseSequence", since=10)
def reverse_sequence(ctx: ImportContext, inputs: list[Value], *, batch_axis: int = 1,
                     time_axis: int = 0) -> Value:
    x, lengths = inputs
    return ctx.emit("reverse_sequence", [x, _as_index(ctx, lengths)], batch_axis=batch_axis,
                    time_axis=time_axis)


@converter("CumSum", since=11)
def cumsum(ctx: ImportContext, inputs: list[Value], *, exclusive: int = 0, reverse: int = 0
           ) -> Value:
    x, axis = inputs
    axis = int(np.asarray(ctx.require_constant(axis, "axis")).reshape(-1)[0])
    return ctx.emit("cumsum", [x], axis=normalize_axis(axis, x.type.ndim),
                    exclusive=bool(exclusive), reverse=bool(reverse))

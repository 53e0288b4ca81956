"""Indexing ops: reads and writes at positions held in tensors (gather and scatter families),
and the position-driven selections one_hot, trilu, reverse_sequence.

gather{axis}(data, indices): ONNX Gather; ``out = data[:axis] x indices x data[axis+1:]``.
gather_elements{axis}(data, indices): ONNX GatherElements; out has the indices' shape.
gather_nd{batch_dims}(data, indices): ONNX GatherND.
scatter_elements{axis, reduction}(data, indices, updates): ONNX ScatterElements.
scatter_nd{reduction}(data, indices, updates): ONNX ScatterND.
one_hot{axis, depth}(indices, values): ONNX OneHot; values is [off, on]; axis normalized.
trilu{upper, k}(x): ONNX Trilu on the last two axes.
reverse_sequence{batch_axis, time_axis}(x, lengths): ONNX ReverseSequence.

Indices are read at run time. A negative index counts from the end; an index still out of
range after that stops the run with a KernelRuntimeError naming the node and the index, as
onnxruntime does (``CHECK_INDICES``; the check costs one compare per index read, and the
kernels clamp as well, so no load ever leaves its buffer). The references, which only see
constants, reject such indices at compile time.
Scatter reductions ("none", "add", "mul", "max", "min") are written per output element as a
reduction over the updates that may target it; see the cost notes at their computes.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import clamp, schedule_reduction
from tensorc.ops.shape_rules import expect_arity, expect_axis, expect_rank
from tensorc.target import Target

gather = define("gather", Pattern.INJECTIVE)
gather_elements = define("gather_elements", Pattern.INJECTIVE)
gather_nd = define("gather_nd", Pattern.INJECTIVE)
scatter_elements = define("scatter_elements", Pattern.REDUCTION)
scatter_nd = define("scatter_nd", Pattern.REDUCTION)
one_hot = define("one_hot", Pattern.INJECTIVE)
trilu = define("trilu", Pattern.INJECTIVE)
reverse_sequence = define("reverse_sequence", Pattern.INJECTIVE)

REDUCTIONS = ("none", "add", "mul", "max", "min")
INT_DTYPES = ("int32", "int64")


def _expect_indices(op: str, t: TensorType, which: str = "indices") -> None:
    if t.dtype not in INT_DTYPES:
        raise ShapeError(f"{op}: {which} must be int32 or int64, got {t}")


def checked_indices(op: str, indices: np.ndarray, size: int) -> np.ndarray:
    """Constant indices with negatives resolved; out-of-range ones are an error (the
    references use it, and the importer for constant indices into run-time data: a kernel
    whose output is empty never reads them, yet onnxruntime refuses them)."""
    indices = indices.astype(np.int64)
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise ShapeError(f"{op}: indices {indices.reshape(-1).tolist()[:8]} are out of range "
                         f"for an axis of size {size}")
    return np.where(indices < 0, indices + size, indices)


# ---------------------------------------------------------------------------------------------
# shape rules and numpy references

@gather.infer
def _gather_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("gather", input_types, 2)
    data, indices = input_types
    axis = attrs["axis"]
    expect_axis("gather", axis, data.ndim)
    _expect_indices("gather", indices)
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    return [TensorType(shape, data.dtype)]


@gather.reference
def _gather_reference(attrs: dict, data: np.ndarray, indices: np.ndarray) -> list[np.ndarray]:
    axis = attrs["axis"]
    return [np.take(data, checked_indices("gather", indices, data.shape[axis]), axis=axis)]


@gather_elements.infer
def _gather_elements_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("gather_elements", input_types, 2)
    data, indices = input_types
    expect_axis("gather_elements", attrs["axis"], data.ndim)
    _expect_indices("gather_elements", indices)
    expect_rank("gather_elements", indices, data.ndim, "indices")
    axis = attrs["axis"] % data.ndim
    if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
        raise ShapeError(f"gather_elements: indices {indices} are larger than data {data} "
                         f"on an axis other than {axis}")
    return [TensorType(indices.shape, data.dtype)]


@gather_elements.reference
def _gather_elements_reference(attrs: dict, data: np.ndarray, indices: np.ndarray
                               ) -> list[np.ndarray]:
    axis = attrs["axis"]
    index = checked_indices("gather_elements", indices, data.shape[axis])
    return [np.take_along_axis(data, index, axis=axis)]


def _gather_nd_shape(data: TensorType, indices: TensorType, batch: int) -> tuple[int, ...]:
    depth = indices.shape[-1] if indices.ndim else 0
    if (indices.ndim < 1 or batch < 0 or batch >= min(data.ndim, indices.ndim)
            or depth > data.ndim - batch or data.shape[:batch] != indices.shape[:batch]):
        raise ShapeError(f"gather_nd: indices {indices} with batch_dims {batch} do not fit "
                         f"data {data}")
    return indices.shape[:-1] + data.shape[batch + depth:]


@gather_nd.infer
def _gather_nd_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("gather_nd", input_types, 2)
    data, indices = input_types
    _expect_indices("gather_nd", indices)
    return [TensorType(_gather_nd_shape(data, indices, attrs["batch_dims"]), data.dtype)]


@gather_nd.reference
def _gather_nd_reference(attrs: dict, data: np.ndarray, indices: np.ndarray
                         ) -> list[np.ndarray]:
    batch, depth = attrs["batch_dims"], indices.shape[-1]
    shape = _gather_nd_shape(TensorType(data.shape, data.dtype.name),
                             TensorType(indices.shape, indices.dtype.name), batch)
    index = np.stack([checked_indices("gather_nd", indices[..., j], data.shape[batch + j])
                      for j in range(depth)], axis=-1) if depth else indices.astype(np.int64)
    out = np.empty(shape, data.dtype)
    for pos in np.ndindex(*indices.shape[:-1]):
        out[pos] = data[pos[:batch] + tuple(index[pos])]
    return [out]


def _check_reduction(op: str, attrs: dict) -> None:
    if attrs.get("reduction", "none") not in REDUCTIONS:
        raise ShapeError(f"{op}: reduction {attrs['reduction']!r} is not one of "
                         f"{', '.join(REDUCTIONS)}")


@scatter_elements.infer
def _scatter_elements_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("scatter_elements", input_types, 3)
    data, indices, updates = input_types
    expect_axis("scatter_elements", attrs["axis"], data.ndim)
    _expect_indices("scatter_elements", indices)
    _check_reduction("scatter_elements", attrs)
    if (indices.shape != updates.shape or indices.ndim != data.ndim
            or any(i > d for i, d in zip(indices.shape, data.shape))
            or updates.dtype != data.dtype):
        raise ShapeError(f"scatter_elements: indices {indices} and updates {updates} must "
                         f"share a shape of data {data}'s rank, no larger, and data's dtype")
    return [data]


_NUMPY_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@scatter_elements.reference
def _scatter_elements_reference(attrs: dict, data: np.ndarray, indices: np.ndarray,
                                updates: np.ndarray) -> list[np.ndarray]:
    axis, reduction = attrs["axis"], attrs.get("reduction", "none")
    index = checked_indices("scatter_elements", indices, data.shape[axis])
    out = data.copy()
    for pos in np.ndindex(*indices.shape):  # in order: the last of duplicates wins
        target = pos[:axis] + (index[pos],) + pos[axis + 1:]
        fn = _NUMPY_REDUCE.get(reduction)
        out[target] = updates[pos] if fn is None else fn(out[target], updates[pos])
    return [out]


def _scatter_nd_check(data: TensorType, indices: TensorType, updates: TensorType) -> None:
    depth = indices.shape[-1] if indices.ndim else -1
    if (not 0 <= depth <= data.ndim
            or updates.shape != indices.shape[:-1] + data.shape[depth:]
            or updates.dtype != data.dtype):
        raise ShapeError(f"scatter_nd: indices {indices} and updates {updates} do not fit "
                         f"data {data}")


@scatter_nd.infer
def _scatter_nd_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("scatter_nd", input_types, 3)
    data, indices, updates = input_types
    _expect_indices("scatter_nd", indices)
    _check_reduction("scatter_nd", attrs)
    _scatter_nd_check(data, indices, updates)
    return [data]


@scatter_nd.reference
def _scatter_nd_reference(attrs: dict, data: np.ndarray, indices: np.ndarray,
                          updates: np.ndarray) -> list[np.ndarray]:
    depth = indices.shape[-1]
    fn = _NUMPY_REDUCE.get(attrs.get("reduction", "none"))
    out = data.copy()
    for pos in np.ndindex(*indices.shape[:-1]):
        target = tuple(int(checked_indices("scatter_nd", indices[pos + (j,)], data.shape[j]))
                       for j in range(depth))
        out[target] = updates[pos] if fn is None else fn(out[target], updates[pos])
    return [out]


@one_hot.infer
def _one_hot_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("one_hot", input_types, 2)
    indices, values = input_types
    axis, depth = attrs["axis"], attrs["depth"]
    expect_axis("one_hot", axis, indices.ndim + 1)
    if values.shape != (2,) or depth < 1:
        raise ShapeError(f"one_hot: values must be [off, on] (got {values}) and depth "
                         f"positive (got {depth})")
    return [TensorType(indices.shape[:axis] + (depth,) + indices.shape[axis:], values.dtype)]


@one_hot.reference
def _one_hot_reference(attrs: dict, indices: np.ndarray, values: np.ndarray
                       ) -> list[np.ndarray]:
    axis, depth = attrs["axis"], attrs["depth"]
    index = indices.astype(np.int64)
    index = np.where(index < 0, index + depth, index)
    shape = [1] * (indices.ndim + 1)
    shape[axis] = depth
    hot = np.expand_dims(index, axis) == np.arange(depth).reshape(shape)
    return [np.where(hot, values[1], values[0]).astype(values.dtype)]


@trilu.infer
def _trilu_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("trilu", input_types, 1)
    if input_types[0].ndim < 2:
        raise ShapeError(f"trilu: input must have rank 2 or more, got {input_types[0]}")
    return [input_types[0]]


@trilu.reference
def _trilu_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    k = attrs["k"]
    return [np.triu(x, k) if attrs["upper"] else np.tril(x, k)]


@reverse_sequence.infer
def _reverse_sequence_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("reverse_sequence", input_types, 2)
    x, lengths = input_types
    batch, time = attrs["batch_axis"], attrs["time_axis"]
    if {batch, time} != {0, 1} or x.ndim < 2:
        raise ShapeError(f"reverse_sequence: batch_axis and time_axis must be 0 and 1 (in "
                         f"either order) of an input of rank 2 or more, got {x}")
    _expect_indices("reverse_sequence", lengths, "sequence_lens")
    if lengths.shape != (x.shape[batch],):
        raise ShapeError(f"reverse_sequence: sequence_lens {lengths} must hold one length per "
                         f"batch entry of {x}")
    return [x]


@reverse_sequence.reference
def _reverse_sequence_reference(attrs: dict, x: np.ndarray, lengths: np.ndarray
                                ) -> list[np.ndarray]:
    batch, time = attrs["batch_axis"], attrs["time_axis"]
    out = x.copy()
    for b, n in enumerate(lengths):
        n = int(min(max(n, 0), x.shape[time]))
        src = [slice(None)] * x.ndim
        src[batch], src[time] = b, slice(0, n)
        dst = list(src)
        dst[time] = slice(n - 1, None, -1) if n else slice(0, 0)
        out[tuple(dst)] = x[tuple(src)]
    return [out]


# ---------------------------------------------------------------------------------------------
# kernels

# Whether kernels check their run-time indices (an out-of-range one fails the run with
# KernelRuntimeError); without the check they are clamped silently.
CHECK_INDICES = True


def wrap_index(index: E.Expr, size: int) -> E.Expr:
    """A run-time index as int64, negatives counted from the end, checked (CHECK_INDICES)
    and clamped into [0, size)."""
    index = E.cast(E.INDEX, index)
    if CHECK_INDICES:
        index = E.Call("check_index", (index, E.as_expr(size)), E.INDEX)
    index = E.select(E.Compare("lt", index, E.const(0)), index + size, index)
    return clamp(index, size)


@gather.compute
def _gather_compute(attrs: dict, data: te.Tensor, indices: te.Tensor) -> te.Tensor:
    axis, q = attrs["axis"], indices.ndim
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]

    def body(*o):
        where = wrap_index(indices[tuple(o[axis:axis + q])], data.shape[axis])
        return data[tuple(o[:axis]) + (where,) + tuple(o[axis + q:])]
    return te.compute(shape, body, name="gather")


@gather_elements.compute
def _gather_elements_compute(attrs: dict, data: te.Tensor, indices: te.Tensor) -> te.Tensor:
    axis = attrs["axis"]

    def body(*o):
        where = wrap_index(indices[o], data.shape[axis])
        return data[tuple(where if d == axis else o[d] for d in range(data.ndim))]
    return te.compute(indices.shape, body, name="gather_elements")


@gather_nd.compute
def _gather_nd_compute(attrs: dict, data: te.Tensor, indices: te.Tensor) -> te.Tensor:
    batch, depth = attrs["batch_dims"], indices.shape[-1]
    shape = indices.shape[:-1] + data.shape[batch + depth:]
    lead = indices.ndim - 1

    def body(*o):
        picked = [wrap_index(indices[tuple(o[:lead]) + (j,)], data.shape[batch + j])
                  for j in range(depth)]
        return data[tuple(o[:batch]) + tuple(picked) + tuple(o[lead:])]
    return te.compute(shape, body, name="gather_nd")


def _combine(reduction: str, data: E.Expr, acc: E.Expr) -> E.Expr:
    return {"add": lambda: data + acc, "mul": lambda: data * acc,
            "max": lambda: E.maximum(data, acc), "min": lambda: E.minimum(data, acc)}[
        reduction]()


def _scatter(name: str, data: te.Tensor, updates: te.Tensor, reduction: str,
             reduce_axes: list[te.IterVar], hits, update_at, flat_position) -> te.Tensor:
    """The scatter kernel shared by scatter_elements and scatter_nd.

    ``hits(o)`` is true where the update at the reduce axes targets output element ``o``,
    ``update_at(o, position)`` loads that update (position: the reduce axes' variables, or
    a flat position for "none"), ``flat_position`` is the row-major number of an update.
    Without a reduction the last update that hits ``o`` wins: a max over the positions of
    the hits finds it (-1 for none), then a second stage reads it.
    """
    dtype = data.dtype
    if reduction == "none":
        last = te.compute(data.shape, lambda *o: te.max_(
            E.select(hits(o), flat_position(), E.const(-1)), axis=reduce_axes),
            name=f"{name}_last", tag=f"anchor:{name}")

        def pick(*o):
            found = last[o]
            value = update_at(o, E.maximum(found, E.const(0)))
            return E.select(E.Compare("ge", found, E.const(0)), value, data[o])
        return te.compute(data.shape, pick, name=name)
    neutral = {"add": E.Const(0, dtype), "mul": E.Const(1, dtype), "max": te.min_value(dtype),
               "min": te.max_value(dtype)}[reduction]
    combiner = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}[reduction]
    acc = te.compute(data.shape, lambda *o: E.Reduce(
        combiner, E.select(hits(o), update_at(o, None), neutral), reduce_axes, neutral),
        name=f"{name}_{reduction}", tag=f"anchor:{name}")
    return te.compute(data.shape, lambda *o: _combine(reduction, data[o], acc[o]), name=name)


@scatter_elements.compute
def _scatter_elements_compute(attrs: dict, data: te.Tensor, indices: te.Tensor,
                              updates: te.Tensor) -> te.Tensor:
    # Cost: every output element scans the updates along the axis, O(data * indices[axis]).
    axis, reduction = attrs["axis"], attrs.get("reduction", "none")
    k = te.reduce_axis(indices.shape[axis], "u")

    def position(o, along):
        return tuple(along if d == axis else clamp(o[d], indices.shape[d])
                     if indices.shape[d] < data.shape[d] else o[d] for d in range(data.ndim))

    def hits(o):
        inside = [E.Compare("lt", o[d], E.const(indices.shape[d])) for d in range(data.ndim)
                  if d != axis and indices.shape[d] < data.shape[d]]
        target = wrap_index(indices[position(o, k.var)], data.shape[axis])
        return E.all_of(*inside, E.eq(target, o[axis]))

    def update_at(o, flat):
        return updates[position(o, k.var if flat is None else flat)]
    return _scatter("scatter_elements", data, updates, reduction, [k], hits, update_at,
                    lambda: k.var)


@scatter_nd.compute
def _scatter_nd_compute(attrs: dict, data: te.Tensor, indices: te.Tensor,
                        updates: te.Tensor) -> te.Tensor:
    # Cost: every output element scans every index tuple, O(data * indices / depth).
    reduction = attrs.get("reduction", "none")
    depth, lead = indices.shape[-1], indices.shape[:-1]
    axes = [te.reduce_axis(n, f"u{d}") for d, n in enumerate(lead)] or [te.reduce_axis(1, "u")]
    lead_vars = [a.var for a in axes][:len(lead)]

    def hits(o):
        found = E.all_of(*[E.eq(wrap_index(indices[tuple(lead_vars) + (j,)], data.shape[j]),
                                o[j]) for j in range(depth)])
        return found if found is not None else E.Const(True, "bool")

    def update_at(o, flat):
        if flat is None:
            where = lead_vars
        else:  # the row-major position of an update back to its index tuple
            where = [(flat // math.prod(lead[d + 1:])) % n for d, n in enumerate(lead)]
        return updates[tuple(where) + tuple(o[depth:])]

    def flat_position():
        flat = E.const(0)
        for var, n in zip(lead_vars, lead):
            flat = flat * n + var
        return flat
    return _scatter("scatter_nd", data, updates, reduction, axes, hits, update_at,
                    flat_position)


def _scatter_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                      attrs: dict, config) -> None:
    # the anchor combines the data with a reduction stage; that stage is the one to place
    (reduced,) = [t for t in anchor.op.input_tensors() if isinstance(t.op, te.ComputeOp)
                  and t.op.tag.startswith("anchor:")]
    schedule_reduction(target, sch, out, reduced)


scatter_elements.schedule(_scatter_schedule)
scatter_nd.schedule(_scatter_schedule)


@one_hot.compute
def _one_hot_compute(attrs: dict, indices: te.Tensor, values: te.Tensor) -> te.Tensor:
    axis, depth = attrs["axis"], attrs["depth"]
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]

    def body(*o):
        index = E.cast(E.INDEX, indices[tuple(o[:axis]) + tuple(o[axis + 1:])])
        index = E.select(E.Compare("lt", index, E.const(0)), index + depth, index)
        return E.select(E.eq(index, o[axis]), values[1], values[0])
    return te.compute(shape, body, name="one_hot")


@trilu.compute
def _trilu_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    upper, k = attrs["upper"], attrs["k"]
    zero = E.Const(0, x.dtype)

    def body(*o):
        offset = o[-1] - o[-2]
        keep = E.Compare("ge" if upper else "le", offset, E.const(k))
        return E.select(keep, x[o], zero)
    return te.compute(x.shape, body, name="trilu")


@reverse_sequence.compute
def _reverse_sequence_compute(attrs: dict, x: te.Tensor, lengths: te.Tensor) -> te.Tensor:
    batch, time = attrs["batch_axis"], attrs["time_axis"]
    steps = x.shape[time]

    def body(*o):
        n = E.cast(E.INDEX, lengths[o[batch]])
        t = o[time]
        source = E.select(E.Compare("lt", t, n), clamp(n - 1 - t, steps), t)
        return x[tuple(source if d == time else o[d] for d in range(x.ndim))]
    return te.compute(x.shape, body, name="reverse_sequence")

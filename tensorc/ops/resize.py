"""Resampling along one axis: resize_axis, the building block of ONNX Resize and Upsample.

resize_axis{axis, fill, nearest}(x, indices, weights): with ``indices`` an int32 (or int64)
[taps, out] table and ``weights`` a float [taps, out] table (constants the frontend computes
from the coordinate mode, interpolation mode and scale),

    out[..., j, ...] = sum over t of weights[t, j] * x[..., indices[t, j], ...]

along ``axis`` (``nearest``: one tap, copied as it is, its weight unread), or ``fill`` where
``indices[0, j]`` is negative (tf_crop_and_resize's extrapolation). The tables run along the
output (taps first) and hold 32-bit positions, so a vector of outputs along the row loads
its positions and weights as whole vectors and gathers its inputs with them; [out, taps]
int64 tables cost strided 64-bit gathers and 64-bit clamps at every vector.

Resize is separable, so an N-D resize is one resize_axis per resized axis; each resize_axis
is a kernel of its own (an anchor: elementwise epilogues join it, another resize_axis does
not), so that the frontend's order (the last axis first where it grows) leaves the gathers
along the row to the small tensor, and the large output is a pass of contiguous vectors, two
(four) input rows per output row with scalar weights. Fused, every output vector gathered
every tap of both axes (a 21 x 16 x 16 -> 256 x 256 bilinear resize ran at 1% of its memory
bound). The taps are unrolled (1 for nearest, 2 linear, 4 cubic, more with antialias).
Integer data is interpolated in float, rounded and saturated.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import INJECTIVE
from tensorc.ops.shape_rules import expect_arity, expect_axis, expect_float

resize_axis = define("resize_axis", Pattern.OUT_ELEMWISE_FUSABLE)


@resize_axis.infer
def _resize_axis_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("resize_axis", input_types, 3)
    x, indices, weights = input_types
    axis = attrs["axis"]
    expect_axis("resize_axis", axis, x.ndim)
    expect_float("resize_axis", weights, "weights")
    if (indices.dtype not in ("int32", "int64") or indices.ndim != 2
            or weights.shape != indices.shape or indices.shape[0] < 1
            or (attrs.get("nearest") and indices.shape[0] != 1)):
        raise ShapeError(f"resize_axis: indices {indices} and weights {weights} must be "
                         f"[taps, out] tables, int32 (or int64) and float, of one tap where "
                         f"nearest")
    shape = x.shape[:axis] + (indices.shape[1],) + x.shape[axis + 1:]
    return [TensorType(shape, x.dtype)]


def _saturate(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.round(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)


@resize_axis.reference
def _resize_axis_reference(attrs: dict, x: np.ndarray, indices: np.ndarray,
                           weights: np.ndarray) -> list[np.ndarray]:
    axis = attrs["axis"]
    n = x.shape[axis]
    if indices.max(initial=0) >= n:
        raise ShapeError(f"resize_axis: indices reach {indices.max()} on an axis of size {n}")
    indices, weights = indices.T, weights.T      # [out, taps]
    if attrs.get("nearest"):
        return [np.take(x, np.clip(indices[:, 0], 0, n - 1), axis=axis)]
    taken = np.take(x.astype(weights.dtype), np.clip(indices, 0, n - 1), axis=axis)
    shape = (1,) * axis + weights.shape + (1,) * (x.ndim - axis - 1)
    out = (taken * weights.reshape(shape)).sum(axis=axis + 1)
    fill = attrs.get("fill")
    if fill is not None:
        outside = (indices[:, 0] < 0).reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
        out = np.where(outside, fill, out)
    return [_saturate(out, x.dtype)]


@resize_axis.compute
def _resize_axis_compute(attrs: dict, x: te.Tensor, indices: te.Tensor, weights: te.Tensor
                         ) -> te.Tensor:
    axis, fill, nearest = attrs["axis"], attrs.get("fill"), attrs.get("nearest", False)
    n, (taps, out) = x.shape[axis], indices.shape
    shape = x.shape[:axis] + (out,) + x.shape[axis + 1:]
    wtype, itype = weights.dtype, indices.dtype

    def body(*o):
        j = o[axis]
        total = None
        for t in range(taps):
            source = E.cast("int64", E.minimum(E.maximum(indices[t, j], E.const(0, itype)),
                                               E.const(n - 1, itype)))
            value = x[tuple(source if d == axis else o[d] for d in range(x.ndim))]
            if nearest:         # (never with a fill: the frontend weighs those by one)
                return value
            term = E.cast(wtype, value) * weights[t, j]
            total = term if total is None else total + term
        if fill is not None:
            outside = E.Compare("lt", indices[0, j], E.const(0, indices.dtype))
            total = E.select(outside, E.Const(fill, wtype), total)
        if E.is_float(x.dtype):
            return E.cast(x.dtype, total)
        low, high = te.min_value(x.dtype).value, te.max_value(x.dtype).value
        rounded = E.call("round", total)
        rounded = E.minimum(E.maximum(rounded, E.Const(low, wtype)), E.Const(high, wtype))
        return E.cast(x.dtype, rounded)
    return te.compute(shape, body, name="resize_axis")


def _injective(kind: str):
    """The injective template of ``kind`` as resize_axis's (looked up when used: the CUDA one
    registers with the GPU schedules)."""
    def apply(target, sch, out, anchor, attrs, config) -> None:
        INJECTIVE[kind].apply(target, sch, out, anchor, attrs, config)

    def space(target, out, anchor, attrs):
        return INJECTIVE[kind].search_space(target, out, anchor, attrs)
    return apply, space


def _schedule_rows(target, sch, out, anchor, attrs, config) -> None:
    """A static resize along an axis before the last: the injective schedule, with the
    tables' entries of each output row copied to registers at the row's loop (its taps'
    positions and weights), so that the row's vectors read them once: loaded from the tables
    at every vector, they are reloaded there (the stores might alias them, as LLVM sees it)."""
    INJECTIVE["llvm"].apply(target, sch, out, anchor, attrs, config)
    if anchor is not out or not te.is_static(out.shape):
        return
    taps_per_row(sch, out, attrs["axis"], anchor.op.input_tensors()[1:])


def taps_per_row(sch, out, axis: int, tables: list) -> None:
    """For a resize along ``axis`` before the last, scheduled as injective: ``tables``' entries
    of each output row (its taps' positions and weights) copied to registers at the row's
    loop, so that the row's vectors read them once (loaded from the tables at every vector,
    they are reloaded there: the stores might alias them, as LLVM sees it)."""
    if axis >= len(out.shape) - 1 or len(out.shape) < 2:
        return
    st = sch[out]
    last = st.op_axis[-1].name
    leaves = st.leaf_vars
    rows = [k for k, sv in enumerate(leaves) if last not in sv.name.split(".")[0].split("_")]
    if not rows or rows[-1] != len(rows) - 1 or len(rows) == len(leaves):
        return      # (only a nest of rows, then loops along the row alone)
    row = leaves[rows[-1]]
    for table in tables:
        local = sch.cache_read(table, "local", [out])
        sch[local].compute_at(st, row)


for _kind in ("llvm", "cuda"):
    _apply, _space = _injective(_kind)
    resize_axis.schedule(_schedule_rows if _kind == "llvm" else _apply, target=_kind,
                         space=_space)

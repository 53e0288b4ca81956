"""Compactions, whose output size is the number of selected elements: known only at run time.

nonzero{count, writes}: x -> int64[rank, count], the coordinates of x's nonzero elements in
row-major order (numpy's ``np.nonzero``; NaN counts as nonzero).
compress{axis, count, writes}: x, condition -> x with only the slices along ``axis`` whose
condition is true (``condition`` a 1-D bool, read up to the axis' length; numpy's
``np.compress``); the frontend flattens x for ONNX's Compress without an axis.

``count`` is the data-dependent dim (ir/dim_table.py ``declare_data``) the output is sized
by, ``writes`` its name: the kernel stores the count there for the entry to read back. The
kernels are loop IR, serial (ops/loop_kernels.py), in two passes: the count first, since the
output's row stride is the count.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.loop_kernels import (
    allocate, extent, get, local, loop, put, read, seq, when, write,
)
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity, expect_axis

nonzero = define("nonzero", Pattern.OPAQUE)
compress = define("compress", Pattern.OPAQUE)


def is_nonzero(value: E.Expr) -> E.Expr:
    """``value != 0`` (NaN is nonzero; a bool is itself)."""
    if value.dtype == "bool":
        value = E.cast("int8", value)
    return E.Compare("ne", value, E.Const(0, value.dtype))


def _size(shape) -> object:
    size = 1
    for d in shape:
        size = size * d
    return size


# ---------------------------------------------------------------------------------------------
# nonzero

@nonzero.infer
def _nonzero_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("nonzero", input_types, 1)
    (x,) = input_types
    if x.ndim == 0:
        raise ShapeError("nonzero: the input is a scalar; give it at least one axis")
    return [TensorType((x.ndim, attrs["count"]), "int64")]


@nonzero.reference
def _nonzero_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


@nonzero.kernel
def _nonzero_kernel(attrs: dict, operands: list, out: Buffer, writes: list[Buffer]) -> Stmt:
    (x,) = operands
    shape = [extent(d) for d in x.shape]
    numel = extent(_size(x.shape))
    total, at = local("int64", "total"), local("int64", "at")

    def count(p):
        return when(is_nonzero(read(x, p)), put(total, get(total) + 1))

    def coordinates(p):
        stores, rest = [], p
        for axis in range(len(shape) - 1, -1, -1):
            coord = rest % shape[axis] if axis else rest
            stores.append(write(out, E.const(axis) * get(total) + get(at), coord))
            rest = rest // shape[axis]
        return when(is_nonzero(read(x, p)),
                    seq(*reversed(stores), put(at, get(at) + 1)))
    body = seq(put(total, 0), loop(numel, count, "p"), put(writes[0], get(total)),
               put(at, 0), loop(numel, coordinates, "p"))
    return allocate([total, at], body)


# ---------------------------------------------------------------------------------------------
# compress

@compress.infer
def _compress_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("compress", input_types, 2)
    x, condition = input_types
    axis = attrs["axis"]
    expect_axis("compress", axis, x.ndim)
    if condition.ndim != 1:
        raise ShapeError(f"compress: the condition must be 1-D, got {condition}")
    shape = list(x.shape)
    shape[axis] = attrs["count"]
    return [TensorType(tuple(shape), x.dtype)]


@compress.reference
def _compress_reference(attrs: dict, x: np.ndarray, condition: np.ndarray
                        ) -> list[np.ndarray]:
    axis = attrs["axis"]
    keep = np.asarray(condition, dtype=bool)[:x.shape[axis]]
    return [np.compress(keep, x, axis=axis)]


@compress.kernel
def _compress_kernel(attrs: dict, operands: list, out: Buffer, writes: list[Buffer]) -> Stmt:
    x, condition = operands
    axis = attrs["axis"]
    outer = extent(_size(x.shape[:axis]))
    length = extent(x.shape[axis])
    inner = extent(_size(x.shape[axis + 1:]))
    # the condition is read up to the axis' length (a longer one's tail is ignored)
    span = E.minimum(length, extent(condition.shape[0])) if isinstance(condition, Buffer) \
        else E.minimum(length, E.const(1))
    total, at = local("int64", "total"), local("int64", "at")

    def count(j):
        return when(is_nonzero(read(condition, j)), put(total, get(total) + 1))

    def copy(j):
        def slab(o):
            return loop(inner, lambda i: write(
                out, (o * get(total) + get(at)) * inner + i,
                read(x, (o * length + j) * inner + i)), "i")
        return when(is_nonzero(read(condition, j)),
                    seq(loop(outer, slab, "o"), put(at, get(at) + 1)))
    body = seq(put(total, 0), loop(span, count, "j"), put(writes[0], get(total)),
               put(at, 0), loop(span, copy, "j"))
    return allocate([total, at], body)

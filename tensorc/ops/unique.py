"""unique{output, sorted, axis, count, writes}: ONNX's Unique, one node per output (``output``
is "y", "indices", "inverse" or "counts"; each computes the whole and writes the count, so
that the four agree on every tie). Along ``axis`` the unique slices (compared whole, in
lexicographic order when sorted); the frontend flattens the input where ONNX gives no axis.
- y: the unique slices, ascending (``sorted``) or in order of first occurrence;
- indices[u]: the position of each one's first occurrence;
- inverse[n]: for each slice of the input, the position of its value in y;
- counts[u]: how often each occurs.

The kernel is loop IR, serial (ops/loop_kernels.py): each slice's first occurrence by
comparing it with the ones before (n^2 slice comparisons), then each unique slice's place by
counting the unique slices ordered before it. Correct first.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.loop import Allocate, Buffer, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.loop_kernels import (
    allocate, extent, get, local, loop, put, read, seq, when, write,
)
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity, expect_axis

unique = define("unique", Pattern.OPAQUE)
OUTPUTS = ("y", "indices", "inverse", "counts")


@unique.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("unique", input_types, 1)
    (x,) = input_types
    axis, output = attrs["axis"], attrs["output"]
    expect_axis("unique", axis, x.ndim)
    if output not in OUTPUTS:
        raise ShapeError(f"unique: output must be one of {OUTPUTS}, got {output!r}")
    if output == "y":
        shape = list(x.shape)
        shape[axis] = attrs["count"]
        return [TensorType(tuple(shape), x.dtype)]
    if output == "inverse":
        return [TensorType((x.shape[axis],), "int64")]
    return [TensorType((attrs["count"],), "int64")]


@unique.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axis = attrs["axis"]
    slices = np.moveaxis(x, axis, 0)
    n = slices.shape[0]
    flat = slices.reshape(n, -1)
    first = []
    for i in range(n):
        first.append(next(j for j in range(i + 1) if np.array_equal(flat[j], flat[i])))
    kept = [i for i in range(n) if first[i] == i]
    if attrs["sorted"]:
        kept.sort(key=lambda i: tuple(flat[i].tolist()))
    place = {i: k for k, i in enumerate(kept)}
    outputs = {
        "y": np.moveaxis(slices[kept], 0, axis) if kept else
        np.moveaxis(slices[:0], 0, axis),
        "indices": np.array(kept, dtype=np.int64),
        "inverse": np.array([place[first[i]] for i in range(n)], dtype=np.int64),
        "counts": np.array([first.count(i) for i in kept], dtype=np.int64),
    }
    return [np.ascontiguousarray(outputs[attrs["output"]])]


@unique.kernel
def _kernel(attrs: dict, operands: list, out: Buffer, writes: list[Buffer]) -> Stmt:
    (x,) = operands
    axis, output = attrs["axis"], attrs["output"]
    outer = _product(x.shape[:axis])
    n = extent(x.shape[axis])
    inner = _product(x.shape[axis + 1:])
    per_slice = outer * inner
    first = Buffer("first", (x.shape[axis],), "int64")
    place = Buffer("place", (x.shape[axis],), "int64")
    total, rank, order = local("int64", "total"), local("int64", "rank"), local("int64", "cmp")

    def element(i, e):
        return read(x, ((e // inner) * n + i) * inner + e % inner)

    def compare(i, j) -> Stmt:
        """order = -1, 0 or 1 as slice i is before, equal to or after slice j."""
        def step(e):
            a, b = element(i, e), element(j, e)
            return when(E.Compare("eq", get(order), E.const(0)),
                        seq(when(E.Compare("lt", a, b), put(order, -1)),
                            when(E.Compare("gt", a, b), put(order, 1))))
        return seq(put(order, 0), loop(per_slice, step, "e"))

    def first_of(i):
        def earlier(j):
            return when(E.Compare("eq", E.Load(first, (i,)), i), seq(
                compare(i, j),
                when(E.Compare("eq", get(order), E.const(0)), write(first, i, j))))
        return seq(write(first, i, i), loop(i, earlier, "j"))

    def is_first(i):
        return E.Compare("eq", E.Load(first, (i,)), i)

    def place_of(i):
        if not attrs["sorted"]:
            return when(is_first(i), seq(write(place, i, get(total)),
                                         put(total, get(total) + 1)))

        def before(j):
            return when(is_first(j), seq(compare(j, i), when(
                E.Compare("lt", get(order), E.const(0)), put(rank, get(rank) + 1))))
        return when(is_first(i), seq(put(rank, 0), loop(n, before, "j"),
                                     write(place, i, get(rank)), put(total, get(total) + 1)))

    def emit_output() -> Stmt:
        def at(i):
            return E.Load(place, (i,))
        if output == "indices":
            return loop(n, lambda i: when(is_first(i), write(out, at(i), i)), "i")
        if output == "inverse":
            return loop(n, lambda i: write(out, i, at(E.Load(first, (i,)))), "i")
        if output == "counts":
            return seq(loop(n, lambda i: when(is_first(i), write(out, at(i), 0)), "i"),
                       loop(n, lambda i: write(
                           out, at(E.Load(first, (i,))),
                           E.Load(out, (at(E.Load(first, (i,))),)) + 1), "i"))

        def copy(i):     # y[o, place[i], r] = x[o, i, r], with y's axis of the count
            return when(is_first(i), loop(per_slice, lambda e: write(
                out, ((e // inner) * get(total) + at(i)) * inner + e % inner,
                element(i, e)), "e"))
        return loop(n, copy, "i")

    body = seq(loop(n, first_of, "i"), put(total, 0), loop(n, place_of, "i"),
               put(writes[0], get(total)), emit_output())
    return Allocate(first, Allocate(place, allocate([total, rank, order], body)))


def _product(dims) -> E.Expr:
    size = E.const(1)
    for d in dims:
        size = size * extent(d)
    return size

"""unique{output, sorted, axis, count, writes}: ONNX's Unique, one node per output (``output``
is "y", "indices", "inverse" or "counts"; each computes the whole and writes the count, so
that the four agree on every tie). Along ``axis`` the unique slices (compared whole, in
lexicographic order when sorted); the frontend flattens the input where ONNX gives no axis.
- y: the unique slices, ascending (``sorted``) or in order of first occurrence;
- indices[u]: the position of each one's first occurrence;
- inverse[n]: for each slice of the input, the position of its value in y;
- counts[u]: how often each occurs.

The kernel is loop IR, serial (ops/loop_kernels.py): the slices merge-sorted by value
(stable, so each run of equal slices starts with the first occurrence), the runs numbered in
that order (sorted) or by first occurrence: O(n log n) slice comparisons.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.loop_kernels import (
    allocate, extent, get, local, loop, merge_sort, put, read, seq, when, write,
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
    order = Buffer("order", (x.shape[axis],), "int64")     # slices, sorted by value
    spare = Buffer("spare", (x.shape[axis],), "int64")
    first = Buffer("first", (x.shape[axis],), "int64")     # each slice's first occurrence
    place = Buffer("place", (x.shape[axis],), "int64")     # a first occurrence's place in y
    total, leader, cmp = local("int64", "total"), local("int64", "leader"), \
        local("int64", "cmp")

    def element(i, e):
        return read(x, ((e // inner) * n + i) * inner + e % inner)

    def compare(i, j) -> Stmt:
        """cmp = -1, 0 or 1 as slice i is before, equal to or after slice j."""
        def step(e):
            a, b = element(i, e), element(j, e)
            return when(E.Compare("eq", get(cmp), E.const(0)),
                        seq(when(E.Compare("lt", a, b), put(cmp, -1)),
                            when(E.Compare("gt", a, b), put(cmp, 1))))
        return seq(put(cmp, 0), loop(per_slice, step, "e"))

    def not_after(i, j):    # stable: equal slices keep their order, the first one first
        return compare(i, j), E.Compare("le", get(cmp), E.const(0))

    def group(k):
        # a run of equal slices in sorted order: its first (the first occurrence) leads it
        current = E.Load(order, (k,))
        new_run = seq(put(leader, current), write(place, current, get(total)),
                      put(total, get(total) + 1))
        starts = E.Compare("eq", k, E.const(0))
        return seq(
            when(starts, new_run,
                 seq(compare(E.Load(order, (k - 1,)), current),
                     when(E.Compare("ne", get(cmp), E.const(0)), new_run))),
            write(first, current, get(leader)))

    def is_first(i):
        return E.Compare("eq", E.Load(first, (i,)), i)

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

    # unsorted: the first occurrences take their places in the order they occur
    by_occurrence = seq(put(total, 0), loop(n, lambda i: when(is_first(i), seq(
        write(place, i, get(total)), put(total, get(total) + 1))), "i"))
    body = seq(loop(n, lambda i: write(order, i, i), "i"),
               merge_sort(order, spare, n, not_after),
               put(total, 0), loop(n, group, "k"),
               None if attrs["sorted"] else by_occurrence,
               put(writes[0], get(total)), emit_output())
    return allocate([order, spare, first, place, total, leader, cmp], body)


def _product(dims) -> E.Expr:
    size = E.const(1)
    for d in dims:
        size = size * extent(d)
    return size

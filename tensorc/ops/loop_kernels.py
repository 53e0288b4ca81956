"""Kernels written directly as loop IR, for the opaque ops that no tensor expression states:
compactions whose output position depends on the data (NonZero, Compress,
NonMaxSuppression, Unique).

Such an op registers ``@op.kernel`` (ops/registry.py). Its group is the node alone (opaque);
:func:`build_loop_kernel` makes the PrimFunc: one Buffer per operand that is passed (a
one-element constant is inlined as a Const, as for every kernel), the output Buffer, then one
one-element int64 Buffer per data-dependent dim the node computes (``attrs["writes"]``),
which the entry points at that dim's slot of the run's dims array and reads back after the
call (compiler/llvm.py). The kernel's loops are serial: correct first; these ops are small
next to the convolutions around them.

Helpers build the loop IR: :func:`loop`, :func:`local` (a scalar in a one-element local
buffer, as a counter), :func:`read`.
"""
from __future__ import annotations

import itertools
from typing import Callable

from tensorc.ir import expr as E
from tensorc.ir.dims import as_expr
from tensorc.ir.loop import Allocate, Buffer, For, IfThenElse, PrimFunc, Stmt, Store, seq
from tensorc.ir.loop import symbolic_dims

_names = itertools.count()


def loop(extent, body: Callable[[E.Var], Stmt], name: str = "i") -> Stmt:
    """``for i in range(extent): body(i)``, serial."""
    var = E.Var(f"{name}{next(_names)}")
    return For(var, _index(extent), "serial", body(var))


def local(dtype: str, name: str = "acc") -> Buffer:
    """A one-element local buffer (a counter, a running value); wrap its uses in
    :func:`allocate`."""
    return Buffer(f"{name}{next(_names)}", (1,), dtype, "local")


def allocate(buffers: list[Buffer], body: Stmt) -> Stmt:
    for b in reversed(buffers):
        body = Allocate(b, body)
    return body


def get(buffer: Buffer) -> E.Expr:
    """The value of a one-element buffer."""
    return E.Load(buffer, (E.const(0),))


def put(buffer: Buffer, value) -> Stmt:
    """Store into a one-element buffer."""
    return Store(buffer, (E.const(0),), E.as_expr(value, buffer.dtype))


def read(operand, index) -> E.Expr:
    """Element ``index`` (a flat index) of an operand: a Buffer's load, or an inlined
    one-element constant itself."""
    if isinstance(operand, Buffer):
        return E.Load(operand, (_index(index),))
    return operand


def write(buffer: Buffer, index, value) -> Stmt:
    return Store(buffer, (_index(index),), E.as_expr(value, buffer.dtype))


def when(cond: E.Expr, then: Stmt, otherwise: Stmt | None = None) -> Stmt:
    return IfThenElse(cond, then, otherwise)


def _index(i) -> E.Expr:
    if isinstance(i, E.Expr):
        return i
    return as_expr(i) if not isinstance(i, int) else E.const(i)


def extent(d) -> E.Expr:
    """A dim (int or Dim) or buffer extent as an INDEX expression."""
    return _index(d if isinstance(d, (int, E.Expr)) else as_expr(d))


def merge_sort(items: Buffer, spare: Buffer, count: E.Expr,
               first_goes_first: Callable[[E.Expr, E.Expr], tuple[Stmt | None, E.Expr]]
               ) -> Stmt:
    """Sort ``items[0:count]`` in place, stably, bottom-up (``spare``: a buffer as long):
    ``first_goes_first(a, b)`` gives a statement to run first (or None) and a condition that
    item ``a`` (from the left run) may precede ``b``: true on ties keeps the sort stable.
    O(count log count) comparisons, serial."""
    width, left, right = local("int64", "width"), local("int64", "left"), \
        local("int64", "right")

    def merge_step(k):
        lo = (k // (get(width) * 2)) * (get(width) * 2)
        mid = E.minimum(lo + get(width), count)
        hi = E.minimum(lo + get(width) * 2, count)
        take_left = seq(write(spare, k, E.Load(items, (get(left),))), put(left, get(left) + 1))
        take_right = seq(write(spare, k, E.Load(items, (get(right),))),
                         put(right, get(right) + 1))
        before, cond = first_goes_first(E.Load(items, (get(left),)),
                                        E.Load(items, (get(right),)))
        both = seq(before, when(cond, take_left, take_right))
        return seq(
            when(E.Compare("eq", k, lo), seq(put(left, lo), put(right, mid))),
            when(E.Compare("lt", get(left), mid),
                 when(E.Compare("lt", get(right), hi), both, take_left),
                 take_right))

    def merge_pass(_):
        return when(E.Compare("lt", get(width), count), seq(
            loop(count, merge_step, "k"),
            loop(count, lambda k: write(items, k, E.Load(spare, (k,))), "k"),
            put(width, get(width) * 2)))
    # 64 passes: widths 1, 2, 4, ... past any count
    return allocate([width, left, right], seq(put(width, 1), loop(64, merge_pass, "pass")))


def build_loop_kernel(kernel_fn: Callable, attrs: dict, operands: list, output_type,
                      name: str) -> PrimFunc:
    """The PrimFunc of a node whose op has a loop-IR kernel ``kernel_fn``; ``operands``: per
    node input, a Buffer parameter or the Const of an inlined scalar (in node order; the
    parameters are the distinct Buffers in that order)."""
    out = Buffer("out", output_type.shape, output_type.dtype)
    writes = [Buffer(f"dim{k}", (1,), "int64") for k, _ in enumerate(attrs.get("writes", ()))]
    body = kernel_fn(attrs, operands, out, writes)
    params = list({id(b): b for b in operands if isinstance(b, Buffer)}.values())
    params += [out, *writes]
    return PrimFunc(name, params, body, dims=symbolic_dims(params, body))


__all__ = ["allocate", "build_loop_kernel", "extent", "get", "local", "loop", "merge_sort", "put",
           "read", "seq", "when", "write"]

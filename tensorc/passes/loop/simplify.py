"""Simplify a PrimFunc: canonical index arithmetic, decided guards, unit loops removed."""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.bounds import SYMBOLIC_MAX
from tensorc.ir.loop import (
    Allocate, For, IfThenElse, Prefetch, PrimFunc, Seq, Stmt, Store, map_stmt, seq,
)


def simplify(func: PrimFunc) -> PrimFunc:
    """Simplify every expression with the ranges of the loops around it; drop loops of extent
    1 and guards that the ranges decide.

    >>> simplify(func)   # for (i, 0, 1) A[i*4 + j // 4 * 4 + j % 4] ... -> A[j] ...
    """
    body = simplify_stmt(func.body, dim_ranges(func))
    return func.with_body(body if body is not None else Seq([]))


def dim_ranges(func: PrimFunc) -> dict:
    """The range of each symbolic dim of ``func``: never negative (a concat's piece past
    ``past`` in ``past + seq`` then decides which input it reads), at most the bound that
    its ``dims_at_most`` attribute gives, one for every dim or by dim name (a variant the
    entry calls only where those dims are small, compiler/variants.py: the tiles of larger
    dims drop out of its code).

    >>> dim_ranges(func)    # {batch: (0, SYMBOLIC_MAX), seq: (0, 8)}: called where seq <= 8
    """
    most = func.attrs.get("dims_at_most", SYMBOLIC_MAX)
    if isinstance(most, dict):
        return {d: (0, most.get(d.name, SYMBOLIC_MAX)) for d in func.dims}
    return {d: (0, most) for d in func.dims}


def simplify_stmt(s: Stmt, ranges: dict) -> Stmt | None:
    """``s`` simplified where the variables of ``ranges`` lie in their (low, high) ranges
    (None where nothing is left of it)."""
    if isinstance(s, For):
        extent = arith.simplify(s.extent, ranges)
        n = arith.as_const_int(extent)
        if n == 0:
            return None
        if n == 1 and s.kind in ("serial", "unrolled", "vectorized", "parallel"):
            body = map_stmt(s.body, lambda e: E.substitute(e, {s.var: E.const(0)}))
            return simplify_stmt(body, ranges)
        inner = dict(ranges)
        if n is not None:
            inner[s.var] = (0, n - 1)
        elif any(ranges.get(v, (0, 0))[1] >= SYMBOLIC_MAX for v in E.free_vars(extent)):
            inner[s.var] = (0, SYMBOLIC_MAX)    # a loop over a symbolic dim
        else:
            most = arith.const_bounds(extent, ranges)[1]
            if most is not None:        # over dims of a bounded range (dim_ranges)
                inner[s.var] = (0, max(most - 1, 0))
        body = simplify_stmt(s.body, inner)
        # (annotations kept: a remainder copy's rolled loops, passes/loop/symbolic_tails.py)
        return None if body is None else For(s.var, extent, s.kind, body, dict(s.annotations))
    if isinstance(s, Store):
        return Store(s.buffer, tuple(arith.simplify(i, ranges) for i in s.indices),
                     arith.simplify(s.value, ranges))
    if isinstance(s, Prefetch):
        return Prefetch(s.buffer, arith.simplify(s.index, ranges), s.nbytes, s.level)
    if isinstance(s, IfThenElse):
        cond = arith.simplify(s.cond, ranges)
        if isinstance(cond, E.Const):
            chosen = s.then_case if cond.value else s.else_case
            return None if chosen is None else simplify_stmt(chosen, ranges)
        then_case = simplify_stmt(s.then_case, ranges)
        else_case = None if s.else_case is None else simplify_stmt(s.else_case, ranges)
        if then_case is None and else_case is None:
            return None
        if then_case is None:
            return IfThenElse(E.Logical("not", cond), else_case)
        return IfThenElse(cond, then_case, else_case)
    if isinstance(s, Seq):
        parts = [simplify_stmt(c, ranges) for c in s.stmts]
        parts = [p for p in parts if p is not None]
        return seq(*parts) if parts else None
    if isinstance(s, Allocate):
        body = simplify_stmt(s.body, ranges)
        return None if body is None else Allocate(s.buffer, body)
    return s

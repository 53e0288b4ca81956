"""The padded-load idiom over a symbolic bound, written as codegen reads it.

A reduction's partial results over a row of symbolic length ``n`` (``Schedule.rfactor``) read
the row's last, partial vector as ``select(k < n, x[min(k, n - 1)], init)``: the clamp keeps
the discarded lanes' loads inside x. Codegen loads such a vector with one masked load where
the condition proves the clamp a no-op, which it checks against constant bounds only
(``min(e, c - 1)`` under ``e < c``); with the symbolic bound every lane was gathered (two
16-lane gathers per row of a softmax over a KV cache). So each clamp ``min(k, n - 1)`` of a
load under a select whose condition has the conjunct ``k < n`` becomes
``n + min(k - n, -1)``, the conjunct ``k - n < 0``: the same values, bounds constant.

    select(k < n, x[b + min(k, n - 1)], 0)  ->  select(k - n < 0, x[b + n + min(k - n, -1)], 0)

Static kernels have no such clamp and are untouched.
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import PrimFunc, Stmt, map_stmt


def shift_symbolic_clamps(func: PrimFunc) -> PrimFunc:
    """Rewrite the symbolic padded loads of ``func`` (see the module docstring).

    >>> shift_symbolic_clamps(func)   # doctest: +SKIP
    """
    if not func.dims:
        return func
    return func.with_body(tighten_padded_clamps(func.body))


def tighten_padded_clamps(s: Stmt, equal: tuple[E.Expr, E.Expr] | None = None
                          ) -> Stmt:
    """``s`` with each clamp ``min(a, b)`` of a load under ``select(u < n, ...)`` written as
    ``t + min(u, n - 1)`` where ``a = t + u`` and ``b = t + n - 1`` (a tail tile's copy for
    the remainder c: ``min(j + 8q, 8q + c - 1)`` under ``j < c`` is ``8q + min(j, c - 1)``),
    and where ``n`` is symbolic, as ``t + n + min(u - n, -1)`` under ``u - n < 0``.
    ``equal``: (x, y), expressions equal wherever ``s`` runs (a remainder's copy: N and
    F * (N // F) + c), x read as y in the clamps' bounds."""
    return map_stmt(s, lambda e: E.transform(e, lambda x: _select(x, equal)))


def _select(e: E.Expr, equal: tuple[E.Expr, E.Expr] | None = None) -> E.Expr | None:
    if not isinstance(e, E.Select) or not isinstance(e.true_value, E.Load):
        return None
    load = e.true_value
    bounds = [c for c in _conjuncts(e.cond) if isinstance(c, E.Compare) and c.op == "lt" and
              E.is_int(c.a.dtype)]
    if not bounds:
        return None
    lows = {arith.expr_key(c.a) for c in _conjuncts(e.cond)
            if isinstance(c, E.Compare) and c.op == "ge" and _is_zero(c.b)}
    shifted = {}        # id(conjunct) -> its rewrite

    def clamp(x: E.Expr) -> E.Expr | None:
        if not (isinstance(x, E.Binary) and x.op == "min"):
            return None
        top = x.b
        if equal is not None:
            key = arith.expr_key(arith.simplify(equal[0]))
            top = E.transform(top, lambda y: equal[1] if arith.expr_key(y) == key else None)
        # a clamp at both ends, min(max(u, 0), n - 1), as a padding's left border reads it,
        # under u >= 0: n + min(max(u, 0) - n, -1), whose clamps codegen strips inside out
        floor = _justified_floor(x.a, lows)
        for cmp in bounds:
            u, n = cmp.a, cmp.b
            if floor is not None:
                if isinstance(n, E.Const) or \
                        arith.expr_key(floor.a) != arith.expr_key(u) or \
                        not _is_zero(arith.simplify(top - (n - 1))):
                    continue
                shifted[id(cmp)] = E.Compare("lt", u - n, E.const(0))
                return n + E.minimum(floor - n, E.const(-1))
            t = arith.simplify(x.a - u)
            if not _is_zero(arith.simplify(top - (n - 1) - t)):
                continue
            if isinstance(n, E.Const):
                if _is_zero(t) and isinstance(x.b, E.Const):
                    return None         # already min(u, n - 1)
                return t + E.minimum(u, E.const(n.value - 1))
            diff = u - n
            shifted[id(cmp)] = E.Compare("lt", diff, E.const(0))
            return t + n + E.minimum(diff, E.const(-1))
        return None
    indices = [E.transform(i, clamp) for i in load.indices]
    if all(a is b for a, b in zip(indices, load.indices)):
        return None
    cond = E.transform(e.cond, lambda x: shifted.get(id(x))) if shifted else e.cond
    return E.Select(cond, E.Load(load.source, indices), e.false_value)


def _justified_floor(x: E.Expr, lows: set) -> E.Binary | None:
    """``x`` where it is ``max(a, 0)`` and ``lows`` (the keys of the conjuncts' e in
    e >= 0) holds a; else None."""
    if isinstance(x, E.Binary) and x.op == "max" and _is_zero(x.b) and \
            arith.expr_key(x.a) in lows:
        return x
    return None


def _is_zero(x: E.Expr) -> bool:
    return isinstance(x, E.Const) and x.value == 0


def _conjuncts(c: E.Expr) -> list[E.Expr]:
    if isinstance(c, E.Logical) and c.op == "and":
        return [x for a in c.args for x in _conjuncts(a)]
    return [c]

"""Index analyses of one vector access, made as codegen emits it (they depend on the vector
variable and width of the loop or register tile being emitted): a load whose index takes two
values over the lanes, the clamps a guard makes no-ops, a row start that is a whole number of
rows."""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E


def two_step(index: E.Expr, var: E.Var, lanes: int
             ) -> tuple[E.Expr, int, E.Expr, int] | None:
    """``index`` as (outer, scale, numerator, divisor): outer + scale * (numerator // divisor)
    with ``outer`` free of ``var``, ``numerator`` affine in it with a stride c >= 1 such that
    c * (lanes - 1) < divisor, so that over the vector's lanes the quotient takes at most two
    consecutive values. Nested divisions by constants merge ((a // b) // c = a // (b * c)).
    None for any other index."""
    outer, scale = E.const(0, index.dtype), 1
    e = index
    while True:
        if isinstance(e, E.Binary) and e.op == "add":
            free, used = (e.a, e.b) if not E.uses_var(e.a, var) else (e.b, e.a)
            if E.uses_var(free, var):
                return None
            outer, e = outer + free * scale, used
        elif isinstance(e, E.Binary) and e.op == "mul" and isinstance(e.b, E.Const):
            scale, e = scale * int(e.b.value), e.a
        elif isinstance(e, E.Binary) and e.op == "mul" and isinstance(e.a, E.Const):
            scale, e = scale * int(e.a.value), e.b
        else:
            break
    divisor = 1
    while isinstance(e, E.Binary) and e.op == "floordiv" and isinstance(e.b, E.Const) and \
            int(e.b.value) > 0:
        divisor, e = divisor * int(e.b.value), e.a
    lin = arith.linear_coeff(e, var)
    if divisor == 1 or lin is None or lin[1] < 1 or lin[1] * (lanes - 1) >= divisor:
        return None
    return outer, scale, e, divisor


def multiple_of(e: E.Expr, n: int) -> bool:
    """Whether the integer expression ``e`` is a multiple of ``n`` for every value of its
    variables (every term's coefficient and the constant are)."""
    aff = arith.to_affine(e, {})
    return aff.const % n == 0 and all(c % n == 0 for _, c in aff.terms.values())


def _conjuncts(c: E.Expr) -> list[E.Expr]:
    if isinstance(c, E.Logical) and c.op == "and":
        return [x for a in c.args for x in _conjuncts(a)]
    return [c]


def strip_justified_clamps(index: E.Expr, cond: E.Expr) -> E.Expr | None:
    """``index`` with each clamp ``max(e, 0)`` / ``min(e, n - 1)`` replaced by ``e`` where
    ``cond`` has the conjunct ``e >= 0`` / ``e < n``; None when nothing could be stripped."""
    lower, upper = set(), set()
    for c in _conjuncts(cond):
        if isinstance(c, E.Compare) and isinstance(c.b, E.Const):
            if c.op == "ge" and c.b.value == 0:
                lower.add(arith.expr_key(c.a))
            elif c.op == "lt":
                upper.add((arith.expr_key(c.a), c.b.value))
    if not lower and not upper:
        return None
    stripped = False

    def fn(x: E.Expr):
        nonlocal stripped
        if isinstance(x, E.Binary) and isinstance(x.b, E.Const):
            key = arith.expr_key(x.a)
            if (x.op == "max" and x.b.value == 0 and key in lower) or \
                    (x.op == "min" and (key, x.b.value + 1) in upper):
                stripped = True
                return x.a
        return None
    out = E.transform(index, fn)
    return out if stripped else None

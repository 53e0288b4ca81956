"""A loop over a symbolic dim's last partial tile, which runs once or not at all, as an ``if``.

Splitting a symbolic extent N by a tile of W leaves a tail loop of extent
``(N + W - 1) // W - N // W``: 1 where W does not divide N, else 0. Emitted as a loop, LLVM
sees a trip count it cannot bound, keeps the loop's control and computes the tail's lane
mask inside it, once per row of the loop nest around it; as an ``if`` the body runs with the
loop's variable at 0, and the mask, which then reads only the dims, leaves the row loop.
(A softmax over rows of 10 with 16-lane partial results runs four such tails per row.)

    for (k: serial, 0, ((N + 15) // 16) - N // 16)  S(k)
      ->  if (((N + 15) // 16) - N // 16 > 0)  S(0)

Only extents over symbolic dims take this form, so static kernels are untouched.
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import For, IfThenElse, PrimFunc, Stmt, map_stmt
from tensorc.passes.loop.simplify import simplify


def single_tails_as_ifs(func: PrimFunc) -> PrimFunc:
    """Each loop whose extent is ``(x + c) // k - x // k`` (0 <= c < k), which is 0 or 1, as
    an ``if`` over its body at the loop's variable 0 (see the module docstring)."""
    if not func.dims:
        return func
    found = []

    def rewrite(s: Stmt) -> Stmt | None:
        if not isinstance(s, For) or s.kind != "serial" or not zero_or_one(s.extent):
            return None
        found.append(s)
        body = map_stmt(s.body, lambda e: E.substitute(e, {s.var: E.const(0)}))
        return IfThenElse(E.Compare("gt", s.extent, E.const(0)), body, None)
    body = map_stmt(func.body, fstmt=rewrite)
    # (the indices that read the variable fold again)
    return simplify(func.with_body(body)) if found else func


def zero_or_one(extent: E.Expr) -> bool:
    """Whether ``extent`` is ``(x + c) // k - x // k`` with 0 <= c < k (``min(a, max(a, b))``
    read as ``a``): a quantity that is 0 or 1 whatever x."""
    if arith.as_const_int(extent) is not None:
        return False
    terms = arith.to_affine(_min_of_own_max(extent), {})
    if terms.const or len(terms.terms) != 2:
        return False
    (up, c_up), (down, c_down) = sorted(terms.terms.values(), key=lambda t: -t[1])
    if (c_up, c_down) != (1, -1) or not all(_is_floordiv(t) for t in (up, down)):
        return False
    k = arith.as_const_int(up.b)
    if k is None or k <= 0 or arith.as_const_int(down.b) != k:
        return False
    shift = arith.simplify(up.a - down.a)
    c = arith.as_const_int(shift)
    return c is not None and 0 <= c < k


def _is_floordiv(e: E.Expr) -> bool:
    return isinstance(e, E.Binary) and e.op == "floordiv"


def _min_of_own_max(e: E.Expr) -> E.Expr:
    """``e`` with each ``min(a, max(a, b))`` (which is ``a``) replaced by ``a``."""
    def fold(x: E.Expr) -> E.Expr | None:
        if isinstance(x, E.Binary) and x.op == "min" and isinstance(x.b, E.Binary) and \
                x.b.op == "max" and E.same(x.b.a, x.a):
            return x.a
        return None
    return E.transform(e, fold)

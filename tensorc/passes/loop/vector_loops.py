"""Which vectorized loops codegen emits as vector code, and how wide.

A vectorized loop of constant extent n > 1 whose body is straight-line stores, guarded by
conditions affine in the loop variable (:func:`vectorizable`), gets ``vector_width``: the
lanes it runs on. An odd extent (13, 7) runs on the next power of two with the extra lanes
masked when its body may run with lanes masked off (:func:`predicable`): LLVM legalizes
odd-width vectors into scalar shuffles, power-of-two ones into whole registers. A guard in it
whose body may not run masked gets ``lane_by_lane`` (where the guard holds on only some lanes,
its body then runs one lane at a time). A loop without ``vector_width`` runs as a scalar loop.

>>> annotate_vector_loops(func)   # doctest: +SKIP
(for (j: vectorized, 0, 13) [vector_width=16])
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    For, IfThenElse, PrimFunc, Seq, Stmt, Store, map_stmt, stmt_exprs, walk_stmts,
)

_TRAPPING = ("div", "truncdiv", "floordiv", "truncmod", "floormod")


def vectorizable(s: Stmt, var: E.Var) -> bool:
    """Straight-line stores (possibly guarded) whose guards are affine in ``var``."""
    if isinstance(s, Store):
        # Every lane storing a var-dependent value to the same element is a reduction over
        # ``var`` (``acc = acc + x[var]``): the lanes depend on each other, so stay scalar.
        return any(E.uses_var(i, var) for i in s.indices) or not E.uses_var(s.value, var)
    if isinstance(s, Seq):
        return all(vectorizable(c, var) for c in s.stmts)
    if isinstance(s, IfThenElse):
        return s.else_case is None and affine_condition(s.cond, var) and \
            vectorizable(s.then_case, var)
    return False


def predicable(s: Stmt) -> bool:
    """Whether ``s`` can run with some vector lanes masked off: its memory accesses are
    masked, but arithmetic runs on every lane, so it must not trap (integer division)."""
    for st in walk_stmts(s):
        for e in stmt_exprs(st):
            for x in E.walk(e):
                if isinstance(x, E.Binary) and x.op in _TRAPPING and E.is_int(x.dtype) and \
                        not isinstance(x.b, E.Const):
                    return False
    return True


def affine_condition(c: E.Expr, var: E.Var) -> bool:
    """Whether ``c`` is a conjunction of integer comparisons affine in ``var``."""
    if not E.uses_var(c, var):
        return True
    if isinstance(c, E.Logical) and c.op == "and":
        return all(affine_condition(a, var) for a in c.args)
    if isinstance(c, E.Compare) and c.op in ("lt", "le", "gt", "ge") and E.is_int(c.a.dtype):
        return arith.linear_coeff(c.a - c.b, var) is not None
    return False


def pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def annotate_vector_loops(func: PrimFunc) -> PrimFunc:
    """Give each vectorized loop that runs as vector code its ``vector_width``, and its
    guards that cannot run masked ``lane_by_lane`` (see the module docstring)."""
    def visit(s: Stmt) -> Stmt | None:
        n = arith.as_const_int(s.extent) if isinstance(s, For) else None
        if not isinstance(s, For) or s.kind != "vectorized" or n is None or n <= 1 or \
                not vectorizable(s.body, s.var):
            return None
        s.annotations["vector_width"] = pow2_at_least(n) if predicable(s.body) else n
        for st in walk_stmts(s.body):
            if isinstance(st, IfThenElse) and not predicable(st.then_case):
                st.annotations["lane_by_lane"] = True
        return s
    return func.with_body(map_stmt(func.body, fstmt=visit))

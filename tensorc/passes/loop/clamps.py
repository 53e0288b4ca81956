"""Resolve the clamps of guarded loads (``E.guarded_clamp``): drop each one that the selects
around its load make a no-op, where the unclamped load stays inside its buffer; turn the
others into min/max.

A concat of slices of one tensor, as a detector head writes its box, objectness and class
parts, reads every input at a clamped index, so that the loads the concat's selects discard
stay in bounds:

    out[r, j] = select(j < 4, x[r, clamp(j, 0, 3)],
                       select(j < 5, sigmoid(x[r, 4 + clamp(j - 4, 0, 0)]),
                              sigmoid(x[r, 5 + clamp(j - 5, 0, 7)])))

Under ``j < 4`` the first clamp changes nothing, and under ``j >= 4 and j < 5`` the second
neither; without them each load reads ``x[r, j]`` for every j of the loop, which is inside x.
So all three loads are the one contiguous vector load of ``x[r, j]``, where the clamped
indices were gathers.
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import Allocate, For, IfThenElse, PrimFunc, Seq, Stmt, Store, seq

# a fact: an integer expression's inclusive interval, known where a select's branch runs
Facts = dict        # expr_key -> (expr, lo | None, hi | None)


def resolve_clamps(func: PrimFunc) -> PrimFunc:
    """Drop the guarded clamps that the conditions around them decide; the rest become
    min/max.

    >>> resolve_clamps(func)   # select(j < 4, X[clamp(j, 0, 3)], ...) -> select(j < 4, X[j], ...)
    ... # doctest: +SKIP
    """
    return func.with_body(_stmt(func.body, {}))


def _stmt(s: Stmt, ranges: dict) -> Stmt:
    if isinstance(s, For):
        inner = dict(ranges)
        n = arith.as_const_int(s.extent)
        if n is not None:
            inner[s.var] = (0, n - 1)
        return For(s.var, s.extent, s.kind, _stmt(s.body, inner), dict(s.annotations))
    if isinstance(s, Store):
        resolve = _Resolver(ranges)
        return Store(s.buffer, tuple(resolve(i, {}) for i in s.indices), resolve(s.value, {}))
    if isinstance(s, Seq):
        return seq(*[_stmt(c, ranges) for c in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _stmt(s.body, ranges))
    if isinstance(s, IfThenElse):
        resolve = _Resolver(ranges)
        return IfThenElse(resolve(s.cond, {}), _stmt(s.then_case, ranges),
                          None if s.else_case is None else _stmt(s.else_case, ranges))
    return s


class _Resolver:
    """Rewrites the expressions of one statement; an expression shared by several parents is
    rewritten once per set of facts."""

    def __init__(self, ranges: dict):
        self.ranges = ranges
        self.memo: dict[tuple[int, int], tuple[E.Expr, E.Expr]] = {}
        self.clamps: dict[int, tuple[E.Expr, bool]] = {}
        self.facts: list[Facts] = []      # keeps each facts dict (and so its id) alive

    def __call__(self, e: E.Expr, facts: Facts) -> E.Expr:
        if not self.has_clamp(e):
            return e
        key = (id(e), id(facts))
        if key not in self.memo:
            # the entry keeps e alive, so that its id is not reused by a later node
            self.memo[key] = (e, self.rewrite(e, facts))
        return self.memo[key][1]

    def rewrite(self, e: E.Expr, facts: Facts) -> E.Expr:
        if isinstance(e, E.Select):
            return E.Select(self(e.cond, facts),
                            self(e.true_value, self.assume(facts, e.cond, True)),
                            self(e.false_value, self.assume(facts, e.cond, False)))
        if isinstance(e, E.Load):
            return E.Load(e.source, [self.index(i, extent, facts)
                                     for i, extent in zip(e.indices, _shape(e))])
        kids = tuple(self(k, facts) for k in e.children())
        if _is_clamp(e):
            x, lo, hi = kids
            return E.minimum(E.maximum(x, lo), hi)
        return e.with_children(kids)

    def assume(self, facts: Facts, cond: E.Expr, holds: bool) -> Facts:
        out = _with(facts, cond, holds, self.ranges)
        self.facts.append(out)
        return out

    def index(self, index: E.Expr, extent: int | None, facts: Facts) -> E.Expr:
        """A load's index along an axis of ``extent``: its clamps dropped where ``facts``
        prove them no-ops and the index without them stays in [0, extent) over the loops'
        ranges."""
        ranges = self.ranges
        if facts and extent is not None:
            free = E.transform(index, lambda x: x.args[0] if _is_clamp(x) and _within(
                x.args[0], x.args[1].value, x.args[2].value, ranges, facts) else None)
            if free is not index:
                lo, hi = arith.const_bounds(arith.simplify(free, ranges), ranges)
                if lo is not None and hi is not None and 0 <= lo and hi < extent:
                    index = free
        return self(index, facts)

    def has_clamp(self, e: E.Expr) -> bool:
        known = self.clamps.get(id(e))
        if known is None:
            known = (e, _is_clamp(e) or any(self.has_clamp(k) for k in e.children()))
            self.clamps[id(e)] = known
        return known[1]


def _within(x: E.Expr, lo: int, hi: int, ranges: dict, facts: Facts) -> bool:
    """Whether ``x`` lies in [lo, hi] wherever ``facts`` hold."""
    bounds = dict(ranges)
    names = {}
    for key, (expr, flo, fhi) in facts.items():
        names[key] = E.Var(f"fact{len(names)}")
        elo, ehi = arith.const_bounds(expr, ranges)
        bounds[names[key]] = (_tighter(flo, elo, max), _tighter(fhi, ehi, min))
    x = E.transform(arith.simplify(x, ranges), lambda n: names.get(arith.expr_key(n)))
    xlo, xhi = arith.const_bounds(arith.simplify(x, bounds), bounds)
    return xlo is not None and xhi is not None and lo <= xlo and xhi <= hi


def _with(facts: Facts, cond: E.Expr, holds: bool, ranges: dict) -> Facts:
    """``facts`` and what ``cond`` being ``holds`` adds: intervals of the integer expressions
    it compares with constants."""
    out = dict(facts)
    for expr, lo, hi in _intervals(cond, holds):
        expr = arith.simplify(expr, ranges)
        key = arith.expr_key(expr)
        _, olo, ohi = out.get(key, (expr, None, None))
        out[key] = (expr, _tighter(lo, olo, max), _tighter(hi, ohi, min))
    return out


_FLIP = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}
_MIRROR = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq"}


def _intervals(cond: E.Expr, holds: bool):
    """(expr, lo, hi) for each comparison of an integer expression with a constant that
    ``cond == holds`` implies."""
    if isinstance(cond, E.Logical):
        if cond.op == "not":
            yield from _intervals(cond.args[0], not holds)
        elif (cond.op == "and") == holds:      # a conjunction holds, a disjunction fails
            for a in cond.args:
                yield from _intervals(a, holds)
        return
    if not isinstance(cond, E.Compare) or not E.is_int(cond.a.dtype):
        return
    op, a, b = cond.op, cond.a, cond.b
    if isinstance(a, E.Const) and not isinstance(b, E.Const):
        op, a, b = _MIRROR.get(op), b, a
    if op is None or not isinstance(b, E.Const):
        return
    if not holds:
        if op == "eq" or op not in _FLIP:
            return
        op = _FLIP[op]
    k = b.value
    if op in ("lt", "le", "gt", "ge", "eq"):
        yield {"lt": (a, None, k - 1), "le": (a, None, k), "gt": (a, k + 1, None),
               "ge": (a, k, None), "eq": (a, k, k)}[op]


def _tighter(a, b, pick):
    return b if a is None else a if b is None else pick(a, b)


def _is_clamp(e: E.Expr) -> bool:
    return isinstance(e, E.Call) and e.name == "clamp"


def _shape(load: E.Load) -> list[int | None]:
    shape = tuple(getattr(load.source, "shape", ()))
    if len(shape) != len(load.indices):
        return [None] * len(load.indices)
    return [int(d) for d in shape]

"""Split loops of symbolic extent into guard-free whole tiles and a guarded tail.

A loop over a symbolic dim is split by a constant factor, and lowering guards every element
of it with ``x * factor + inner < N``: the guard holds for every inner iteration until the
last, partial tile. Where a comparison inside a serial or parallel loop is affine in the
loop's variable with a positive coefficient and its other terms are bounded by the loops
inside, it holds for every inner iteration below a cut computed at run time
(``N // factor`` for the usual guard). The loop runs the pieces below the cut with the
comparison replaced by true, then the rest as it was:

    for (x, 0, (N + 7) // 8)  for (y, 0, 8)  if (x*8 + y < N) ...
      ->  for (x, 0, N // 8)  for (y, 0, 8)  ...
          for (x', 0, (N + 7) // 8 - N // 8)  for (y, 0, 8)  if ((x' + N // 8)*8 + y < N) ...

A parallel loop keeps one loop whose iterations branch on the cut (as partition.py does for
constant cuts: one team, no second wait).

The tail of a split by a small factor F runs at most one tile, whose guarded rows are the
dim's remainder ``N % F``: it becomes one guard-free copy per remainder, each with its rows
unrolled (``N`` written as ``q*F + c`` decides every guard), chosen at run time. A guarded
register tile of 6 rows computing one row took 5x the unguarded row (a decode step's
projection). The copies' loops of constant extent can be kept rolled (ROLLED_COPIES: LLVM
unrolls each copy's reduction whole, most of a symbolic matmul's code), but that is off: a
rolled copy ran the worst sweep shapes 7-19% slower. partition.py cuts at constant points; this pass
only fires on comparisons that involve a symbolic dim, so static kernels are untouched.
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.bounds import SYMBOLIC_MAX, relaxed_interval
from tensorc.ir.loop import (
    Allocate, For, IfThenElse, PrimFunc, Seq, Stmt, Store, map_stmt, seq,
)
from tensorc.passes.loop import partition
from tensorc.passes.loop.padded_loads import tighten_padded_clamps
from tensorc.passes.loop.partition import _comparisons, _conditions, _loop_ranges
from tensorc.passes.loop.simplify import simplify, simplify_stmt

SPLIT_KINDS = ("serial", "parallel")
# the largest split factor whose remainders get a copy of the tail each
MAX_TAIL_CASES = 8
# Whether the copies' loops of constant extent stay rolled (less code for LLVM, 10-20% of a
# symbolic compile). Off: where a copy is most of a kernel's work (gpt at batch 31, seq 3,
# past 7; an OCR line of width 4; bert at 7 x 97) the rolled reductions ran the whole model
# 9-19% slower (the same compile both ways, alternating, quiet machine); at gpt 127,17,67 they
# were 8% faster. benchmarks/tail_copies.py times both.
ROLLED_COPIES = False


def split_symbolic_tails(func: PrimFunc) -> PrimFunc:
    """Split each loop at the run-time point where a symbolic guard inside it stops holding.

    >>> func = split_symbolic_tails(func)    # doctest: +SKIP
    """
    if not func.dims:
        return func
    dims = {v for v in func.dims}
    body = _drop_held_guards(func.body, [], dims)
    return simplify(func.with_body(_visit(body, dims)))


def _drop_held_guards(s: Stmt, loops: list[tuple[E.Var, E.Expr]], dims: set[E.Var]) -> Stmt:
    """``s`` with the guards that hold at every iteration of the loops around them made
    true: a comparison ``a < b`` whose ``a`` never decreases as the loops' variables grow and
    whose ``b`` reads none of them holds everywhere where it holds with each variable at its
    last value (``extent - 1``, an expression of the dims). The ranges of simplification
    cannot see that ``fused // 4 < batch`` for ``fused`` in ``[0, batch * 4)``."""
    if isinstance(s, For):
        body = _drop_held_guards(s.body, [*loops, (s.var, s.extent)], dims)
        return For(s.var, s.extent, s.kind, body, dict(s.annotations))
    if isinstance(s, Seq):
        return seq(*[_drop_held_guards(c, loops, dims) for c in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _drop_held_guards(s.body, loops, dims), dict(s.annotations))
    if isinstance(s, IfThenElse):
        last = {v: arith.simplify(extent - 1) for v, extent in loops}
        known = {d: (0, SYMBOLIC_MAX) for d in dims}

        first = {v: E.const(0) for v, _ in loops}

        def held(x):
            if not isinstance(x, E.Compare):
                return None
            if x.op == "lt" and isinstance(x.a, E.Binary) and x.a.op == "floormod" and \
                    E.same(x.a.b, x.b):
                return E.Const(True, "bool")        # x % n < n (the loop runs where n > 0)
            if x.op == "ge" and (E.free_vars(x.a) | E.free_vars(x.b)) & dims and \
                    not E.free_vars(x.b) & first.keys() and arith.never_decreases(x.a) and \
                    E.free_vars(x.a) <= first.keys() | dims:
                at_start = arith.simplify(E.Compare("ge", E.substitute(x.a, first), x.b),
                                          known)
                if isinstance(at_start, E.Const) and at_start.value:
                    return E.Const(True, "bool")
            if x.op == "lt" and \
                    (E.free_vars(x.a) | E.free_vars(x.b)) & dims and \
                    not E.free_vars(x.b) & last.keys() and arith.never_decreases(x.a) and \
                    E.free_vars(x.a) <= last.keys() | dims:
                at_end = arith.simplify(E.Compare("lt", E.substitute(x.a, last), x.b), known)
                if isinstance(at_end, E.Const) and at_end.value:
                    return E.Const(True, "bool")
            return None
        return IfThenElse(E.transform(s.cond, held),
                          _drop_held_guards(s.then_case, loops, dims),
                          None if s.else_case is None else
                          _drop_held_guards(s.else_case, loops, dims), dict(s.annotations))
    return s


def _visit(s: Stmt, dims: set[E.Var]) -> Stmt:
    if isinstance(s, For):
        if s.kind in SPLIT_KINDS:
            cut = _cut(s, dims)
            if cut is not None:
                return _split(s, *cut, dims)
        return For(s.var, s.extent, s.kind, _visit(s.body, dims), dict(s.annotations))
    if isinstance(s, Seq):
        return seq(*[_visit(c, dims) for c in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _visit(s.body, dims), dict(s.annotations))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, _visit(s.then_case, dims),
                          None if s.else_case is None else _visit(s.else_case, dims),
                          dict(s.annotations))
    return s


def _cut(loop: For, dims: set[E.Var]) -> tuple[E.Expr, E.Compare] | None:
    """The first run-time point below which a comparison inside ``loop`` that involves a
    symbolic dim holds for every iteration of the loops inside (clamped to the loop's
    range), or None."""
    inner = _loop_ranges(loop.body, {})
    inner.pop(loop.var, None)
    # guards first (a split's), then selects (a padding's border at a symbolic width)
    for cond in [*_conditions(loop.body, selects=False),
                 *_select_conditions(loop.body)]:
        for cmp in _comparisons(cond):
            point = _point(cmp, loop, inner, dims)
            if point is not None:
                return point, cmp
    return None


def _point(cmp: E.Compare, loop: For, inner: dict, dims: set[E.Var]) -> E.Expr | None:
    """Where ``cmp`` stops holding for all inner iterations: the v with ``coeff * v + rest
    + hi < 0`` exactly below it."""
    if cmp.op not in ("lt", "le", "gt") or \
            not (E.free_vars(cmp.a) | E.free_vars(cmp.b)) & dims:
        return None
    form = _linear_form(cmp, loop, inner)
    if form is None:
        return None
    coeff, rest, _, hi = form
    # ``rest`` may read outer loops' variables (a tile's rows start at its block's): the
    # point is then computed where the loop starts, as its extent is
    # v < (-rest - hi - 1) // coeff + 1  =  (-rest + coeff - hi - 1) // coeff
    top = arith.simplify(E.const(0) - rest)
    point = arith.simplify((top + (coeff - hi - 1)) // coeff)
    known = {d: (0, SYMBOLIC_MAX) for d in dims}
    if E.free_vars(top) - dims:
        known = {}      # an outer loop's variable in it: no lower bound known
    if hi > coeff - 1 or arith.const_bounds(top, known)[0] is None or \
            arith.const_bounds(top, known)[0] < 0:
        point = E.maximum(point, E.const(0))
    # the usual guard of a split by coeff: the loop runs ceil(top / coeff) times, and the
    # point floor(top / coeff) never passes it
    ceil = arith.simplify((top + (coeff - 1)) // coeff)
    if not (hi == coeff - 1 and E.same(ceil, arith.simplify(loop.extent))):
        point = E.minimum(point, loop.extent)
    # dims are never negative: a concat's cut at past in past + seq is past, not the min
    # of the two (which left the second piece testing which input each row reads)
    return arith.simplify(point, {d: (0, SYMBOLIC_MAX) for d in dims})


def _split(loop: For, point: E.Expr, cmp: E.Compare, dims: set[E.Var]) -> Stmt:
    inner = _loop_ranges(loop.body, {})
    inner.pop(loop.var, None)

    held: list[E.Compare] = []

    def holds(e: E.Expr) -> E.Expr:
        # every comparison that holds below the same point (the init, update and store
        # nests of one stage each test the same guard with their own loop variables)
        def fn(x):
            if isinstance(x, E.Compare):
                p = _point(x, loop, inner, dims)
                if p is not None and E.same(p, point):
                    held.append(x)
                    return E.Const(True, "bool")
            return None
        return _drop_clamps(E.transform(e, fn), held)

    whole = map_stmt(loop.body, holds)
    if loop.kind == "parallel":
        # where the loop runs ceil(X / F) times and the cut is X // F, the other branch runs
        # the last iteration only: it reads the cut for the loop's variable, so that the
        # loops inside see a count of the dims (a row block's tiles past the rows' end)
        last = loop.body if not _last_only(loop.extent, point) else \
            map_stmt(loop.body, lambda e: E.substitute(e, {loop.var: point}))
        body = IfThenElse(E.Compare("lt", loop.var, point), _visit(whole, dims),
                          _remainder_cases(loop.body, loop.var, point, cmp, dims) or
                          _count_cases(loop, point, cmp, dims) or _visit(last, dims))
        return For(loop.var, loop.extent, loop.kind, body, dict(loop.annotations))
    main = _visit(For(loop.var, point, loop.kind, whole, dict(loop.annotations)), dims)
    var = E.Var(loop.var.name)
    tail_body = map_stmt(loop.body, lambda e: E.substitute(e, {loop.var: var + point}))
    extent = arith.simplify(loop.extent - point)
    cases = _remainder_cases(loop.body, loop.var, point, cmp, dims, extent) or \
        _count_cases(loop, point, cmp, dims, serial=True)
    if cases is not None:
        # the copies run the tail tile where the loop has one: a piece of a loop that
        # partition.py cut at a constant point (a padded row's first tile) is empty at
        # small dims, while the dims' remainder is not 0
        runs = arith.simplify(E.Compare("lt", point, loop.extent))
        if not (isinstance(runs, E.Const) and runs.value):
            cases = IfThenElse(runs, cases, None)
        return seq(main, cases)
    end = _end(cmp, loop, inner, dims)
    if end is not None and _stores_end(loop.body, loop, inner, dims, end):
        # iterations from ``end`` on store nothing (a row block's tiles past the rows' end,
        # when the block's tile count is a constant): the tail stops there
        extent = arith.simplify(E.minimum(loop.extent, E.maximum(end, point)) - point)
    tail = For(var, extent, loop.kind, _visit(tail_body, dims), dict(loop.annotations))
    return seq(main, tail)


def _end(cmp: E.Compare, loop: For, inner: dict, dims: set[E.Var]) -> E.Expr | None:
    """Where ``cmp`` (as ``coeff * v + rest + [lo, hi] < 0``) stops holding for every inner
    iteration: the least v with ``coeff * v + rest + lo >= 0``; None where it is not of that
    form."""
    form = _linear_form(cmp, loop, inner) if cmp.op in ("lt", "le", "gt") else None
    if form is None:
        return None
    coeff, rest, lo, _ = form
    return arith.simplify((E.const(coeff - 1 - lo) - rest) // coeff)


def _linear_form(cmp: E.Compare, loop: For, inner: dict) -> tuple | None:
    """``cmp`` as ``coeff * v + rest + [lo, hi] < 0`` over the loop's variable v (coeff > 0,
    the inner loops' variables relaxed into [lo, hi]): (coeff, rest, lo, hi), or None where
    it is not of that form or ``rest`` reads an inner loop of symbolic extent (no bound then
    holds for all its iterations)."""
    lin = arith.linear_coeff(_below_zero(cmp), loop.var)
    if lin is None or lin[1] <= 0:
        return None
    base, coeff = lin
    relaxed = {v: r for v, r in inner.items() if E.uses_var(base, v)}
    bounded = relaxed_interval(arith.simplify(base), relaxed, {})
    if bounded is None:
        return None
    rest, lo, hi = bounded
    if E.free_vars(rest) & _inner_vars(loop.body):
        return None
    return coeff, rest, lo, hi


def _stores_end(body: Stmt, loop: For, inner: dict, dims: set[E.Var], end: E.Expr) -> bool:
    """Whether every store of ``body`` into a buffer it does not allocate itself is under a
    guard that fails for every inner iteration from ``loop``'s iteration ``end`` on."""
    def ends(cond: E.Expr) -> bool:
        for c in _comparisons(cond):
            e = _end(c, loop, inner, dims)
            if e is not None and E.same(e, end):
                return True
        return False

    def visit(s: Stmt, local: frozenset, guarded: bool) -> bool:
        if isinstance(s, Store):
            return guarded or s.buffer in local
        if isinstance(s, Allocate):
            return visit(s.body, local | {s.buffer}, guarded)
        if isinstance(s, IfThenElse):
            inside = guarded or ends(s.cond)
            return visit(s.then_case, local, inside) and \
                (s.else_case is None or visit(s.else_case, local, guarded))
        return all(visit(c, local, guarded) for c in s.children())
    return visit(body, frozenset(), False)


def _inner_vars(s: Stmt) -> set[E.Var]:
    out, stack = set(), [s]
    while stack:
        x = stack.pop()
        if isinstance(x, For):
            out.add(x.var)
        stack.extend(x.children())
    return out


def _select_conditions(s: Stmt) -> list[E.Expr]:
    conds = _conditions(s, selects=True)
    guards = {id(c) for c in _conditions(s, selects=False)}
    return [c for c in conds if id(c) not in guards]


def _drop_clamps(e: E.Expr, held: list[E.Compare]) -> E.Expr:
    """``e`` without the upper clamps ``min(x, b - 1)`` (``x`` itself, or a lower clamp of
    it to 0) that a held comparison ``x < b`` makes no-ops: a padding's load clamps its
    index into the input, and where the border test holds, the clamp is what keeps the
    load a gather."""
    bounds = [(arith.expr_key(arith.simplify(c.a)), arith.simplify(c.b - 1))
              for c in held if c.op == "lt"]
    if not bounds:
        return e

    def fn(x):
        if isinstance(x, E.Binary) and x.op == "min":
            inner = x.a
            if isinstance(inner, E.Binary) and inner.op == "max" and \
                    isinstance(inner.b, E.Const) and inner.b.value <= 0:
                inner = inner.a         # max(x, c) <= b - 1 too, where c <= 0 <= b - 1
            key, top = arith.expr_key(arith.simplify(inner)), arith.simplify(x.b)
            if any(k == key and E.same(top, t) for k, t in bounds):
                return fn(x.a) or x.a
        return None
    return E.transform(e, fn)


def _remainder_cases(body: Stmt, var: E.Var, at: E.Expr, cmp: E.Compare, dims: set[E.Var],
                     extent: E.Expr | None = None) -> Stmt | None:
    """``body`` run at ``var = at``, the tail tile of a split by a factor F whose guard is
    ``cmp`` (``... + F * var < N``), as one copy per remainder c = N % F in 1..F-1, with N
    written q*F + c: the copies' guards are constant comparisons of the rows' loop variables
    (partitioned away), their indices read q as N // F. None where the guard is not of that
    form, F is over MAX_TAIL_CASES, or a copy keeps a guard on N. ``extent``: the tail
    loop's, which must be 1 where the remainder is not 0 and 0 where it is."""
    split = _tail_split(cmp, var)
    if split is None:
        return None
    base, factor = split
    dim = next((d for d in sorted(dims & E.free_vars(base), key=lambda v: v.name)
                if (arith.linear_coeff(base, d) or (None, 0))[1] == -1), None)
    if dim is None:
        return None
    # the guarded extent N = dim - off (a valid conv's output row: its padded input's width
    # less the window's), its remainder c = N % F
    off = _offset(arith.simplify(base + dim), _inner_vars(body))
    q = E.Var(f"{dim.name}.q")
    ranges = {q: (0, SYMBOLIC_MAX)}
    if extent is not None:
        for c in range(factor):
            runs = arith.simplify(E.substitute(extent, {dim: q * factor + c + off}), ranges)
            if arith.as_const_int(runs) != (1 if c else 0):
                return None
    at_tile = map_stmt(body, lambda e: E.substitute(e, {var: at}))
    cases = None
    for c in range(factor - 1, 0, -1):
        copy = map_stmt(at_tile, lambda e, c=c: E.substitute(e, {dim: q * factor + c + off}))
        copy = simplify_stmt(partition._visit(simplify_stmt(copy, ranges) or seq(), ranges)
                             or seq(), ranges)
        if copy is None:
            copy = seq()
        if any(dim in E.free_vars(x) or q in E.free_vars(x)
               for cond in _conditions(copy, selects=True) for x in _comparisons(cond)):
            return None     # a guard on N left (a load's index may read q: not a guard)
        # a padded load's clamp to N - 1 is one to c - 1 past q*F, which codegen loads
        # masked (with N as q*F + c, before q is read back as N // F)
        copy = _rolled(tighten_padded_clamps(copy))
        copy = map_stmt(copy, lambda e: E.substitute(e, {q: (dim - off) // factor}))
        remainder = E.Compare("eq", (dim - off) % factor, E.const(c))
        cases = IfThenElse(remainder, copy, cases)
    return cases


def _offset(rest: E.Expr, inner: set[E.Var]) -> int:
    """The constant term of ``rest`` (a guard's terms other than the split's and the dim's),
    where every variable it reads is a loop inside the tile (each starts at 0); else 0."""
    if E.free_vars(rest) - inner:
        return 0
    const = arith.as_const_int(arith.simplify(
        E.substitute(rest, {v: E.const(0) for v in E.free_vars(rest)})))
    return const or 0


def _last_only(extent: E.Expr, point: E.Expr) -> bool:
    """Whether ``extent`` is ``(X + F - 1) // F`` and ``point`` is ``X // F`` (F a constant):
    the loop's iterations from ``point`` on are its last one at most."""
    extent, point = arith.simplify(extent), arith.simplify(point)
    if not (isinstance(extent, E.Binary) and extent.op == "floordiv" and
            isinstance(extent.b, E.Const) and isinstance(point, E.Binary) and
            point.op == "floordiv" and isinstance(point.b, E.Const) and
            point.b.value == extent.b.value and extent.b.value > 0):
        return False
    return E.same(arith.simplify(extent.a - (extent.b.value - 1)), arith.simplify(point.a))


def _count_cases(loop: For, point: E.Expr, cmp: E.Compare, dims: set[E.Var],
                 serial: bool = False) -> Stmt | None:
    """:func:`_remainder_cases` where the guarded count N is any expression of the dims (a
    strided conv's output row, (W - 3) // 2 + 1): the loop runs ceil(N / F) tiles and its
    tail tile, v = N // F, runs where N % F = c > 0, each guard ``F*v + inner - N < 0`` then
    ``inner < c``, which the copy's own loops decide. None where a guard is not of that
    form, the loop's extent is not ceil(N / F), or a copy keeps any guard."""
    inner = _loop_ranges(loop.body, {})
    inner.pop(loop.var, None)
    split = _guarded_count(cmp, loop.var, inner, dims)
    if split is None:
        return None
    factor, count, _ = split
    # (a serial loop may run further, where its iterations store nothing: a row block's
    # constant count of tiles past the rows' end; its tail then runs the one tile)
    ceil = arith.simplify((count + (factor - 1)) // factor)
    if not E.same(arith.simplify(loop.extent), ceil) and \
            not (serial and _stores_end(loop.body, loop, inner, dims, ceil)):
        return None
    tile = arith.simplify(count // factor)

    # each guard the tail tile decides becomes inner < c, c a placeholder for the remainder
    # (the guards are found once, then each remainder's copy substitutes its value)
    remainder = E.Var("remainder")

    def decided(x):
        if isinstance(x, E.Compare):
            own = _guarded_count(x, loop.var, inner, dims)
            if own is not None and own[0] == factor and E.same(own[1], count) and \
                    E.same(_point(x, loop, inner, dims), point):
                return E.Compare("lt", own[2], remainder)
        return None

    marked = map_stmt(loop.body, lambda e: E.substitute(E.transform(e, decided),
                                                        {loop.var: tile}))
    cases = None
    for c in range(factor - 1, 0, -1):
        copy = map_stmt(marked, lambda e, c=c: E.substitute(e, {remainder: E.const(c)}))
        copy = simplify_stmt(partition._visit(simplify_stmt(copy, {}) or seq(), {}) or seq(),
                             {}) or seq()
        if list(_conditions(copy, selects=False)):
            return None     # a guard left (inside a vectorized loop: no copy is worth it)
        # a padded load's clamp to N - 1 is one to c - 1 past the tile's start, which codegen
        # loads masked (N is F * tile + c here)
        copy = _rolled(tighten_padded_clamps(copy, (count, factor * tile + c)))
        cases = IfThenElse(E.Compare("eq", count % factor, E.const(c)), copy, cases)
    return cases


def _below_zero(cmp: E.Compare) -> E.Expr:
    """``cmp`` (lt, le or gt) as ``diff < 0``: its ``diff``."""
    return cmp.a - cmp.b if cmp.op == "lt" else \
        cmp.a - cmp.b - 1 if cmp.op == "le" else cmp.b - cmp.a


def _tail_split(cmp: E.Compare, var: E.Var) -> tuple[E.Expr, int] | None:
    """(base, F) where ``cmp`` is ``F*var + base < 0`` with 1 < F <= MAX_TAIL_CASES (a
    split's guard small enough for a copy per remainder); else None."""
    lin = arith.linear_coeff(_below_zero(cmp), var)
    return lin if lin is not None and 1 < lin[1] <= MAX_TAIL_CASES else None


def _guarded_count(cmp: E.Compare, var: E.Var, inner: dict, dims: set[E.Var]):
    """(F, N, inner) where ``cmp`` is ``F*var + inner < N``, N an expression of the dims and
    constants, inner a sum over the loops inside ``var`` in [0, F - 1]; else None."""
    if cmp.op not in ("lt", "le", "gt"):
        return None
    split = _tail_split(cmp, var)
    if split is None:
        return None
    base, factor = split
    relaxed = {v: r for v, r in inner.items() if E.uses_var(base, v)}
    bounded = relaxed_interval(arith.simplify(base), relaxed, {})
    if bounded is None:
        return None
    rest, lo, hi = bounded      # base = rest + [lo, hi], the constant terms in lo and hi
    if hi - lo != factor - 1 or not E.free_vars(rest) & dims or E.free_vars(rest) - dims:
        return None
    count = arith.simplify(E.const(0) - rest - lo)
    return factor, count, arith.simplify(base + count)


def _rolled(s: Stmt) -> Stmt:
    """``s`` (a remainder's copy) with its serial loops of constant extent marked for codegen
    to keep rolled. LLVM unrolls such a loop whole (a register tile's reduction over 16 or
    64 steps): in each of F - 1 copies of each variant, it made most of a kernel's code. A
    copy runs one partial tile per block, and a tile of a few rows waits on its accumulators'
    FMA latency, loop or no loop."""
    def mark(x: Stmt) -> Stmt | None:
        if ROLLED_COPIES and isinstance(x, For) and x.kind == "serial" and \
                (arith.as_const_int(x.extent) or 0) > 1:
            return For(x.var, x.extent, x.kind, x.body, {**x.annotations, "rolled": True})
        return None
    return map_stmt(s, fstmt=mark)

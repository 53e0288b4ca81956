"""Half-width vectors for a symbolic dim's last tile when its remainder fits half a tile.

A tile of W lanes (two registers: a GEMM's column panel) over a symbolic dim ends in a
tile whose lanes are guarded, ``if (j + base < N)``: every vector of it runs both registers,
masked, whatever the remainder. Where the remainder ``N - base`` is at most W / 2, the
upper register holds no lane that runs. The loop around such a tile runs its body twice
over, chosen at run time: vectors of W / 2 lanes where the remainder fits, else as it was.

    for (x, ...)  ... for (j: vectorized, 0, 16)  if (j + x*16 + c < N) S
      ->  for (x, ...)
            if (N - x*16 - c <= 8)  ... for (j: vectorized, 0, 8)  if (j + x*16 + c < N) S
            else  ... for (j: vectorized, 0, 16)  if (j + x*16 + c < N) S

The guards stay (they drop the lanes past the remainder within the half). Where the
remainder passes half a tile, each vector loop runs as two of half the lanes: the lower
half, all of whose lanes run, without the bound, the upper half under it. Only guards
over a symbolic dim are read, so static kernels are untouched. (QK^T of a decode step
over a cache of 40, a remainder of 8 in 16-lane panels: the last panel's accumulators
filled both registers and spilled.)

A remainder that reads only dims (the last tile of a parallel loop over a map's positions,
which keeps its tail in the loop's last iteration: symbolic_tails.py) is the same in every
iteration: the smallest statement holding all of its vector loops branches once, and its
narrowed copy narrows again, to a quarter of the tile, where the remainder fits that (a
detector head's 1x1 conv over a 2x2 map ran 16-lane tiles, masked to 4 lanes, at 5x the
static build's 4-lane tiles).

>>> narrow_symbolic_tails(func)   # doctest: +SKIP
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.bounds import SYMBOLIC_MAX
from tensorc.ir.loop import Allocate, For, IfThenElse, PrimFunc, Seq, Stmt, map_stmt, seq
from tensorc.passes.loop.simplify import dim_ranges

# the narrowest tile that is halved (16 float lanes: two AVX2 registers)
MIN_LANES = 16
# ... and the narrowest that a remainder of dims alone narrows again (to SSE's 4 lanes)
MIN_INVARIANT_LANES = 8


def narrow_symbolic_tails(func: PrimFunc) -> PrimFunc:
    """Give each loop whose body holds guarded tiles of a symbolic remainder a half-width
    copy of its body (see the module docstring)."""
    if not func.dims:
        return func
    dims = set(func.dims)
    ranges = dim_ranges(func)

    def narrowed(s: Stmt) -> Stmt | None:
        if not isinstance(s, For):
            return None
        found = _shared_remainder(s.body, s.var, dims)
        if found is None:
            return None
        rest, width = found
        fits = E.Compare("le", rest, E.const(width // 2))
        # (a variant over small dims, whose remainder always fits: the narrowed body alone)
        decided = arith.simplify(fits, {**ranges, s.var: (0, SYMBOLIC_MAX)})
        if isinstance(decided, E.Const) and decided.value:
            body = _narrowed(s.body, rest, width)
        else:
            body = IfThenElse(fits, _narrowed(s.body, rest, width),
                              _halved(s.body, rest, width))
        return For(s.var, s.extent, s.kind, body, dict(s.annotations))
    # inner loops first: a loop's body is already narrowed where it is looked at
    body = map_stmt(func.body, fstmt=narrowed)
    return func.with_body(_narrow_invariant(body, dims, ranges))


def _narrow_invariant(s: Stmt, dims: set, ranges: dict) -> Stmt:
    """``s`` with the smallest statement that holds every guarded vector loop of a
    remainder R over dims alone run as ``if (R <= W / 2) narrowed else halved`` (narrowed
    again inside where W / 2 is at least MIN_INVARIANT_LANES)."""
    found = _invariant_remainders(s, dims)
    if not found:
        return s
    kids = [c for c in s.children() if _invariant_remainders(c, dims)]
    if len(found) > 1 or len(kids) == 1 and not (isinstance(s, For) and
                                                   s.kind == "vectorized"):
        # descend: into the one child that holds them all, or into each where they differ
        return _rebuilt(s, lambda c: _narrow_invariant(c, dims, ranges))
    rest, width = found[0]
    fits = arith.simplify(E.Compare("le", rest, E.const(width // 2)), ranges)
    narrow = _narrowed(s, rest, width)
    if width // 2 >= MIN_INVARIANT_LANES:
        narrow = _narrow_invariant(narrow, dims, ranges)
    if isinstance(fits, E.Const):
        return narrow if fits.value else (_halved(s, rest, width) if width >= MIN_LANES
                                          else s)
    other = _halved(s, rest, width) if width >= MIN_LANES else s
    return IfThenElse(fits, narrow, other)


def _invariant_remainders(s: Stmt, dims: set) -> list[tuple[E.Expr, int]]:
    """The distinct (R, W) of the guarded vector loops in ``s`` whose R reads dims only."""
    out: list[tuple[E.Expr, int]] = []
    for loop in _vector_loops(s):
        width = arith.as_const_int(loop.extent)
        if width is None or width < MIN_INVARIANT_LANES:
            continue
        found = _remainder(loop, MIN_INVARIANT_LANES)
        if found is None:
            continue
        free = E.free_vars(found[0])
        if free and free <= dims and not any(E.same(found[0], r) and found[1] == w
                                             for r, w in out):
            out.append(found)
    return out


def _rebuilt(s: Stmt, fn) -> Stmt:
    """``s`` with ``fn`` applied to each of its child statements."""
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, fn(s.body), dict(s.annotations))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, fn(s.body), dict(s.annotations))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, fn(s.then_case),
                          None if s.else_case is None else fn(s.else_case),
                          dict(s.annotations))
    if isinstance(s, Seq):
        return seq(*[fn(c) for c in s.stmts])
    return s


def _remainder(loop: For, least: int = MIN_LANES) -> tuple[E.Expr, int] | None:
    """(R, W) where ``loop`` is a vector loop over W lanes (a power of two, at least
    ``least``) whose whole body is under a guard with the conjunct ``j < R`` (``j`` the
    loop's variable), R free of j; else None."""
    found = _bound_conjunct(loop, least)
    return None if found is None else found[:2]


def _bound_conjunct(loop: For, least: int = MIN_LANES) -> tuple[E.Expr, int, E.Expr] | None:
    """:func:`_remainder`'s (R, W) and the conjunct that bounds j by R."""
    width = arith.as_const_int(loop.extent)
    if loop.kind != "vectorized" or width is None or width < least or \
            width & (width - 1) or not isinstance(loop.body, IfThenElse) or \
            loop.body.else_case is not None:
        return None
    for c in _conjuncts(loop.body.cond):
        if not isinstance(c, E.Compare) or c.op != "lt":
            continue
        lin = arith.linear_coeff(c.a - c.b, loop.var)
        if lin is not None and lin[1] == 1:
            return arith.simplify(E.const(0) - lin[0]), width, c
    return None


def _conjuncts(c: E.Expr) -> list[E.Expr]:
    if isinstance(c, E.Logical) and c.op == "and":
        return [x for a in c.args for x in _conjuncts(a)]
    return [c]


def _vector_loops(s: Stmt) -> list[For]:
    found = []

    def visit(x: Stmt) -> None:
        if isinstance(x, For) and x.kind == "vectorized":
            found.append(x)
        return None
    map_stmt(s, fstmt=visit)
    return found


def _shared_remainder(body: Stmt, var: E.Var, dims: set) -> tuple[E.Expr, int] | None:
    """(R, W) shared by the guarded vector loops of ``body`` whose remainder R reads
    ``var`` and a symbolic dim and nothing bound inside ``body``; None where there are none
    or they differ."""
    shared = None
    for loop in _vector_loops(body):
        found = _remainder(loop)
        if found is None:
            continue
        rest, width = found
        free = E.free_vars(rest)
        if var not in free or not free & dims or not free <= dims | {var}:
            continue
        if shared is not None and (shared[1] != width or not E.same(shared[0], rest)):
            return None
        shared = (rest, width)
    return shared


def _narrowed(body: Stmt, rest: E.Expr, width: int) -> Stmt:
    """``body`` with its vector loops of remainder ``rest`` over ``width`` lanes run over
    half as many."""
    def visit(s: Stmt) -> Stmt | None:
        if isinstance(s, For):
            found = _remainder(s, MIN_INVARIANT_LANES)
            if found is not None and found[1] == width and E.same(found[0], rest):
                return For(s.var, E.const(width // 2), s.kind, s.body, dict(s.annotations))
        return None
    return map_stmt(body, fstmt=visit)


def _halved(body: Stmt, rest: E.Expr, width: int) -> Stmt:
    """``body`` (run where the remainder ``rest`` passes half of ``width``) with each of its
    vector loops of that remainder as two of half the lanes: the lower half, every lane of
    which runs, without the bound; the upper half under it."""
    half = width // 2

    def visit(s: Stmt) -> Stmt | None:
        if not isinstance(s, For):
            return None
        found = _bound_conjunct(s)
        if found is None or found[1] != width or not E.same(found[0], rest):
            return None
        guard = s.body
        others = [c for c in _conjuncts(guard.cond) if c is not found[2]]
        lower = guard.then_case if not others else \
            IfThenElse(_conjunction(others), guard.then_case, None, dict(guard.annotations))
        var = E.Var(s.var.name)
        upper = map_stmt(guard, lambda e: E.substitute(e, {s.var: var + half}))
        return seq(For(s.var, E.const(half), s.kind, lower, dict(s.annotations)),
                   For(var, E.const(half), s.kind, upper, dict(s.annotations)))
    return map_stmt(body, fstmt=visit)


def _conjunction(parts: list[E.Expr]) -> E.Expr:
    out = parts[0]
    for p in parts[1:]:
        out = E.Logical("and", out, p)
    return out

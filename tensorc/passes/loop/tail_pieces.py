"""A symbolic split's tail tile run as pieces of power-of-two rows, not one copy per remainder.

The tail tile of a split by F over a symbolic count N holds c = N % F rows. Given a copy
for each c in 1..F-1 (symbolic_tails.py's remainder copies), a tile whose rows are unrolled
is emitted F - 1 times with 1 + 2 + ... + F - 1 rows in all (15 rows' code for F = 6,
times each variant and column tail). The same rows run as the binary digits of c: a piece of
4 rows where c has the bit 4, then one of 2, then one of 1, each starting where the ones
before it stopped, 7 rows' code for F = 6 or 8. A piece of w rows is the tile with its row
loops cut to w and their variables shifted by the piece's start (an expression of c):

    if (c % 8 >= 4)  rows [0, 4)          if (c % 4 >= 2)  rows [c - c % 4, +2)
    if (c % 2 >= 1)  rows [c - 1, +1)

A buffer the tile allocates itself (a register tile's accumulators) keeps its rows at 0..w-1
in every piece, so that its indices stay constant and it stays in registers.
"""
from __future__ import annotations

from typing import Callable

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import Allocate, For, IfThenElse, Store, Stmt, map_stmt, seq, walk_stmts
from tensorc.passes.loop import partition
from tensorc.passes.loop.partition import _comparisons, _conditions
from tensorc.passes.loop.simplify import simplify_stmt

# the least split factor whose tail is served by pieces: below it, the pieces are as many as
# the copies (F = 3: pieces of 2 and 1 rows, copies for 1 and 2 rows)
MIN_PIECES_FACTOR = 4
# the loops whose rows a piece cuts (a vector loop's tail stays one masked vector)
ROW_KINDS = ("serial", "unrolled")


def tail_pieces(body: Stmt, var: E.Var, tile: E.Expr, factor: int, remainder: E.Expr,
                row_of: Callable[[E.Compare], E.Expr | None],
                drop_clamps: Callable[[E.Expr, list[E.Compare]], E.Expr],
                reads: set[E.Var]) -> Stmt | None:
    """``body`` (a loop's body over ``var``) run at ``var = tile``, its rows as pieces (see
    the module docstring), where ``remainder`` is c. ``row_of(cmp)``: for each guard of the
    split, the rows it bounds (F * var + rows < N), else None; ``drop_clamps(e, guards)``:
    ``e`` without the clamps that ``guards`` make no-ops. None where F is below
    MIN_PIECES_FACTOR, a guard's rows are no serial or unrolled loop of ``body`` over F
    rows, a buffer the tile allocates is read or written at an index free of its rows, or a
    piece keeps a comparison or clamp of a row and the dims ``reads`` (a padded load the
    remainder copies handle)."""
    if factor < MIN_PIECES_FACTOR:
        return None
    guards: list[E.Compare] = []
    rows: set = set()

    def collect(x: E.Expr) -> None:
        if isinstance(x, E.Compare):
            row = row_of(x)
            if row is not None:
                guards.append(x)
                rows.add(row if isinstance(row, E.Var) else None)
        return None
    map_stmt(body, lambda e: E.transform(e, collect))
    loops = [x for x in walk_stmts(body) if isinstance(x, For) and x.var in rows]
    if not rows or None in rows or rows - {x.var for x in loops} or \
            any(arith.as_const_int(x.extent) != factor or x.kind not in ROW_KINDS
                for x in loops):
        return None
    # each guard becomes row < width, the piece's rows, over a stand-in for the row that the
    # shift to the piece's start leaves alone
    width = E.Var("piece.rows")
    unshifted = {r: E.Var(f"{r.name}.unshifted") for r in rows}

    def decided(x: E.Expr) -> E.Expr | None:
        if isinstance(x, E.Compare):
            row = row_of(x)
            if row is not None:
                return E.Compare("lt", unshifted[row], width)
        return None
    marked = map_stmt(body, lambda e: drop_clamps(E.transform(e, decided), guards))
    local = {s.buffer for s in walk_stmts(marked) if isinstance(s, Allocate)}
    if not _rows_index(marked, local, rows):
        return None
    at_tile = map_stmt(marked, lambda e: E.substitute(e, {var: tile}))
    pieces, w = [], 1
    while w < factor:
        # the rows before this piece: c's digits above w
        start = arith.simplify(remainder - remainder % (2 * w)) if 2 * w < factor else \
            E.const(0)
        piece = _shifted(at_tile, rows, start, local)
        piece = map_stmt(piece, lambda e, w=w: E.substitute(
            e, {width: E.const(w), **{v: r for r, v in unshifted.items()}}))
        piece = simplify_stmt(partition._visit(simplify_stmt(piece, {}) or seq(), {}) or
                              seq(), {}) or seq()
        if _reads_dims(piece, reads, rows):
            return None
        runs = arith.simplify(E.Compare("ge", remainder % (2 * w), E.const(w)))
        pieces.append(IfThenElse(runs, piece, None))
        w *= 2
    return seq(*reversed(pieces))


def _accesses(s: Stmt, buffers: set):
    """The index tuples of every load and store of ``buffers`` in ``s``."""
    for x in walk_stmts(s):
        if isinstance(x, Store) and x.buffer in buffers:
            yield x.indices
        exprs = [x.extent] if isinstance(x, For) else [x.cond] if isinstance(x, IfThenElse) \
            else [*x.indices, x.value] if isinstance(x, Store) else []
        for e in exprs:
            for sub in E.walk(e):
                if isinstance(sub, E.Load) and sub.source in buffers:
                    yield sub.indices


def _rows_index(s: Stmt, local: set, rows: set[E.Var]) -> bool:
    """Whether each access of a buffer in ``local`` reads a row variable: the piece's rows
    then map onto the buffer's first rows alike in every loop nest that uses it."""
    return all(any(E.free_vars(i) & rows for i in index) for index in _accesses(s, local))


def _shifted(s: Stmt, rows: set[E.Var], start: E.Expr, local: set) -> Stmt:
    """``s`` with each row variable r read as r + start, except in the indices of the buffers
    in ``local`` (the piece's rows are their first rows)."""
    frozen = {r: E.Var(f"{r.name}.local") for r in rows}
    back = {v: r for r, v in frozen.items()}

    def freeze_loads(x: E.Expr) -> E.Expr | None:
        if isinstance(x, E.Load) and x.source in local:
            return E.Load(x.source, [E.substitute(i, frozen) for i in x.indices])
        return None

    def freeze_stores(x: Stmt) -> Stmt | None:
        if isinstance(x, Store) and x.buffer in local:
            return Store(x.buffer, tuple(E.substitute(i, frozen) for i in x.indices), x.value)
        return None
    s = map_stmt(s, lambda e: E.transform(e, freeze_loads), freeze_stores)
    moved = {r: r + start for r in rows}
    s = map_stmt(s, lambda e: E.substitute(e, moved))
    return map_stmt(s, lambda e: E.substitute(e, back))


def _reads_dims(s: Stmt, dims: set[E.Var], rows: set[E.Var]) -> bool:
    """Whether a comparison of ``s`` or a clamp of a load index in it reads both a row
    variable and one of ``dims``: a guard or a padding's bound that the piece left
    undecided."""
    for cond in _conditions(s, selects=True):
        for cmp in _comparisons(cond):
            free = E.free_vars(cmp)
            if free & dims and free & rows:
                return True
    for x in walk_stmts(s):
        exprs = [*x.indices, x.value] if isinstance(x, Store) else []
        for e in exprs:
            for sub in E.walk(e):
                if isinstance(sub, E.Load):
                    for i in sub.indices:
                        for y in E.walk(i):
                            if isinstance(y, E.Binary) and y.op in ("min", "max") and \
                                    E.free_vars(y) & dims and E.free_vars(y) & rows:
                                return True
    return False

"""Partition loops where a condition inside them changes value.

A concat computes ``select(c < 64, A[...], B[...])`` for every element; an attached padding
stage tests its borders at every element. Where such a comparison is affine in a loop's
variable and the loops inside it are bounded, the comparison holds (or fails) for every inner
iteration on a whole range of the loop: split the loop at those breakpoints and simplify each
piece with its narrowed range, and each piece runs one branch, with no select.

    for (c, 0, 128)  out[c, i] = select(c < 64, A[c, i], B[c - 64, i])
      ->  for (c, 0, 64) out[c, i] = A[c, i];   for (c, 0, 64) out[c + 64, i] = B[c, i]
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.bounds import SYMBOLIC_MAX
from tensorc.ir.loop import (
    Allocate, For, IfThenElse, PrimFunc, Seq, Stmt, Store, interleaved_tile, map_stmt, seq,
    stmt_exprs, walk_stmts,
)
from tensorc.passes.loop.simplify import simplify, simplify_stmt

MAX_PIECES = 4         # a loop is split into at most this many ranges
# ... or, where its body is small (a concat's copy: one piece per input), into as many pieces
# as keep the copies' expressions within PIECES_BUDGET nodes in all
MAX_SMALL_PIECES = 64
PIECES_BUDGET = 4096
PARTITIONED = ("serial", "parallel", "unrolled")
MAX_SYMBOLIC_CUTS = 2   # constant cuts of a loop of symbolic extent (a padding's start)


def partition_loops(func: PrimFunc) -> PrimFunc:
    """Split loops at the points where affine conditions inside them change value.

    >>> func = partition_loops(func)    # doctest: +SKIP
    """
    body = _visit(func.body, {})
    return simplify(func.with_body(body))


def _visit(s: Stmt, ranges: dict) -> Stmt:
    if isinstance(s, For):
        # outer loops first: each piece's narrower range can decide conditions of the loops
        # inside it (the guarded last block of a row decides which of its unrolled vectors
        # are in range)
        n = arith.as_const_int(s.extent)
        cuts = []
        if s.kind in PARTITIONED and not _declares_shared(s.body) and \
                interleaved_tile(s) is None and (n is not None or s.kind != "parallel"):
            cuts = _breakpoints(s, n, ranges)
        if cuts and (s.kind == "parallel" or s.kind == "serial" and n is not None and
                     _copies_decided(s.body, s.var)):
            return _branched_pieces(s, [0, *cuts, n], ranges)
        if cuts and n is None:
            return seq(*_symbolic_pieces(s, cuts, ranges))
        pieces = _split(s, [0, *cuts, n]) if cuts else [s]
        out = []
        for loop in pieces:
            inner = dict(ranges)
            extent = arith.as_const_int(loop.extent)
            if extent is not None:
                inner[loop.var] = (0, extent - 1)
            out.append(For(loop.var, loop.extent, loop.kind, _visit(loop.body, inner)))
        return seq(*out)
    if isinstance(s, Seq):
        return seq(*[_visit(c, ranges) for c in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _visit(s.body, ranges))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, _visit(s.then_case, ranges),
                          None if s.else_case is None else _visit(s.else_case, ranges))
    return s


def _branched_pieces(loop: For, points: list[int], ranges: dict) -> Stmt:
    """A loop's pieces as branches of one loop: each iteration runs the body simplified for
    its piece (a parallel loop's, and a serial loop's whose pieces decide only copies, see
    :func:`_copies_decided`). As parallel loops one after another, each piece would end
    in a wait for all threads, and a short piece (the partial last column block of a GEMV,
    the edge rows of a padded map) would run on one thread while the others wait: a 1 x
    2048 x 1000 matmul (ResNet-50's classifier), 7 column blocks in parallel then the
    partial 8th alone, took 0.265 ms at two threads (onnxruntime 0.188).

    Only the statements the pieces can decide something in are branched: the rest of the
    body (a Winograd conv's GEMM and output transform, after the padded input transform that
    the edge rows decide) runs once for all pieces, not copied into each branch (resnet's
    two 3x3 convs were 1.75 MB of LLVM IR each, three copies of the whole tile)."""
    pieces = [(start, stop) for start, stop in zip(points, points[1:])]
    whole = dict(ranges)
    whole[loop.var] = (points[0], points[-1] - 1)

    def branched(s: Stmt, around: dict = ranges) -> Stmt:
        branches = []
        for start, stop in pieces:
            inner = dict(around)
            inner[loop.var] = (start, stop - 1)
            body = s
            if stop - start == 1:       # one iteration: its index a constant
                body = map_stmt(body, lambda e, k=start: E.substitute(e, {loop.var: E.const(
                    k, loop.var.dtype)}))
            body = simplify_stmt(_visit(body, inner), inner)
            branches.append((stop, body if body is not None else seq()))
        out = branches[-1][1]
        for stop, branch in reversed(branches[:-1]):
            out = IfThenElse(E.Compare("lt", loop.var, E.const(stop, loop.var.dtype)), branch,
                             out)
        return out

    def factored(s: Stmt) -> Stmt:
        if isinstance(s, Seq):
            return seq(*[factored(c) for c in s.stmts])
        if isinstance(s, Allocate):
            return Allocate(s.buffer, factored(s.body), dict(s.annotations))
        if not _decided_by(s, loop.var):
            shared = simplify_stmt(_visit(s, whole), whole)
            return shared if shared is not None else seq()
        if isinstance(s, For) and _copies_decided(s, loop.var):
            # a loop whose body the pieces decide only copies in (a Winograd tile's padded
            # patch, before its transform): partitioned itself first, then only the copies
            # branched, inside it
            return _branch_within(_visit(s, whole), loop.var, whole, branched)
        return branched(s)
    return For(loop.var, loop.extent, loop.kind, factored(loop.body))


# A loop (or its pieces) keeps one copy of the statements it does not decide where the ones it
# decides are copies (a padded load per element) and those it does not take at least this many
# expression nodes: Winograd's input transform after a tile's padded patch, whose nine copies
# (edge rows and columns) made the largest kernels of four models
SHARED_NODES = 256


def _copies_decided(s: Stmt, var: E.Var) -> bool:
    """Whether ``var``'s pieces decide only copies inside ``s`` (stores whose value is a
    load, a constant or a select of them), beside at least SHARED_NODES nodes they do not
    decide."""
    decided, shared = _parts(s, var)
    return shared >= SHARED_NODES and bool(decided) and all(_is_copy(x) for x in decided)


def _parts(s: Stmt, var: E.Var) -> tuple[list[Stmt], int]:
    """The statements inside ``s`` that ``var``'s pieces decide (outermost, through
    sequences, allocations and loops whose extent ``var`` leaves alone), and the expression
    nodes of the rest."""
    if not _decided_by(s, var):
        return [], _size(s)
    if isinstance(s, Seq):
        decided, shared = [], 0
        for c in s.stmts:
            d, n = _parts(c, var)
            decided += d
            shared += n
        return decided, shared
    if isinstance(s, Allocate) or isinstance(s, For) and var not in E.free_vars(s.extent):
        return _parts(s.body, var)
    return [s], 0


def _is_copy(s: Stmt) -> bool:
    def copied(e: E.Expr) -> bool:
        if isinstance(e, E.Select):
            return copied(e.true_value) and copied(e.false_value)
        return isinstance(e, (E.Load, E.Const))
    return all(copied(x.value) for x in walk_stmts(s) if isinstance(x, Store)) and \
        not any(isinstance(x, IfThenElse) for x in walk_stmts(s))


def _branch_within(s: Stmt, var: E.Var, ranges: dict, branched) -> Stmt:
    """``s`` with each run of statements that ``var``'s pieces decide (see :func:`_parts`)
    replaced by ``branched`` of it (its branches, one per piece); ``ranges``: the loops'
    around it."""
    if not _decided_by(s, var):
        return s
    if isinstance(s, Seq):
        out, run = [], []
        for c in s.stmts:
            if _parts(c, var)[1] == 0:      # decided through and through: one branch
                run.append(c)
                continue
            if run:
                out.append(branched(seq(*run), ranges))
                run = []
            out.append(_branch_within(c, var, ranges, branched))
        if run:
            out.append(branched(seq(*run), ranges))
        return seq(*out)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _branch_within(s.body, var, ranges, branched),
                        dict(s.annotations))
    if isinstance(s, For) and var not in E.free_vars(s.extent) and _parts(s, var)[1]:
        inner = dict(ranges)
        n = arith.as_const_int(s.extent)
        if n is not None:
            inner[s.var] = (0, n - 1)
        return For(s.var, s.extent, s.kind, _branch_within(s.body, var, inner, branched),
                   dict(s.annotations))
    return branched(s, ranges)


def _decided_by(s: Stmt, var: E.Var) -> bool:
    """Whether a piece's narrower range of ``var`` can change ``s``: ``var`` in a comparison
    (a guard, a select), a min or max (a clamp) or a loop's extent (a tail) inside it.
    Elsewhere (addresses) it only folds to a constant in a one-iteration piece."""
    for x in walk_stmts(s):
        for e in stmt_exprs(x):
            if isinstance(x, For) and var in E.free_vars(e):
                return True
            for sub in E.walk(e):
                if (isinstance(sub, E.Compare) or isinstance(sub, E.Binary) and
                        sub.op in ("min", "max")) and var in E.free_vars(sub):
                    return True
    return False


def _declares_shared(s: Stmt) -> bool:
    """Whether ``s`` allocates GPU shared memory: a kernel declares each such buffer once."""
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, Allocate) and x.buffer.scope == "shared":
            return True
        stack.extend(x.children())
    return False


def _loop_ranges(s: Stmt, ranges: dict) -> dict:
    """The ranges of every loop variable inside ``s`` (constant extents only)."""
    out = dict(ranges)
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, For):
            n = arith.as_const_int(x.extent)
            if n is not None:
                out[x.var] = (0, n - 1)
        stack.extend(x.children())
    return out


def _conditions(s: Stmt, selects: bool = True):
    """The conditions of the guards inside ``s``, and of its selects if ``selects``."""
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, IfThenElse):
            yield x.cond
        if isinstance(x, Store) and selects:
            for e in (*x.indices, x.value):
                for sub in E.walk(e):
                    if isinstance(sub, E.Select):
                        yield sub.cond
        stack.extend(x.children())


def _comparisons(cond: E.Expr):
    if isinstance(cond, E.Logical):
        for a in cond.args:
            yield from _comparisons(a)
    elif isinstance(cond, E.Compare) and cond.op in ("lt", "le", "gt", "ge") and \
            E.is_int(cond.a.dtype):
        yield _undivided(cond)


def _undivided(cmp: E.Compare) -> E.Compare:
    """``x // d < k`` as ``x < k*d`` (d > 0; likewise <=, >, >=): a fused loop's concat
    compares the row of a flat index, which is affine once the division is gone."""
    a, b = cmp.a, cmp.b
    if not (isinstance(a, E.Binary) and a.op == "floordiv" and isinstance(a.b, E.Const) and
            a.b.value > 0 and isinstance(b, E.Const)):
        return cmp
    d, k = a.b.value, b.value
    if cmp.op in ("lt", "ge"):
        return E.Compare(cmp.op, a.a, E.const(k * d, b.dtype))
    # x // d <= k  <=>  x < (k + 1) * d;   x // d > k  <=>  x >= (k + 1) * d
    return E.Compare("lt" if cmp.op == "le" else "ge", a.a, E.const((k + 1) * d, b.dtype))


def _symbolic_pieces(loop: For, cuts: list[int], ranges: dict) -> list[Stmt]:
    """The pieces of a loop of symbolic extent E cut at constant points: each piece but the
    last runs up to its length, fewer where E ends inside it; the last runs what is left."""
    out = []
    points = [0, *cuts]
    for k, start in enumerate(points):
        var = E.Var(loop.var.name)
        left = E.maximum(loop.extent - start, E.const(0)) if start else loop.extent
        inner = dict(ranges)
        if k + 1 < len(points):
            length = points[k + 1] - start
            extent = arith.simplify(E.minimum(left, E.const(length)))
            inner[var] = (0, length - 1)
        else:
            extent = arith.simplify(left)
            inner[var] = (0, SYMBOLIC_MAX)
        shifted = var + start if start else var
        body = map_stmt(loop.body, lambda e, v=shifted: E.substitute(e, {loop.var: v}))
        body = simplify_stmt(_visit(body, inner), inner)
        if body is not None:
            out.append(For(var, extent, loop.kind, body))
    return out


def _breakpoints(loop: For, n: int | None, ranges: dict) -> list[int]:
    """Values of the loop variable where some condition inside may change from decided to
    undecided (over all inner iterations) or back: each starts a new piece. For a loop of
    symbolic extent (``n`` None), the points of comparisons that read no symbolic dim, at
    most MAX_SYMBOLIC_CUTS of them."""
    inner = _loop_ranges(loop.body, ranges)
    inner.pop(loop.var, None)
    cuts: set[int] = set()
    # An unrolled loop's selects are decided in each of its copies (the variable is a
    # constant there): splitting it for them only breaks up a tile that codegen transposes
    # in registers (a YOLO head's concat of box and class parts, channels last).
    for cond in _conditions(loop.body, selects=loop.kind != "unrolled"):
        for cmp in _comparisons(cond):
            # each comparison as (or as the negation of) coeff * v + base < 0
            diff = cmp.a - cmp.b if cmp.op in ("lt", "ge") else \
                cmp.a - cmp.b - 1 if cmp.op == "le" else cmp.b - cmp.a
            lin = arith.linear_coeff(diff, loop.var)
            if lin is None or lin[1] == 0:
                continue
            base, coeff = lin
            if n is None and not E.free_vars(base) <= inner.keys():
                continue        # a symbolic dim: symbolic_tails.py cuts there
            lo, hi = arith.const_bounds(arith.simplify(base, inner), inner)
            if lo is None or hi is None:
                continue
            # it holds for every base in [lo, hi] from one point on (or up to one), and
            # fails for every base from (or up to) another: those points start the pieces
            for bound in (lo, hi):
                if coeff > 0:
                    point = -(bound // coeff)       # ceil(-bound / coeff)
                else:
                    point = bound // -coeff + 1     # floor(bound / -coeff) + 1
                if 0 < point and (n is None or point < n):
                    cuts.add(int(point))
    if n is None:
        return sorted(cuts) if len(cuts) <= MAX_SYMBOLIC_CUTS else []
    if len(cuts) + 1 > MAX_PIECES and (len(cuts) + 1 > MAX_SMALL_PIECES or
                                       (len(cuts) + 1) * _size(loop.body) > PIECES_BUDGET):
        return []
    return sorted(cuts)


def _size(s: Stmt) -> int:
    """The expression nodes of the stores inside ``s`` (what each piece copies)."""
    total, stack = 0, [s]
    while stack:
        x = stack.pop()
        if isinstance(x, Store):
            total += sum(1 for e in (*x.indices, x.value) for _ in E.walk(e))
        stack.extend(x.children())
    return total


def _split(loop: For, points: list[int]) -> list[For]:
    pieces = []
    for start, stop in zip(points, points[1:]):
        if stop <= start:
            continue
        var = E.Var(loop.var.name)
        shifted = var + start if start else var
        body = map_stmt(loop.body, lambda e, v=shifted: E.substitute(e, {loop.var: v}))
        pieces.append(For(var, E.const(stop - start), loop.kind, body))
    return pieces

"""Bounds inference for lowering: the extents of a stage's loops, its root indices in terms
of the leaf loops, and the elements an index reaches while some loops run (the box or the
lattice of a region, the runs of a prefetch).

Indices are analysed in the canonical affine form of :mod:`tensorc.ir.arith`.
"""
from __future__ import annotations

import math

from tensorc.errors import ScheduleError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.expr import Expr, Var, substitute
from tensorc.ir.schedule import Split, Stage, SVar


def loop_extents(stage: Stage, root_extents: dict[SVar, int] | None = None
                 ) -> dict[SVar, int | Expr]:
    """The extent of every loop of ``stage`` (root loops default to their full extent).

    A split by a factor at least the extent keeps one outer iteration and an inner loop of
    the whole extent; otherwise the outer loop rounds up (and lowering adds a guard). A
    symbolic extent (an index expression of the kernel's dims) split by a factor keeps the
    factor as the inner extent and rounds the outer one up at run time: constant tiles, and
    a guarded tail.
    """
    ext = {sv: (root_extents or {}).get(sv, sv.root_extent) for sv in stage.root_vars}
    for rel in stage.relations:
        if isinstance(rel, Split):
            n = ext[rel.parent]
            if not isinstance(n, int):
                if rel.factor is None:
                    raise ScheduleError(
                        f"stage {stage.name}: loop {rel.parent.name} has the symbolic extent "
                        f"{E.format_expr(n)}; split it by a factor, not into nparts")
                if rel.factor >= WHOLE_FACTOR:
                    # a block "as large as the loop" (a schedule's WHOLE): one block
                    inner, outer = n, 1
                else:
                    inner = rel.factor
                    outer = ceil_div(n, inner)
            elif rel.factor is not None:
                inner = min(rel.factor, n)
                outer = -(-n // inner)
            else:
                outer = min(rel.nparts, n)
                inner = -(-n // outer)
            ext[rel.outer], ext[rel.inner] = outer, inner
        else:
            a, b = ext[rel.outer], ext[rel.inner]
            ext[rel.fused] = a * b if isinstance(a, int) and isinstance(b, int) else \
                arith.simplify(as_index(a) * as_index(b))
    return ext


# a split of a symbolic extent by this factor or more keeps the whole loop inside
WHOLE_FACTOR = 1 << 20
# the range lowering assumes for a loop of symbolic extent, for the interval arithmetic of
# bounds inference and simplification: no dim of a tensor reaches it
SYMBOLIC_MAX = 1 << 40


def part_of_fused_within(cond: Expr, extents: dict[Var, Expr], ranges: arith.Bounds) -> bool:
    """Whether ``cond`` is ``v // s < n``, ``v // s >= 0``, ``v % s < s`` or ``v % s >= 0``
    for a loop ``v`` whose symbolic extent (``extents``) is a whole multiple of ``s`` (and
    ``n`` times it for the first), after the loops that ``ranges`` gives one value take it:
    the parts of a loop fused from two of symbolic extent, which interval arithmetic cannot
    place (its extent has no constant bound), but which lie in their loops' ranges wherever
    ``v`` runs."""
    if not isinstance(cond, E.Compare) or cond.op not in ("lt", "ge"):
        return False
    fixed = {v: E.const(ranges[v][0]) for v in E.free_vars(cond)
             if v in ranges and ranges[v][0] == ranges[v][1]}
    if fixed:
        cond = arith.simplify(substitute(cond, fixed), ranges)
        if not isinstance(cond, E.Compare):
            return isinstance(cond, E.Const) and bool(cond.value)
    part = cond.a
    if not (isinstance(part, E.Binary) and part.op in ("floordiv", "floormod") and
            isinstance(part.a, Var) and part.a in extents):
        return False
    whole, s = extents[part.a], part.b
    quotient = arith.simplify(whole // s)
    if not E.same(arith.simplify(quotient * s - whole), E.const(0)):
        return False
    if cond.op == "ge":
        return E.same(cond.b, E.const(0))
    return E.same(arith.simplify((quotient if part.op == "floordiv" else s) - cond.b),
                  E.const(0))


def loop_range(extent: int | Expr) -> tuple[int, int]:
    """The (low, high) of a loop's variable."""
    return (0, extent - 1) if isinstance(extent, int) else (0, SYMBOLIC_MAX - 1)


def as_index(n: int | Expr) -> Expr:
    return n if isinstance(n, Expr) else E.const(n)


def ceil_div(n: int | Expr, d: int) -> int | Expr:
    if isinstance(n, int):
        return -(-n // d)
    return n if d == 1 else arith.simplify((n + (d - 1)) // d)


class NestInfo:
    """Extents of a stage's loops and its root indices in terms of the leaf loop variables."""

    def __init__(self, stage: Stage, root_ranges: dict[SVar, tuple]):
        """``root_ranges``: per root loop (min, extent) or (min, extent, step)."""
        ext = loop_extents(stage, {sv: r[1] for sv, r in root_ranges.items()})
        value: dict[SVar, Expr] = {sv: sv.var for sv in stage.leaf_vars}
        guards: list[tuple[SVar, Expr]] = []
        for rel in reversed(stage.relations):
            if isinstance(rel, Split):
                inner = ext[rel.inner]
                start = value[rel.outer] * inner
                parent = ext[rel.parent]
                symbolic = not isinstance(parent, int)
                # a symbolic extent is never assumed a multiple of the factor; nor does its
                # last block shift back (the extent may be below the factor)
                partial = (symbolic and inner is not parent) or \
                    (not symbolic and ext[rel.outer] * inner != parent)
                if partial and rel.shift_tail and not symbolic:
                    # the last block ends at the extent: no guard, an overlap instead
                    start = E.minimum(start, E.const(ext[rel.parent] - inner))
                value[rel.parent] = start + value[rel.inner]
                if partial and (symbolic or not rel.shift_tail):
                    guards.append((rel.parent, E.Compare("lt", value[rel.parent],
                                                         as_index(parent))))
            else:
                n = ext[rel.inner]
                value[rel.outer] = value[rel.fused] // n if n != 1 else value[rel.fused]
                value[rel.inner] = value[rel.fused] % n if n != 1 else E.const(0)
        self.extent = ext
        self.guards = guards
        self.root_index = {sv: arith.simplify(root_ranges[sv][0] +
                                              scaled(value[sv], _step(root_ranges[sv])))
                           for sv in stage.root_vars}


def _step(rng: tuple) -> int:
    return rng[2] if len(rng) > 2 else 1


def scaled(e: Expr, step: int) -> Expr:
    return e if step == 1 else e * step


def lattice_step(indices: list[Expr], los: list[int], relaxed: dict[Var, tuple[int, int]],
                 known: dict[Var, tuple[int, int]]) -> int:
    """The largest step g such that every element the loads read is at lo + g * k: the gcd
    of the relaxed variables' coefficients and of the loads' offsets from each other (1
    when a relaxed variable appears inside a non-affine term)."""
    g = 0
    for index in indices:
        aff = arith.to_affine(index, known)
        for atom, c in aff.terms.values():
            if isinstance(atom, Var) and atom in relaxed:
                a, b = relaxed[atom]
                if b > a:
                    g = math.gcd(g, abs(c))
            elif E.free_vars(atom) & relaxed.keys():
                return 1
    for lo in los:
        g = math.gcd(g, abs(lo - los[0]))
    return g or 1


def runs(flat: Expr, relaxed: dict[Var, int], known: dict[Var, tuple[int, int]]
         ) -> tuple[Expr, tuple[int, ...], int] | None:
    """The elements that ``flat`` (an index) reaches as the ``relaxed`` variables run over
    their extents: ``base + start + [0, span)`` for each start, or None where a variable's
    stride is not a constant >= 0. Strides no longer than the run so far extend it; a longer
    one starts runs of its own."""
    base = arith.simplify(substitute(flat, {v: E.const(0) for v in relaxed}), known)
    steps = []
    for v, n in relaxed.items():
        lc = arith.linear_coeff(flat, v, known)
        if lc is None or lc[1] < 0:
            return None
        if lc[1] and n > 1:
            steps.append((lc[1], n))
    starts, span = [0], 1
    for stride, n in sorted(steps):
        if stride <= span:
            span += stride * (n - 1)
        else:
            starts = [s + stride * k for s in starts for k in range(n)]
    return base, tuple(starts), span


def relaxed_interval(index: Expr, relaxed: dict[Var, tuple[int, int]],
                     known: dict[Var, tuple[int, int]]) -> tuple[Expr, int, int] | None:
    """``index`` = base + [lo, hi] where base is free of the relaxed variables."""
    aff = arith.merge_div_mod(arith.to_affine(index, known))
    lo = hi = aff.const
    base_terms = {}
    for key, (atom, c) in aff.terms.items():
        if isinstance(atom, Var) and atom in relaxed:
            a, b = relaxed[atom]
            lo += min(c * a, c * b)
            hi += max(c * a, c * b)
        elif E.free_vars(atom) & relaxed.keys():
            if E.free_vars(atom) - relaxed.keys() - known.keys():
                return None
            bounds = {**known, **relaxed}
            alo, ahi = arith.const_bounds(atom, bounds)
            if alo is None or ahi is None:
                return None
            lo += min(c * alo, c * ahi)
            hi += max(c * alo, c * ahi)
        else:
            base_terms[key] = (atom, c)
    base = arith.Affine(base_terms, 0, aff.dtype).to_expr()
    return base, lo, hi

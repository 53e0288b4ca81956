"""Addresses as a constant offset from a shared base: the terms of an index that are constant
where it is emitted (numbers, an unrolled loop's index bound to a constant, arithmetic of
them) are split off, so the rest is one expression for all of an unrolled loop's copies,
which the index cache (index_cache.py) emits once. A Winograd transform's 36 unrolled loads
are then one address computation and 36 constant offsets (memory.py's ``_at``), not 36
multiply-add chains for LLVM to fold back.

>>> rest, offset = gen.offsets.split(index)     # c.o*25088 + t*32 + k*8 + 24, k bound to 4
(c.o*25088 + t*32, 56)
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.ir import expr as E

# the integer operations a constant term may hold (floor division and modulo by a positive
# number: Python's // and % are floor's)
_FOLDED = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "min": min, "max": max}


class ConstantOffsets:
    """Splits the indices of the code generator ``gen`` (see the module docstring)."""

    def __init__(self, gen) -> None:
        self.gen = gen
        self._terms: dict[E.Expr, list] = {}        # each index's terms
        self._rests: dict[tuple, E.Expr] = {}       # each rest made of them

    def split(self, index: E.Expr) -> tuple[E.Expr, int]:
        """``index`` as (rest, offset): the terms of its sum that are constant here (numbers,
        unrolled loops' indices bound to constants, their products) folded into ``offset``.
        The terms and each rest are made once per index (an unrolled loop asks per copy), so
        the rest is one object that the index cache finds again."""
        terms = self._terms.get(index)
        if terms is None:
            terms = self._terms[index] = _sum_terms(index)
        if len(terms) < 2:
            return index, 0
        values = [self._constant_term(e) for e, _ in terms]
        offset = sum(sign * v for (_, sign), v in zip(terms, values) if v is not None)
        if offset == 0:
            return index, 0
        key = (index, tuple(v is None for v in values))
        rest = self._rests.get(key)
        if rest is None:
            for (e, sign), v in zip(terms, values):
                if v is None:
                    rest = (e if sign > 0 else E.const(0, index.dtype) - e) if rest is None \
                        else (rest + e if sign > 0 else rest - e)
            rest = self._rests[key] = rest if rest is not None else E.const(0, index.dtype)
        return rest, offset

    def _constant_term(self, e: E.Expr) -> int | None:
        """``e``'s value where it is an integer constant here: a number, a variable bound to
        a constant, or arithmetic of those (``(ab // 6) * 48`` in an unrolled loop over ab)."""
        if isinstance(e, E.Const):
            return e.value if isinstance(e.value, int) else None
        if isinstance(e, E.Var):
            value = self.gen.fs.env.get(e)
            return value.constant if isinstance(value, ir.Constant) and \
                isinstance(value.type, ir.IntType) else None
        if isinstance(e, E.Binary) and e.op in _FOLDED:
            a = self._constant_term(e.a)
            b = self._constant_term(e.b) if a is not None else None
            if b is None or e.op in ("floordiv", "floormod") and b <= 0:
                return None
            return _FOLDED[e.op](a, b)
        return None


def _sum_terms(index: E.Expr) -> list[tuple[E.Expr, int]]:
    """The terms of ``index`` as a sum, with their signs (1 or -1), in order."""
    out, stack = [], [(index, 1)]
    while stack:
        e, sign = stack.pop()
        if isinstance(e, E.Binary) and e.op in ("add", "sub"):
            stack.append((e.b, -sign if e.op == "sub" else sign))
            stack.append((e.a, sign))
        else:
            out.append((e, sign))
    return out

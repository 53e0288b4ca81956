"""The arena's allocators: where each intermediate lives, given the values in the order the
kernels compute them and the step after which each is dead.

Both answer ``allocate(size, last_step) -> handle``, ``release(step)`` (the values dead
before ``step`` free their bytes), ``offset(handle)`` and ``size()``.

- :class:`FirstFit` (sizes known at compile time) puts each value at the lowest place clear
  of the live values.
- :class:`StorageTokens` (sizes that are expressions of symbolic dims; the storage reuse of
  TVM's and IREE's planners) gives each value a token of storage: a freed one where there is
  one, else a new one. A token's size is the largest of its values' sizes (a max expression
  where the dims' ranges do not order them) and the tokens lie one after another, so the
  offsets, expressions of the dims that the entry function evaluates for each run, hold at
  every run by construction. Which freed token a value takes is decided at sample values of
  the dims (each dim's low end, its hint and four times its hint): the one that grows least,
  then the smallest. A first fit over symbolic sizes could reuse a freed block only where
  the ranges prove the sizes fit, and products of different dims rarely compare.
"""
from __future__ import annotations

import functools
import itertools
import math

from tensorc.ir import te
from tensorc.ir.dims import Dim, as_expr, decide, dim_var, evaluator, is_symbolic
from tensorc.ir.expr import Binary


class FirstFit:
    """Each value at the first gap among the live blocks that fits it (int sizes)."""

    def __init__(self):
        self.live: list[tuple[int, int, int]] = []       # (offset, size, last step)
        self.end = 0

    def release(self, step: int) -> None:
        self.live = [blk for blk in self.live if blk[2] >= step]

    def allocate(self, size: int, last: int) -> int:
        at = 0
        for off, sz, _ in sorted(self.live, key=lambda b: b[0]):
            if at + size <= off:
                break
            at = max(at, off + sz)
        self.live.append((at, size, last))
        self.end = max(self.end, at + size)
        return at

    def offset(self, handle: int) -> int:
        return handle

    def size(self) -> int:
        return self.end


# the most sample points of the dims (every combination of each dim's samples up to this
# count, else one point per sample taken across all dims)
MAX_SAMPLES = 81


def sample_points(table, names: list[str]) -> list[tuple[int, ...]]:
    """Values of the dims ``names`` (in that order) to weigh sizes at: each at the low end of
    its range (at least 1), its hint and four times its hint, within the range."""
    samples = []
    for name in names:
        lo, hi = table.ranges.get(name, (0, None))
        guess = te.hint(dim_var(name))
        values = {max(lo, 1), max(guess // 4, 1), guess, 4 * guess}
        samples.append(sorted(v for v in values if hi is None or v <= hi) or [max(lo, 1)])
    if math.prod(len(s) for s in samples) <= MAX_SAMPLES:
        return list(itertools.product(*samples))
    return [tuple(s[min(k, len(s) - 1)] for s in samples) for k in range(3)]


class StorageTokens:
    """Each value on top of the live values of a token of storage (see the module's
    docstring)."""

    def __init__(self, table, peaks: list[int]):
        self.names = sorted(table.symbols)
        self.points = sample_points(table, self.names)
        self.peaks = [max(p, 1) for p in peaks]
        # per token: its live values bottom to top as (last step, offset in the token, end,
        # end at the sample points); the ends of all its values that no other is proven to
        # cover (its size is their maximum); its size at the sample points
        self.tokens: list[dict] = []
        self.step = 0
        self._offsets: list | None = None

    def release(self, step: int) -> None:
        for token in self.tokens:
            token["live"] = [blk for blk in token["live"] if blk[0] >= step]

    def allocate(self, size, last: int):
        need = self._at_points(size)

        arena = [sum(t["at"][k] for t in self.tokens) for k in range(len(need))]

        def cost(token):
            """The arena after this value at each point, over the most bytes live at once
            there (no plan takes less): the worst point's, then their sum, then the bytes the
            token has left above the value."""
            top = token["live"][-1][3] if token["live"] else [0] * len(need)
            after = [(a + max(t + n - h, 0)) / peak for a, t, n, h, peak in
                     zip(arena, top, need, token["at"], self.peaks)]
            return max(after), sum(after), sum((h - t - n) / peak for t, n, h, peak in
                                               zip(top, need, token["at"], self.peaks))

        new = {"live": [], "ends": [], "at": [0] * len(need), "index": len(self.tokens)}
        best = min([new, *self.tokens], key=cost)       # a tie: a new token
        if best is new:
            self.tokens.append(new)
        # the top of the token: the end of its newest live value, which was placed above all
        # the others that still live
        at, top = (best["live"][-1][2], best["live"][-1][3]) if best["live"] \
            else (0, [0] * len(need))
        end = add_unsimplified(at, size)
        end_at = [t + n for t, n in zip(top, need)]
        best["live"].append((last, at, end, end_at))
        best["at"] = [max(e, h) for e, h in zip(end_at, best["at"])]
        if not any(decide("le", end, e) is True for e in best["ends"]):
            best["ends"] = [e for e in best["ends"] if decide("le", e, end) is not True] + [end]
        return best["index"], at

    def _at_points(self, size) -> list[int]:
        return at_points(size, self.names, self.points)

    def offset(self, handle):
        if self._offsets is None:
            # built without simplifying: a sum of maxima that the entry evaluates per run
            base, self._offsets = 0, []
            for token in self.tokens:
                self._offsets.append(base)
                largest = token["ends"][0]
                for e in token["ends"][1:]:
                    largest = _unsimplified("max", largest, e)
                base = add_unsimplified(base, largest)
            self._offsets.append(base)
        index, at = handle
        return add_unsimplified(self._offsets[index], at)

    def size(self):
        return self._offsets[-1] if self._offsets is not None else \
            self.offset((len(self.tokens), 0))


def at_points(size, names: list[str], points: list[tuple[int, ...]]) -> list[int]:
    """``size`` evaluated at each point (values of ``names``)."""
    if not is_symbolic(size):
        return [size] * len(points)
    return list(_evaluated(size, tuple(names), tuple(points)))


@functools.lru_cache(maxsize=4096)
def _evaluated(size, names: tuple, points: tuple) -> tuple:
    # a plan evaluates each size twice (LiveBytes, then StorageTokens): compiled once
    evaluate = evaluator([size], list(names))
    return tuple(evaluate(p)[0] for p in points)


class LiveBytes:
    """Not an allocator: the most bytes live at once, at each of the dims' sample points
    (what no plan can go below), from the same calls."""

    def __init__(self, table):
        self.names = sorted(table.symbols)
        self.points = sample_points(table, self.names)
        self.live: list[tuple[int, list[int]]] = []       # (last step, size at the points)
        self.peaks = [0] * len(self.points)

    def release(self, step: int) -> None:
        self.live = [blk for blk in self.live if blk[0] >= step]

    def allocate(self, size, last: int) -> None:
        self.live.append((last, at_points(size, self.names, self.points)))
        for k in range(len(self.points)):
            self.peaks[k] = max(self.peaks[k], sum(blk[1][k] for blk in self.live))

    def offset(self, handle) -> int:
        return 0

    def size(self) -> int:
        return 0


def add_unsimplified(a, b):
    """``a + b`` for an offset: an int where both are, else a Dim built without the
    simplifier (whose canonical form of a long sum of maxima costs seconds per offset)."""
    if b == 0 or a == 0:
        return a if b == 0 else b
    return _unsimplified("add", a, b)


def _unsimplified(op: str, a, b):
    if not is_symbolic(a) and not is_symbolic(b):
        return a + b if op == "add" else max(a, b)
    return Dim(Binary(op, as_expr(a), as_expr(b)))

"""Register tiles that several conv formulations share: a tile of filters x output columns
accumulated in registers, and the tile sizes that divide an extent."""
from __future__ import annotations

from tensorc.ir import te
from tensorc.ir.schedule import Schedule


def accumulate_in_registers(sch: Schedule, local: te.Tensor, st, at) -> None:
    """A register tile: ``local`` (n, filters, [rows,] columns), computed at ``st``'s loop
    ``at`` with its reduction loops outside the unrolled filters and vectorized columns."""
    ls = sch[local]
    ls.compute_at(st, at)
    ln, lf, *lines, lq = ls.op_axis
    ls.reorder(ln, *lines, *ls.reduce_axis, lf, lq)
    ls.unroll(lf)
    ls.vectorize(lq)


def divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of ``n`` up to ``limit``.

    >>> divisor_at_most(24, 7)
    6
    """
    return max(d for d in range(1, limit + 1) if n % d == 0)

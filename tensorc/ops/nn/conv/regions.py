"""Where a dilated conv's taps read only padding: the regions of its output, each with the taps
that are live there.

Along one spatial dim, tap k reads input o*s + k*d - p for output o; it is live at o where that
index is inside the map, and the live taps of an output are a run [k0, k1). Consecutive
outputs with the same run form a segment (at most 2K + 1 of them: each tap's live outputs are
one run too). A 2-D region is a pair of segments, and over it the conv is a conv of the
region's live taps alone with no padding at all: every tap it keeps reads inside the map for
every output of the region. With a dilation at or past the map's size every output keeps the
centre tap alone, a 1x1 conv (DeepLab's ASPP on a 16x16 map at dilations 12-36: 9x less work).

Segments are merged where a split costs more than it saves (each region is a kernel of its
own and a copy into the concatenated output): a merged segment keeps the union of its taps
and pads where they leave the map. :func:`plan` picks, per dim, the segmentation of least
cost; the 2-D cost is separable (work = rows' work x columns' work).

>>> plan(16, 3, 1, 24, 24, 24)          # dilation 24 on a 16-row map: the centre tap alone
[Segment(start=0, stop=16, tap_start=1, tap_stop=2)]
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# A region costs about this many FLOPs beyond its own work (a kernel's start, its tiles'
# ragged edges, the slice of its input): about 10 us at a core's peak. An estimate: the dilated
# sweep of benchmarks/kernels.py, run on a loaded machine, could not tune it finer
REGION_OVERHEAD_FLOPS = 1_000_000
# ... and a split must save at least this part of the conv's work
MIN_SAVING = 0.15


@dataclass(frozen=True)
class Segment:
    """Outputs [start, stop) of one spatial dim, computed from taps [tap_start, tap_stop)."""

    start: int
    stop: int
    tap_start: int
    tap_stop: int

    @property
    def outputs(self) -> int:
        return self.stop - self.start

    @property
    def taps(self) -> int:
        return self.tap_stop - self.tap_start

    def input_window(self, stride: int, dilation: int, pad: int, size: int
                     ) -> tuple[int, int, int, int]:
        """(first input read, inputs read inside the map, padding before, padding after)."""
        first = self.start * stride + self.tap_start * dilation - pad
        last = (self.stop - 1) * stride + (self.tap_stop - 1) * dilation - pad
        lo, hi = max(first, 0), min(last, size - 1)
        return lo, hi - lo + 1, lo - first, last - hi


def live_taps(o: int, size: int, kernel: int, stride: int, dilation: int, pad: int
              ) -> tuple[int, int]:
    """The run of taps [k0, k1) that read inside a map of ``size`` for output ``o``."""
    base = o * stride - pad
    k0 = max(0, -(base // dilation))            # base + k*d >= 0
    k1 = min(kernel, (size - 1 - base) // dilation + 1) if size - 1 - base >= 0 else 0
    return k0, max(k0, k1)


def segments(size: int, kernel: int, stride: int, dilation: int, pad: int, out: int
             ) -> list[Segment]:
    """The maximal runs of outputs with the same live taps (empty runs of taps included)."""
    found: list[Segment] = []
    for o in range(out):
        k0, k1 = live_taps(o, size, kernel, stride, dilation, pad)
        if found and (found[-1].tap_start, found[-1].tap_stop) == (k0, k1):
            found[-1] = Segment(found[-1].start, o + 1, k0, k1)
        else:
            found.append(Segment(o, o + 1, k0, k1))
    return found


def _merged(run: list[Segment]) -> Segment:
    live = [s for s in run if s.taps]
    k0 = min((s.tap_start for s in live), default=0)
    k1 = max((s.tap_stop for s in live), default=1)
    return Segment(run[0].start, run[-1].stop, k0, k1)


def _best_by_count(exact: list[Segment]) -> dict[int, list[Segment]]:
    """For each number of pieces, the contiguous grouping of ``exact`` with the least work
    (outputs x taps), no piece left without a live tap."""
    n = len(exact)
    # best[i][c]: (work, pieces) covering exact[:i] with c pieces
    best: list[dict[int, tuple[int, list[Segment]]]] = [dict() for _ in range(n + 1)]
    best[0][0] = (0, [])
    for i in range(1, n + 1):
        for j in range(i):
            piece = _merged(exact[j:i])
            if not any(s.taps for s in exact[j:i]):
                continue
            for c, (work, pieces) in best[j].items():
                total = work + piece.outputs * piece.taps
                if c + 1 not in best[i] or total < best[i][c + 1][0]:
                    best[i][c + 1] = (total, pieces + [piece])
    return {c: pieces for c, (_, pieces) in best[n].items()}


def plan_2d(sizes: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int],
            dilations: tuple[int, int], pads: tuple[int, ...], out: tuple[int, int],
            tap_flops: int = 2 * 256 * 256) -> tuple[list[Segment], list[Segment]] | None:
    """The rows' and the columns' segments of a 2-D conv's regions, or None where splitting
    saves too little (the conv as it is). ``tap_flops``: the FLOPs of one tap of one output
    position (2 x filters x input channels per group x images)."""
    choices = []
    for d in range(2):
        exact = segments(sizes[d], kernel[d], strides[d], dilations[d], pads[d], out[d])
        choices.append(_best_by_count(exact))
    full = out[0] * kernel[0] * out[1] * kernel[1]
    best = None
    for ny, rows in choices[0].items():
        for nx, cols in choices[1].items():
            work = sum(s.outputs * s.taps for s in rows) * sum(s.outputs * s.taps for s in cols)
            cost = work * tap_flops + REGION_OVERHEAD_FLOPS * (ny * nx - 1)
            if best is None or cost < best[0]:
                best = (cost, work, rows, cols)
    if best is None:
        return None
    _, work, rows, cols = best
    if work > (1 - MIN_SAVING) * full:
        return None
    if len(rows) == len(cols) == 1 and (rows[0].taps, cols[0].taps) == kernel:
        return None
    return rows, cols


def plan(size: int, kernel: int, stride: int, dilation: int, pad: int, pad_end: int
         ) -> list[Segment]:
    """One dim's segments as :func:`plan_2d` picks them for a square conv (for reading)."""
    out = (size + pad + pad_end - dilation * (kernel - 1) - 1) // stride + 1
    planned = plan_2d((size, size), (kernel, kernel), (stride, stride), (dilation, dilation),
                      (pad, pad, pad_end, pad_end), (out, out))
    return planned[0] if planned else [Segment(0, out, 0, kernel)]


def live_work(sizes, kernel, strides, dilations, pads, out) -> int:
    """Output-taps a conv's live taps make (the work its regions leave, at most)."""
    return math.prod(sum(s.outputs * s.taps for s in segments(
        sizes[d], kernel[d], strides[d], dilations[d], pads[d], out[d])) for d in range(2))

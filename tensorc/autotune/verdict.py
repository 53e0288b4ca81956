"""Whether a tuned model is faster than the default one, end to end, beyond the noise.

Two runs of the same model differ by more than a tuning gain on a shared machine, and a
burst of load during one side's timing made a tuned MobileNetV2 read 0.63x one time and 0.98x
the next (issue 38). So the two are timed alternating, pair by pair (the order flipping each
round, so that neither always runs second), in blocks, until their medians settle; the
figure is the median of the pairs' ratios, whose distribution-free 95% interval says whether
the gain is beyond the noise: a load burst falls on both sides of a pair alike.

>>> verdict = compare_alternating(default_module.run_feeds, tuned_module.run_feeds, deadline)
>>> verdict.faster, verdict.words()
(True, 'tuned 1.12x faster (95% interval 1.09-1.15x over 30 alternating pairs)')
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

NOISE_FLOOR = 0.02      # a gain under 2% is no reason to keep a log, however significant
BLOCK = 5               # pairs per block
MIN_BLOCKS = 3
MAX_BLOCKS = 24
SETTLED = 0.01          # medians that moved less than this over a block have settled
SAMPLE_SECONDS = 0.02   # a sample is a batch of calls about this long (at least one call)


@dataclass(frozen=True)
class Verdict:
    """Default against tuned: medians (ms), the median ratio default / tuned of the
    alternating pairs and its 95% interval, how many pairs, whether the medians settled."""

    default_ms: float
    tuned_ms: float
    ratio: float
    low: float
    high: float
    pairs: int
    settled: bool

    @property
    def faster(self) -> bool:
        """Tuned is faster beyond the noise (and by more than NOISE_FLOOR)."""
        return self.low > 1 + NOISE_FLOOR

    @property
    def slower(self) -> bool:
        return self.high < 1 / (1 + NOISE_FLOOR)

    def words(self) -> str:
        interval = (f"95% interval {self.low:.2f}-{self.high:.2f}x over {self.pairs} "
                    f"alternating pairs")
        if self.faster:
            text = f"tuned {self.ratio:.2f}x faster ({interval})"
        elif self.slower:
            text = f"tuned slower: {self.ratio:.2f}x ({interval})"
        else:
            text = f"the difference is within noise: {self.ratio:.2f}x ({interval})"
        if not self.settled:
            text += "; the medians had not settled when the time ran out"
        return text

    def to_json(self) -> dict:
        return {"default_ms": self.default_ms, "tuned_ms": self.tuned_ms, "ratio": self.ratio,
                "low": self.low, "high": self.high, "pairs": self.pairs,
                "settled": self.settled, "faster": self.faster, "slower": self.slower}


def median_interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free ~95% interval of the median of ``values`` (order statistics)."""
    ordered = sorted(values)
    n = len(ordered)
    k = max(0, math.floor((n - 1.96 * math.sqrt(n)) / 2))
    return ordered[k], ordered[n - 1 - k]


def _batch_time(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def compare_alternating(default: Callable[[], object], tuned: Callable[[], object],
                        deadline: float | None = None, block: int = BLOCK,
                        min_blocks: int = MIN_BLOCKS, max_blocks: int = MAX_BLOCKS
                        ) -> Verdict:
    """Time ``default`` and ``tuned`` (zero-argument callables) alternating, in blocks of
    ``block`` pairs, until both medians moved less than SETTLED over the last block (at
    least ``min_blocks``), ``max_blocks`` were taken, or ``time.monotonic()`` passed
    ``deadline`` (after one block at least)."""
    for fn in (default, tuned):
        fn()                    # first calls: lazy initialization, page faults
        fn()
    per_call = max(_batch_time(default, 1), _batch_time(tuned, 1), 1e-9)
    calls = max(1, round(SAMPLE_SECONDS / per_call))
    d_samples: list[float] = []
    t_samples: list[float] = []
    ratios: list[float] = []
    previous = None
    settled = False
    for index in range(max_blocks):
        for pair in range(block):
            if (index * block + pair) % 2:
                t = _batch_time(tuned, calls)
                d = _batch_time(default, calls)
            else:
                d = _batch_time(default, calls)
                t = _batch_time(tuned, calls)
            d_samples.append(d)
            t_samples.append(t)
            ratios.append(d / t)
        medians = (statistics.median(d_samples), statistics.median(t_samples))
        if previous is not None:
            settled = all(abs(now - before) <= SETTLED * before
                          for now, before in zip(medians, previous))
        previous = medians
        if index + 1 >= min_blocks and settled:
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
    low, high = median_interval(ratios)
    return Verdict(statistics.median(d_samples) * 1e3, statistics.median(t_samples) * 1e3,
                   statistics.median(ratios), low, high, len(ratios), settled)

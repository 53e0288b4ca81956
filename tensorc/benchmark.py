"""Latency measurement: candidates timed side by side, alternating, after a warm-up.

The machines are shared and noisy, so every candidate runs in turn (A B A B ...) and drift
hits all of them alike; each sample is a batch of calls long enough for the clock; the
median is the figure to quote and the min-max spread says whether the run was quiet.

>>> timings = time_alternating({"sum": lambda: sum(range(100))}, seconds=0.05)
>>> timings["sum"].median_ms > 0
True
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# A min-max spread wider than this (relative to the median) means the machine was busy.
NOISY_SPREAD = 0.10


@dataclass(frozen=True)
class Timing:
    """The per-call latencies of one candidate, one entry per sample, in milliseconds."""

    samples_ms: tuple[float, ...]
    calls_per_sample: int

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def max_ms(self) -> float:
        return max(self.samples_ms)

    @property
    def spread(self) -> float:
        """(max - min) / median."""
        return (self.max_ms - self.min_ms) / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY_SPREAD


def _time_calls(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return time.perf_counter() - start


def time_alternating(
    candidates: Mapping[str, Callable[[], object]],
    seconds: float = 1.5,
    samples: int = 25,
    warmup: int = 3,
    settle: float = 0.02,
) -> dict[str, Timing]:
    """Time each zero-argument callable, alternating between them.

    After ``warmup`` calls each (and at least 50 ms), every candidate gets ``samples``
    samples, taken in turn. A sample is a batch of calls lasting about ``seconds / samples``
    (at least one call of the slowest candidate), so each candidate runs for about
    ``seconds``; a sample's figure is the batch's time per call. Batches long enough to
    average out a stray interrupt keep the min-max spread meaningful. Before each batch the
    machine idles for ``settle`` seconds (not timed), so that the previous candidate's
    spinning worker threads do not compete with this one.
    """
    if not candidates:
        return {}
    per_call: dict[str, float] = {}
    for name, fn in candidates.items():
        fn()  # first call: lazy initialization, page faults
        calls, elapsed = 0, 0.0
        while calls < warmup or elapsed < 0.05:
            elapsed += _time_calls(fn, 1)
            calls += 1
        per_call[name] = max(elapsed / calls, 1e-9)
    samples = max(1, samples)
    sample_seconds = max(seconds / samples, *per_call.values())
    batch = {name: max(1, round(sample_seconds / estimate)) for name, estimate in per_call.items()}
    taken: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(samples):
        for name, fn in candidates.items():
            # Thread pools (onnxruntime's, libgomp's) spin for a while after a call; let the
            # other candidate's workers go idle so that they do not steal this one's cores.
            time.sleep(settle)
            taken[name].append(_time_calls(fn, batch[name]) / batch[name] * 1e3)
    return {name: Timing(tuple(taken[name]), batch[name]) for name in candidates}


def format_ms(timing: Timing) -> str:
    """``median (min-max)`` in milliseconds, with 3 significant digits."""
    return f"{timing.median_ms:.3g} ({timing.min_ms:.3g}-{timing.max_ms:.3g})"

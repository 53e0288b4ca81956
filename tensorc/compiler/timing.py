"""Where a compile's time goes: wall seconds per phase and per kernel, which
``tensorc.compile(..., time_passes=True)`` and ``tensorc compile --time-passes`` print, and
every compiled Module keeps as ``module.compile_times``.

>>> times = CompileTimes()
>>> with times.phase("scheduling", kernel="k0_conv"):
...     pass
>>> print(times.report())
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

# The phases in the order a compile runs them; a report lists them in this order, graph
# passes (named "graph pass <name>") where "graph passes" stands. "python imports": the
# frontend and compiler modules, imported by a process's first compile (see tensorc/api.py).
PHASES = ("python imports", "import and validation", "graph passes", "fusion", "scheduling",
          "lowering to loop IR", "loop passes", "memory plan", "LLVM IR emission",
          "kernel cache", "LLVM optimization", "object emission", "CUDA C emission",
          "nvcc", "module creation")
GRAPH_PASS = "graph pass "


class CompileTimes:
    """Seconds spent in each phase of one compile, and in each kernel (scheduling, lowering,
    loop passes, LLVM IR emission and, where each kernel is a module of its own, LLVM);
    ``total`` is set when the compile returns."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.kernels: dict[str, float] = {}
        self.total = 0.0
        # (worker processes, wall seconds) of the kernels' parallel build, whose phases are
        # summed over the workers (compiler/kernel_objects.py); None when nothing was built
        self.parallel: tuple[int, float] | None = None
        self._start = time.perf_counter()

    def add(self, phase: str, seconds: float, kernel: str | None = None) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        if kernel is not None:
            self.kernels[kernel] = self.kernels.get(kernel, 0.0) + seconds

    @contextmanager
    def phase(self, name: str, kernel: str | None = None) -> Iterator[None]:
        """Time the block as phase ``name`` (and as part of ``kernel``'s time)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start, kernel)

    def finish(self) -> CompileTimes:
        """Set ``total``: wall seconds since this object was made."""
        self.total = time.perf_counter() - self._start
        return self

    def ordered(self) -> list[tuple[str, float]]:
        """(phase, seconds) in the order the compile runs them."""
        def rank(name: str) -> int:
            if name.startswith(GRAPH_PASS):
                return PHASES.index("graph passes")
            return PHASES.index(name) if name in PHASES else len(PHASES)
        return sorted(self.phases.items(), key=lambda item: rank(item[0]))

    def slowest_kernels(self, count: int = 5) -> list[tuple[str, float]]:
        return sorted(self.kernels.items(), key=lambda item: -item[1])[:count]

    def report(self, kernels: int = 5) -> str:
        """A table: each phase's seconds and share of the total, then the slowest kernels."""
        total = self.total or sum(self.phases.values())
        lines = ["compile time by phase:"]
        for name, seconds in self.ordered():
            lines.append(f"  {name:<34} {seconds:8.3f} s {_share(seconds, total)}")
        other = total - sum(self.phases.values())
        if other > 0.0005:
            lines.append(f"  {'other':<34} {other:8.3f} s {_share(other, total)}")
        lines.append(f"  {'total':<34} {total:8.3f} s")
        if self.parallel is not None and self.parallel[0] > 1:
            workers, wall = self.parallel
            lines.append(f"(the kernels were built by {workers} processes in {wall:.3f} s of "
                         f"wall time: their phases add up the processes' seconds)")
        slowest = self.slowest_kernels(kernels)
        if slowest:
            lines.append("slowest kernels (scheduling, lowering, loop passes, IR emission, "
                         "LLVM):")
            for name, seconds in slowest:
                lines.append(f"  {name:<34} {seconds:8.3f} s")
        return "\n".join(lines)


def _share(seconds: float, total: float) -> str:
    return f"{100 * seconds / total:5.1f}%" if total > 0 else ""

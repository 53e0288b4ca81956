"""This machine's roofline: peak arithmetic rate and memory bandwidth, measured and cached.

The memory roof is hierarchical: a bandwidth for each cache level (L1, L2, L3) and for DRAM,
and a kernel's memory bound is taken at the smallest level its working set (the bytes one call
reads and writes) fits in, since kernels are timed over and over with hot caches; the part of
the working set that the faster levels can hold is counted at their bandwidth (a working set
of 800 KB keeps up to 512 KB in L2 and streams the rest from L3), so that the bound stays a
least time that no kernel beats.

All figures are measured per thread count (two cores share one memory bus) as the best of many
short runs (``microbench.py``), so that other processes on the machine cannot lower them silently,
and the peak is checked against the instruction set's FLOPs per cycle times the clock
(``cpu_limits.py``). The cache, ``machine.json`` under ``cache_root()``, keyed by CPU name,
features and core count, records when, how and by which tensorc each figure was measured; an
entry that is corrupt, was measured by another method or version, on a busy machine, or fails
the plausibility check is measured again, never trusted. Only the first profile on a machine
pays the second or so a measurement takes.

>>> roofline = machine_roofline(threads=1)
>>> roofline.peak_gflops, roofline.bandwidth_gbs      # e.g. (92.9, 12.6) on a Zen 3 core
>>> roofline.memory_level(200_000)                    # MemoryLevel('L2', 524288, 68.9)
>>> print(roofline.provenance())
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path

from tensorc.runtime import microbench
from tensorc.runtime.cache_dir import cache_root
from tensorc.runtime.cpu_limits import IsaBound, data_caches, isa_bound
from tensorc.target import Target
from tensorc.version import __version__

# Changing how the figures are measured changes this, so older caches are measured again.
METHOD = (f"best of short runs (~{microbench.RUN_SECONDS * 1e3:.0f} ms each), dropping runs in "
          f"which a thread lost its core; a copy per cache level")
CACHE_FORMAT = 2
# A t-thread figure below this share of a fewer-thread one was measured on a busy machine.
MONOTONE = 0.9


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory roof: working sets up to ``capacity`` bytes (all threads
    together; 0: any size) move at ``gbs``."""

    name: str                   # "L1", "L2", "L3", "DRAM"
    capacity: int
    gbs: float

    def text(self) -> str:
        size = (f" <={_bytes_text(self.capacity)}" if self.capacity else "")
        return f"{self.name}{size} {self.gbs:.1f} GB/s"


@dataclass(frozen=True)
class Roofline:
    """Peak FLOP/s and memory bandwidth at some thread count, and where they came from.
    ``bandwidth_gbs`` is memory's (DRAM); ``levels``, where measured, the caches' too."""

    peak_gflops: float
    bandwidth_gbs: float
    threads: int = 1
    source: str = "given"           # "given", "measured" (now) or "cached"
    measured_at: str = ""           # UTC, ISO 8601
    method: str = ""
    runs: int = 0                   # clean runs the best of which the peak is
    isa_gflops: float = 0.0         # FLOPs/cycle x clock x threads; 0.0 when not known
    isa_basis: str = ""             # how isa_gflops was formed, or why there is none
    version: str = ""               # the tensorc that measured
    warning: str = ""               # what is doubtful about these figures, if anything
    remeasured: str = ""            # why a cached entry was not used, if one was there
    levels: tuple[MemoryLevel, ...] = ()    # smallest first, DRAM last; () for one flat roof

    def memory_level(self, nbytes: float) -> MemoryLevel:
        """The level a working set of ``nbytes`` fits in (the flat roof where there are no
        levels)."""
        for level in self.levels:
            if not level.capacity or nbytes <= level.capacity:
                return level
        return MemoryLevel("memory", 0, self.bandwidth_gbs)

    def memory_seconds(self, nbytes: float) -> float:
        """The least time ``nbytes`` of working set take to move: the first L1-capacity bytes
        at L1's bandwidth, the next up to L2's capacity at L2's, and so on to the level that
        holds them all."""
        if not self.levels:
            return nbytes / (self.bandwidth_gbs * 1e9)
        seconds, below = 0.0, 0.0
        for level in self.levels:
            top = level.capacity or math.inf
            seconds += max(0.0, min(nbytes, top) - below) / (level.gbs * 1e9)
            if nbytes <= top:
                break
            below = top
        return seconds

    def bound_seconds(self, flops: float, nbytes: float) -> float:
        """The least time a kernel doing ``flops`` and moving ``nbytes`` (its working set)
        can take."""
        return max(flops / (self.peak_gflops * 1e9), self.memory_seconds(nbytes))

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOP/byte) where compute becomes the bound."""
        return self.peak_gflops / self.bandwidth_gbs

    def provenance(self) -> str:
        """Where the figures came from, in a line or two."""
        if self.source == "given":
            return "given, not measured"
        when = self.measured_at.replace("T", " ").replace("+00:00", " UTC")
        head = ("measured now" if self.source == "measured"
                else f"cached in {cache_file()}, measured {when}")
        text = f"{head} by tensorc {self.version}: {self.method}; {self.runs} clean runs"
        if self.remeasured:
            text += f" ({self.remeasured})"
        if self.isa_gflops:
            text += (f"\n  plausibility: the peak is {self.peak_gflops / self.isa_gflops:.0%} of "
                     f"{self.isa_gflops:.1f} GFLOP/s = {min(self.threads, os.cpu_count() or 1)} "
                     f"x {self.isa_basis}")
        elif self.isa_basis:
            text += f"\n  {self.isa_basis}"
        if self.levels:
            text += ("\n  memory by working set: "
                     + ", ".join(level.text() for level in self.levels))
        return text


def _bytes_text(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} B"


def cache_file() -> Path:
    return cache_root() / "machine.json"


def _machine_key(target: Target) -> str:
    text = f"{target.mcpu}|{target.features}|{os.cpu_count()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _read_cache() -> dict:
    """The cache's entries, {} when the file is missing, corrupt or of another format."""
    try:
        data = json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def _write_cache(entries: dict) -> None:
    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": CACHE_FORMAT, "entries": entries}, indent=1))
        tmp.replace(path)
    except OSError:
        pass      # an unwritable cache only costs a measurement next time


def _entry(data: object) -> Roofline | None:
    """A cached entry as a Roofline, None when it is malformed."""
    if not isinstance(data, dict) or set(data) != {f.name for f in fields(Roofline)}:
        return None
    if not _typed(data, Roofline, skip="levels") or not isinstance(data["levels"], list):
        return None
    if not all(isinstance(level, dict) and set(level) == {"name", "capacity", "gbs"}
               and _typed(level, MemoryLevel) and level["gbs"] > 0 and level["capacity"] >= 0
               for level in data["levels"]):
        return None
    roofline = Roofline(**{**data, "levels": tuple(MemoryLevel(**x) for x in data["levels"])})
    if roofline.peak_gflops <= 0 or roofline.bandwidth_gbs <= 0 or roofline.threads < 1:
        return None
    return roofline


def _typed(data: dict, kind: type, skip: str = "") -> bool:
    """Whether ``data``'s values have the types of ``kind``'s fields (finite numbers)."""
    kinds = {"float": (int, float), "int": (int,), "str": (str,)}
    for f in fields(kind):
        if f.name == skip:
            continue
        value = data[f.name]
        if isinstance(value, bool) or not isinstance(value, kinds[f.type]):
            return False
        if f.type == "float" and not math.isfinite(value):
            return False
    return True


def distrust(cached: Roofline, bound: IsaBound, fewer: list[Roofline]) -> str:
    """Why a cached roofline must be measured again ('' when it can be used): measured by
    another method or tensorc, with no clean run, implausible against the instruction set,
    or below the figures of fewer threads."""
    if cached.method != METHOD or cached.version != __version__:
        return f"measured by another tensorc ({cached.version or 'unknown'})"
    if cached.runs <= 0:
        return "measured while the machine was busy (no clean run)"
    verdict = bound.verdict(cached.peak_gflops, cached.threads)
    if verdict:
        return f"implausible: {verdict}"
    for other in fewer:
        if cached.peak_gflops < MONOTONE * other.peak_gflops:
            return (f"implausible: {cached.peak_gflops:.1f} GFLOP/s at {cached.threads} "
                    f"threads, {other.peak_gflops:.1f} at {other.threads}")
        if cached.bandwidth_gbs < MONOTONE * other.bandwidth_gbs:
            return (f"implausible: {cached.bandwidth_gbs:.1f} GB/s at {cached.threads} "
                    f"threads, {other.bandwidth_gbs:.1f} at {other.threads}")
    return ""


def measure(target: Target, threads: int, bound: IsaBound) -> Roofline:
    """Measure the roofline at ``threads`` threads now; a peak the instruction set makes
    implausible is measured once more, and a doubtful figure carries a warning."""
    peak = microbench.measure_peak(target, threads)
    verdict = bound.verdict(peak.rate, threads)
    if verdict:
        again = microbench.measure_peak(target, threads)
        if (again.clean, again.rate) > (peak.clean, peak.rate):
            peak = again
        verdict = bound.verdict(peak.rate, threads)
    caches = data_caches()
    copies = {f"L{cache.level}": (cache.capacity(threads),
                                  microbench.measure_cache_bandwidth(target, cache, threads))
              for cache in caches}
    copies["DRAM"] = (0, microbench.measure_bandwidth(
        target, threads, caches[-1].capacity(threads) if caches else 0))
    busy = [name for name, (_, best) in copies.items() if not best.clean]
    warning = "; ".join(
        text for text in (verdict,
                          "" if peak.clean else "the machine was busy in every peak run",
                          f"the machine was busy in every {', '.join(busy)} copy run"
                          if busy else "")
        if text)
    # a cache is never slower than the memory behind it: a level measured so was disturbed
    levels: list[MemoryLevel] = []
    for name, (capacity, best) in reversed(copies.items()):
        levels.insert(0, MemoryLevel(name, capacity, max([best.rate] + [x.gbs for x in levels])))
    return Roofline(
        peak.rate, levels[-1].gbs, threads, "measured",
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), method=METHOD,
        runs=min(best.clean for best in [peak] + [b for _, b in copies.values()]),
        isa_gflops=bound.gflops(threads), isa_basis=bound.basis,
        version=__version__, warning=warning, levels=tuple(levels))


def machine_roofline(target: Target | None = None, threads: int = 1, remeasure: bool = False
                     ) -> Roofline:
    """The roofline of this machine at ``threads`` threads, from the cache when a trusted
    entry is there, else measured now (and cached). ``remeasure`` measures anyway and keeps
    the better of a trusted cached figure and the new one (a busy machine measures low)."""
    target = target or Target.host()
    threads = max(1, threads)
    machine = _machine_key(target)
    entries = _read_cache()
    bound = isa_bound(target)
    cached = _entry(entries.get(f"{machine}/{threads}"))
    fewer = [e for t in range(1, threads) if (e := _entry(entries.get(f"{machine}/{t}")))]
    doubt = distrust(cached, bound, fewer) if cached is not None else ""
    if cached is not None and not doubt and not remeasure:
        return replace(cached, source="cached", isa_basis=bound.basis,
                       isa_gflops=bound.gflops(threads))
    fresh = measure(target, threads, bound)
    if cached is not None and not doubt:
        # each figure the better of two measurements, the cached one trusted: no busy warning
        peak = max(fresh.peak_gflops, cached.peak_gflops)
        fresh = replace(fresh, peak_gflops=peak,
                        bandwidth_gbs=max(fresh.bandwidth_gbs, cached.bandwidth_gbs),
                        levels=_better_levels(fresh.levels, cached.levels),
                        runs=max(fresh.runs, cached.runs), warning=bound.verdict(peak, threads))
    elif doubt:
        fresh = replace(fresh, remeasured=f"the cached figures were {doubt}")
    entries[f"{machine}/{threads}"] = asdict(replace(fresh, source="cached", remeasured=""))
    _write_cache(entries)
    return fresh


def _better_levels(fresh: tuple[MemoryLevel, ...], cached: tuple[MemoryLevel, ...]
                   ) -> tuple[MemoryLevel, ...]:
    """Each of the fresh levels at the better of its fresh and cached bandwidth."""
    old = {level.name: level for level in cached}
    return tuple(replace(level, gbs=max(level.gbs, old[level.name].gbs))
                 if level.name in old and old[level.name].capacity == level.capacity else level
                 for level in fresh)

"""What this CPU is built to do: fp32 FLOPs per cycle times the clock, the figure a measured
peak is checked against, and the sizes of its data caches, which the memory roof has a level for.

A measurement far above it is wrong (a broken timer, a cache from another machine); one far
below it was taken while something else ran. The FLOPs per cycle come from a small table of
the cores whose FMA pipes are known; on any other CPU there is no check, and ``basis`` says so.

>>> isa_bound(Target.host())          # doctest: +SKIP
IsaBound(gflops_per_core=78.2, basis='32 FLOP/cycle (Zen 3: two 256-bit FMA pipes) x ...')
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tensorc.target import Target

CPUINFO = Path("/proc/cpuinfo")
CPUFREQ_MAX = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")

# How far above FLOPs/cycle x clock a measurement may land: boost clocks run above the clock
# /proc/cpuinfo shows in a VM (EPYC 7763: 2.45 GHz base, 3.5 GHz boost), and a little above
# cpufreq's maximum where the kernel reports the highest non-boost state.
HEADROOM = {"cpufreq": 1.25, "cpuinfo": 1.5}
# Below this fraction of the bound the measurement shared its core with other work.
LOW_FRACTION = 0.5


@dataclass(frozen=True)
class IsaBound:
    """fp32 GFLOP/s one core can issue (0.0 when this CPU's FMA pipes are not known)."""

    gflops_per_core: float
    basis: str                  # how the figure was formed, or why there is none
    headroom: float = 1.0       # the most a real measurement can exceed it by

    @property
    def known(self) -> bool:
        return self.gflops_per_core > 0

    def gflops(self, threads: int) -> float:
        """The bound of ``threads`` threads: one core's each, as far as there are cores."""
        return self.gflops_per_core * min(threads, os.cpu_count() or threads)

    def verdict(self, gflops: float, threads: int) -> str:
        """'' when ``gflops`` at ``threads`` threads is plausible, else why it is not."""
        if not self.known:
            return ""
        bound = self.gflops(threads)
        if gflops > bound * self.headroom:
            return (f"{gflops:.1f} GFLOP/s is {gflops / bound:.1f}x the instruction set's "
                    f"{bound:.1f}")
        if gflops < bound * LOW_FRACTION:
            return (f"{gflops:.1f} GFLOP/s is {gflops / bound:.0%} of the instruction set's "
                    f"{bound:.1f} (measured on a busy machine?)")
        return ""


def flops_per_cycle(vendor: str, family: int, model: int, avx512: bool
                    ) -> tuple[int, str] | None:
    """fp32 FLOPs one core issues per cycle, with the reason; None for a CPU not in the table."""
    if vendor != "AuthenticAMD":
        return None
    if family == 26:
        return 64, "Zen 5: two 512-bit FMA pipes"
    if family == 25:
        return 32, ("Zen 4: 512-bit FMAs at half rate" if avx512
                    else "Zen 3: two 256-bit FMA pipes")
    if family == 23:
        return (32, "Zen 2: two 256-bit FMA pipes") if model >= 0x30 else \
            (16, "Zen: two 128-bit FMA pipes")
    return None


def read_clock(cpuinfo: str, max_khz: str | None) -> tuple[float, str] | None:
    """The core clock in GHz and where it was read: cpufreq's maximum, else /proc/cpuinfo's
    ``cpu MHz``."""
    if max_khz and max_khz.strip().isdigit() and int(max_khz) > 0:
        return int(max_khz) / 1e6, "cpufreq"
    found = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo, re.MULTILINE)
    if found and float(found.group(1)) > 0:
        return float(found.group(1)) / 1e3, "cpuinfo"
    return None


def bound_from(cpuinfo: str, max_khz: str | None, avx512: bool) -> IsaBound:
    """The bound for a CPU described by ``/proc/cpuinfo``'s text and cpufreq's maximum (kHz)."""
    def field(name: str) -> str:
        found = re.search(rf"^{name}\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
        return found.group(1).strip() if found else ""
    vendor = field("vendor_id")
    try:
        family, model = int(field("cpu family")), int(field("model"))
    except ValueError:
        return IsaBound(0.0, "no plausibility check: /proc/cpuinfo gives no cpu family")
    per_cycle = flops_per_cycle(vendor, family, model, avx512)
    if per_cycle is None:
        return IsaBound(0.0, f"no plausibility check: FMA pipes of {vendor or '?'} family "
                             f"{family} model {model} are not known to tensorc")
    clock = read_clock(cpuinfo, max_khz)
    if clock is None:
        return IsaBound(0.0, "no plausibility check: no clock in /proc/cpuinfo or cpufreq")
    (flops, why), (ghz, where) = per_cycle, clock
    where_text = "cpufreq max" if where == "cpufreq" else "/proc/cpuinfo cpu MHz"
    return IsaBound(flops * ghz, f"{flops} FLOP/cycle ({why}) x {ghz:.2f} GHz ({where_text})",
                    HEADROOM[where])


def isa_bound(target: Target) -> IsaBound:
    """This machine's bound, for code built for ``target`` (its AVX-512 decides Zen 4's rate)."""
    try:
        cpuinfo = CPUINFO.read_text()
    except OSError:
        return IsaBound(0.0, "no plausibility check: /proc/cpuinfo is not readable")
    try:
        max_khz = CPUFREQ_MAX.read_text()
    except OSError:
        max_khz = None
    return bound_from(cpuinfo, max_khz, "+avx512f" in target.features)


@dataclass(frozen=True)
class Cache:
    """One level of data cache as seen from one core."""

    level: int                  # 1, 2, 3
    bytes: int
    sharing: int = 1            # cores that share it

    def capacity(self, threads: int) -> int:
        """The bytes ``threads`` threads on as many cores hold in this level together."""
        return self.bytes * -(-threads // self.sharing)


def _cpu_count(cpu_list: str) -> int:
    """Cores in a sysfs list such as ``0-3,8``."""
    count = 0
    for part in cpu_list.strip().split(","):
        low, _, high = part.partition("-")
        if low.isdigit():
            count += int(high) - int(low) + 1 if high.isdigit() else 1
    return max(count, 1)


def _size(text: str) -> int:
    text = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else 0


def data_caches(root: Path = CACHES) -> list[Cache]:
    """The data (and unified) caches of cpu0 from sysfs, smallest level first; [] where sysfs
    does not describe them."""
    found: dict[int, Cache] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _size((index / "size").read_text())
            sharing = _cpu_count((index / "shared_cpu_list").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size > 0:
            found[level] = Cache(level, size, sharing)
    return [found[level] for level in sorted(found)]

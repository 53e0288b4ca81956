"""Per-kernel profiles of a compiled model: time, share, FLOP/s, bytes/s and percent of the
roofline bound of each kernel.

The times come from the model's own entry function, which adds each kernel call's wall time to
a buffer when it is given one (``LLVMCodegen.add_entry``, codegen/llvm/codegen.py): the kernels
run as in a normal inference, in order, on the same arena, with no rebuild. A kernel's roofline
bound is ``max(flops / peak, bytes / bandwidth)``, the bandwidth that of the memory level its
working set (``bytes``, read and written by one call) fits in: the runs are back to back, so a
kernel whose data fits in L2 finds it there (and the part of it the faster levels can hold is
counted at their speed, ``Roofline.memory_seconds``). A kernel far below its bound is a
schedule to fix, whatever the model's total says. A kernel above its bound is shown above 100%
and flagged, never clipped: the roofline is wrong (a figure measured low: a cached roofline
that a kernel beats is measured again), or the kernel's data sat in a faster level than its
size suggests.

>>> profile = module.profile(feeds)
>>> print(profile.table())          # sorted by time
>>> profile.write_trace("trace.json")   # chrome://tracing or ui.perfetto.dev
"""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Mapping

from tensorc.errors import TensorcError
from tensorc.ir.dims import DimLike, dim_from_json, dim_to_json, evaluate
from tensorc.ir.types import format_shape
from tensorc.runtime.machine import Roofline, machine_roofline


@dataclass(frozen=True)
class KernelInfo:
    """What one kernel call of the entry function does (recorded at compile time)."""

    name: str                   # the kernel function (shared by identical workloads)
    ops: tuple[str, ...]        # the graph ops fused into it, in order
    # its output's shape, FLOPs and bytes: expressions of the dims in a module over symbolic
    # dims (``at`` gives a run's figures)
    shape: tuple[DimLike, ...]
    dtype: str
    flops: DimLike
    bytes: DimLike
    nodes: tuple[str, ...] = ()  # the graph nodes fused into it (named after ONNX nodes)

    def at(self, values: Mapping[str, int]) -> KernelInfo:
        """The figures of a run whose symbolic dims take ``values``."""
        return replace(self, shape=tuple(evaluate(d, values) for d in self.shape),
                       flops=evaluate(self.flops, values), bytes=evaluate(self.bytes, values))

    def to_json(self) -> dict:
        return {"name": self.name, "ops": list(self.ops),
                "shape": [dim_to_json(d) for d in self.shape], "dtype": self.dtype,
                "flops": dim_to_json(self.flops), "bytes": dim_to_json(self.bytes),
                "nodes": list(self.nodes)}

    @staticmethod
    def from_json(data: dict) -> KernelInfo:
        return KernelInfo(str(data["name"]), tuple(data["ops"]),
                          tuple(dim_from_json(d) for d in data["shape"]),
                          str(data["dtype"]), dim_from_json(data["flops"]),
                          dim_from_json(data["bytes"]),
                          tuple(str(n) for n in data.get("nodes", ())))


@dataclass(frozen=True)
class KernelTiming:
    """One kernel call's median time beside what it does and its roofline figures."""

    index: int                  # position in the entry function's calls
    info: KernelInfo
    seconds: float              # median over the profiled runs
    bound_seconds: float        # the roofline's least time for its FLOPs and bytes
    level: str = "memory"       # the memory level its working set fits in (L1 ... DRAM)

    @property
    def gflops(self) -> float:
        return self.info.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def gbs(self) -> float:
        return self.info.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.info.flops / self.info.bytes if self.info.bytes else 0.0

    @property
    def roofline_fraction(self) -> float:
        """bound time / measured time: 1.0 means the kernel runs at the machine's limit, more
        than 1.0 that it beat the bound (not clipped: the roofline or the bound is wrong)."""
        return self.bound_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def above_bound(self) -> bool:
        return self.roofline_fraction > 1.0


@dataclass
class Profile:
    """The kernels of one model at one thread count, in execution order."""

    kernels: list[KernelTiming]
    end_to_end_seconds: float   # median latency of uninstrumented runs
    threads: int
    roofline: Roofline
    runs: int
    model: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def kernel_seconds(self) -> float:
        return sum(k.seconds for k in self.kernels)

    def by_time(self) -> list[KernelTiming]:
        return sorted(self.kernels, key=lambda k: -k.seconds)

    def above_bound(self) -> list[KernelTiming]:
        """The kernels that ran faster than their roofline bound allows."""
        return [k for k in self.kernels if k.above_bound]

    def warnings(self) -> list[str]:
        """What makes the roofline figures doubtful: kernels above their bound, a doubtful
        measurement."""
        out = []
        if self.roofline.warning:
            out.append(f"the roofline's measurement is doubtful: {self.roofline.warning}")
        above = self.above_bound()
        if above:
            worst = max(above, key=lambda k: k.roofline_fraction)
            out.append(
                f"{len(above)} kernel{'s' if len(above) != 1 else ''} ran faster than the "
                f"roofline allows (marked !; up to {_percent(worst.roofline_fraction)}, kernel "
                f"{worst.index} {worst.info.name}): the peak or bandwidth is too low (run "
                f"'tensorc profile --remeasure' on a quiet machine), or the kernel's data "
                f"sat in a faster level than its size suggests")
        return out

    def with_roofline(self, roofline: Roofline) -> Profile:
        """The same timings against another roofline."""
        kernels = [replace(k, bound_seconds=roofline.bound_seconds(k.info.flops, k.info.bytes),
                           level=roofline.memory_level(k.info.bytes).name)
                   for k in self.kernels]
        return replace(self, kernels=kernels, roofline=roofline, notes=list(self.notes))

    def table(self, top: int | None = None) -> str:
        """A readable table, slowest kernel first."""
        total = self.kernel_seconds or 1.0
        header = ["#", "kernel", "ops", "shape", "ms", "share", "MFLOP", "KB", "GFLOP/s", "GB/s",
                  "level", "roofline"]
        rows = []
        shown = self.by_time()[:top] if top else self.by_time()
        for k in shown:
            rows.append([str(k.index), k.info.name, _ops_text(k.info.ops),
                         format_shape(k.info.shape),
                         f"{k.seconds * 1e3:.4f}", f"{k.seconds / total:.1%}",
                         f"{k.info.flops / 1e6:.2f}", f"{k.info.bytes / 1e3:.1f}",
                         f"{k.gflops:.1f}", f"{k.gbs:.1f}", k.level, _fraction_cell(k)])
        lines = [_format_table(header, rows)]
        if top and len(self.kernels) > top:
            lines.append(f"... {len(self.kernels) - top} more kernels")
        gap = self.kernel_seconds / self.end_to_end_seconds - 1 if self.end_to_end_seconds else 0
        lines.append(
            f"{len(self.kernels)} kernel calls: {self.kernel_seconds * 1e3:.3f} ms summed; "
            f"end to end {self.end_to_end_seconds * 1e3:.3f} ms ({gap:+.1%}); "
            f"{self.threads} thread{'s' if self.threads != 1 else ''}; median of {self.runs} runs")
        lines.append(f"roofline: {self.roofline.peak_gflops:.1f} GFLOP/s peak, "
                     f"{self.roofline.bandwidth_gbs:.1f} GB/s memory; roofline = bound time / "
                     f"measured time, the memory bound at the level each kernel's bytes fit in")
        lines.append(f"  {self.roofline.provenance()}")
        lines.extend(self.notes)
        lines.extend(f"WARNING: {w}" for w in self.warnings())
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "threads": self.threads,
            "runs": self.runs,
            "end_to_end_ms": self.end_to_end_seconds * 1e3,
            "kernel_sum_ms": self.kernel_seconds * 1e3,
            "roofline": asdict(self.roofline),
            "warnings": self.warnings(),
            "kernels": [
                {"index": k.index, "name": k.info.name, "ops": list(k.info.ops),
                 "shape": list(k.info.shape), "dtype": k.info.dtype, "ms": k.seconds * 1e3,
                 "share": k.seconds / (self.kernel_seconds or 1.0), "flops": k.info.flops,
                 "bytes": k.info.bytes, "gflops": k.gflops, "gbs": k.gbs,
                 "intensity": k.intensity, "bound_ms": k.bound_seconds * 1e3,
                 "level": k.level,
                 "bound_gbs": _bound_gbs(self.roofline, k.info.bytes),
                 "roofline": k.roofline_fraction, "above_bound": k.above_bound}
                for k in self.by_time()],
        }

    def chrome_trace(self) -> dict:
        """A Chrome/Perfetto trace of one run laid out with the median times (``X`` events,
        microseconds)."""
        events, now = [], 0.0
        for k in self.kernels:
            dur = k.seconds * 1e6
            events.append({"name": k.info.name, "cat": "kernel", "ph": "X", "ts": now,
                           "dur": dur, "pid": 1, "tid": 1,
                           "args": {"ops": " ".join(k.info.ops),
                                    "shape": format_shape(k.info.shape),
                                    "GFLOP/s": round(k.gflops, 2), "GB/s": round(k.gbs, 2),
                                    "level": k.level,
                                    "roofline": round(k.roofline_fraction, 3)}})
            now += dur
        meta = {"name": "process_name", "ph": "M", "pid": 1,
                "args": {"name": f"tensorc {self.model}".strip()}}
        return {"traceEvents": [meta, *events], "displayTimeUnit": "ms"}

    def write_trace(self, path: str | Path) -> None:
        _write_text(path, json.dumps(self.chrome_trace()))

    def plot(self, path: str | Path) -> None:
        """A roofline chart (arithmetic intensity vs GFLOP/s, a dot per kernel) as an image;
        needs matplotlib (``pip install tensorc[plot]``)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise TensorcError("--plot needs matplotlib: pip install 'tensorc[plot]' (or "
                               "pip install matplotlib)") from None
        r = self.roofline
        points = [k for k in self.kernels if k.info.flops > 0 and k.info.bytes > 0]
        fig, ax = plt.subplots(figsize=(8, 5.5))
        levels = r.levels or (r.memory_level(0),)        # a roof per memory level
        ridges = [r.peak_gflops / level.gbs for level in levels]
        lo = min([k.intensity for k in points] + [x / 100 for x in ridges]) / 2
        hi = max([k.intensity for k in points] + [x * 100 for x in ridges]) * 2
        for level, ridge, style in zip(reversed(levels), reversed(ridges),
                                       ["-", "--", "-.", ":", ":"]):
            xs = [lo, ridge, hi]
            ax.plot(xs, [min(r.peak_gflops, x * level.gbs) for x in xs], color="black",
                    linestyle=style, linewidth=1.0,
                    label=f"{level.text()}" + ("" if level.capacity else
                                               f", {r.peak_gflops:.0f} GFLOP/s peak"))
        total = self.kernel_seconds or 1.0
        sizes = [20 + 400 * k.seconds / total for k in points]
        colors = [k.roofline_fraction for k in points]
        dots = ax.scatter([k.intensity for k in points], [k.gflops for k in points], s=sizes,
                          c=colors, cmap="RdYlGn", vmin=0, vmax=1,
                          edgecolors=["red" if k.above_bound else "black" for k in points],
                          linewidths=[2.0 if k.above_bound else 0.5 for k in points])
        named = sorted(points, key=lambda k: -k.seconds)[:8]
        for k in named + [k for k in points if k.above_bound and k not in named]:
            label = f"{k.info.name} ({k.level})"
            label += f" {_percent(k.roofline_fraction)}!" if k.above_bound else ""
            ax.annotate(label, (k.intensity, k.gflops), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{self.model or 'model'}: kernels on the roofline, {self.threads} "
                     f"thread{'s' if self.threads != 1 else ''} (dot area = share of time)")
        fig.colorbar(dots, ax=ax, label="fraction of roofline bound (red edge: above it)")
        ax.legend(loc="lower right")
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        try:
            fig.savefig(str(path), dpi=120)
        except OSError as exc:
            raise TensorcError(f"cannot write the plot {path}: {exc.strerror or exc}") from None
        finally:
            plt.close(fig)


def build_profile(infos: list[KernelInfo], samples_ns: list[list[int]],
                  end_to_end_s: list[float], roofline: Roofline, model: str = "") -> Profile:
    """Reduce per-run kernel times (``samples_ns[run][kernel]``) to medians. A kernel faster
    than a cached roofline allows has the machine measured again (``recheck_roofline``)."""
    kernels = []
    for index, info in enumerate(infos):
        seconds = statistics.median(run[index] for run in samples_ns) / 1e9
        kernels.append(KernelTiming(index, info, seconds,
                                    roofline.bound_seconds(info.flops, info.bytes),
                                    roofline.memory_level(info.bytes).name))
    profile = Profile(kernels, statistics.median(end_to_end_s), roofline.threads, roofline,
                      len(samples_ns), model)
    return recheck_roofline(profile)


def recheck_roofline(profile: Profile) -> Profile:
    """A cached roofline that some kernel beats (its peak, or the bandwidth of the kernel's
    memory level) was likely measured low, on a busy machine: measure the machine again,
    keeping the better figures, and recompute the bounds. Given and freshly measured
    rooflines are left as they are."""
    roofline = profile.roofline
    above = profile.above_bound()
    if roofline.source != "cached" or not above:
        return profile
    worst = max(above, key=lambda k: k.roofline_fraction)
    fresh = machine_roofline(threads=roofline.threads, remeasure=True)
    again = profile.with_roofline(fresh)
    again.notes.append(
        f"kernel {worst.index} {worst.info.name} ran at {_percent(worst.roofline_fraction)} of "
        f"its bound by the cached roofline ({roofline.peak_gflops:.1f} GFLOP/s peak): measured "
        f"again, {fresh.peak_gflops:.1f} GFLOP/s, "
        + ", ".join(level.text() for level in fresh.levels or (fresh.memory_level(0),)))
    return again


def _percent(fraction: float) -> str:
    """A percent that reads above 100% whenever ``fraction`` is above 1."""
    text = f"{fraction:.0%}"
    return f"{fraction:.1%}" if fraction > 1 and text == "100%" else text


def _bound_gbs(roofline: Roofline, nbytes: int) -> float:
    """The bandwidth the memory bound of a working set of ``nbytes`` allows."""
    seconds = roofline.memory_seconds(nbytes)
    return nbytes / seconds / 1e9 if seconds > 0 else roofline.memory_level(nbytes).gbs


def _fraction_cell(k: KernelTiming) -> str:
    return _percent(k.roofline_fraction) + ("!" if k.above_bound else "")


def _ops_text(ops: tuple[str, ...], limit: int = 40) -> str:
    text = "+".join(ops)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    left = {1, 2, 3}

    def line(cells):
        return "  ".join(str(c).ljust(w) if i in left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _write_text(path: str | Path, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise TensorcError(f"cannot write {path}: {exc.strerror or exc}") from None

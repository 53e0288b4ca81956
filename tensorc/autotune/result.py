"""What a tuning run found: per task, the default and tuned latencies (timed again side by
side at the end), the best config and the best-so-far curve; a table for people and JSON for
programs.

>>> result = tensorc.tune("model.onnx", trials=64, log="tune.jsonl")
>>> print(result.table())
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TaskResult:
    name: str
    description: str
    weight: int
    flops: int
    trials: int
    errors: int
    default_latency: float | None
    best_latency: float | None
    best_config: dict | None
    curve: list[float]          # best latency after each trial
    # the search's best config timed slower than the default beside it: the model keeps the
    # default (a compile prefers the faster confirmed record), and so does this result
    kept_default: bool = False
    # the default and best were timed again side by side (else: the search's own figures,
    # when the time ran out first)
    confirmed: bool = False

    @property
    def speedup(self) -> float:
        if not self.default_latency or not self.best_latency:
            return 1.0
        return self.default_latency / self.best_latency

    def gflops(self, latency: float | None) -> float:
        return self.flops / latency / 1e9 if latency else 0.0



@dataclass
class TuneResult:
    tasks: list[TaskResult]
    trials: int
    seconds: float
    log: str
    end_to_end: dict = field(default_factory=dict)     # default_ms, tuned_ms, onnxruntime_ms
    # over symbolic dims: the tuning shapes (batch=1,seq=7 each); end_to_end has a row each
    shapes: list = field(default_factory=list)

    def table(self) -> str:
        header = ["task", "ops", "weight", "trials", "errors", "default ms", "tuned ms",
                  "GFLOP/s", "speed-up", "applied"]
        rows = []
        for t in self.tasks:
            rows.append([t.name, t.description[:34], str(t.weight), str(t.trials),
                         str(t.errors), _ms(t.default_latency), _ms(t.best_latency),
                         f"{t.gflops(t.best_latency):.1f}",
                         f"{t.speedup:.2f}x" + ("" if t.confirmed or not t.trials else "*"),
                         "default" if t.kept_default or t.best_config is None else "tuned"])
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(r, widths)))
                 for r in [header, ["-" * w for w in widths], *rows]]
        weighted_default = sum(t.weight * (t.default_latency or 0) for t in self.tasks)
        weighted_best = sum(t.weight * (t.best_latency or t.default_latency or 0)
                            for t in self.tasks)
        lines.append(f"{self.trials} trials in {self.seconds:.0f} s; kernel time (weighted "
                     f"sum) {weighted_default * 1e3:.3f} -> {weighted_best * 1e3:.3f} ms")
        if self.shapes:
            lines.append(f"tuned over symbolic dims at {len(self.shapes)} shapes: "
                         f"{'; '.join(self.shapes)} (kernel times: geometric means over the "
                         f"shapes where each runs its own schedule)")
        if any(t.trials and not t.confirmed for t in self.tasks):
            lines.append("* the search's single measurements: not timed again beside the "
                         "default (no faster config found, or the time ran out)")
        lines.extend(self._end_to_end_lines())
        return "\n".join(lines)

    def _end_to_end_lines(self) -> list[str]:
        """The end-to-end figures and the verdict on the log: recommended only when the
        tuned model is faster beyond the noise."""
        e2e = self.end_to_end
        apply = f"tensorc compile --tuning-log {self.log}"
        if not e2e:
            return [f"log: {self.log} (not timed end to end; {apply} applies it)"]
        if "shapes" in e2e:
            return self._shape_lines(apply)
        text = (f"end to end ({e2e.get('threads', 0) or 'all'} threads): default "
                f"{e2e['default_ms']:.3f} ms, tuned {e2e['tuned_ms']:.3f} ms")
        if e2e.get("onnxruntime_ms"):
            text += f", onnxruntime {e2e['onnxruntime_ms']:.3f} ms"
        verdict = e2e.get("verdict") or {}
        lines = [text, f"  {e2e.get('verdict_text', '')}"]
        if verdict.get("faster"):
            lines.append(f"log: {self.log} makes the model faster: {apply}")
        elif verdict.get("slower"):
            lines.append(f"log: {self.log} makes the model slower end to end: compile "
                         f"without it (more trials, or --resume, may still find gains)")
        else:
            lines.append(f"log: {self.log} gives no gain beyond the noise end to end: "
                         f"compiling without it is as fast (more trials, or --resume, may "
                         f"find more)")
        return lines

    def _shape_lines(self, apply: str) -> list[str]:
        """The end-to-end lines of a model tuned over symbolic dims: one per tuning shape,
        what was dropped, and the verdict on the log."""
        e2e = self.end_to_end
        threads = e2e.get("threads", 0) or "all"
        lines = [f"end to end ({threads} threads), symbolic module default vs tuned:"]
        for row in e2e["shapes"]:
            if row.get("same_kernels"):
                lines.append(f"  {row['shape']}: the same kernels (every tuned kernel runs "
                             f"its small-dims variant here): not timed")
                continue
            lines.append(f"  {row['shape']}: default {row['default_ms']:.3f} ms, tuned "
                         f"{row['tuned_ms']:.3f} ms: {row['verdict_text']}"
                         + ("  [dropped]" if row.get("dropped") else ""))
        if e2e.get("dropped"):
            lines.append(f"  dropped the tuned configs of {len(e2e['dropped'])} kernels "
                         f"that made the model slower at a shape")
        verdict = e2e.get("verdict") or {}
        if not e2e.get("applied_kernels"):
            lines.append(f"log: {self.log} applies no tuned config: compiling with it "
                         f"gives the untuned model")
        elif verdict.get("faster"):
            lines.append(f"log: {self.log} makes the model faster at some tuning shapes "
                         f"and slower at none: {apply}")
        else:
            lines.append(f"log: {self.log} gives no gain beyond the noise at any tuning "
                         f"shape, and no loss: compiling without it is as fast")
        return lines

    def to_json(self) -> dict:
        return {"trials": self.trials, "seconds": self.seconds, "log": self.log,
                "end_to_end": self.end_to_end, "shapes": self.shapes,
                "tasks": [{"name": t.name, "ops": t.description, "weight": t.weight,
                           "flops": t.flops, "trials": t.trials, "errors": t.errors,
                           "default_ms": _ms_value(t.default_latency),
                           "tuned_ms": _ms_value(t.best_latency),
                           "gflops": t.gflops(t.best_latency), "speedup": t.speedup,
                           "config": t.best_config, "kept_default": t.kept_default,
                           "confirmed": t.confirmed}
                          for t in self.tasks]}


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.4f}" if seconds else "-"


def _ms_value(seconds: float | None) -> float | None:
    return seconds * 1e3 if seconds else None

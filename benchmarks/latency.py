"""Latency of tensorc beside onnxruntime on the bundled models, at 1 and 2 threads.

For each model: compile with tensorc (the compile time is reported), check that its outputs
agree with onnxruntime's, then time both side by side after a warm-up, alternating blocks of
runs with a 50 ms pause before each block (../shared/BENCHMARKING.md); the figure is the
median, with the min-max spread beside it (over 10%: the machine was busy). onnxruntime runs
as users get it: default session options, its spinning workers on. The ratio is tensorc's
latency over onnxruntime's (below 1: tensorc is faster); GFLOP/s is the model's arithmetic
(the FLOPs of tensorc's kernels: a multiply-add counts 2, elementwise ops one per element)
over the latency. A geomean row per thread count closes the table.

    python -m benchmarks.latency                      # every model, 1 and 2 threads
    python -m benchmarks.latency --models mlp --threads 1 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import models  # noqa: E402
import tensorc  # noqa: E402
from benchmarks.common import format_table, geomean  # noqa: E402
from tensorc.benchmark import NOISY_SPREAD, time_alternating  # noqa: E402
from tensorc.reference import (  # noqa: E402
    compare_outputs,
    onnxruntime_session,
    random_inputs,
    run_session,
)

DEFAULT_MODELS = tuple(models.MODELS)  # every bundled model
SETTLE_S = 0.05  # idle before each block: the other side's spinning workers go quiet


@dataclass
class Result:
    """One row of the table: a model at one thread count."""

    model: str
    threads: int
    compile_s: float | None = None
    tensorc_ms: float | None = None
    tensorc_min_ms: float | None = None
    tensorc_max_ms: float | None = None
    onnxruntime_ms: float | None = None
    onnxruntime_min_ms: float | None = None
    onnxruntime_max_ms: float | None = None
    samples: int = 0
    gflops: float | None = None  # of one inference (every kernel of the compiled model)
    max_abs_err: float | None = None
    noisy: bool = False  # a min-max spread over NOISY_SPREAD on either side
    error: str = ""  # why this row has no timings

    @property
    def ratio(self) -> float | None:
        """tensorc / onnxruntime latency: below 1, tensorc is faster."""
        if self.tensorc_ms and self.onnxruntime_ms:
            return self.tensorc_ms / self.onnxruntime_ms
        return None

    def rate(self, ms: float | None) -> float | None:
        """Effective GFLOP/s at a latency of ``ms``."""
        return self.gflops / (ms / 1e3) if self.gflops and ms else None


def bench_model(name: str, threads: list[int], seconds: float) -> list[Result]:
    """Compile one model, then check and time it at each thread count."""
    path = models.path(name)
    input_shapes = models.input_shapes(name)
    print(f"{name}: compiling {path.name} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        module = tensorc.compile(str(path), input_shapes=input_shapes, num_threads=threads[0])
    except Exception as error:  # one model failing must not stop the others being measured
        traceback.print_exc()
        reason = f"compile failed: {type(error).__name__}: {error}"
        return [Result(name, t, error=reason) for t in threads]
    compile_s = time.perf_counter() - start
    gflops = sum(k.flops for k in module.kernels) / 1e9
    feeds = models.example_inputs(name) or random_inputs(module.inputs, seed=0)

    results = []
    for count in threads:
        result = Result(name, count, compile_s=compile_s, gflops=gflops)
        results.append(result)
        module.num_threads = count
        session = onnxruntime_session(path, count, spinning=True)
        comparison = compare_outputs(module.run(feeds), run_session(session, feeds))
        result.max_abs_err = comparison.max_abs
        if not comparison.passed:
            result.error = (
                f"outputs disagree with onnxruntime (max abs err {comparison.max_abs:.3g})"
            )
            continue
        print(f"{name}: timing at {count} thread(s) ...", file=sys.stderr, flush=True)
        timings = time_alternating(
            {
                "tensorc": lambda: module.run(feeds),
                "onnxruntime": lambda: session.run(None, feeds),  # noqa: B023 (used right away)
            },
            seconds=seconds,
            settle=SETTLE_S,
        )
        ours, theirs = timings["tensorc"], timings["onnxruntime"]
        result.tensorc_ms, result.onnxruntime_ms = ours.median_ms, theirs.median_ms
        result.tensorc_min_ms, result.tensorc_max_ms = ours.min_ms, ours.max_ms
        result.onnxruntime_min_ms, result.onnxruntime_max_ms = theirs.min_ms, theirs.max_ms
        result.samples = len(ours.samples_ms)
        result.noisy = ours.noisy or theirs.noisy
    return results


def _ms(median: float | None, low: float | None, high: float | None) -> str:
    if median is None:
        return "-"
    return f"{median:.3g} ({low:.3g}-{high:.3g})"


def _rate(value: float | None) -> str:
    return f"{value:.1f}" if value else "-"


def render(results: list[Result]) -> str:
    """The readable table with a geomean row per thread count, and footnotes for failures
    and noisy rows."""
    header = [
        "model",
        "threads",
        "tensorc ms (min-max)",
        "onnxruntime ms (min-max)",
        "ratio",
        "tensorc GFLOP/s",
        "onnxruntime GFLOP/s",
        "compile s",
    ]
    rows, notes, noisy = [], [], []
    for r in results:
        ratio = r.ratio
        rows.append(
            [
                r.model,
                str(r.threads),
                _ms(r.tensorc_ms, r.tensorc_min_ms, r.tensorc_max_ms),
                _ms(r.onnxruntime_ms, r.onnxruntime_min_ms, r.onnxruntime_max_ms),
                f"{ratio:.2f}" if ratio else "-",
                _rate(r.rate(r.tensorc_ms)),
                _rate(r.rate(r.onnxruntime_ms)),
                f"{r.compile_s:.1f}" if r.compile_s is not None else "-",
            ]
        )
        if r.error:
            notes.append(f"{r.model} at {r.threads} thread(s): {r.error}")
        elif r.noisy:
            noisy.append(f"{r.model}/{r.threads}")
    for count in sorted({r.threads for r in results}):
        timed = [r for r in results if r.threads == count and r.ratio]
        if not timed:
            continue
        ours = geomean([r.tensorc_ms for r in timed])
        theirs = geomean([r.onnxruntime_ms for r in timed])
        rows.append(
            [
                f"geomean ({len(timed)} models)",
                str(count),
                f"{ours:.3g}",
                f"{theirs:.3g}",
                f"{geomean([r.ratio for r in timed]):.2f}",
                _rate(geomean([r.rate(r.tensorc_ms) for r in timed if r.gflops])),
                _rate(geomean([r.rate(r.onnxruntime_ms) for r in timed if r.gflops])),
                "",
            ]
        )
    notes.insert(
        0,
        "ratio = tensorc / onnxruntime latency (below 1: tensorc is faster); times are "
        "medians; onnxruntime with its default options (spinning workers on)",
    )
    if noisy:
        notes.append(
            f"min-max spread over {NOISY_SPREAD:.0%} (the machine was busy; measure again): "
            + ", ".join(noisy)
        )
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    notes.append(f"load average (1/5/15 min) at the end: {load} on {os.cpu_count()} cores")
    return "\n".join([format_table(header, rows), *notes])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit code 1 if any model failed to compile or to agree."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models",
        nargs="+",
        default=list(DEFAULT_MODELS),
        choices=sorted(models.MODELS),
        help="models to measure (default: all)",
    )
    parser.add_argument(
        "--threads", nargs="+", type=int, default=[1, 2], help="thread counts (default: 1 2)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=1.5,
        help="time to spend measuring each side per row (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    results: list[Result] = []
    for name in args.models:
        results.extend(bench_model(name, args.threads, args.seconds))
    if args.json:
        print(json.dumps([asdict(r) | {"ratio": r.ratio} for r in results], indent=2))
    else:
        print(render(results))
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Threads on a quiet and on a busy machine: tensorc at 2 threads against 1.

Three measurements per model, each in this one process:

(a) quiet: 2 threads against 1, alternating blocks of runs (target: >= 1.8x faster);
(b) busy: the same with a spinning Python process pinned to one core, which the benchmark
    starts and stops itself (target: the 2-thread latency at most 1.2x the 1-thread one);
(c) beside onnxruntime: tensorc's 2-thread latency alone, then alternating with blocks of a
    2-thread onnxruntime session with its default options (spinning workers on), with a
    short pause between blocks, then alone again (target: within 10% of alone). The same
    without the pause is shown too: onnxruntime's workers then still spin while tensorc runs.

The load average is printed before and after: on a shared machine (other processes busy on
the cores) the "quiet" figures are not quiet, and the table says so.

    python -m benchmarks.threads                     # resnet and bert
    python -m benchmarks.threads --models resnet --seconds 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import models  # noqa: E402
import tensorc  # noqa: E402
from benchmarks.common import format_table  # noqa: E402
from tensorc.benchmark import time_alternating  # noqa: E402
from tensorc.reference import (  # noqa: E402
    compare_outputs,
    onnxruntime_session,
    random_inputs,
    run_session,
)

# The closest bundled models to ResNet-50 (a residual CNN) and BERT (a post-LN encoder).
DEFAULT_MODELS = ("resnet", "bert")
BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


@dataclass
class Row:
    """One model's figures, medians in milliseconds."""

    model: str
    quiet: dict[int, float] = field(default_factory=dict)  # threads -> ms
    busy: dict[int, float] = field(default_factory=dict)
    alone_ms: float | None = None  # tensorc, 2 threads, no onnxruntime runs in between
    beside_ms: float | None = None  # alternating with onnxruntime, pause between blocks
    beside_nopause_ms: float | None = None  # alternating with no pause
    onnxruntime_ms: float | None = None
    notes: list[str] = field(default_factory=list)


class BusyProcess:
    """A Python process spinning on one core (the last one this process may use)."""

    def __init__(self) -> None:
        self.cpu = max(os.sched_getaffinity(0))
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> BusyProcess:
        self.process = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(self.cpu)])
        time.sleep(0.3)  # let it start spinning
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()


def _runner(module: tensorc.Module, threads: int, feeds: dict):
    def run() -> None:
        module.num_threads = threads
        module.run(feeds)

    return run


def _threads_ms(module: tensorc.Module, feeds: dict, seconds: float) -> dict[int, float]:
    timings = time_alternating(
        {"1": _runner(module, 1, feeds), "2": _runner(module, 2, feeds)}, seconds=seconds
    )
    return {int(name): t.median_ms for name, t in timings.items()}


def _blocks(runs: list[tuple[str, object]], rounds: int, pause: float) -> dict[str, list[float]]:
    """``rounds`` times: each (name, fn) in turn runs a block of calls, timed per call, with
    ``pause`` seconds of idling before each block."""
    taken: dict[str, list[float]] = {name: [] for name, _ in runs}
    for _ in range(rounds):
        for name, (fn, calls) in runs:
            time.sleep(pause)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            taken[name].append((time.perf_counter() - start) / calls * 1e3)
    return taken


def _calls_for(fn, seconds: float) -> int:
    fn()
    start = time.perf_counter()
    fn()
    return max(1, round(seconds / max(time.perf_counter() - start, 1e-6)))


def bench_model(name: str, seconds: float) -> Row:
    row = Row(name)
    path = models.path(name)
    print(f"{name}: compiling ...", file=sys.stderr, flush=True)
    module = tensorc.compile(str(path), input_shapes=models.input_shapes(name))
    feeds = models.example_inputs(name) or random_inputs(module.inputs, seed=0)
    for threads in (1, 2, 3, 8):  # the dynamic chunks give the same answer at any count
        module.num_threads = threads
        got = module.run(feeds)
        if threads == 1:
            first = got
        elif any((got[k] != first[k]).any() for k in got):
            row.notes.append(f"{threads} threads differ from 1 thread")

    print(f"{name}: (a) quiet, 1 vs 2 threads ...", file=sys.stderr, flush=True)
    row.quiet = _threads_ms(module, feeds, seconds)
    print(f"{name}: (b) busy core, 1 vs 2 threads ...", file=sys.stderr, flush=True)
    with BusyProcess():
        row.busy = _threads_ms(module, feeds, seconds)

    print(f"{name}: (c) beside onnxruntime ...", file=sys.stderr, flush=True)
    tensorc_run = _runner(module, 2, feeds)
    block = _calls_for(tensorc_run, 0.05)  # about 50 ms of runs per block
    rounds = max(5, round(seconds / 0.05))
    alone_before = _blocks([("tensorc", (tensorc_run, block))], rounds, 0.05)["tensorc"]
    session = onnxruntime_session(path, 2, spinning=True)
    check = compare_outputs(module.run(feeds), run_session(session, feeds))
    if not check.passed:
        row.notes.append(f"disagrees with onnxruntime (max abs err {check.max_abs:.3g})")

    def ort_run() -> None:
        session.run(None, feeds)

    ort_block = _calls_for(ort_run, 0.05)
    pairs = [("tensorc", (tensorc_run, block)), ("onnxruntime", (ort_run, ort_block))]
    beside = _blocks(pairs, rounds, 0.05)
    beside_nopause = _blocks(pairs, rounds, 0.0)
    del session
    time.sleep(0.5)  # onnxruntime's pool is gone; let the last spinning stop
    alone_after = _blocks([("tensorc", (tensorc_run, block))], rounds, 0.05)["tensorc"]
    row.alone_ms = statistics.median(alone_before + alone_after)
    row.beside_ms = statistics.median(beside["tensorc"])
    row.beside_nopause_ms = statistics.median(beside_nopause["tensorc"])
    row.onnxruntime_ms = statistics.median(beside["onnxruntime"])
    return row


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def render(rows: list[Row]) -> str:
    header = ["model", "quiet 1t ms", "quiet 2t ms", "speedup (>=1.8)", "busy 1t ms",
              "busy 2t ms", "2t/1t (<=1.2)", "alone 2t ms", "beside ort ms", "change (<=10%)",
              "no pause ms", "ort 2t ms"]
    lines = []
    for r in rows:
        speedup = r.quiet[1] / r.quiet[2]
        busy = r.busy[2] / r.busy[1]
        change = r.beside_ms / r.alone_ms - 1
        lines.append([r.model, f"{r.quiet[1]:.3g}", f"{r.quiet[2]:.3g}",
                      f"{speedup:.2f}x" + ("" if speedup >= 1.8 else " (miss)"),
                      f"{r.busy[1]:.3g}", f"{r.busy[2]:.3g}",
                      f"{busy:.2f}x" + ("" if busy <= 1.2 else " (miss)"),
                      f"{r.alone_ms:.3g}", f"{r.beside_ms:.3g}",
                      f"{change:+.0%}" + ("" if abs(change) <= 0.10 else " (miss)"),
                      f"{r.beside_nopause_ms:.3g}", f"{r.onnxruntime_ms:.3g}"])
    notes = [f"{r.model}: {n}" for r in rows for n in r.notes]
    return "\n".join([format_table(header, lines), *notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS),
                        choices=sorted(models.MODELS))
    parser.add_argument("--seconds", type=float, default=1.5,
                        help="time per candidate and measurement (default: %(default)s)")
    args = parser.parse_args(argv)
    if len(os.sched_getaffinity(0)) < 2:
        print("needs at least 2 cores", file=sys.stderr)
        return 1
    before = _load()
    rows = [bench_model(name, args.seconds) for name in args.models]
    print(render(rows))
    print(f"cores: {len(os.sched_getaffinity(0))}; load average (1/5/15 min) before "
          f"{before}, after {_load()} (above ~0 on a quiet machine: other processes were "
          f"running, and 'quiet' was not)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Threads on a quiet and on a busy machine: tensorc at 2 threads against 1.

Three measurements per model, each in this one process:

(a) quiet: 2 threads against 1, alternating blocks of runs (target: >= 1.8x faster);
(b) busy: the same with a spinning Python process pinned to one core, which the benchmark
    starts and stops itself (target: the 2-thread latency at most 1.2x the 1-thread one);
(c) beside onnxruntime: tensorc's 2-thread latency in blocks of runs that follow a 2-thread
    onnxruntime session's block (default options: spinning workers on) after a 50 ms pause,
    against blocks that follow 0.3 s of idling (onnxruntime's workers asleep); target:
    within 10%. Blocks that follow onnxruntime's with no pause at all are shown too (its
    workers then still spin while tensorc runs).

The load average is printed before and after: on a shared machine (other processes busy on
the cores) the "quiet" figures are not quiet, and the table says so.

    python -m benchmarks.threads                     # resnet50, bert_base, resnet and bert
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
from tensorc.benchmark import Timing, format_ms, time_alternating  # noqa: E402
from tensorc.reference import (  # noqa: E402
    compare_outputs,
    onnxruntime_session,
    random_inputs,
    run_session,
)

# ResNet-50- and BERT-base-shaped models (the target's), and the small ResNet-10 and BERT
# toys whose kernels take microseconds (a harder case for threads).
DEFAULT_MODELS = ("resnet50", "bert_base", "resnet", "bert")
BLOCK_S = 0.05  # a block of runs lasts about this long
PAUSE_S = 0.05  # the pause before a block (../shared/BENCHMARKING.md)
QUIET_S = 0.3  # long enough for onnxruntime's workers to stop spinning (~55 ms of CPU)
BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


@dataclass
class Row:
    """One model's figures, medians in milliseconds."""

    model: str
    quiet: dict[int, Timing] = field(default_factory=dict)  # threads -> timing
    busy: dict[int, Timing] = field(default_factory=dict)
    alone_ms: float | None = None  # tensorc, 2 threads, no onnxruntime runs in between
    beside_ms: float | None = None  # alternating with onnxruntime, pause between blocks
    beside_nopause_ms: float | None = None  # alternating with no pause
    alone1_ms: float | None = None  # the same two at 1 thread
    beside1_ms: float | None = None
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


def _threads_ms(module: tensorc.Module, feeds: dict, seconds: float) -> dict[int, Timing]:
    timings = time_alternating(
        {"1": _runner(module, 1, feeds), "2": _runner(module, 2, feeds)}, seconds=seconds,
        settle=PAUSE_S,
    )
    return {int(name): t for name, t in timings.items()}


def _block(fn, calls: int) -> float:
    """Milliseconds per call of a block of ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


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
    session = onnxruntime_session(path, 2, spinning=True)
    check = compare_outputs(module.run(feeds), run_session(session, feeds))
    if not check.passed:
        row.notes.append(f"disagrees with onnxruntime (max abs err {check.max_abs:.3g})")

    def ort_run() -> None:
        session.run(None, feeds)

    ort_block = _calls_for(ort_run, BLOCK_S)
    taken: dict[str, list[float]] = {}
    # one round: tensorc after a long idle (onnxruntime's workers asleep again), then
    # onnxruntime, tensorc after a short pause, onnxruntime, tensorc right after it; rounds
    # interleave, so the machine's drift hits every figure alike. The same at 1 thread
    # separates what threads suffer from what any run suffers after onnxruntime's (its
    # weights pushed tensorc's out of the caches)
    rounds = max(5, round(seconds / BLOCK_S))
    for threads in (2, 1):
        tensorc_run = _runner(module, threads, feeds)
        block = _calls_for(tensorc_run, BLOCK_S)
        for _ in range(rounds):
            time.sleep(QUIET_S)
            taken.setdefault(f"alone{threads}", []).append(_block(tensorc_run, block))
            time.sleep(PAUSE_S)
            taken.setdefault("ort", []).append(_block(ort_run, ort_block))
            time.sleep(PAUSE_S)
            taken.setdefault(f"beside{threads}", []).append(_block(tensorc_run, block))
            _block(ort_run, ort_block)
            taken.setdefault(f"nopause{threads}", []).append(_block(tensorc_run, block))
    row.alone_ms = statistics.median(taken["alone2"])
    row.beside_ms = statistics.median(taken["beside2"])
    row.beside_nopause_ms = statistics.median(taken["nopause2"])
    row.alone1_ms = statistics.median(taken["alone1"])
    row.beside1_ms = statistics.median(taken["beside1"])
    row.onnxruntime_ms = statistics.median(taken["ort"])
    return row


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def render(rows: list[Row]) -> str:
    header = ["model", "quiet 1t ms", "quiet 2t ms", "speedup (>=1.8)", "best-run speedup",
              "busy 1t ms", "busy 2t ms", "2t/1t (<=1.2)", "alone 2t ms", "after ort ms",
              "change (<=10%)", "no pause ms", "1t: change", "ort 2t ms"]
    lines = []
    for r in rows:
        speedup = r.quiet[1].median_ms / r.quiet[2].median_ms
        best = r.quiet[1].min_ms / r.quiet[2].min_ms
        busy = r.busy[2].median_ms / r.busy[1].median_ms
        change = r.beside_ms / r.alone_ms - 1
        lines.append([r.model, format_ms(r.quiet[1]), format_ms(r.quiet[2]),
                      f"{speedup:.2f}x" + ("" if speedup >= 1.8 else " (miss)"),
                      f"{best:.2f}x",
                      format_ms(r.busy[1]), format_ms(r.busy[2]),
                      f"{busy:.2f}x" + ("" if busy <= 1.2 else " (miss)"),
                      f"{r.alone_ms:.3g}", f"{r.beside_ms:.3g}",
                      f"{change:+.0%}" + ("" if abs(change) <= 0.10 else " (miss)"),
                      f"{r.beside_nopause_ms:.3g}", f"{r.beside1_ms / r.alone1_ms - 1:+.0%}",
                      f"{r.onnxruntime_ms:.3g}"])
    notes = [f"{r.model}: {n}" for r in rows for n in r.notes]
    notes.append("ms: median (min-max); best-run speedup: fastest 1-thread sample over the "
                 "fastest 2-thread one (closest to a quiet machine when others are busy); "
                 "1t: change: the same after-onnxruntime change at 1 thread (caches, not threads)")
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

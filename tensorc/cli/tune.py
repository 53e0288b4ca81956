"""``tensorc tune``: search the schedules of a model's kernels on this CPU (or a Dask
cluster's workers), appending every measurement to a log that ``tensorc compile
--tuning-log`` applies; the tuner itself is ``tensorc.autotune``.

    $ tensorc tune resnet.onnx --trials 300 --log resnet.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorc.cli.arguments import (
    add_dim_range, add_input_shape, add_input_value, duration, parse_tune_shape, positive_int,
    range_dict, require_file, shape_dict, subcommand, thread_count, value_dict, writable_output,
)
from tensorc.errors import TensorcError

EXIT_INTERRUPTED = 130   # a shell's code for SIGINT, as main() returns for other commands

if TYPE_CHECKING:
    from tensorc.autotune.result import TuneResult


def add_tune_parser(commands: Any) -> None:
    """Register ``tensorc tune`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands, "tune", "tune a model's kernels for this CPU",
        "Search each distinct kernel's schedule space, measuring candidates in separate "
        "processes (a crashing or hanging candidate is recorded and skipped), guided by an "
        "XGBoost cost model. Every measurement is appended to the log; 'tensorc compile "
        "--tuning-log LOG' applies the fastest, and --resume continues a stopped run.",
        """\
examples:
  tensorc tune mlp.onnx --trials 64 --log mlp.jsonl
  tensorc tune mlp.onnx --time 20m --log mlp.jsonl --resume --threads 2
  tensorc tune mlp.onnx --trials 2000 --log mlp.jsonl --cluster tcp://scheduler:8786
  tensorc compile mlp.onnx -o mlp.tcz --tuning-log mlp.jsonl
  tensorc tune resnet.onnx --input-shape input=1x3x224x224 --time 20m --log resnet.jsonl
  tensorc tune bert.onnx --trials 200 --log bert.jsonl --dim-range sequence=1:512
  tensorc tune bert.onnx --trials 200 --log bert.jsonl --dim-range sequence=1:512 \
--tune-shape batch=1,sequence=9 --tune-shape batch=4,sequence=128
  tensorc compile bert.onnx -o bert.tcz --dim-range sequence=1:512 --tuning-log bert.jsonl

A model whose input dims stay symbolic (no --input-shape binds them) is tuned as 'tensorc
compile' builds it, one set of kernels for every shape: each candidate is timed at every
--tune-shape (by default a few across each dim's range: 1, 7, a middle value, the range's
end where finite), a config slower than the default at any of them is rejected, and the
end-to-end verdict at each shape drops the configs that make the model slower there.
""")
    p.add_argument("model", help="the ONNX model file")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--trials", type=positive_int, metavar="N", help="measurements in all")
    budget.add_argument("--time", metavar="T", type=duration,
                        help="wall-clock budget of the whole run (extraction, search, "
                        "confirmation, end-to-end timing): 90s, 20m, 1h")
    p.add_argument("--log", default="tune.jsonl", metavar="FILE",
                   help="the tuning log to append to (default: %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the log's measurements without repeating them")
    p.add_argument("--threads", type=thread_count, metavar="N",
                   help="threads kernels are timed with (default: all cores)")
    p.add_argument("--search", choices=("xgboost", "random"), default="xgboost",
                   help="cost-model-guided evolutionary search or random (default: "
                   "%(default)s)")
    p.add_argument("--batch", type=positive_int, default=8, metavar="N",
                   help="candidates measured per round (default: %(default)s)")
    p.add_argument("--build-workers", type=positive_int, default=2, metavar="N",
                   help="builder processes (default: %(default)s)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="build and measure on the workers of a Dask cluster, e.g. "
                   "tcp://scheduler:8786 (needs pip install 'tensorc[cluster]')")
    add_input_shape(p)
    add_input_value(p)
    add_dim_range(p)
    p.add_argument("--tune-shape", metavar="DIMS", type=parse_tune_shape, action="append",
                   help="a shape to tune a model over symbolic dims at: every symbolic dim's "
                   "value, e.g. batch=1,seq=9 (each pair split at its last '='), or a JSON "
                   "object for dim names with commas; repeat the flag for several shapes "
                   "(default: a few across each dim's range)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--plot", metavar="PNG",
                   help="draw each task's search curve (best-so-far speed-up against "
                   "trials) and its confirmed speed-up, with the end-to-end verdict")
    p.add_argument("--no-end-to-end", action="store_true",
                   help="skip timing the whole model default vs tuned at the end (which "
                   "alternates the two until their medians settle, and recommends the log "
                   "only when tuned is faster beyond the noise)")
    p.add_argument("--cold-cache", action="store_true",
                   help="time each call of a candidate after flushing the caches, as a "
                   "kernel finds its weights inside a model (slower tuning; its records "
                   "are applied before hot-cache ones)")
    p.set_defaults(handler=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    """Tune the model's kernels and print the table (or JSON) of what the search found."""
    # (here: the tuner imports the compiler and llvmlite, which 'tensorc --help' does without)
    from tensorc.autotune.measure import MeasureOptions
    from tensorc.autotune.tuner import tune

    model = require_file(args.model, "model")
    writable_output(args.log, "append to the tuning log")
    if args.plot:
        writable_output(args.plot, "draw the plot to")
    tty = sys.stderr.isatty()

    def progress(message: str) -> None:
        if args.json:
            print(message, file=sys.stderr, flush=True)
        elif tty and message.startswith("["):
            print("\r" + message[:150].ljust(150), end="", file=sys.stderr, flush=True)
        else:
            print(message, flush=True)

    try:
        result = tune(str(model), shape_dict(args.input_shape), "llvm", args.trials,
                      args.time, args.log, args.resume, args.threads, args.search, args.batch,
                      args.build_workers, not args.no_end_to_end, progress=progress,
                      cluster=args.cluster, options=MeasureOptions(flush_cache=args.cold_cache),
                      input_values=value_dict(args.input_value),
                      tune_shapes=args.tune_shape, dim_ranges=range_dict(args.dim_range))
    except KeyboardInterrupt:
        if tty:
            print(file=sys.stderr)
        print(f"interrupted: {args.log} keeps every measurement taken so far; run the same "
              f"'tensorc tune' command with --resume added to continue the search, or apply "
              f"what it found with 'tensorc compile {args.model} --tuning-log {args.log}'",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if tty:
        print(file=sys.stderr)
    if args.plot:
        plot_speedups(result, args.plot)
    print(json.dumps(result.to_json(), indent=2) if args.json else result.table())
    return 0


def plot_series(result: TuneResult) -> list[dict]:
    """What --plot draws for each task with trials: the search's best-so-far speed-up over
    the default per trial (single measurements, biased high), and the confirmed speed-up
    (the default and the pick timed again side by side; None where they were not) that the
    table reports and the model gets."""
    series = []
    for t in result.tasks:
        if t.curve and t.default_latency:
            search_default = t.curve[0]
            series.append({
                "name": t.name,
                "search": [search_default / c if math.isfinite(c) and c > 0 else 0
                           for c in t.curve],
                "confirmed": t.speedup if t.confirmed else None,
                "kept_default": t.kept_default,
            })
    return series


def plot_speedups(result: TuneResult, path: str | Path) -> None:
    """Draw each task's search curve (best-so-far speed-up over its default against its
    trials, faint) and its confirmed speed-up (a marker at its last trial, labelled), with
    the end-to-end verdict as the title (needs matplotlib).

    >>> plot_speedups(tensorc.tune("model.onnx", trials=64), "tuning.png")
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TensorcError("--plot needs matplotlib: pip install 'tensorc[plot]'") from None
    fig, ax = plt.subplots(figsize=(8, 5))
    for entry in plot_series(result):
        ys = entry["search"]
        line, = ax.plot(range(1, len(ys) + 1), ys, linestyle="--", alpha=0.45, linewidth=1)
        confirmed = entry["confirmed"]
        label = entry["name"][:30]
        if confirmed is not None:
            ax.plot([len(ys)], [confirmed], marker="o", color=line.get_color())
            ax.annotate(f"{confirmed:.2f}x" + (" (default kept)" if entry["kept_default"]
                                               else ""), (len(ys), confirmed), fontsize=7,
                        xytext=(4, 0), textcoords="offset points")
            label += f": confirmed {confirmed:.2f}x"
        else:
            label += ": not confirmed"
        line.set_label(label)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("trials of the task")
    ax.set_ylabel("speed-up over the default")
    verdict = result.end_to_end.get("verdict_text") if result.end_to_end else None
    ax.set_title("dashed: the search's single measurements; dots: timed again beside the "
                 "default" + (f"\nend to end: {verdict}" if verdict else ""), fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)

"""``tensorc bench``: a model's latency (median of repeated runs after a warm-up), side by side
with onnxruntime's on the same inputs and thread count when asked.

    $ tensorc bench resnet.onnx --vs onnxruntime --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import tensorc
from tensorc.benchmark import NOISY_SPREAD, format_ms, time_alternating
from tensorc.cli.arguments import (
    EXIT_CHECK_FAILED, add_check_options, add_input_shape, add_input_value, add_tuning_log,
    artifact_shapes, embedded_source, jsonable, positive_float, positive_int,
    refuse_for_artifact, require_file,
    shape_dict, subcommand, thread_count, value_dict,
)
from tensorc.reference import (
    compare_outputs, format_comparison, onnxruntime_session, quantization_steps, random_inputs,
    run_session,
)
from tensorc.runtime.artifact import is_artifact
from tensorc.runtime.module import Module


def cmd_bench(args: argparse.Namespace) -> int:
    """Compile a model and time it, side by side with onnxruntime if asked."""
    model = require_file(args.model, "model")
    compile_seconds = None
    if is_artifact(model):
        refuse_for_artifact(model, [("--target", args.target),
                                    ("--input-value", args.input_value),
                                    ("--tuning-log", args.tuning_log)])
        module = tensorc.load(model)
        shapes = artifact_shapes(model, module, args.input_shape)
        source: str | bytes = embedded_source(model, module, "compare with onnxruntime") \
            if args.vs == "onnxruntime" else b""
        saved_threads = module.num_threads if isinstance(module, Module) else 0
        threads = (saved_threads if args.threads is None else args.threads) or \
            os.cpu_count() or 1
        target = module.target
    else:
        module, compile_seconds = _compile(model, args)
        shapes = None
        source, threads, target = str(model), args.threads or os.cpu_count() or 1, \
            args.target or "llvm"
    if isinstance(module, Module):
        module.num_threads = threads        # the same count for both sides
    feeds = random_inputs(module.inputs, seed=args.seed, shapes=shapes)
    candidates = {"tensorc": lambda: module.run(feeds)}
    comparison = None
    if args.vs == "onnxruntime":
        session = onnxruntime_session(source, threads)
        expected = run_session(session, feeds)
        comparison = compare_outputs(module.run(feeds), expected, rtol=args.rtol,
                                     atol=args.atol, steps=quantization_steps(source),
                                     max_steps=args.steps)
        candidates["onnxruntime"] = lambda: session.run(None, feeds)
    timings = time_alternating(candidates, seconds=args.seconds, samples=args.repeat)

    tensorc_timing = timings["tensorc"]
    report: dict[str, Any] = {
        "model": str(model),
        "target": target,
        "threads": threads,
        "compile_s": compile_seconds,
        "samples": len(tensorc_timing.samples_ms),
        "results": {
            name: {
                "median_ms": t.median_ms,
                "min_ms": t.min_ms,
                "max_ms": t.max_ms,
                "calls_per_sample": t.calls_per_sample,
            }
            for name, t in timings.items()
        },
    }
    if comparison is not None:
        report["check_passed"] = comparison.passed
        report["max_abs_err"] = comparison.max_abs
        report["check"] = comparison.to_json()
        report["ratio"] = timings["onnxruntime"].median_ms / tensorc_timing.median_ms
    if "tuning" in module.info:
        report["tuning"] = module.info["tuning"]
    if args.json:
        print(json.dumps(jsonable(report), indent=2, allow_nan=False))
    else:
        how = f"compiled for {target} in {compile_seconds:.2f} s" if compile_seconds is not None \
            else f"loaded (compiled for {target})"
        print(f"{model}: {how}; {threads} thread{'s' if threads != 1 else ''}, "
              f"{report['samples']} samples per side")
        if "tuning" in report:
            tuning = report["tuning"]
            print(f"schedules from {tuning['log']}: {tuning['tuned_kernels']} kernels as "
                  f"recorded, {tuning['default_kernels']} without a record (default)")
        if comparison is not None:
            verdict = "PASS" if comparison.passed else "FAIL"
            print(f"outputs vs onnxruntime ({comparison.tolerance()}): {verdict}")
            for line in format_comparison(comparison):
                print(f"    {line}")
        for name, timing in timings.items():
            noisy = f"  (noisy: spread over {NOISY_SPREAD:.0%})" if timing.noisy else ""
            print(f"  {name:<12} {format_ms(timing)} ms  median (min-max){noisy}")
        if comparison is not None:
            print(f"  onnxruntime / tensorc = {report['ratio']:.2f}  (> 1: tensorc is faster)")
        if any(t.noisy for t in timings.values()):
            print(
                f"note: a min-max spread over {NOISY_SPREAD:.0%} means the machine was busy; "
                "measure again"
            )
    if comparison is not None and not comparison.passed:
        return EXIT_CHECK_FAILED
    return 0


def _compile(model: Any, args: argparse.Namespace) -> tuple[Any, float]:
    """The module of an ONNX model, compiled as the flags say, and the seconds it took."""
    def progress(message: str) -> None:
        if not args.json:
            print(f"  {message}", file=sys.stderr, flush=True)

    target = args.target or "llvm"
    if not args.json:
        print(f"compiling {model} for target {target}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    module = tensorc.compile(
        str(model), target=target, input_shapes=shape_dict(args.input_shape),
        num_threads=args.threads or os.cpu_count() or 1, progress=progress,
        input_values=value_dict(args.input_value), tuning_log=args.tuning_log,
    )
    return module, time.perf_counter() - start


def add_bench_parser(commands: Any) -> None:
    """Register ``tensorc bench`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands,
        "bench",
        "time a model, side by side with onnxruntime",
        "Compile a model and measure its latency: a warm-up, then the median of repeated "
        "runs. With --vs onnxruntime, the outputs are checked first, then tensorc and "
        "onnxruntime (same thread count, all graph optimizations) run in turn.",
        """\
examples:
  tensorc bench mlp.onnx
  tensorc bench resnet.onnx --input-shape input=1x3x224x224 --vs onnxruntime --threads 1

Exit status: 0 ok, 1 the outputs disagree with onnxruntime, 2 error.
""",
    )
    p.add_argument("model", help="the ONNX model file, or a .tcz artifact (timed as compiled; "
                   "--vs onnxruntime then uses the model it embeds)")
    p.add_argument(
        "--vs", choices=("onnxruntime",), help="also time this runtime on the same inputs"
    )
    p.add_argument("--target", help="what to compile for (default: llvm)")
    add_input_shape(p)
    add_input_value(p)
    p.add_argument(
        "--threads",
        type=thread_count,
        metavar="N",
        help="threads for tensorc and onnxruntime alike (default: all cores, or the "
        "artifact's setting)",
    )
    p.add_argument(
        "--repeat",
        type=positive_int,
        default=25,
        metavar="N",
        help="timed samples per side, each a batch of runs; the median is reported "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--seconds",
        type=positive_float,
        default=1.5,
        help="time to spend measuring each side (default: %(default)s)",
    )
    add_check_options(p)
    add_tuning_log(p)
    p.set_defaults(handler=cmd_bench)

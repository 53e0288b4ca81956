"""The ``make demo`` walk-through: compile a bundled model, run it, check it, time it.

    python -m models.demo            # the ResNet-style CNN (built first if missing)
    python -m models.demo mlp        # or any model in models.MODELS

Uses only the public API: tensorc.compile, Module.save / tensorc.load, Module.run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import models
import tensorc
from tensorc.benchmark import format_ms, time_alternating
from tensorc.errors import TensorcError
from tensorc.reference import (
    compare_outputs,
    format_comparison,
    onnxruntime_session,
    random_inputs,
    run_session,
)

BUILD_DIR = Path("build")


def demo(name: str, seconds: float) -> int:
    """Run the demo on one model; returns the exit code (1 if the check fails)."""
    file = models.MODELS_DIR / f"{name}.onnx"
    if not file.exists():
        print(f"building {file} ...")
    path = models.path(name)
    input_shapes = models.input_shapes(name)

    print(f"compiling {path} with tensorc (target llvm) ...")
    start = time.perf_counter()
    module = tensorc.compile(
        str(path),
        target="llvm",
        input_shapes=input_shapes,
        progress=lambda message: print(f"  {message}", flush=True),
    )
    print(f"  compiled in {time.perf_counter() - start:.2f} s")
    for kind, signature in (("input ", module.inputs), ("output", module.outputs)):
        for value_name, shape, dtype in signature:
            print(f"  {kind} {value_name}: {dtype}{list(shape)}")

    BUILD_DIR.mkdir(exist_ok=True)
    artifact = BUILD_DIR / f"{name}.tcz"
    module.save(str(artifact))
    start = time.perf_counter()
    module = tensorc.load(str(artifact))
    print(f"saved {artifact} and loaded it back in {(time.perf_counter() - start) * 1e3:.0f} ms")

    feeds = models.example_inputs(name) or random_inputs(module.inputs, seed=0)
    session = onnxruntime_session(path, num_threads=1)
    comparison = compare_outputs(module.run(feeds), run_session(session, feeds))
    print(f"check against onnxruntime (rtol {comparison.rtol:g}, atol {comparison.atol:g}):")
    for line in format_comparison(comparison):
        print(f"  {line}")
    if not comparison.passed:
        print("FAIL: tensorc's outputs differ from onnxruntime's")
        return 1

    print("latency, median of alternating runs (min-max):")
    for threads in sorted({1, os.cpu_count() or 1}):
        module.num_threads = threads
        session = onnxruntime_session(path, num_threads=threads)
        timings = time_alternating(
            {
                "tensorc": lambda: module.run(feeds),
                "onnxruntime": lambda: session.run(None, feeds),  # noqa: B023 (used right away)
            },
            seconds=seconds,
        )
        ours, theirs = timings["tensorc"], timings["onnxruntime"]
        ratio = theirs.median_ms / ours.median_ms
        speed = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
        print(
            f"  {threads} thread{'s' if threads > 1 else ' '}: tensorc {format_ms(ours)} ms"
            f"   onnxruntime {format_ms(theirs)} ms   (tensorc is {speed})"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the demo; a TensorcError prints as ``error: ...``."""
    parser = argparse.ArgumentParser(description="Compile, run, check and time a bundled model.")
    parser.add_argument(
        "model",
        nargs="?",
        default="resnet",
        choices=sorted(models.MODELS),
        help="which model (default: %(default)s)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=1.0,
        help="time to spend timing each side at each thread count (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        return demo(args.model, args.seconds)
    except TensorcError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

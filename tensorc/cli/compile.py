"""``tensorc compile``: an ONNX model into a .tcz artifact, which ``tensorc run`` and
``tensorc.load`` use without compiling again.

    $ tensorc compile mlp.onnx -o mlp.tcz --threads 2
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import tensorc
from tensorc.cli.arguments import (
    add_dim_range, add_input_shape, add_input_value, add_tuning_log, range_dict, require_file,
    shape_dict, subcommand, thread_count, value_dict, writable_output,
)
from tensorc.errors import TensorcError
from tensorc.ir.types import format_shape
from tensorc.runtime.artifact import is_artifact


def _print_signature(title: str, signature: list[tuple[str, tuple[int, ...], str]]) -> None:
    for name, shape, dtype in signature:
        print(f"  {title} {name}: {dtype}{format_shape(shape)}")


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile an ONNX model and save the module as a .tcz artifact."""
    model = require_file(args.model, "model")
    output = writable_output(args.output or str(model.with_suffix(".tcz")), "save to")
    if output.exists() and not args.force:
        if output.is_dir() or not is_artifact(output):
            raise TensorcError(
                f"refusing to overwrite {output}: it exists and is not a tensorc artifact "
                "(pass --force to overwrite it)"
            )
    input_shapes = shape_dict(args.input_shape)
    print(f"compiling {model} for target {args.target}")
    if input_shapes:
        for name, shape in input_shapes.items():
            print(f"  binding input {name} to shape {format_shape(shape)}")
    start = time.perf_counter()
    module = tensorc.compile(
        str(model),
        target=args.target,
        input_shapes=input_shapes,
        input_values=value_dict(args.input_value),
        num_threads=args.threads,
        tuning_log=args.tuning_log,
        progress=lambda message: print(f"  {message}", flush=True),
        cache=not args.no_cache,
        dim_ranges=range_dict(args.dim_range),
    )
    compile_seconds = time.perf_counter() - start
    _print_signature("input ", module.inputs)
    _print_signature("output", module.outputs)
    print(f"compiled in {compile_seconds:.2f} s")
    if args.time_passes and module.compile_times is not None:
        print(module.compile_times.report())
    module.save(str(output), overwrite=args.force, include_source=args.keep_source)
    print(f"saved {output} ({output.stat().st_size / 1e6:.2f} MB)")
    return 0


def add_compile_parser(commands: Any) -> None:
    """Register ``tensorc compile`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands,
        "compile",
        "compile an ONNX model into a .tcz artifact",
        "Compile an ONNX model and save the compiled module as a .tcz artifact, which "
        "'tensorc run' and tensorc.load() use without recompiling.",
        """\
examples:
  tensorc compile mlp.onnx -o mlp.tcz
  tensorc compile resnet.onnx -o resnet.tcz --input-shape input=1x3x224x224 --threads 2
  tensorc compile mlp.onnx -o mlp-gpu.tcz --target "cuda -arch=sm_90"
""",
    )
    p.add_argument("model", help="the ONNX model file")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write the artifact (default: the model's path with .tcz)",
    )
    p.add_argument(
        "--target",
        default="llvm",
        help="what to compile for: llvm (this CPU), cuda (NVIDIA GPUs, sm_80) or "
        "'cuda -arch=sm_90' (also sm_89; several: -arch=sm_80,sm_90) (default: %(default)s)",
    )
    add_input_shape(p)
    add_dim_range(p)
    add_input_value(p)
    p.add_argument(
        "--threads",
        type=thread_count,
        metavar="N",
        help="threads the module runs on; 0 means all cores (default: all cores)",
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite --output even if it is not an artifact"
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--keep-source",
        action="store_true",
        help="embed the source ONNX model in the artifact (as large again as the model), so "
        "that 'run --check-onnxruntime' and 'bench --vs onnxruntime' need no .onnx file; "
        "without it they read the file the artifact was compiled from, if unchanged",
    )
    source.add_argument("--no-source", action="store_true",
                        help=argparse.SUPPRESS)   # the default now; kept for old scripts
    p.add_argument(
        "--time-passes",
        action="store_true",
        help="print the seconds of each compile phase and the slowest kernels",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="compile without reading or writing the compiled-code cache "
        "($TENSORC_CACHE_DIR/kernels, else ~/.cache/tensorc/kernels)",
    )
    add_tuning_log(p)
    p.set_defaults(handler=cmd_compile)

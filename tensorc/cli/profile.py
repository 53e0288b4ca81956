"""``tensorc profile``: every kernel of a model timed inside the model's own entry function,
against the machine's roofline; a table, JSON, a Chrome trace or a roofline chart.

    $ tensorc profile models/resnet.onnx --threads 1 --trace trace.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import tensorc
from tensorc.cli.arguments import (
    add_input_shape, add_input_value, add_tuning_log, jsonable, non_negative_int, require_file,
    shape_dict, subcommand, thread_count, value_dict,
)
from tensorc.errors import TensorcError
from tensorc.reference import random_inputs
from tensorc.runtime.artifact import is_artifact
from tensorc.runtime.machine import Roofline, machine_roofline


def cmd_profile(args: argparse.Namespace) -> int:
    """Time every kernel of a compiled model and show how far each is from its roofline."""
    model = require_file(args.model, "model")
    if is_artifact(model):
        for flag, given in (("--input-shape", args.input_shape),
                            ("--tuning-log", args.tuning_log)):
            if given:
                raise TensorcError(f"{model} is compiled already: {flag} applies to .onnx "
                                   f"models only (compile with it: tensorc compile "
                                   f"{flag} ...)")
        module = tensorc.load(model)
    else:
        def progress(message: str) -> None:
            if not args.json:
                print(message, file=sys.stderr, flush=True)
        module = tensorc.compile(str(model), target=args.target,
                                 input_shapes=shape_dict(args.input_shape), progress=progress,
                                 input_values=value_dict(args.input_value),
                                 tuning_log=args.tuning_log)
    if args.threads is not None:
        module.num_threads = args.threads
    threads = module.num_threads or os.cpu_count() or 1
    if args.peak_gflops or args.bandwidth:
        if not (args.peak_gflops and args.bandwidth):
            raise TensorcError("give both --peak-gflops and --bandwidth, or neither (then the "
                               "machine is measured)")
        roofline = Roofline(args.peak_gflops, args.bandwidth, threads, "given")
    else:
        roofline = machine_roofline(threads=threads, remeasure=args.remeasure)
    feeds = random_inputs(module.inputs, seed=args.seed)
    profile = module.profile(feeds, seconds=args.seconds, roofline=roofline, model=model.name)
    if args.trace:
        profile.write_trace(args.trace)
    if args.plot:
        profile.plot(args.plot)
    if args.json:
        print(json.dumps(jsonable(profile.to_json()), indent=2))
    else:
        print(f"{model}: {len(profile.kernels)} kernel calls, {threads} "
              f"thread{'s' if threads != 1 else ''}")
        print(profile.table(top=args.top or None))
        for path, what in ((args.trace, "trace"), (args.plot, "roofline plot")):
            if path:
                print(f"wrote the {what} to {path}")
    return 0


def add_profile_parser(commands: Any) -> None:
    """Register ``tensorc profile`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands,
        "profile",
        "time every kernel of a model against the machine's roofline",
        "Compile a model (or load a .tcz) and time each kernel inside the model's own entry "
        "function: the median over repeated runs, its share of the total, FLOPs and bytes "
        "moved, GFLOP/s, GB/s, and the percent of its roofline bound (the least time its "
        "FLOPs and bytes can take on this machine, whose peak and memory bandwidth are "
        "measured once and cached). Slowest kernel first.",
        """\
examples:
  tensorc profile models/resnet.onnx --threads 1
  tensorc profile resnet.tcz --json
  tensorc profile models/mobilenetv2.onnx --trace trace.json --plot roofline.png

The trace opens in chrome://tracing or https://ui.perfetto.dev; --plot needs matplotlib.
""",
    )
    p.add_argument("model", help="the ONNX model file, or a .tcz artifact")
    p.add_argument("--target", default="llvm", help="what to compile for (default: %(default)s)")
    add_input_shape(p)
    add_input_value(p)
    p.add_argument("--threads", type=thread_count, metavar="N",
                   help="threads to run on; 0 means all cores (default: all cores)")
    p.add_argument("--seconds", type=float, default=1.0,
                   help="time to spend measuring (default: %(default)s)")
    p.add_argument("--top", type=non_negative_int, default=0, metavar="K",
                   help="show only the K slowest kernels (default: all)")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace")
    p.add_argument("--plot", metavar="FILE.png", help="draw a roofline chart (matplotlib)")
    p.add_argument("--peak-gflops", type=float, metavar="G",
                   help="the peak GFLOP/s to use instead of measuring it")
    p.add_argument("--bandwidth", type=float, metavar="GBS",
                   help="the memory bandwidth in GB/s to use instead of measuring it")
    p.add_argument("--remeasure", action="store_true",
                   help="measure the machine's peak and bandwidth again (a busy machine "
                   "measures low; the better of the cached and new figures is kept)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random inputs (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    add_tuning_log(p)
    p.set_defaults(handler=cmd_profile)

"""``tensorc profile``: every kernel of a model timed inside the model's own entry function,
against the machine's roofline; a table, JSON, a Chrome trace or a roofline chart.

    $ tensorc profile resnet.onnx --threads 1 --trace trace.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import tensorc
from tensorc.cli.arguments import (
    add_input_shape, add_input_value, add_tuning_log, jsonable, non_negative_int,
    artifact_shapes, positive_float, refuse_for_artifact, require_file, shape_dict, subcommand,
    thread_count,
    value_dict, writable_output,
)
from tensorc.errors import TensorcError
from tensorc.reference import random_inputs
from tensorc.runtime.artifact import is_artifact
from tensorc.runtime.cuda import CudaModule
from tensorc.runtime.cuda_device import PyCudaDevice
from tensorc.runtime.machine import Roofline, machine_roofline
from tensorc.target import Target

# the CPU profiler's options, which a CUDA module's per-launch table has no use for
CPU_ONLY = (("--threads", "threads"), ("--trace", "trace"), ("--plot", "plot"),
            ("--peak-gflops", "peak_gflops"), ("--bandwidth", "bandwidth"),
            ("--remeasure", "remeasure"))


def _gpu_device(args: argparse.Namespace) -> Any:
    """The GPU a CUDA module is profiled on, or a TensorcError saying why there is none and
    which CPU-only options were given."""
    for flag, name in CPU_ONLY:
        if getattr(args, name):
            raise TensorcError(f"{flag} applies to CPU modules (target llvm); a CUDA module's "
                               f"profile times each kernel launch with CUDA events")
    try:
        return PyCudaDevice.shared()
    except TensorcError as error:
        raise TensorcError(f"profiling a CUDA module needs a GPU: {error}") from None


def _profile_cuda(module: CudaModule, args: argparse.Namespace, name: str) -> int:
    """Time every launch of a CUDA module with device events: a table in launch order (or the
    K slowest with --top), or JSON."""
    device = module.device
    feeds = random_inputs(module.inputs, seed=args.seed)
    start = time.perf_counter()
    module.run(feeds)                                      # warm-up: loads the kernels
    run_s = max(time.perf_counter() - start, 1e-6)
    repeat = max(3, min(1000, int(args.seconds / run_s)))
    launches = module.profile(feeds, repeat=repeat)
    total = sum(launch["ms"] for launch in launches) or 1.0
    for launch in launches:
        launch["share"] = launch["ms"] / total
    if args.json:
        print(json.dumps(jsonable({"model": name, "target": module.target,
                                   "device": device.name, "repeat": repeat,
                                   "total_ms": total, "launches": launches}), indent=2))
        return 0
    shown = list(enumerate(launches))
    if args.top:
        shown = sorted(shown, key=lambda item: -item[1]["ms"])[:args.top]
    print(f"{name}: {len(launches)} kernel launches on {device.name}, median of {repeat} "
          f"runs, {total:.4g} ms in all")
    width = max([len("kernel")] + [len(launch["kernel"]) for _, launch in shown])
    print(f"{'#':>4}  {'kernel':<{width}}  {'grid':>16}  {'block':>14}  {'ms':>10}  share")
    for k, launch in shown:
        grid = "x".join(str(d) for d in launch["grid"])
        block = "x".join(str(d) for d in launch["block"])
        print(f"{k:>4}  {launch['kernel']:<{width}}  {grid:>16}  {block:>14}  "
              f"{launch['ms']:>10.4f}  {launch['share']:6.1%}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """Time every kernel of a compiled model and show how far each is from its roofline."""
    model = require_file(args.model, "model")
    if args.trace:
        writable_output(args.trace, "write the trace to")
    if args.plot:
        writable_output(args.plot, "draw the roofline plot to")
    if not is_artifact(model) and Target.from_string(args.target).kind == "cuda":
        _gpu_device(args)                 # before compiling a module that could not run
    if is_artifact(model):
        refuse_for_artifact(model, [("--input-value", args.input_value),
                                    ("--tuning-log", args.tuning_log)])
        module = tensorc.load(model)
        shapes = artifact_shapes(model, module, args.input_shape)
    else:
        def progress(message: str) -> None:
            if not args.json:
                print(message, file=sys.stderr, flush=True)
        module = tensorc.compile(str(model), target=args.target,
                                 input_shapes=shape_dict(args.input_shape), progress=progress,
                                 input_values=value_dict(args.input_value),
                                 tuning_log=args.tuning_log)
    if isinstance(module, CudaModule):
        module.use_device(_gpu_device(args))
        return _profile_cuda(module, args, model.name)
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
    feeds = random_inputs(module.inputs, seed=args.seed,
                          shapes=shapes if is_artifact(model) else None)
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
  tensorc profile resnet.onnx --input-shape input=1x3x224x224 --threads 1
  tensorc compile resnet.onnx -o resnet.tcz --input-shape input=1x3x224x224
  tensorc profile resnet.tcz --json
  tensorc profile mlp.onnx --trace trace.json --plot roofline.png

The trace opens in chrome://tracing or https://ui.perfetto.dev; --plot needs matplotlib.
""",
    )
    p.add_argument("model", help="the ONNX model file, or a .tcz artifact")
    p.add_argument("--target", default="llvm", help="what to compile for (default: %(default)s)")
    add_input_shape(p)
    add_input_value(p)
    p.add_argument("--threads", type=thread_count, metavar="N",
                   help="threads to run on; 0 means all cores (default: all cores)")
    p.add_argument("--seconds", type=positive_float, default=1.0,
                   help="time to spend measuring (default: %(default)s)")
    p.add_argument("--top", type=non_negative_int, default=0, metavar="K",
                   help="show only the K slowest kernels (default: all)")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace")
    p.add_argument("--plot", metavar="FILE.png", help="draw a roofline chart (matplotlib)")
    p.add_argument("--peak-gflops", type=positive_float, metavar="G",
                   help="the peak GFLOP/s to use instead of measuring it")
    p.add_argument("--bandwidth", type=positive_float, metavar="GBS",
                   help="the memory bandwidth in GB/s to use instead of measuring it")
    p.add_argument("--remeasure", action="store_true",
                   help="measure the machine's peak and bandwidth again (a busy machine "
                   "measures low; the better of the cached and new figures is kept)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of the random inputs (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    add_tuning_log(p)
    p.set_defaults(handler=cmd_profile)

"""``tensorc inspect``: the model's IR after one stage of the pipeline (graph, fused, loops,
llvm, cuda).

    $ tensorc inspect lenet5.onnx --stage loops
"""

from __future__ import annotations

import argparse
from typing import Any

import onnx

import tensorc
from tensorc.cli.arguments import (
    add_input_shape, add_input_value, embedded_source, refuse_for_artifact, require_file,
    shape_dict, subcommand, value_dict,
)
from tensorc.cli.info import artifact_report, format_report
from tensorc.runtime.artifact import is_artifact


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print the model's IR after one stage of the pipeline."""
    model = require_file(args.model, "model")
    if is_artifact(model):
        refuse_for_artifact(model, [("--input-shape", args.input_shape),
                                    ("--input-value", args.input_value)])
        module = tensorc.load(model)
        if args.stage is None:
            print("\n".join(format_report(artifact_report(model, module))))
            return 0
        # the IR of the model it embeds, at the shapes and for the target it was compiled
        source = onnx.ModelProto.FromString(
            embedded_source(model, module, f"show stage {args.stage}"))
        text = tensorc.inspect(source, stage=args.stage,
                               input_shapes={n: s for n, s, _ in module.inputs},
                               target=args.target or module.target)
    else:
        text = tensorc.inspect(
            str(model), stage=args.stage or "graph", input_shapes=shape_dict(args.input_shape),
            target=args.target or "llvm", input_values=value_dict(args.input_value),
        )
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def add_inspect_parser(commands: Any) -> None:
    """Register ``tensorc inspect`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands,
        "inspect",
        "print the IR of a model after a compiler stage",
        "Print the model's intermediate representation after one stage of the pipeline: "
        "graph (core ops), fused (kernels after fusion), loops (loop IR), llvm (generated "
        "code) or, for --target cuda, cuda (the CUDA C, with ptxas's registers, shared "
        "memory and spills per kernel when nvcc is installed).",
        """\
examples:
  tensorc inspect mlp.onnx
  tensorc inspect lenet5.onnx --stage loops
  tensorc inspect mlp.onnx --target cuda --stage cuda
""",
    )
    p.add_argument("model", help="the ONNX model file, or a .tcz artifact (its signature, "
                   "target, threads and provenance; with --stage, the IR of the model it "
                   "embeds)")
    p.add_argument(
        "--stage",
        choices=tensorc.STAGES,
        help="which stage's IR to print (default: graph)",
    )
    p.add_argument(
        "--target",
        help="what to compile for: llvm or 'cuda -arch=sm_NN' (default: llvm, or an "
        "artifact's target)",
    )
    add_input_shape(p)
    add_input_value(p)
    p.set_defaults(handler=cmd_inspect)

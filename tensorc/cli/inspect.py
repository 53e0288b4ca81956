"""``tensorc inspect``: the model's IR after one stage of the pipeline (graph, fused, loops,
llvm, cuda).

    $ tensorc inspect models/lenet5.onnx --stage loops
"""

from __future__ import annotations

import argparse
from typing import Any

import tensorc
from tensorc.cli.arguments import (
    add_input_shape, add_input_value, require_file, shape_dict, subcommand, value_dict,
)


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print the model's IR after one stage of the pipeline."""
    model = require_file(args.model, "model")
    text = tensorc.inspect(
        str(model), stage=args.stage, input_shapes=shape_dict(args.input_shape),
        target=args.target, input_values=value_dict(args.input_value),
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
  tensorc inspect models/mlp.onnx
  tensorc inspect models/lenet5.onnx --stage loops
  tensorc inspect models/mlp.onnx --target cuda --stage cuda
""",
    )
    p.add_argument("model", help="the ONNX model file")
    p.add_argument(
        "--stage",
        choices=tensorc.STAGES,
        default="graph",
        help="which stage's IR to print (default: %(default)s)",
    )
    p.add_argument(
        "--target",
        default="llvm",
        help="what to compile for: llvm or 'cuda -arch=sm_NN' (default: %(default)s)",
    )
    add_input_shape(p)
    add_input_value(p)
    p.set_defaults(handler=cmd_inspect)

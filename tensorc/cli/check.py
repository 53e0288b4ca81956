"""``tensorc check``: which ops of a model tensorc supports, without compiling it.

    $ tensorc check bert.onnx --input-shape input_ids=1x128 --json
"""

from __future__ import annotations

import argparse
from typing import Any

import onnx

import tensorc
from tensorc.cli.arguments import (
    EXIT_CHECK_FAILED, add_dim_range, add_input_shape, add_input_value, embedded_source,
    range_dict, refuse_for_artifact, require_file, shape_dict, subcommand, value_dict,
)
from tensorc.errors import TensorcError
from tensorc.runtime.artifact import is_artifact


def cmd_check(args: argparse.Namespace) -> int:
    """Report which ops of a model tensorc supports, without compiling it."""
    model = require_file(args.model, "model")
    if is_artifact(model):
        report = _check_artifact(model, args)
    else:
        report = tensorc.check(str(model), input_shapes=shape_dict(args.input_shape),
                               input_values=value_dict(args.input_value),
                               dim_ranges=range_dict(args.dim_range))
    print(report.to_json() if args.json else report)
    return 0 if report.supported else EXIT_CHECK_FAILED


def _check_artifact(path: Any, args: argparse.Namespace) -> Any:
    """The report on the source model a compiled artifact embeds, at the shapes it was
    compiled for (its values fixed at compile time are constants in it already)."""
    refuse_for_artifact(path, [("--input-shape", args.input_shape),
                               ("--input-value", args.input_value),
                               ("--dim-range", args.dim_range)])
    module = tensorc.load(path)
    try:
        source = embedded_source(path, module, "report on it")
    except TensorcError as error:
        raise TensorcError(f"{path} is compiled already (for {module.target}), so every op of "
                           f"it compiled; {error} (or see 'tensorc info {path}')") from None
    proto = onnx.ModelProto.FromString(source)
    proto.graph.name = proto.graph.name or path.name
    return tensorc.check(proto, input_shapes={n: s for n, s, _ in module.inputs})


def add_check_parser(commands: Any) -> None:
    """Register ``tensorc check`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands,
        "check",
        "report which ops of a model tensorc supports, without compiling it",
        "Report, without compiling, which ops of an ONNX model tensorc supports and which it "
        "does not (op type, domain, opset, node names, and why for an attribute or variant "
        "a converter rejects), which input dims are symbolic and whether --input-shape binds "
        "them, and the model's opsets and IR version. Each supported node is converted on "
        "trial, dims left unbound kept symbolic (their ranges, the constraints checked at run "
        "time and the outputs' symbolic shapes are reported), so one run lists every problem.",
        """\
examples:
  tensorc check resnet.onnx
  tensorc check bert.onnx --input-shape input_ids=1x32 --json
  tensorc check bert.onnx --dim-range sequence=1:64 --dim-range batch=1:8

Exit status: 0 every op is supported, 1 something is not, 2 error (a missing or broken file).
""",
    )
    p.add_argument("model", help="the ONNX model file (or a .tcz artifact that embeds one)")
    add_input_shape(p)
    add_input_value(p)
    add_dim_range(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=cmd_check)

"""``tensorc check``: which ops of a model tensorc supports, without compiling it.

    $ tensorc check models/bert.onnx --input-shape input_ids=1x128 --json
"""

from __future__ import annotations

import argparse
from typing import Any

import tensorc
from tensorc.cli.arguments import (
    EXIT_CHECK_FAILED, add_input_shape, add_input_value, require_file, shape_dict, subcommand,
    value_dict,
)


def cmd_check(args: argparse.Namespace) -> int:
    """Report which ops of a model tensorc supports, without compiling it."""
    model = require_file(args.model, "model")
    report = tensorc.check(str(model), input_shapes=shape_dict(args.input_shape),
                           input_values=value_dict(args.input_value))
    print(report.to_json() if args.json else report)
    return 0 if report.supported else EXIT_CHECK_FAILED


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
        "trial (dims left unbound are tried as 1), so one run lists every problem.",
        """\
examples:
  tensorc check models/resnet.onnx
  tensorc check models/bert.onnx --input-shape input_ids=1x128 --json

Exit status: 0 every op is supported, 1 something is not, 2 error (a missing or broken file).
""",
    )
    p.add_argument("model", help="the ONNX model file")
    add_input_shape(p)
    add_input_value(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=cmd_check)

"""The ``tensorc`` command line: compile, run, check, inspect, benchmark, profile and tune ONNX
models. Each command is a module of this package holding its parser and its handler, a plain
function over the parsed arguments; ``main`` maps a ``TensorcError`` to ``error: <message>``
on stderr (JSON on stdout under --json, argument errors included) and exit code 2, never a
traceback; any other exception is a bug: its traceback, then an ``error:`` line, and 2 too
(1 means only that a correctness check failed).

>>> main(["compile", "mlp.onnx", "-o", "mlp.tcz"])  # doctest: +SKIP
0
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Sequence

from tensorc.cli.arguments import EXIT_ERROR, ArgumentParser, HelpFormatter, UsageError
from tensorc.cli.bench import add_bench_parser
from tensorc.cli.check import add_check_parser
from tensorc.cli.compile import add_compile_parser
from tensorc.cli.info import add_info_parser
from tensorc.cli.inspect import add_inspect_parser
from tensorc.cli.profile import add_profile_parser
from tensorc.cli.run import add_run_parser
from tensorc.cli.tune import add_tune_parser
from tensorc.errors import TensorcError
from tensorc.version import __version__


def build_parser() -> ArgumentParser:
    """The argument parser of the ``tensorc`` command."""
    parser = ArgumentParser(
        prog="tensorc",
        description="Compile ONNX models to native code and run them.",
        epilog="""\
examples (python -m tensorc.examples writes mlp.onnx, lenet5.onnx, resnet.onnx and bert.onnx
here; every command's examples start from those):
  tensorc compile mlp.onnx -o mlp.tcz
  tensorc run mlp.tcz --check-onnxruntime
  tensorc check mlp.onnx
  tensorc inspect mlp.onnx --stage fused
  tensorc info mlp.tcz
  tensorc bench resnet.onnx --input-shape input=1x3x224x224 --vs onnxruntime --threads 1
  tensorc profile resnet.onnx --input-shape input=1x3x224x224 --threads 1

'tensorc COMMAND --help' describes each command.
""",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version",
                        version=f"tensorc {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_compile_parser(commands)
    add_run_parser(commands)
    add_check_parser(commands)
    add_inspect_parser(commands)
    add_info_parser(commands)
    add_bench_parser(commands)
    add_profile_parser(commands)
    add_tune_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tensorc`` command with ``argv`` (default: sys.argv[1:]); returns the exit
    code: 0 success, 1 a correctness check failed, 2 an error. An argument error exits
    through SystemExit(2), as argparse's do (as JSON with --json)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        if "--json" in argv:
            print(json.dumps({"error": str(error), "type": "UsageError"}))
        else:
            print(f"{error.usage}{error.prog}: error: {error}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR) from None
    json_errors = getattr(args, "json", False)
    try:
        return args.handler(args)
    except (TensorcError, OSError) as error:
        # an OSError that no command wrapped (a full disk while printing, say) is still the
        # user's environment, not a bug: one line, exit status 2
        message = (error.cli_message or str(error)) if isinstance(error, TensorcError) else \
            f"{error.strerror or error}{f': {error.filename}' if error.filename else ''}"
        return _report(message, type(error).__name__, json_errors)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 (a bug: exit 2 with its traceback, never 1)
        traceback.print_exc()
        return _report(f"internal error (a bug in tensorc: please report it with the "
                       f"traceback above): {type(error).__name__}: {error}",
                       type(error).__name__, json_errors)


def _report(message: str, kind: str, json_errors: bool) -> int:
    """Print an error as one line on stderr, or as JSON on stdout; the exit status."""
    sys.stdout.flush()
    if json_errors:
        print(json.dumps({"error": message, "type": kind}))
    else:
        print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())

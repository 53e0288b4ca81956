"""``python -m tensorc.examples [DIR] [--only NAME]``: write the example models."""
from __future__ import annotations

import argparse
import sys

from tensorc.examples import EXAMPLES, write_examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tensorc.examples",
        description="Write the example models the README and 'tensorc --help' use (ONNX, "
        "seeded random weights): " + "; ".join(f"{k}.onnx: {v}" for k, v in
                                                EXAMPLES.items()) + ".")
    parser.add_argument("directory", nargs="?", default=".",
                        help="where to write them (default: the current directory)")
    parser.add_argument("--only", action="append", choices=list(EXAMPLES), metavar="NAME",
                        help="write only this one (repeat for several): "
                        + ", ".join(EXAMPLES))
    args = parser.parse_args(argv)
    for path in write_examples(args.directory, args.only):
        print(f"wrote {path}")
    print("next: tensorc compile mlp.onnx -o mlp.tcz && tensorc run mlp.tcz "
          "--check-onnxruntime" if args.directory == "." else
          f"next: cd {args.directory}; tensorc compile mlp.onnx -o mlp.tcz")
    return 0


if __name__ == "__main__":
    sys.exit(main())

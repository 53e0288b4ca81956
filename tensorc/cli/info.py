"""``tensorc info``: what a compiled artifact (.tcz) is: its signature, target, threads and
where it came from (source model and its SHA-256, compile shapes and values, tensorc version,
when), without running it. ``tensorc inspect`` shows the same for an artifact.

    $ tensorc info resnet.tcz --json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import tensorc
from tensorc.cli.arguments import jsonable, require_file, subcommand
from tensorc.errors import TensorcError
from tensorc.ir.types import format_shape
from tensorc.runtime.artifact import is_artifact
from tensorc.runtime.base import CompiledModule
from tensorc.version import __version__


def artifact_report(path: Path, module: CompiledModule) -> dict[str, Any]:
    """What ``tensorc info`` says of the artifact at ``path``, JSON-ready."""
    info = dict(module.info)
    threads = getattr(module, "num_threads", None)       # None: a GPU module
    signature = [
        [{"name": n, "shape": [d if isinstance(d, int) else str(d) for d in s], "dtype": dt}
         for n, s, dt in sig]
        for sig in (module.inputs, module.outputs)]
    dims = getattr(module, "dims", None)         # a module over symbolic dims: its table
    return {
        "artifact": str(path),
        "bytes": path.stat().st_size,
        "kind": "cuda" if threads is None else "cpu",
        "target": module.target,
        "threads": threads,
        "inputs": signature[0],
        "outputs": signature[1],
        "dims": dims.to_json() if dims is not None else None,
        "dim_lines": dims.describe() if dims is not None else [],
        "tensorc_version": __version__,          # load() refuses artifacts of other versions
        "source": info.pop("source", None),
        "compiled_at": info.pop("compiled_at", None),
        "embeds_source": module.source_onnx is not None,
        "embedded_source_bytes": len(module.source_onnx or b""),
        "details": info,
    }


def format_report(report: dict[str, Any]) -> list[str]:
    """The lines ``tensorc info`` prints for an :func:`artifact_report`."""
    threads = report["threads"]
    lines = [f"{report['artifact']}: a tensorc {report['tensorc_version']} module, "
             f"{report['bytes'] / 1e6:.2f} MB",
             f"  target: {report['target']}",
             "  threads: " + ("not applicable (a GPU module)" if threads is None else
                              "all cores" if threads == 0 else str(threads))]
    for title, key in (("input ", "inputs"), ("output", "outputs")):
        lines += [f"  {title} {e['name']}: {e['dtype']}{format_shape(tuple(e['shape']))}"
                  for e in report[key]]
    lines += [f"  dim {line}" for line in report.get("dim_lines", [])]
    source = report["source"]
    if source:
        lines.append(f"  source: {source.get('path') or source['model']} (sha256 "
                     f"{source['sha256'][:16]}..., {source['bytes'] / 1e6:.2f} MB)")
        for key, title in (("input_shapes", "--input-shape"), ("input_values", "--input-value")):
            for name, value in (source.get(key) or {}).items():
                text = "x".join(map(str, value)) if key == "input_shapes" else \
                    json.dumps(value, separators=(",", ":"))
                lines.append(f"    compiled with {title} {name}={text}")
    else:
        lines.append("  source: not recorded")
    if report["compiled_at"]:
        lines.append(f"  compiled at: {report['compiled_at']}")
    details = report["details"]
    if "kernels" in details:
        lines.append(f"  kernels: {details['kernels']} distinct"
                     + (f", {details['groups']} calls" if "groups" in details else ""))
    if "tuning" in details:
        tuning = details["tuning"]
        lines.append(f"  tuning log: {tuning.get('log')} ({tuning.get('tuned_kernels')} "
                     f"kernels tuned)")
    embedded = report["embedded_source_bytes"]
    lines.append(f"  embeds its source model ({embedded / 1e6:.2f} MB): "
                 f"'run --check-onnxruntime' needs no .onnx" if report["embeds_source"] else
                 "  does not embed its source model (compile with --keep-source to embed it)")
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    """Print what a compiled artifact is."""
    path = require_file(args.artifact, "artifact")
    if not is_artifact(path):
        raise TensorcError(f"{path} is an ONNX model, not a compiled module: 'tensorc check "
                           f"{path}' reports what it holds; 'tensorc info' reads .tcz files"
                           if path.suffix.lower() == ".onnx" else
                           f"{path} is not a tensorc module (.tcz)")
    report = artifact_report(path, tensorc.load(path))
    if args.json:
        print(json.dumps(jsonable(report), indent=2))
    else:
        print("\n".join(format_report(report)))
    return 0


def add_info_parser(commands: Any) -> None:
    """Register ``tensorc info`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands,
        "info",
        "show what a compiled .tcz artifact is",
        "Print a compiled artifact's inputs and outputs, target, thread count and provenance "
        "(the source model and its SHA-256, the shapes and values it was compiled with, the "
        "tensorc version, when), and whether it embeds its source model. Nothing is run.",
        """\
examples:
  tensorc compile mlp.onnx -o mlp.tcz
  tensorc info mlp.tcz
  tensorc info mlp.tcz --json
""",
    )
    p.add_argument("artifact", help="the .tcz artifact written by 'tensorc compile'")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=cmd_info)

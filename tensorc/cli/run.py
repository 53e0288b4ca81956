"""``tensorc run``: a compiled module once, on given or seeded random inputs, with each
output's summary, and optionally checked against onnxruntime.

    $ tensorc run mlp.tcz --check-onnxruntime      # exit status 1 when the outputs differ
"""

from __future__ import annotations

import argparse
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import tensorc
from tensorc.cli.arguments import (
    EXIT_CHECK_FAILED, add_check_options, embedded_source, jsonable, parse_input_file,
    parse_input_shape,    require_file, shape_dict, subcommand, thread_count, writable_output,
)
from tensorc.errors import TensorcError
from tensorc.ir.types import format_shape
from tensorc.reference import (
    compare_outputs, format_comparison, input_rule, quantization_steps, random_inputs,
    run_onnxruntime,
)
from tensorc.runtime.artifact import is_artifact


def _summary(array: np.ndarray) -> dict[str, Any]:
    """min / max / mean and the first few values of an output, JSON-ready."""
    info: dict[str, Any] = {}
    if array.size and array.dtype.kind in "fiub":
        values = array.astype(np.float64)
        info.update(min=float(values.min()), max=float(values.max()), mean=float(values.mean()))
        if array.ndim >= 1 and array.size > 1:
            info["argmax"] = int(values.argmax())
    info["head"] = array.reshape(-1)[:5].tolist()
    return info


def _read_array(name: str, path: str) -> np.ndarray:
    """The array of an ``--input NAME=FILE``: a .npy file, or the array NAME of an .npz."""
    file = require_file(path, f"input file for {name!r}:")
    try:
        data = np.load(file, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise TensorcError(f"cannot read {path} as a .npy array: {error}") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            if name in data.files:
                return data[name]
            raise TensorcError(
                f"--input {name}={path}: {path} is an .npz archive (arrays "
                f"{', '.join(data.files) or 'none'}), not one array, and has none named "
                f"{name!r}: give the archive with --inputs {path} (its arrays are matched to "
                f"the inputs by name), or one array with --input {name}=FILE.npy")
    return data


def _read_archive(path: str, known: set[str]) -> dict[str, np.ndarray]:
    """The arrays of an ``--inputs FILE.npz``, each named after the input it feeds."""
    file = require_file(path, "--inputs")
    try:
        data = np.load(file, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise TensorcError(f"cannot read {path} as an .npz archive: {error}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise TensorcError(f"--inputs {path} is not an .npz archive (np.savez writes one); "
                           f"give a single .npy array with --input NAME={path}")
    with data:
        unknown = [name for name in data.files if name not in known]
        if unknown:
            raise TensorcError(f"--inputs {path} has arrays {', '.join(data.files)}, but the "
                               f"model's inputs are {', '.join(sorted(known))}: name each "
                               f"array after the input it feeds (np.savez(path, NAME=array))")
        return {name: data[name] for name in data.files}


def _save_archive(path: str, arrays: dict[str, np.ndarray]) -> None:
    """An .npz archive at exactly ``path`` (np.savez would add .npz to another name, and
    takes no array named 'file')."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def _load_feeds(
    given: list[tuple[str, str]] | None,
    signature: list[tuple[str, tuple[int, ...], str]],
    seed: int,
    archive: str | None = None,
    shapes: dict | None = None,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Feeds from the ``--inputs`` archive and ``--input`` files (which win), random (seeded)
    for inputs not given; also returns the names of the random ones."""
    known = {name for name, _, _ in signature}
    feeds: dict[str, np.ndarray] = {}
    from_archive = _read_archive(archive, known) if archive else {}
    for name, path in given or []:
        if name in feeds:
            raise TensorcError(f"--input {name}=... is given twice; give each input once")
        if name not in known:
            raise TensorcError(
                f"--input {name}={path}: the model has no input {name!r}; "
                f"its inputs are {', '.join(sorted(known))}"
            )
        feeds[name] = _read_array(name, path)
    feeds = {**from_archive, **feeds}
    missing = [entry for entry in signature if entry[0] not in feeds]
    feeds.update(random_inputs(missing, seed=seed, shapes=shapes))
    return feeds, [name for name, _, _ in missing]


def _source_model(args: argparse.Namespace, artifact: Path, module: Any) -> str | bytes:
    if args.check_onnxruntime:
        return str(require_file(args.check_onnxruntime, "ONNX model"))
    try:
        return embedded_source(artifact, module, "compare with onnxruntime")
    except TensorcError as error:
        raise TensorcError(f"{error} (--check-onnxruntime model.onnx)") from None


def _looks_like_onnx(path: Path) -> bool:
    """An .onnx name, or a file that parses as an ONNX model with a graph."""
    if path.suffix.lower() == ".onnx":
        return True
    try:
        return len(onnx.load(str(path), load_external_data=False).graph.node) > 0
    except Exception:  # noqa: BLE001 (anything unreadable is simply not ONNX)
        return False


def cmd_run(args: argparse.Namespace) -> int:
    """Run a compiled module, optionally checking it against onnxruntime."""
    artifact = require_file(args.model, "artifact")
    if not is_artifact(artifact) and _looks_like_onnx(artifact):
        compiled = artifact.with_suffix(".tcz")
        raise TensorcError(f"{artifact} is an ONNX model, not a compiled module: compile it "
                           f"first with 'tensorc compile {artifact} -o {compiled}', then "
                           f"'tensorc run {compiled}'")
    if args.outputs:
        writable_output(args.outputs, "write the outputs to")
    module = tensorc.load(str(artifact))
    if args.threads is not None:
        module.num_threads = args.threads
    feeds, random_names = _load_feeds(args.input, module.inputs, args.seed, args.inputs,
                                      shape_dict(args.input_shape))
    start = time.perf_counter()
    outputs = module.run(feeds)
    run_ms = (time.perf_counter() - start) * 1e3

    comparison = None
    if args.check_onnxruntime is not None:
        source = _source_model(args, artifact, module)
        expected = run_onnxruntime(source, feeds, args.threads)
        comparison = compare_outputs(outputs, expected, rtol=args.rtol, atol=args.atol,
                                     steps=quantization_steps(source), max_steps=args.steps)

    if args.outputs:
        try:
            _save_archive(args.outputs, outputs)
        except OSError as error:
            raise TensorcError(f"cannot write the outputs to {args.outputs}: "
                               f"{error.strerror or error}") from None
    rules = {name: input_rule(name, shape, dtype) for name, shape, dtype in module.inputs
             if name in random_names}
    if args.json:
        report: dict[str, Any] = {
            "artifact": str(artifact),
            "random_inputs": random_names,
            "input_rules": {name: rule for name, rule in rules.items() if rule},
            "seed": args.seed,
            "run_ms": run_ms,
            "outputs": [
                {
                    "name": name,
                    "shape": list(value.shape),
                    "dtype": str(value.dtype),
                    **_summary(value),
                }
                for name, value in outputs.items()
            ],
        }
        if comparison is not None:
            report["check"] = comparison.to_json()
        if args.outputs:
            report["outputs_file"] = args.outputs
        print(json.dumps(jsonable(report), indent=2, allow_nan=False))
    else:
        if random_names:
            names = [f"{name} = {rules[name]}" if rules[name] else name
                     for name in random_names]
            print(f"random inputs (seed {args.seed}): {', '.join(names)}")
        for name, value in outputs.items():
            info = _summary(value)
            stats = ""
            if "min" in info:
                stats = f"  min {info['min']:.4g}  max {info['max']:.4g}  mean {info['mean']:.4g}"
            head = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in info["head"])
            print(
                f"{name}: {value.dtype}{format_shape(value.shape)}{stats}  [{head}"
                f"{', ...' if value.size > 5 else ''}]"
            )
        print(f"ran in {run_ms:.3f} ms (first call)")
        if comparison is not None:
            print(f"check against onnxruntime ({comparison.tolerance()}):")
            for line in format_comparison(comparison):
                print(f"  {line}")
            print("PASS" if comparison.passed else "FAIL")
        if args.outputs:
            print(f"wrote the outputs to {args.outputs}")
    if comparison is not None and not comparison.passed:
        return EXIT_CHECK_FAILED
    return 0


def add_run_parser(commands: Any) -> None:
    """Register ``tensorc run`` on ``commands``, the subparsers of ``main.build_parser``."""
    p = subcommand(
        commands,
        "run",
        "run a compiled .tcz module",
        "Run a compiled module once and print each output's name, shape, dtype and a summary. "
        "Inputs not given with --input or --inputs get seeded random values: floats standard "
        "normal, integers 0 to 9, bools coin flips, except where the name implies more: a "
        "mask is ones, token type ids zeros, position ids 0, 1, 2, ..., an integer sample "
        "rate (sr, sample_rate) 16000, any other one-element integer input (a control input) "
        "1.",
        """\
examples:
  tensorc compile mlp.onnx -o mlp.tcz
  tensorc run mlp.tcz
  tensorc run mlp.tcz --outputs out.npz --json
  tensorc run mlp.tcz --check-onnxruntime        # against the model mlp.tcz came from
  tensorc run mlp.tcz --check-onnxruntime mlp.onnx
  python -c "import numpy as np; np.savez('feeds.npz', x=np.ones((1, 784), np.float32))"
  tensorc run mlp.tcz --inputs feeds.npz         # or one array: --input x=x.npy
  tensorc compile bert.onnx -o bert.tcz
  tensorc run bert.tcz --input-shape input_ids=2x17 --input-shape attention_mask=2x17

Exit status: 0 ok, 1 the outputs disagree with onnxruntime, 2 error.
""",
    )
    p.add_argument("model", help="the .tcz artifact written by 'tensorc compile'")
    p.add_argument(
        "--input",
        metavar="NAME=FILE.npy",
        type=parse_input_file,
        action="append",
        help="feed input NAME from a .npy file, or the array NAME of an .npz (repeat the flag "
        "for several inputs)",
    )
    p.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="feed inputs from an .npz archive, each array named after its input "
        "(np.savez(FILE, x=...)); --input overrides one",
    )
    p.add_argument(
        "--outputs",
        metavar="FILE.npz",
        help="write every output to an .npz archive, each array named after its output",
    )
    p.add_argument(
        "--check-onnxruntime",
        metavar="MODEL.onnx",
        nargs="?",
        const="",
        help="also run the model with onnxruntime and compare the outputs, printing PASS or "
        "FAIL; without a file, the model the artifact was compiled from (embedded with "
        "compile --keep-source, else the file it was compiled from, if unchanged; put this "
        "flag after the artifact's name)",
    )
    p.add_argument(
        "--threads",
        type=thread_count,
        metavar="N",
        help="threads to run on, for tensorc and onnxruntime; 0 means all cores "
        "(default: the artifact's setting)",
    )
    p.add_argument(
        "--input-shape",
        metavar="NAME=SHAPE",
        type=parse_input_shape,
        action="append",
        help="the shape of the random values for an input with symbolic dims, e.g. "
        "input_ids=2x17 (repeat the flag for several inputs)",
    )
    add_check_options(p)
    p.set_defaults(handler=cmd_run)

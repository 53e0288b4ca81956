"""The ``tensorc`` command line: compile, run, inspect and benchmark ONNX models.

Every subcommand is a plain function over parsed arguments; ``main`` maps a
``TensorcError`` to ``error: <message>`` on stderr and exit code 2, never a traceback.

>>> main(["compile", "models/mlp.onnx", "-o", "mlp.tcz"])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import tensorc
from tensorc.benchmark import NOISY_SPREAD, format_ms, time_alternating
from tensorc.errors import TensorcError
from tensorc.reference import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    compare_outputs,
    format_comparison,
    onnxruntime_session,
    random_inputs,
    run_onnxruntime,
    run_session,
)
from tensorc.ir.types import format_shape
from tensorc.runtime.artifact import is_artifact

EXIT_CHECK_FAILED = 1
EXIT_ERROR = 2


# --- argument types -------------------------------------------------------------------------


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse ``NAME=D1xD2x...`` (``,`` also separates dims) into a name and a shape.

    >>> parse_input_shape("x=1x3x224x224")
    ('x', (1, 3, 224, 224))
    """
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=SHAPE such as x=1x3x224x224, got {text!r}")
    try:
        shape = tuple(int(d) for d in dims.replace(",", "x").split("x") if d.strip() != "")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"shape of {name!r} must be integers separated by 'x', got {dims!r}"
        ) from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"shape of {name!r} has a negative dim: {dims!r}")
    return name, shape


def parse_input_value(text: str) -> tuple[str, Any]:
    """Parse ``NAME=VALUE``, the value a JSON number, boolean or (nested) list.

    >>> parse_input_value("sr=16000")
    ('sr', 16000)
    """
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE such as sr=16000, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not _is_numeric(parsed):
        raise argparse.ArgumentTypeError(
            f"the value of {name!r} must be a number, true/false or a list such as [1, 2], "
            f"got {value!r}")
    return name, parsed


def _is_numeric(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_is_numeric(v) for v in value)
    return isinstance(value, (int, float, bool))


def _value_dict(pairs: list[tuple[str, Any]] | None) -> dict | None:
    if not pairs:
        return None
    values: dict[str, Any] = {}
    for name, value in pairs:
        if name in values:
            raise TensorcError(f"--input-value gives input {name!r} twice")
        values[name] = value
    return values


def parse_input_file(text: str) -> tuple[str, str]:
    """Parse ``NAME=FILE.npy``.

    >>> parse_input_file("x=x.npy")
    ('x', 'x.npy')
    """
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy such as x=x.npy, got {text!r}")
    return name, path


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _thread_count(text: str) -> int:
    """A ``--threads`` value: 0 (all cores) or 1 to four times the cores."""
    from tensorc.runtime.module import check_num_threads
    value = _non_negative_int(text)
    try:
        return check_num_threads(value)
    except TensorcError as error:
        raise argparse.ArgumentTypeError(str(error).replace("num_threads", "--threads")) \
            from None


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number >= 1, got 0")
    return value


def _shape_dict(pairs: list[tuple[str, tuple[int, ...]]] | None) -> dict | None:
    if not pairs:
        return None
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in pairs:
        if name in shapes and shapes[name] != shape:
            raise TensorcError(f"--input-shape gives two shapes for input {name!r}")
        shapes[name] = shape
    return shapes


# --- small helpers --------------------------------------------------------------------------


def _require_file(path: str, what: str) -> Path:
    file = Path(path)
    if not file.exists():
        raise TensorcError(f"{what} {path} does not exist")
    if not file.is_file():
        raise TensorcError(f"{what} {path} is not a file")
    return file


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


def _jsonable(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None (JSON has no such numbers)."""
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _print_signature(title: str, signature: list[tuple[str, tuple[int, ...], str]]) -> None:
    for name, shape, dtype in signature:
        print(f"  {title} {name}: {dtype}{format_shape(shape)}")


# --- subcommands ----------------------------------------------------------------------------


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile an ONNX model and save the module as a .tcz artifact."""
    model = _require_file(args.model, "model")
    output = Path(args.output) if args.output else model.with_suffix(".tcz")
    if output.exists() and not args.force:
        if output.is_dir() or not is_artifact(output):
            raise TensorcError(
                f"refusing to overwrite {output}: it exists and is not a tensorc artifact "
                "(pass --force to overwrite it)"
            )
    input_shapes = _shape_dict(args.input_shape)
    print(f"compiling {model} for target {args.target}")
    if input_shapes:
        for name, shape in input_shapes.items():
            print(f"  binding input {name} to shape {format_shape(shape)}")
    start = time.perf_counter()
    module = tensorc.compile(
        str(model),
        target=args.target,
        input_shapes=input_shapes,
        input_values=_value_dict(args.input_value),
        num_threads=args.threads,
        tuning_log=args.tuning_log,
        progress=lambda message: print(f"  {message}", flush=True),
    )
    compile_seconds = time.perf_counter() - start
    _print_signature("input ", module.inputs)
    _print_signature("output", module.outputs)
    print(f"compiled in {compile_seconds:.2f} s")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TensorcError(f"cannot save to {output}: cannot make its directory "
                           f"{output.parent}: {error.strerror or error}") from None
    module.save(str(output), overwrite=args.force, include_source=not args.no_source)
    print(f"saved {output} ({output.stat().st_size / 1e6:.2f} MB)")
    return 0


def _load_feeds(
    given: list[tuple[str, str]] | None,
    signature: list[tuple[str, tuple[int, ...], str]],
    seed: int,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Feeds from ``--input`` files, random (seeded) for inputs not given; also returns the
    names of the random ones."""
    known = {name for name, _, _ in signature}
    feeds: dict[str, np.ndarray] = {}
    for name, path in given or []:
        if name in feeds:
            raise TensorcError(f"--input {name}=... is given twice; give each input once")
        if name not in known:
            raise TensorcError(
                f"--input {name}={path}: the model has no input {name!r}; "
                f"its inputs are {', '.join(sorted(known))}"
            )
        file = _require_file(path, f"input file for {name!r}:")
        try:
            feeds[name] = np.load(file, allow_pickle=False)
        except (ValueError, OSError) as error:
            raise TensorcError(f"cannot read {path} as a .npy array: {error}") from None
    missing = [entry for entry in signature if entry[0] not in feeds]
    feeds.update(random_inputs(missing, seed=seed))
    return feeds, [name for name, _, _ in missing]


def _source_model(args: argparse.Namespace, module: Any) -> str | bytes:
    if args.check_onnxruntime:
        return str(_require_file(args.check_onnxruntime, "ONNX model"))
    source = getattr(module, "source_onnx", None)
    if not source:
        raise TensorcError(
            f"{args.model} does not contain its source ONNX model; "
            "pass it explicitly: --check-onnxruntime model.onnx"
        )
    return source


def _looks_like_onnx(path: Path) -> bool:
    """An .onnx name, or a file that parses as an ONNX model with a graph."""
    if path.suffix.lower() == ".onnx":
        return True
    try:
        import onnx
        return len(onnx.load(str(path), load_external_data=False).graph.node) > 0
    except Exception:  # noqa: BLE001 (anything unreadable is simply not ONNX)
        return False


def cmd_run(args: argparse.Namespace) -> int:
    """Run a compiled module, optionally checking it against onnxruntime."""
    artifact = _require_file(args.model, "artifact")
    if not is_artifact(artifact) and _looks_like_onnx(artifact):
        compiled = artifact.with_suffix(".tcz")
        raise TensorcError(f"{artifact} is an ONNX model, not a compiled module: compile it "
                           f"first with 'tensorc compile {artifact} -o {compiled}', then "
                           f"'tensorc run {compiled}'")
    module = tensorc.load(str(artifact))
    if args.threads is not None:
        module.num_threads = args.threads
    feeds, random_names = _load_feeds(args.input, module.inputs, args.seed)
    start = time.perf_counter()
    outputs = module.run(feeds)
    run_ms = (time.perf_counter() - start) * 1e3

    comparison = None
    if args.check_onnxruntime is not None:
        expected = run_onnxruntime(_source_model(args, module), feeds, args.threads)
        comparison = compare_outputs(outputs, expected, rtol=args.rtol, atol=args.atol)

    if args.json:
        report: dict[str, Any] = {
            "artifact": str(artifact),
            "random_inputs": random_names,
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
            report["check"] = {
                "reference": "onnxruntime",
                "passed": comparison.passed,
                "rtol": comparison.rtol,
                "atol": comparison.atol,
                "outputs": [
                    {
                        "name": d.name,
                        "max_abs": d.max_abs,
                        "max_rel": d.max_rel,
                        "passed": d.passed,
                        "problem": d.problem,
                    }
                    for d in comparison.outputs
                ],
            }
        print(json.dumps(_jsonable(report), indent=2, allow_nan=False))
    else:
        if random_names:
            print(f"random inputs (seed {args.seed}): {', '.join(random_names)}")
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
            print(
                f"check against onnxruntime (rtol {comparison.rtol:g}, atol {comparison.atol:g}):"
            )
            for line in format_comparison(comparison):
                print(f"  {line}")
            print("PASS" if comparison.passed else "FAIL")
    if comparison is not None and not comparison.passed:
        return EXIT_CHECK_FAILED
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Report which ops of a model tensorc supports, without compiling it."""
    model = _require_file(args.model, "model")
    report = tensorc.check(str(model), input_shapes=_shape_dict(args.input_shape))
    print(report.to_json() if args.json else report)
    return 0 if report.supported else EXIT_CHECK_FAILED


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print the model's IR after one stage of the pipeline."""
    model = _require_file(args.model, "model")
    text = tensorc.inspect(
        str(model), stage=args.stage, input_shapes=_shape_dict(args.input_shape),
        target=args.target, input_values=_value_dict(args.input_value),
    )
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Compile a model and time it, side by side with onnxruntime if asked."""
    model = _require_file(args.model, "model")
    threads = args.threads or os.cpu_count() or 1  # the same count for both sides
    input_shapes = _shape_dict(args.input_shape)

    def progress(message: str) -> None:
        if not args.json:
            print(f"  {message}", file=sys.stderr, flush=True)

    if not args.json:
        print(f"compiling {model} for target {args.target}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    module = tensorc.compile(
        str(model), target=args.target, input_shapes=input_shapes, num_threads=threads,
        progress=progress, input_values=_value_dict(args.input_value),
        tuning_log=args.tuning_log,
    )
    compile_seconds = time.perf_counter() - start
    feeds = random_inputs(module.inputs, seed=args.seed)
    candidates = {"tensorc": lambda: module.run(feeds)}
    comparison = None
    if args.vs == "onnxruntime":
        session = onnxruntime_session(str(model), threads)
        expected = run_session(session, feeds)
        comparison = compare_outputs(module.run(feeds), expected, rtol=args.rtol, atol=args.atol)
        candidates["onnxruntime"] = lambda: session.run(None, feeds)
    timings = time_alternating(candidates, seconds=args.seconds, samples=args.repeat)

    tensorc_timing = timings["tensorc"]
    report: dict[str, Any] = {
        "model": str(model),
        "target": args.target,
        "threads": threads,
        "compile_s": compile_seconds,
        "samples": len(tensorc_timing.samples_ms),
        "results": {
            name: {
                "median_ms": t.median_ms,
                "min_ms": t.min_ms,
                "max_ms": t.max_ms,
                "calls_per_sample": t.calls_per_sample,
            }
            for name, t in timings.items()
        },
    }
    if comparison is not None:
        report["check_passed"] = comparison.passed
        report["max_abs_err"] = comparison.max_abs
        report["ratio"] = timings["onnxruntime"].median_ms / tensorc_timing.median_ms
    if "tuning" in module.info:
        report["tuning"] = module.info["tuning"]
    if args.json:
        print(json.dumps(_jsonable(report), indent=2, allow_nan=False))
    else:
        print(
            f"{model}: compiled for {args.target} in {compile_seconds:.2f} s; "
            f"{threads} thread{'s' if threads != 1 else ''}, "
            f"{report['samples']} samples per side"
        )
        if "tuning" in report:
            tuning = report["tuning"]
            print(f"schedules from {tuning['log']}: {tuning['tuned_kernels']} kernels as "
                  f"recorded, {tuning['default_kernels']} without a record (default)")
        if comparison is not None:
            verdict = "PASS" if comparison.passed else "FAIL"
            print(
                f"outputs vs onnxruntime: max abs err {comparison.max_abs:.3g}, "
                f"max rel err {comparison.max_rel:.3g}  {verdict}"
            )
        for name, timing in timings.items():
            noisy = f"  (noisy: spread over {NOISY_SPREAD:.0%})" if timing.noisy else ""
            print(f"  {name:<12} {format_ms(timing)} ms  median (min-max){noisy}")
        if comparison is not None:
            print(f"  onnxruntime / tensorc = {report['ratio']:.2f}  (> 1: tensorc is faster)")
        if any(t.noisy for t in timings.values()):
            print(
                f"note: a min-max spread over {NOISY_SPREAD:.0%} means the machine was busy; "
                "measure again"
            )
    if comparison is not None and not comparison.passed:
        return EXIT_CHECK_FAILED
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """Time every kernel of a compiled model and show how far each is from its roofline."""
    from tensorc.runtime.machine import Roofline, machine_roofline
    model = _require_file(args.model, "model")
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
                                 input_shapes=_shape_dict(args.input_shape), progress=progress,
                                 input_values=_value_dict(args.input_value),
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
        print(json.dumps(_jsonable(profile.to_json()), indent=2))
    else:
        print(f"{model}: {len(profile.kernels)} kernel calls, {threads} "
              f"thread{'s' if threads != 1 else ''}")
        print(profile.table(top=args.top or None))
        for path, what in ((args.trace, "trace"), (args.plot, "roofline plot")):
            if path:
                print(f"wrote the {what} to {path}")
    return 0


# --- parser ---------------------------------------------------------------------------------


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps prose paragraphs of descriptions and epilogs, keeps indented lines (examples) as
    written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.strip("\n").split("\n\n"):
            if any(line.startswith(" ") for line in paragraph.splitlines()):
                paragraphs.append("\n".join(indent + line for line in paragraph.splitlines()))
            else:
                paragraphs.append(super()._fill_text(paragraph, width, indent))
        return "\n\n".join(paragraphs)


def _subcommand(commands: Any, name: str, summary: str, description: str, epilog: str) -> Any:
    return commands.add_parser(
        name, help=summary, description=description, epilog=epilog, formatter_class=_HelpFormatter
    )


def _add_input_value(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-value",
        metavar="NAME=VALUE",
        type=parse_input_value,
        action="append",
        help="fix an input to a value at compile time, e.g. sr=16000 or mask=[1,0,1]: it "
        "becomes a constant and leaves the module's inputs; for inputs that decide a shape "
        "or a branch (repeat the flag for several inputs)",
    )


def _add_input_shape(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-shape",
        metavar="NAME=SHAPE",
        type=parse_input_shape,
        action="append",
        help="bind an input's shape, e.g. input=1x3x224x224; needed for inputs with symbolic "
        "dims (repeat the flag for several inputs)",
    )


def _add_check_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rtol",
        type=float,
        default=DEFAULT_RTOL,
        help="relative tolerance of the onnxruntime check (default: %(default)g)",
    )
    parser.add_argument(
        "--atol",
        type=float,
        default=DEFAULT_ATOL,
        help="absolute tolerance of the onnxruntime check (default: %(default)g)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random inputs (default: %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _add_compile_parser(commands: Any) -> None:
    p = _subcommand(
        commands,
        "compile",
        "compile an ONNX model into a .tcz artifact",
        "Compile an ONNX model and save the compiled module as a .tcz artifact, which "
        "'tensorc run' and tensorc.load() use without recompiling.",
        """\
examples:
  tensorc compile models/mlp.onnx -o mlp.tcz
  tensorc compile models/resnet.onnx -o resnet.tcz --input-shape input=1x3x224x224 --threads 2
  tensorc compile models/mlp.onnx -o mlp-gpu.tcz --target "cuda -arch=sm_90"
""",
    )
    p.add_argument("model", help="the ONNX model file")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write the artifact (default: the model's path with .tcz)",
    )
    p.add_argument(
        "--target",
        default="llvm",
        help="what to compile for: llvm (this CPU), cuda (NVIDIA GPUs, sm_80) or "
        "'cuda -arch=sm_90' (also sm_89; several: -arch=sm_80,sm_90) (default: %(default)s)",
    )
    _add_input_shape(p)
    _add_input_value(p)
    p.add_argument(
        "--threads",
        type=_thread_count,
        metavar="N",
        help="threads the module runs on; 0 means all cores (default: all cores)",
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite --output even if it is not an artifact"
    )
    p.add_argument(
        "--no-source",
        action="store_true",
        help="leave the source ONNX model out of the artifact (smaller; 'run "
        "--check-onnxruntime' then needs the .onnx file)",
    )
    _add_tuning_log(p)
    p.set_defaults(handler=cmd_compile)


def _add_run_parser(commands: Any) -> None:
    p = _subcommand(
        commands,
        "run",
        "run a compiled .tcz module",
        "Run a compiled module once and print each output's name, shape, dtype and a summary. "
        "Inputs not given with --input get seeded random values.",
        """\
examples:
  tensorc run mlp.tcz
  tensorc run mlp.tcz --input x=x.npy --json
  tensorc run mlp.tcz --check-onnxruntime        # against the model stored in mlp.tcz
  tensorc run mlp.tcz --check-onnxruntime models/mlp.onnx

Exit status: 0 ok, 1 the outputs disagree with onnxruntime, 2 error.
""",
    )
    p.add_argument("model", help="the .tcz artifact written by 'tensorc compile'")
    p.add_argument(
        "--input",
        metavar="NAME=FILE.npy",
        type=parse_input_file,
        action="append",
        help="feed input NAME from a .npy file (repeat the flag for several inputs)",
    )
    p.add_argument(
        "--check-onnxruntime",
        metavar="MODEL.onnx",
        nargs="?",
        const="",
        help="also run the model with onnxruntime and compare the outputs, printing PASS or "
        "FAIL; without a file, the ONNX model stored in the artifact is used (put this flag "
        "after the artifact's name)",
    )
    p.add_argument(
        "--threads",
        type=_thread_count,
        metavar="N",
        help="threads to run on, for tensorc and onnxruntime; 0 means all cores "
        "(default: the artifact's setting)",
    )
    _add_check_options(p)
    p.set_defaults(handler=cmd_run)


def _add_check_model_parser(commands: Any) -> None:
    p = _subcommand(
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
    _add_input_shape(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=cmd_check)


def _add_inspect_parser(commands: Any) -> None:
    p = _subcommand(
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
    _add_input_shape(p)
    _add_input_value(p)
    p.set_defaults(handler=cmd_inspect)


def _add_bench_parser(commands: Any) -> None:
    p = _subcommand(
        commands,
        "bench",
        "time a model, side by side with onnxruntime",
        "Compile a model and measure its latency: a warm-up, then the median of repeated "
        "runs. With --vs onnxruntime, the outputs are checked first, then tensorc and "
        "onnxruntime (same thread count, all graph optimizations) run in turn.",
        """\
examples:
  tensorc bench models/mlp.onnx
  tensorc bench models/resnet.onnx --vs onnxruntime --threads 1

Exit status: 0 ok, 1 the outputs disagree with onnxruntime, 2 error.
""",
    )
    p.add_argument("model", help="the ONNX model file")
    p.add_argument(
        "--vs", choices=("onnxruntime",), help="also time this runtime on the same inputs"
    )
    p.add_argument("--target", default="llvm", help="what to compile for (default: %(default)s)")
    _add_input_shape(p)
    _add_input_value(p)
    p.add_argument(
        "--threads",
        type=_thread_count,
        metavar="N",
        help="threads for tensorc and onnxruntime alike (default: all cores)",
    )
    p.add_argument(
        "--repeat",
        type=_positive_int,
        default=25,
        metavar="N",
        help="timed samples per side, each a batch of runs; the median is reported "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=1.5,
        help="time to spend measuring each side (default: %(default)s)",
    )
    _add_check_options(p)
    _add_tuning_log(p)
    p.set_defaults(handler=cmd_bench)


def _add_tuning_log(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tuning-log",
        metavar="FILE",
        help="apply the fastest schedules 'tensorc tune' recorded in FILE for this CPU",
    )


def _add_profile_parser(commands: Any) -> None:
    p = _subcommand(
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
    _add_input_shape(p)
    _add_input_value(p)
    p.add_argument("--threads", type=_thread_count, metavar="N",
                   help="threads to run on; 0 means all cores (default: all cores)")
    p.add_argument("--seconds", type=float, default=1.0,
                   help="time to spend measuring (default: %(default)s)")
    p.add_argument("--top", type=_non_negative_int, default=0, metavar="K",
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
    _add_tuning_log(p)
    p.set_defaults(handler=cmd_profile)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tensorc`` command."""
    parser = argparse.ArgumentParser(
        prog="tensorc",
        description="Compile ONNX models to native code and run them.",
        epilog="""\
examples:
  tensorc compile models/mlp.onnx -o mlp.tcz
  tensorc run mlp.tcz --check-onnxruntime
  tensorc check models/mlp.onnx
  tensorc inspect models/mlp.onnx --stage fused
  tensorc bench models/resnet.onnx --vs onnxruntime --threads 1
  tensorc profile models/resnet.onnx --threads 1

'tensorc COMMAND --help' describes each command.
""",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version",
                        version=f"tensorc {tensorc.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_compile_parser(commands)
    _add_run_parser(commands)
    _add_check_model_parser(commands)
    _add_inspect_parser(commands)
    _add_bench_parser(commands)
    _add_profile_parser(commands)
    from tensorc.autotune.tuner import add_tune_parser

    add_tune_parser(commands, _subcommand, _add_input_shape)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tensorc`` command with ``argv`` (default: sys.argv[1:]); returns the exit
    code: 0 success, 1 a correctness check failed, 2 an error."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (TensorcError, OSError) as error:
        # an OSError that no command wrapped (a full disk while printing, say) is still the
        # user's environment, not a bug: one line, exit status 2
        sys.stdout.flush()
        message = str(error) if isinstance(error, TensorcError) else \
            f"{error.strerror or error}{f': {error.filename}' if error.filename else ''}"
        if getattr(args, "json", False):
            print(json.dumps({"error": message, "type": type(error).__name__}))
        else:
            print(f"error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

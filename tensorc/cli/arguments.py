"""What the ``tensorc`` commands share: the exit codes, the argument types (shapes, input
values, thread counts), the flags several commands take, the help layout, and the JSON rule
(NaN and infinities become null).

>>> parse_input_shape("x=1x3x224x224")
('x', (1, 3, 224, 224))
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from tensorc.errors import TensorcError
from tensorc.reference import DEFAULT_ATOL, DEFAULT_RTOL, DEFAULT_STEPS
from tensorc.runtime.module import check_num_threads

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


def parse_dim_range(text: str) -> tuple[str, tuple[int, int | None]]:
    """Parse ``NAME=LO:HI`` (HI empty: unbounded) into a dim name and its range. The name is
    everything before the last ``=``, so names holding ``x``, ``+``, ``:`` or spaces work.

    >>> parse_dim_range("seq=1:512"), parse_dim_range("past=0:")
    (('seq', (1, 512)), ('past', (0, None)))
    >>> parse_dim_range("max_x=8:64"), parse_dim_range("past_sequence_length + 1=1:2048")
    (('max_x', (8, 64)), ('past_sequence_length + 1', (1, 2048)))
    """
    name, sep, bounds = text.rpartition("=")
    lo, colon, hi = bounds.partition(":")
    if not sep or not name or not colon:
        raise argparse.ArgumentTypeError(
            f"expected NAME=LO:HI such as seq=1:512 (HI empty for unbounded: past=0:), got "
            f"{text!r}")
    try:
        low, high = int(lo), (int(hi) if hi.strip() else None)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"the range of dim {name!r} must be LO:HI with integers, e.g. {name}=1:512, got "
            f"{bounds!r}") from None
    if low < 0 or (high is not None and high < low):
        raise argparse.ArgumentTypeError(f"the range of dim {name!r} needs 0 <= LO <= HI, "
                                         f"got {bounds!r}")
    return name, (low, high)


def parse_tune_shape(text: str) -> dict[str, int]:
    """One tuning shape of ``tensorc tune --tune-shape``: ``NAME=V,NAME=V`` (each pair split
    at its last ``=``, so a name may hold ``x`` or ``=``), or a JSON object for names holding
    a comma.

    >>> parse_tune_shape("batch=1,seq=7"), parse_tune_shape('{"a,b": 9}')
    ({'batch': 1, 'seq': 7}, {'a,b': 9})
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise argparse.ArgumentTypeError(f"cannot read the tuning shape {text!r} as "
                                             f"JSON: {error}") from None
        if not isinstance(value, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
            raise argparse.ArgumentTypeError(f"the tuning shape {text!r} must be a JSON "
                                             f"object of integers, e.g. {{\"seq\": 7}}")
        return value
    shape: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.rpartition("=")
        name = name.strip()
        if not sep or not name or not value.strip().isdigit():
            raise argparse.ArgumentTypeError(
                f"cannot read the tuning shape {text!r}: give NAME=VALUE pairs separated by "
                f"commas, one value for each symbolic dim, e.g. batch=1,seq=7 (or a JSON "
                f"object for names with commas)")
        shape[name] = int(value)
    return shape


def range_dict(pairs: list[tuple[str, tuple[int, int | None]]] | None) -> dict | None:
    """The ``--dim-range`` pairs as a dict (None when none are given)."""
    if not pairs:
        return None
    ranges: dict[str, tuple[int, int | None]] = {}
    for name, bounds in pairs:
        if name in ranges and ranges[name] != bounds:
            raise TensorcError(f"--dim-range gives two ranges for dim {name!r}")
        ranges[name] = bounds
    return ranges


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


def value_dict(pairs: list[tuple[str, Any]] | None) -> dict | None:
    """The ``--input-value`` pairs as a dict (None when none are given)."""
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


def non_negative_int(text: str) -> int:
    """An argument type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    return value


def positive_float(text: str) -> float:
    """An argument type: a finite number > 0 (seconds, GFLOP/s, GB/s)."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return value


def duration(text: str) -> float:
    """An argument type: a time budget > 0 in seconds, written 90, 90s, 20m or 1.5h."""
    units = {"s": 1, "m": 60, "h": 3600}
    body = text.strip().lower()
    scale = units.get(body[-1:], 1)
    try:
        value = float(body[:-1] if body[-1:] in units else body) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read the duration {text!r}: use e.g. 90s, "
                                         f"20m, 1h") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a duration > 0 such as 90s, 20m or 1h, "
                                         f"got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An argument type: a finite number >= 0 (tolerances)."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def thread_count(text: str) -> int:
    """A ``--threads`` value: 0 (all cores) or 1 to four times the cores."""
    value = non_negative_int(text)
    try:
        return check_num_threads(value)
    except TensorcError as error:
        raise argparse.ArgumentTypeError(str(error).replace("num_threads", "--threads")) \
            from None


def positive_int(text: str) -> int:
    """An argument type: a whole number >= 1."""
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number >= 1, got 0")
    return value


def shape_dict(pairs: list[tuple[str, tuple[int, ...]]] | None) -> dict | None:
    """The ``--input-shape`` pairs as a dict (None when none are given)."""
    if not pairs:
        return None
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in pairs:
        if name in shapes and shapes[name] != shape:
            raise TensorcError(f"--input-shape gives two shapes for input {name!r}")
        shapes[name] = shape
    return shapes


# --- files and JSON -------------------------------------------------------------------------


def require_file(path: str, what: str) -> Path:
    """``path`` as a Path, or a TensorcError naming ``what`` it should have been."""
    file = Path(path)
    if not file.exists():
        raise TensorcError(f"{what} {path} does not exist")
    if not file.is_file():
        raise TensorcError(f"{what} {path} is not a file")
    return file


def writable_output(path: str, action: str) -> Path:
    """``path`` as a Path once it is known that a file can be written there (its directory
    made if missing), so that a command fails before its work, not after; else a
    TensorcError ``cannot <action> <path>: <why>``."""
    file = Path(path)
    if file.is_dir():
        raise TensorcError(f"cannot {action} {path}: it is a directory; give a file name")
    ancestor = file.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise TensorcError(f"cannot {action} {path}: {ancestor} is not a directory")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TensorcError(f"cannot {action} {path}: cannot make its directory "
                           f"{file.parent}: {error.strerror or error}") from None
    if not os.access(file if file.exists() else file.parent, os.W_OK):
        raise TensorcError(f"cannot {action} {path}: permission denied")
    return file


def refuse_for_artifact(path: Path, given: list[tuple[str, Any]]) -> None:
    """A TensorcError where a flag that applies to compiling (``given``: (flag, value)
    pairs) is given with an artifact, which is compiled already."""
    for flag, value in given:
        if value:
            raise TensorcError(f"{path} is compiled already: {flag} applies to .onnx models "
                               f"only (compile with it: tensorc compile {flag} ...)")


def artifact_shapes(path: Path, module: Any, given) -> dict | None:
    """The ``--input-shape`` pairs given with an artifact: the shapes to run a module over
    symbolic dims at; with a module of one shape, a TensorcError (it is compiled already)."""
    shapes = shape_dict(given)
    if shapes and all(isinstance(d, int) for _, shape, _ in module.inputs for d in shape):
        refuse_for_artifact(path, [("--input-shape", given)])
    return shapes


def embedded_source(path: Path, module: Any, use: str) -> bytes:
    """The source ONNX model of an artifact: the one it embeds (compiled with --keep-source),
    else the file it was compiled from, where that is still there unchanged (the path and
    SHA-256 its provenance records); otherwise a TensorcError saying what to do instead of
    ``use`` (e.g. "compare with onnxruntime")."""
    if module.source_onnx is not None:
        return module.source_onnx
    source = (module.info or {}).get("source") or {}
    recorded = source.get("path")
    why = "and its provenance records no source file"
    if recorded:
        file = Path(recorded)
        try:
            data = file.read_bytes()
        except OSError:
            why = f"and the model it was compiled from, {recorded}, is not there"
        else:
            if hashlib.sha256(data).hexdigest() == source.get("sha256"):
                values = source.get("input_values")
                if values:      # the inputs it was compiled with fixed, as it embeds them
                    # (here: the frontend costs 'tensorc --help' half a second)
                    from tensorc.frontend.model import with_input_values
                    return with_input_values(str(file), values).SerializeToString()
                return data
            why = (f"and the model it was compiled from, {recorded}, has changed since "
                   f"(its SHA-256 differs)")
    raise TensorcError(f"{path} does not embed its source model (artifacts leave it out "
                       f"unless compiled with --keep-source), {why}; it is needed to {use}: "
                       f"give the .onnx model, or compile with --keep-source")


def jsonable(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None (JSON has no such numbers)."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


# --- the parser, shared flags and the help layout ------------------------------------------


class UsageError(TensorcError):
    """A command line the parser rejects (an unknown flag, a missing or invalid value)."""

    def __init__(self, message: str, usage: str, prog: str):
        super().__init__(message)
        self.usage = usage
        self.prog = prog


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose errors are raised as UsageError so that ``main`` can report
    them as JSON under --json (the subcommands' parsers are of this class too)."""

    def error(self, message: str) -> Any:
        raise UsageError(message, self.format_usage(), self.prog)


class HelpFormatter(argparse.HelpFormatter):
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


def subcommand(commands: Any, name: str, summary: str, description: str, epilog: str) -> Any:
    """A command's parser, with its one-line summary for ``tensorc --help``."""
    return commands.add_parser(
        name, help=summary, description=description, epilog=epilog, formatter_class=HelpFormatter
    )


def add_input_value(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-value",
        metavar="NAME=VALUE",
        type=parse_input_value,
        action="append",
        help="fix an input to a value at compile time, e.g. sr=16000 or mask=[1,0,1]: it "
        "becomes a constant and leaves the module's inputs; for inputs that decide a shape "
        "or a branch (repeat the flag for several inputs)",
    )


def add_input_shape(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-shape",
        metavar="NAME=SHAPE",
        type=parse_input_shape,
        action="append",
        help="bind an input's shape, e.g. input=1x3x224x224; needed for inputs with symbolic "
        "dims (repeat the flag for several inputs)",
    )


def add_dim_range(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dim-range",
        metavar="NAME=LO:HI",
        type=parse_dim_range,
        action="append",
        help="the range of a symbolic dim, e.g. seq=1:512, or past=0: (HI empty: unbounded; "
        "default 1:, or 0: for a dim only concatenated along, such as a KV cache's); the "
        "name is what precedes the last '=' (repeat the flag for several dims)",
    )


def add_check_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rtol",
        type=non_negative_float,
        default=DEFAULT_RTOL,
        help="relative tolerance of the onnxruntime check (default: %(default)g)",
    )
    parser.add_argument(
        "--atol",
        type=non_negative_float,
        default=DEFAULT_ATOL,
        help="absolute tolerance of the onnxruntime check (default: %(default)g)",
    )
    parser.add_argument(
        "--steps",
        type=non_negative_float,
        default=DEFAULT_STEPS,
        metavar="N",
        help="for a quantized (int8) model, an output within N quantization steps of "
        "onnxruntime's also passes: the two round some values differently at each layer "
        "(default: %(default)g)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0,
        help="seed of the random inputs (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def add_tuning_log(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tuning-log",
        metavar="FILE",
        help="apply the fastest schedules 'tensorc tune' recorded in FILE for this CPU",
    )

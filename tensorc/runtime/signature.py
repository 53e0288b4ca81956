"""A module's inputs and outputs, (name, shape, dtype) each: the checks of a saved signature
and of the feeds a run is given, the same for CPU and CUDA modules.

>>> arrays = check_feeds([("x", (1, 3), "float32")], {"x": np.zeros((1, 3), np.float32)})
"""
from __future__ import annotations

from typing import Any, Mapping

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy for signatures that use it)
import numpy as np

from tensorc.errors import ArtifactError, InputError
from tensorc.ir.dims import dim_from_json, dim_to_json

Signature = list[tuple[str, tuple[int, ...], str]]


def describe(sig: Signature) -> str:
    """``x: float32[1, 3], y: int64[batch, 2]``."""
    return ", ".join(f"{n}: {d}{format_dims(s)}" for n, s, d in sig)


def format_dims(shape) -> str:
    """``[batch, 3]``: a shape whose dims may be symbolic."""
    return f"[{', '.join(str(d) for d in shape)}]"


def check_feeds(inputs: Signature, feeds: Mapping[str, Any]) -> list[np.ndarray]:
    """The feeds as contiguous arrays in the order of ``inputs``; an InputError names what does
    not match (missing or unknown names, dtypes, shapes). A Python scalar of a kind that casts
    safely is converted."""
    names = [n for n, _, _ in inputs]
    if not isinstance(feeds, Mapping):
        raise InputError(f"run() takes a dict of input name -> array, got "
                         f"{type(feeds).__name__}; inputs: {names}")
    unknown = sorted(set(feeds) - set(names))
    missing = [n for n in names if n not in feeds]
    if unknown or missing:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if unknown:
            parts.append(f"unknown {unknown}")
        raise InputError(f"feeds do not match the model's inputs: {', '.join(parts)}; "
                         f"the model takes {describe(inputs)}")
    arrays = []
    for name, shape, dtype in inputs:
        value = feeds[name]
        arr = np.asarray(value)
        if arr.dtype != np.dtype(dtype):
            if np.isscalar(value) and arr.shape == shape and \
                    np.can_cast(arr.dtype, dtype, "same_kind"):
                arr = arr.astype(dtype)
            else:
                raise InputError(f"input {name!r}: expected {dtype}{list(shape)}, got "
                                 f"{arr.dtype}{list(arr.shape)}; convert it with "
                                 f".astype(np.{dtype})")
        if not _matches(tuple(arr.shape), shape):
            if not all(isinstance(d, int) for d in shape):
                raise InputError(f"input {name!r}: expected shape {format_dims(shape)}, got "
                                 f"{list(arr.shape)} ({dtype}): its rank and static dims "
                                 f"are fixed")
            problem = (f"input {name!r}: expected shape {list(shape)}, got {list(arr.shape)} "
                       f"({dtype}); compile again with")
            error = InputError(f"{problem} input_shapes={{{name!r}: {tuple(arr.shape)}}} for "
                               f"another shape")
            error.cli_message = (f"{problem} --input-shape "
                                 f"{name}={'x'.join(map(str, arr.shape))} for another shape")
            raise error
        arrays.append(np.ascontiguousarray(arr))
    return arrays


def _matches(shape: tuple, declared: tuple) -> bool:
    """Whether ``shape`` has ``declared``'s rank and static dims (its symbolic dims are the
    dim table's to check: runtime/module.py)."""
    if shape == declared:
        return True
    return len(shape) == len(declared) and all(
        not isinstance(d, int) or d == s for s, d in zip(shape, declared))


def _symbolic(d) -> bool:
    """Whether a saved dim is a symbolic dim's JSON form (ir/dims.py)."""
    try:
        return not isinstance(dim_from_json(d), int)
    except ValueError:
        return False


def signature_to_json(sig: Signature) -> list:
    """A signature as a saved header holds it: symbolic dims as their JSON form."""
    return [[n, [dim_to_json(d) for d in s], d_type] for n, s, d_type in sig]


def signature_from_json(sig: list) -> Signature:
    return [(n, tuple(dim_from_json(d) for d in s), d_type) for n, s, d_type in sig]


def corrupt(label: str, problem: str) -> ArtifactError:
    """The error for a saved module whose header or sections cannot be used."""
    return ArtifactError(f"{label} is corrupt: {problem}; compile the model again")


def validate_signature(header: dict, label: str) -> None:
    """Inputs and outputs are lists of [name, shape, dtype]: unique non-empty names, dims
    that are whole numbers >= 0, dtypes numpy knows; there is at least one output."""
    for key in ("inputs", "outputs"):
        sig = header.get(key)
        if not isinstance(sig, list):
            raise corrupt(label, f"its header has no {key} list")
        names = []
        for entry in sig:
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                    and entry[0] and isinstance(entry[1], list) and isinstance(entry[2], str)):
                raise corrupt(label, f"{key} entry {entry!r} is not [name, shape, dtype]")
            name, shape, dtype = entry
            if not all((type(d) is int and 0 <= d < 1 << 40) or _symbolic(d)
                       for d in shape):
                raise corrupt(label, f"{key[:-1]} {name!r} has shape {shape}")
            try:
                np.dtype(dtype)
            except TypeError:
                raise corrupt(label, f"{key[:-1]} {name!r} has unknown dtype {dtype!r}") \
                    from None
            names.append(name)
        if len(set(names)) != len(names):
            raise corrupt(label, f"its {key} repeat a name: {names}")
    if not header["outputs"]:
        raise corrupt(label, "it has no outputs")

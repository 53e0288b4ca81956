"""The converter table: ONNX op converters keyed by (op_type, opset range).

A converter is ``fn(ctx, inputs, **attributes) -> Value | tuple[Value | None, ...]``: its
keyword arguments are the ONNX attribute names with their ONNX defaults, ``inputs`` holds one
Value per ONNX input (None for an omitted optional input). It builds core ops with
``ctx.emit`` (which folds constants) and reads constant inputs with ``ctx.constant``. Only a
converter registered with ``containers=True`` is given sequences and optionals (see
frontend/containers.py) as inputs; the others see tensors only.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Converter:
    op_type: str
    since: int
    until: int | None  # inclusive; None: every later opset
    fn: Callable
    attributes: frozenset[str]  # the ONNX attributes the converter understands
    containers: bool = False  # takes sequences and optionals as inputs


CONVERTERS: dict[str, list[Converter]] = {}


def converter(op_type: str, since: int = 1, until: int | None = None,
              containers: bool = False) -> Callable:
    """Register ``fn`` as the converter of ``op_type`` for opsets ``since..until``;
    ``containers``: it takes sequences and optionals as inputs, not only tensors.

    >>> @converter("Relu", since=6)
    ... def relu(ctx, inputs):
    ...     return ctx.emit("relu", inputs)
    """
    def register(fn: Callable) -> Callable:
        params = inspect.signature(fn).parameters
        attributes = frozenset(name for name, p in params.items()
                               if p.kind is inspect.Parameter.KEYWORD_ONLY)
        CONVERTERS.setdefault(op_type, []).append(
            Converter(op_type, since, until, fn, attributes, containers))
        return fn
    return register


def find_converter(op_type: str, opset: int) -> Converter | None:
    for entry in CONVERTERS.get(op_type, ()):
        if entry.since <= opset and (entry.until is None or opset <= entry.until):
            return entry
    return None


def supported_opsets(op_type: str) -> str:
    """A readable list of the opset ranges ``op_type`` is supported for ('' if none)."""
    ranges = sorted((c.since, c.until) for c in CONVERTERS.get(op_type, ()))
    return ", ".join(f"{lo}-{hi}" if hi else f">={lo}" for lo, hi in ranges)

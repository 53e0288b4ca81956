"""ONNX op converters, keyed by (op_type, opset range): the registry and shared helpers.

The converters live in one module per op family (elementwise, nn, reduce, shape, rnn,
control, ...); importing this package registers them all.

A converter is ``fn(ctx, inputs, **attributes) -> Value | tuple[Value | None, ...]``: its
keyword arguments are the ONNX attribute names with their ONNX defaults, ``inputs`` holds one
Value per ONNX input (None for an omitted optional input). It builds core ops with
``ctx.emit`` (which folds constants) and reads constant inputs with ``ctx.constant``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from tensorc.errors import InvalidModelError, ShapeError
from tensorc.ir.graph import Value

if TYPE_CHECKING:
    from tensorc.frontend.onnx import ImportContext


@dataclass(frozen=True)
class Converter:
    op_type: str
    since: int
    until: int | None  # inclusive; None: every later opset
    fn: Callable
    attributes: frozenset[str]  # the ONNX attributes the converter understands


CONVERTERS: dict[str, list[Converter]] = {}


def converter(op_type: str, since: int = 1, until: int | None = None) -> Callable:
    """Register ``fn`` as the converter of ``op_type`` for opsets ``since..until``.

    >>> @converter("Relu", since=6)
    ... def relu(ctx, inputs):
    ...     return ctx.emit("relu", inputs)
    """
    def register(fn: Callable) -> Callable:
        params = inspect.signature(fn).parameters
        attributes = frozenset(name for name, p in params.items()
                               if p.kind is inspect.Parameter.KEYWORD_ONLY)
        CONVERTERS.setdefault(op_type, []).append(
            Converter(op_type, since, until, fn, attributes))
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


# helpers --------------------------------------------------------------------------------------
def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of range for rank {ndim}")
    return axis % ndim


def reshape(ctx: ImportContext, x: Value, shape: Sequence[int]) -> Value:
    """Reshape, or nothing when the shape is unchanged."""
    shape = tuple(int(d) for d in shape)
    return x if shape == x.type.shape else ctx.emit("reshape", [x], shape=shape)


def scalar(ctx: ImportContext, value: float, like: Value) -> Value:
    return ctx.const(np.array(value, dtype=like.type.dtype))


def spatial_attrs(x: Value, kernel: Sequence[int], strides: Sequence[int] | None,
                  dilations: Sequence[int] | None, pads: Sequence[int] | None, auto_pad: str,
                  pool: bool = False
                  ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Resolve ONNX window attributes to explicit (strides, pads, dilations). A pooling
    window (``pool``) must overlap its input: its pads are smaller than the kernel."""
    spatial = len(kernel)
    if spatial != x.type.ndim - 2:
        raise ShapeError(f"the kernel {tuple(kernel)} has {spatial} spatial axes, x {x.type} "
                         f"has {x.type.ndim - 2}")
    for name, values, count in (("strides", strides, spatial), ("dilations", dilations, spatial),
                                ("pads", pads, 2 * spatial)):
        if values is not None and len(values) != count:
            raise ShapeError(f"{name} {list(values)} must have {count} values (for "
                             f"{spatial} spatial axes)")
        if values is not None and name != "pads" and min(values, default=1) < 1:
            raise ShapeError(f"{name} {list(values)} must be positive")
    if pool and pads is not None and auto_pad in ("NOTSET", "") and any(
            p >= k for p, k in zip(pads, list(kernel) * 2)):
        raise InvalidModelError(f"pads {list(pads)} must each be smaller than the kernel "
                                f"{list(kernel)} on their axis (a window wholly in the "
                                f"padding has no input to pool); shrink the pads")
    strides = tuple(strides or (1,) * spatial)
    dilations = tuple(dilations or (1,) * spatial)
    if auto_pad in ("NOTSET", ""):
        return strides, tuple(pads or (0,) * (2 * spatial)), dilations
    if auto_pad == "VALID":
        return strides, (0,) * (2 * spatial), dilations
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ShapeError(f"unknown auto_pad {auto_pad!r}")
    begins, ends = [], []
    for size, k, s, d in zip(x.type.shape[2:], kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        # SAME_UPPER puts the odd padding element at the end, SAME_LOWER at the beginning.
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return strides, tuple(begins + ends), dilations


# the families register their converters on import
from tensorc.frontend.converters import (  # noqa: E402,F401
    control, elementwise, nn, reduce, rnn,
)
from tensorc.frontend.converters import shape as _shape  # noqa: E402,F401
from tensorc.frontend.converters import indexing as _indexing  # noqa: E402,F401
from tensorc.frontend.converters import resize as _resize  # noqa: E402,F401
from tensorc.frontend.converters import norm as _norm  # noqa: E402,F401
from tensorc.frontend.converters import einsum as _einsum  # noqa: E402,F401
from tensorc.frontend.converters import losses as _losses  # noqa: E402,F401
from tensorc.frontend.converters import bits as _bits  # noqa: E402,F401
from tensorc.frontend.converters import attention as _attention  # noqa: E402,F401
from tensorc.frontend.converters import sampling as _sampling  # noqa: E402,F401
from tensorc.frontend.converters import quantize as _quantize  # noqa: E402,F401

"""Helpers the converters share: axes, reshapes, scalars, window attributes."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tensorc.errors import InvalidModelError, ShapeError
from tensorc.frontend.context import ImportContext
from tensorc.ir.dims import Dim, ceil_div, dim_max
from tensorc.ir.graph import Value


def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of range for rank {ndim}")
    return axis % ndim


def reshape(ctx: ImportContext, x: Value, shape: Sequence[int]) -> Value:
    """Reshape, or nothing when the shape is unchanged."""
    shape = tuple(d if isinstance(d, Dim) else int(d) for d in shape)
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
        out = ceil_div(size, s)
        total = dim_max(0, (out - 1) * s + (k - 1) * d + 1 - size)  # symbolic: an expression
        # SAME_UPPER puts the odd padding element at the end, SAME_LOWER at the beginning.
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return strides, tuple(begins + ends), dilations

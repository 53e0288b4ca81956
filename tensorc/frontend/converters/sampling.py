"""Converters of ONNX sampling and signal ops: GridSample, AffineGrid, Col2Im, CenterCropPad,
CumProd and the window functions (HannWindow, HammingWindow, BlackmanWindow).

GridSample and Col2Im have core ops of their own (``ops/image.py``), CumProd is a scan
(``ops/scan.py``); AffineGrid is a matmul with a constant base grid, CenterCropPad a slice and
a pad, and a window of constant size is a constant.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.converters.common import normalize_axis, reshape
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value

# GridSample-16 names its modes after the 2-D case; opset 20 generalized them to N-D
_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic"}


def _ints(ctx: ImportContext, value: Value, what: str) -> list[int]:
    return [int(v) for v in np.asarray(ctx.require_constant(value, what)).reshape(-1)]


@converter("GridSample", since=16)
def grid_sample(ctx: ImportContext, inputs: list[Value], *, align_corners: int = 0,
                mode: str = "linear", padding_mode: str = "zeros") -> Value:
    x, grid = inputs
    if ctx.opset < 20 and x.type.ndim != 4:
        raise ShapeError(f"GridSample-16 takes a 4-D input, got {x.type}; use opset 20 for "
                         f"other ranks")
    mode = _GRID_MODES.get(mode, mode)
    dtype = x.type.dtype
    if dtype not in ("float16", "bfloat16", "float32", "float64"):
        # integer images are sampled in float and rounded back
        x = ctx.emit("cast", [x], dtype="float32")
    y = ctx.emit("grid_sample", [x, grid], mode=mode, padding_mode=padding_mode,
                 align_corners=bool(align_corners))
    if y.type.dtype != dtype:
        y = ctx.emit("cast", [ctx.emit("round", [y])], dtype=dtype)
    return y


def _base_grid(spatial: Sequence[int], align_corners: bool, dtype: str) -> np.ndarray:
    """(k + 1, prod(spatial)): the normalized coordinates of every output position, the
    innermost axis first (x, y, z), then a row of ones (the affine offset)."""
    axes = []
    for size in spatial:
        if align_corners:
            axes.append(np.linspace(-1.0, 1.0, size) if size > 1 else np.array([-1.0]))
        else:  # pixel centers of `size` equal cells spanning [-1, 1]
            axes.append((2.0 * np.arange(size) + 1.0) / size - 1.0)
    mesh = np.meshgrid(*axes, indexing="ij")
    rows = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(math.prod(spatial))]
    return np.stack(rows).astype(dtype)


@converter("AffineGrid", since=20)
def affine_grid(ctx: ImportContext, inputs: list[Value], *, align_corners: int = 0) -> Value:
    theta, size = inputs
    n, _, *spatial = _ints(ctx, size, "size")
    k = len(spatial)
    if theta.type.shape != (n, k, k + 1) or k not in (2, 3):
        raise ShapeError(f"AffineGrid: theta must be (N, {k}, {k + 1}) for size "
                         f"{[n, '_', *spatial]}, got {theta.type}")
    base = ctx.const(_base_grid(spatial, bool(align_corners), theta.type.dtype))
    points = ctx.emit("matmul", [theta, base])                      # (N, k, P)
    points = ctx.emit("transpose", [points], perm=(0, 2, 1))        # (N, P, k)
    return reshape(ctx, points, (n, *spatial, k))


@converter("Col2Im", since=18)
def col2im(ctx: ImportContext, inputs: list[Value], *, dilations: Sequence[int] | None = None,
           pads: Sequence[int] | None = None, strides: Sequence[int] | None = None) -> Value:
    x, image_shape, block_shape = inputs
    image = _ints(ctx, image_shape, "image_shape")
    block = _ints(ctx, block_shape, "block_shape")
    k = len(image)
    return ctx.emit("col2im", [x], image_shape=tuple(image), block_shape=tuple(block),
                    strides=tuple(strides or (1,) * k), pads=tuple(pads or (0,) * (2 * k)),
                    dilations=tuple(dilations or (1,) * k))


@converter("CenterCropPad", since=18)
def center_crop_pad(ctx: ImportContext, inputs: list[Value], *,
                    axes: Sequence[int] | None = None) -> Value:
    x, shape = inputs
    sizes = _ints(ctx, shape, "shape")
    ndim = x.type.ndim
    axes = list(range(ndim)) if axes is None else [normalize_axis(a, ndim) for a in axes]
    if len(axes) != len(sizes):
        raise ShapeError(f"CenterCropPad: shape {sizes} must give one size per axis {axes}")
    target = dict(zip(axes, sizes))
    # crop what is too large (the odd element comes off the end), then pad what is too small
    # (the odd element goes at the end)
    starts = [max(0, (d - target.get(a, d)) // 2) for a, d in enumerate(x.type.shape)]
    cropped = tuple(min(d, target.get(a, d)) for a, d in enumerate(x.type.shape))
    if cropped != x.type.shape:
        x = ctx.emit("slice", [x], starts=tuple(starts), steps=(1,) * ndim, shape=cropped)
    begins = [max(0, (target.get(a, d) - d) // 2) for a, d in enumerate(cropped)]
    ends = [max(0, target.get(a, d) - d) - b for a, (d, b) in enumerate(zip(cropped, begins))]
    if any(begins) or any(ends):
        x = ctx.emit("pad", [x], pads=tuple(begins + ends), value=0.0, mode="constant")
    return x


@converter("CumProd", since=26)
def cumprod(ctx: ImportContext, inputs: list[Value], *, exclusive: int = 0, reverse: int = 0
            ) -> Value:
    x, axis = inputs
    (axis_value,) = _ints(ctx, axis, "axis")
    return ctx.emit("cumprod", [x], axis=normalize_axis(axis_value, x.type.ndim),
                    exclusive=bool(exclusive), reverse=bool(reverse))


# window functions: w[n] = sum_k a_k cos(2 pi k n / N'), N' the size (periodic) or size - 1
_WINDOWS = {"HannWindow": (0.5, -0.5), "HammingWindow": (25 / 46, -21 / 46),
            "BlackmanWindow": (0.42, -0.5, 0.08)}


def _window(coefficients: Sequence[float]) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, output_datatype: int = 1,
                periodic: int = 1) -> Value:
        (size,) = _ints(ctx, inputs[0], "size")
        dtype = ctx.dtype_name(output_datatype)
        period = size if periodic else size - 1
        n = np.arange(size, dtype=np.float64)
        phase = 2 * np.pi * n / period if period > 0 else np.zeros_like(n)
        window = sum(a * np.cos(k * phase) for k, a in enumerate(coefficients))
        return ctx.const(np.asarray(window).astype(np.dtype(dtype)))
    return convert


for _onnx_op, _coefficients in _WINDOWS.items():
    converter(_onnx_op, since=17)(_window(_coefficients))

"""Converters of ONNX Resize and Upsample.

Resize is separable: each resized axis becomes one core op over a constant table computed
here from the ONNX attributes (coordinate transformation, interpolation mode, antialias,
exclude_outside): ``gather`` along the axis for nearest, ``resize_axis`` (indices and weights
per output position) for linear and cubic. The tables follow the ONNX reference in float64.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import numpy as np

from tensorc.errors import ShapeError, SymbolicDimError, UnsupportedOpError
from tensorc.frontend.converters.common import normalize_axis, reshape
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.dims import Dim
from tensorc.ir.graph import Value

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                    "align_corners", "asymmetric", "tf_crop_and_resize")


def source_coordinates(mode: str, out_size: int, in_size: int, scale: float,
                       roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray | None]:
    """The input coordinate of every output position; and, for tf_crop_and_resize, which
    positions fall outside the input (they take the extrapolation value)."""
    y = np.arange(out_size, dtype=np.float64)
    length = scale * in_size  # ONNX uses the unrounded output length
    if mode == "align_corners":
        x = np.zeros(out_size) if length == 1 else y * (in_size - 1) / (length - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "pytorch_half_pixel":
        x = np.full(out_size, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        offset = in_size / 2 * (1 - out_size / length)
        x = offset + (y + 0.5) / scale - 0.5
    elif mode == "tf_crop_and_resize":
        span = (roi[1] - roi[0]) * (in_size - 1)
        x = np.full(out_size, span / 2) if length == 1 else y * span / (length - 1)
        x = x + roi[0] * (in_size - 1)
        return x, (x < 0) | (x > in_size - 1)
    else:
        raise UnsupportedOpError(f"Resize coordinate_transformation_mode {mode!r} is not "
                                 f"supported")
    return x, None


def _ratio(x: np.ndarray) -> np.ndarray:
    """Where ``x`` lies between its two nearest input positions, in (0, 1]: ONNX takes the
    taps left of an exact input position (ratio 1, not 0)."""
    ratio = x - np.floor(x)
    return np.where(ratio == 0, 1.0, ratio)


def _window(x: np.ndarray, taps: int) -> np.ndarray:
    """[out, taps] input positions around ``x`` (an even number of taps, half on each side).

    ONNX finds the window on coordinates shifted by half of it; where that shift rounds a
    coordinate onto an integer, the window starts one tap further left (while the weights
    keep the unshifted ratio). The same is done here, so that the tables match its reference.
    """
    shift = (taps + 1) // 2
    shifted = x + shift
    left = np.floor(shifted)
    start = left - taps // 2 + np.where(shifted == left, 0, 1) - shift
    return start[:, None].astype(np.int64) + np.arange(taps)[None, :]


def nearest_indices(x: np.ndarray, rule: str, scale: float, in_size: int) -> np.ndarray:
    """Round coordinates to input positions by ONNX nearest_mode ("simple": Upsample and
    Resize-10, floor when enlarging and ceil when shrinking, as onnxruntime)."""
    if rule == "simple":
        rule = "floor" if scale >= 1 else "ceil"
    ratio = _ratio(x)
    up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
          "floor": ratio == 1.0, "ceil": np.ones(x.shape, bool)}.get(rule)
    if up is None:
        raise UnsupportedOpError(f"Resize nearest_mode {rule!r} is not supported")
    # the left or the right one of the two positions around x (x itself when exact)
    pair = _window(x, 2)
    return np.clip(np.where(up, pair[:, 1], pair[:, 0]), 0, in_size - 1)


def _cubic_kernel(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def interpolation_table(x: np.ndarray, mode: str, scale: float, in_size: int,
                        cubic_coeff_a: float, antialias: bool, exclude_outside: bool
                        ) -> tuple[np.ndarray, np.ndarray]:
    """[out, taps] input positions and weights of linear or cubic interpolation at ``x``."""
    ratio = _ratio(x)
    reach = 1 if mode == "linear" else 2
    shrink = min(scale, 1.0) if antialias else 1.0
    first = math.floor(-reach / shrink) + 1   # the leftmost tap, relative to floor(x)
    offsets = np.arange(first, 1 - first + 1)
    distance = (offsets[None, :] - ratio[:, None]) * shrink
    if mode == "linear":
        weights = np.clip(1 - np.abs(distance), 0, 1)
    else:
        weights = _cubic_kernel(distance, cubic_coeff_a)
    if antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    positions = _window(x, len(offsets))
    if exclude_outside:
        weights = np.where((positions < 0) | (positions >= in_size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(positions, 0, in_size - 1), weights


# a nearest resize growing an axis this many times or more is a resize_axis kernel of its own
# (the gathers along the row on the small tensor, the rest whole rows); less (shrinking or
# resampling), a gather that fuses with the ops around it. 256 x 13 x 13 -> 26 x 26 ran in
# 0.36-0.44 ms as two resize_axis kernels, 0.66-0.87 as one gather of both axes (onnxruntime
# 0.13-0.19; a loaded machine, back to back)
NEAREST_TABLE_GROWTH = 2


def resize_axis(ctx: ImportContext, x: Value, axis: int, out_size: int, scale: float,
                roi: tuple[float, float], *, mode: str, coordinates: str, nearest_mode: str,
                cubic_coeff_a: float = -0.75, antialias: bool = False,
                exclude_outside: bool = False, extrapolation_value: float = 0.0) -> Value:
    in_size = x.type.shape[axis]
    source, outside = source_coordinates(coordinates, out_size, in_size, scale, roi)
    fill = float(extrapolation_value) if outside is not None and outside.any() else None
    wtype = np.float64 if x.type.dtype == "float64" else np.float32
    nearest = False
    if mode == "nearest":
        index = nearest_indices(source, nearest_mode, scale, in_size)
        nearest = fill is None
        if nearest and out_size < NEAREST_TABLE_GROWTH * in_size:
            return ctx.emit("gather", [x, ctx.const(index)], axis=axis)
        positions, weights = index[:, None], np.ones((out_size, 1))
    elif mode in ("linear", "cubic"):
        positions, weights = interpolation_table(source, mode, scale, in_size, cubic_coeff_a,
                                                 antialias, exclude_outside)
    else:
        raise UnsupportedOpError(f"Resize mode {mode!r} is not supported")
    if fill is not None:
        positions = positions.copy()
        positions[outside, 0] = -1
    # [taps, out] tables of 32-bit positions: whole vectors along the output (ops/resize.py)
    itype = np.int32 if in_size < 2 ** 31 else np.int64
    table = ctx.const(np.ascontiguousarray(positions.T).astype(itype))
    weights = ctx.const(np.ascontiguousarray(weights.T).astype(wtype))
    if nearest:
        return ctx.emit("resize_axis", [x, table, weights], axis=axis, nearest=True)
    return ctx.emit("resize_axis", [x, table, weights], axis=axis, fill=fill)


def resize(ctx: ImportContext, x: Value, scales: Sequence[float] | None,
           sizes: Sequence[int] | None, roi: Sequence[float] | None,
           axes: Sequence[int] | None = None, keep_aspect_ratio_policy: str = "stretch",
           **options) -> Value:
    """Resize ``x`` along ``axes`` (all by default) to ``sizes`` or by ``scales``."""
    shape, ndim = x.type.shape, x.type.ndim
    axes = list(range(ndim)) if axes is None else [normalize_axis(a, ndim) for a in axes]
    given = sizes if sizes is not None else scales
    if given is None or len(given) != len(axes):
        raise ShapeError(f"Resize needs one scale or size per resized axis ({len(axes)}), got "
                         f"{None if given is None else list(given)}")
    roi = list(roi) if roi is not None and len(roi) else None
    if roi is not None and len(roi) != 2 * len(axes):
        raise ShapeError(f"Resize roi {roi} must hold a start and an end per resized axis")
    if sizes is not None and any(isinstance(d, Dim) for d in
                                 [*sizes, *(shape[a] for a in axes)]):
        if keep_aspect_ratio_policy != "stretch":
            raise SymbolicDimError(f"Resize keep_aspect_ratio_policy "
                                   f"{keep_aspect_ratio_policy!r} over symbolic dims is not "
                                   f"supported; give concrete input_shapes",
                                   next(d for d in [*sizes, *shape] if isinstance(d, Dim)))
        return _resample(ctx, x, axes, None, list(sizes), roi, options)
    if sizes is not None:
        factors = [int(n) / shape[a] for n, a in zip(sizes, axes)]
        out = [int(n) for n in sizes]
        if keep_aspect_ratio_policy != "stretch":
            pick = {"not_larger": min, "not_smaller": max}.get(keep_aspect_ratio_policy)
            if pick is None:
                raise ShapeError(f"Resize keep_aspect_ratio_policy "
                                 f"{keep_aspect_ratio_policy!r} is unknown")
            factor = pick(factors)
            factors = [factor] * len(axes)
            out = [int(factor * shape[a] + 0.5) for a in axes]
    else:
        factors = [float(s) for s in scales]
        if min(factors, default=1) <= 0:
            raise ShapeError(f"Resize scales {factors} must be positive")
        if any(isinstance(shape[a], Dim) for a in axes):
            return _resize_symbolic(ctx, x, axes, factors, roi, options)
        out = [int(f * shape[a]) for f, a in zip(factors, axes)]
    # shrinking axes first (less for the rest to read), then growing ones from the last: the
    # row's gathers on the smaller tensor, the larger one made of whole rows (ops/resize.py)
    order = sorted(range(len(axes)), key=lambda k: (out[k] > shape[axes[k]], -axes[k]
                                                    if out[k] > shape[axes[k]] else axes[k]))
    for k in order:
        axis, size, factor = axes[k], out[k], factors[k]
        window = (0.0, 1.0) if roi is None else (float(roi[k]), float(roi[k + len(axes)]))
        if size == shape[axis] and math.isclose(factor, 1.0) and window == (0.0, 1.0):
            continue
        x = resize_axis(ctx, x, axis, size, factor, window, **options)
    return x


# (coordinate mode, nearest mode) pairs under which nearest resizing by a whole factor k
# repeats each element k times: half-pixel centers land within 0.5 of the source element
_REPEATING = {("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
              ("pytorch_half_pixel", "round_prefer_floor"),
              ("pytorch_half_pixel", "round_prefer_ceil"), ("asymmetric", "floor"),
              ("tf_half_pixel_for_nn", "floor")}


def _resize_symbolic(ctx: ImportContext, x: Value, axes: Sequence[int], factors: list[float],
                     roi, options: dict) -> Value:
    """Resize of symbolic axes: nearest by whole factors (2x upsampling in a detector's neck),
    as each element repeated (reshape, broadcast, reshape), output ``k*H``. Other modes over a
    symbolic axis are not ported: refused by name."""
    coordinates = options.get("coordinates", "asymmetric")
    nearest = options.get("nearest_mode", "floor") if options.get("mode") == "nearest" else None
    if options.get("mode") != "nearest" or (coordinates, nearest) not in _REPEATING or \
            roi is not None or any(f != int(f) for f in factors):
        return _resample(ctx, x, axes, factors, None, roi, options)
    for axis, factor in zip(axes, factors):
        k = int(factor)
        if k == 1:
            continue
        dims = list(x.type.shape)
        spread = dims[:axis + 1] + [1] + dims[axis + 1:]
        x = reshape(ctx, x, spread)
        spread[axis + 1] = k
        x = ctx.emit("broadcast_to", [x], shape=tuple(spread))
        x = reshape(ctx, x, dims[:axis] + [dims[axis] * k] + dims[axis + 1:])
    return x


# the largest denominator of a scale that resizes a symbolic dim: its output length
# floor(scale * H) is then exact integer arithmetic, (p * H) // q
SCALE_DENOMINATOR = 1024


def _resample(ctx: ImportContext, x: Value, axes: Sequence[int], factors: list[float] | None,
              sizes: list | None, roi, options: dict) -> Value:
    """Resize where an axis's length is known only at run time: one resample_axis per
    resized axis (ops/resample.py), whose kernel computes each output's taps and weights,
    the last axis first. ``factors`` (the scales) or ``sizes`` (ints or Dims) give the
    output lengths."""
    shape = x.type.shape
    resized = [shape[a] for k, a in enumerate(axes)
               if factors is None or factors[k] != 1] + list(sizes or [])
    symbolic = next(d for d in [*resized, *shape] if isinstance(d, Dim))
    mode, coordinates = options.get("mode"), options.get("coordinates", "asymmetric")

    def refuse(why: str):
        raise SymbolicDimError(
            f"Resize (mode {mode!r}, coordinate_transformation_mode {coordinates!r}, "
            f"{'scales ' + str(factors) if factors is not None else 'sizes'}) of {x.type} "
            f"over symbolic dim {symbolic}: {why} is not supported over symbolic dims; give "
            f"concrete input_shapes", symbolic)
    if roi is not None or coordinates == "tf_crop_and_resize":
        refuse("tf_crop_and_resize (a region of interest)")
    if options.get("antialias") and mode != "nearest":
        refuse("antialias")
    if mode not in ("nearest", "linear", "cubic"):
        refuse(f"mode {mode!r}")
    for k in sorted(range(len(axes)), key=lambda k: -axes[k]):
        axis = axes[k]
        n = x.type.shape[axis]
        scale = None
        if factors is not None:
            scale = factors[k]
            exact = Fraction(scale)
            if exact.denominator > SCALE_DENOMINATOR:
                refuse(f"a scale of {scale} (not a ratio of small integers)")
            size = exact.numerator * n // exact.denominator
        else:
            size = sizes[k]
        if scale == 1.0 or size is n:
            continue        # every coordinate mode maps an unscaled axis onto itself
        if isinstance(n, int) and isinstance(size, int):
            if scale is None:
                scale = size / n
            x = resize_axis(ctx, x, axis, size, scale, (0.0, 1.0), **options)
            continue
        x = ctx.emit("resample_axis", [x], axis=axis, size=size, mode=mode,
                     coordinates=coordinates,
                     nearest_mode=options.get("nearest_mode", "round_prefer_floor"),
                     scale=scale, cubic_coeff_a=float(options.get("cubic_coeff_a", -0.75)),
                     exclude_outside=bool(options.get("exclude_outside")))
    return x


def _optional(ctx: ImportContext, inputs: list[Value], k: int, what: str) -> np.ndarray | None:
    value = inputs[k] if len(inputs) > k else None
    if value is None:
        return None
    array = ctx.require_constant(value, what).reshape(-1)
    return array if array.size else None


@converter("Resize", since=11)
def resize_11(ctx: ImportContext, inputs: list[Value], *, antialias: int = 0,
              axes: Sequence[int] | None = None,
              coordinate_transformation_mode: str = "half_pixel",
              cubic_coeff_a: float = -0.75, exclude_outside: int = 0,
              extrapolation_value: float = 0.0, keep_aspect_ratio_policy: str = "stretch",
              mode: str = "nearest", nearest_mode: str = "round_prefer_floor") -> Value:
    roi = _optional(ctx, inputs, 1, "roi")
    scales = _optional(ctx, inputs, 2, "scales")
    if len(inputs) > 3 and inputs[3] is not None and ctx.constant(inputs[3]) is None:
        # sizes computed from the shapes of symbolic inputs (an FPN's upsampling to its
        # lateral map's size): ints and Dims
        sizes = ctx.require_dims(inputs[3], "sizes")
    else:
        sizes = _optional(ctx, inputs, 3, "sizes")
        sizes = None if sizes is None else sizes.astype(np.int64).tolist()
    if coordinate_transformation_mode != "tf_crop_and_resize":
        roi = None
    return resize(ctx, inputs[0], None if sizes is not None else scales, sizes, roi, axes,
                  keep_aspect_ratio_policy, mode=mode,
                  coordinates=coordinate_transformation_mode, nearest_mode=nearest_mode,
                  cubic_coeff_a=cubic_coeff_a, antialias=bool(antialias),
                  exclude_outside=bool(exclude_outside),
                  extrapolation_value=extrapolation_value)


def _resize_asymmetric(ctx: ImportContext, x: Value, scales: Sequence[float], mode: str
                       ) -> Value:
    """Resize-10 and Upsample: scales only, asymmetric coordinates."""
    if mode not in ("nearest", "linear", "bilinear"):
        raise UnsupportedOpError(f"mode {mode!r} is not supported (nearest or linear)")
    return resize(ctx, x, list(scales), None, None, mode="nearest" if mode == "nearest"
                  else "linear", coordinates="asymmetric", nearest_mode="simple")


@converter("Resize", since=10, until=10)
def resize_10(ctx: ImportContext, inputs: list[Value], *, mode: str = "nearest") -> Value:
    scales = ctx.require_constant(inputs[1], "scales").reshape(-1).tolist()
    return _resize_asymmetric(ctx, inputs[0], scales, mode)


@converter("Upsample", since=7, until=8)
def upsample_attribute(ctx: ImportContext, inputs: list[Value], *, scales: Sequence[float],
                       mode: str = "nearest") -> Value:
    return _resize_asymmetric(ctx, inputs[0], scales, mode)


@converter("Upsample", since=9, until=9)
def upsample_input(ctx: ImportContext, inputs: list[Value], *, mode: str = "nearest"
                   ) -> Value:
    scales = ctx.require_constant(inputs[1], "scales").reshape(-1).tolist()
    return _resize_asymmetric(ctx, inputs[0], scales, mode)

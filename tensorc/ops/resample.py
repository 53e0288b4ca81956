"""Resampling along one axis of run-time length: resample_axis, ONNX Resize over a symbolic dim.

resample_axis{axis, size, mode, coordinates, nearest_mode, scale, cubic_coeff_a,
exclude_outside}(x): x resized along ``axis`` to ``size`` (a Dim) with ONNX's rules. Where
the input or output length is known only at run time, resize_axis's constant tables
(ops/resize.py) cannot be built at compile time, so the kernel builds them first, once per
call, over the output positions of the axis, in float64 as the frontend builds the constant
ones:

    x(j) = the coordinate mode's source of output j   (scale: the attr, or size / n)
    linear:  taps ceil(x) - 1 and ceil(x), weights 1 - r and r, r = x - (ceil(x) - 1)
    cubic:   taps ceil(x) - 2 .. ceil(x) + 1, Keys' kernel at each tap's distance
    nearest: ceil(x) - 1 or ceil(x) by the nearest mode

every tap clamped into the axis (``r`` in (0, 1]: ONNX takes the taps left of an exact input
position), weights rounded to float32. Then the output is resize_axis's sum of weighted
gathers. It is an anchor as resize_axis is, scheduled by the injective template.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.dims import Dim, as_expr
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.resize import taps_per_row
from tensorc.ops.schedules import injective_space, schedule_injective
from tensorc.ops.shape_rules import expect_arity, expect_axis

resample_axis = define("resample_axis", Pattern.OUT_ELEMWISE_FUSABLE)

MODES = ("nearest", "linear", "cubic")
COORDINATES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


@resample_axis.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("resample_axis", input_types, 1)
    (x,) = input_types
    axis = attrs["axis"]
    expect_axis("resample_axis", axis, x.ndim)
    if attrs["mode"] not in MODES or attrs["coordinates"] not in COORDINATES or \
            attrs["nearest_mode"] not in NEAREST_MODES:
        raise ShapeError(f"resample_axis: mode {attrs['mode']!r}, coordinates "
                         f"{attrs['coordinates']!r}, nearest mode {attrs['nearest_mode']!r}: "
                         f"one of {MODES}, {COORDINATES}, {NEAREST_MODES}")
    if not E.is_float(x.dtype):
        raise ShapeError(f"resample_axis: {x} must be float (integers resize with constant "
                         f"tables)")
    return [TensorType(x.shape[:axis] + (attrs["size"],) + x.shape[axis + 1:], x.dtype)]


class _Numpy:
    """The arithmetic the coordinates need, on numpy arrays (the reference)..."""
    where, ceil = staticmethod(np.where), staticmethod(np.ceil)

    @staticmethod
    def eq(a, b):
        return a == b

    @staticmethod
    def abs(a):
        return np.abs(a)


class _Exprs:
    """... and on float64 expressions (the compute)."""
    where = staticmethod(E.select)

    @staticmethod
    def ceil(a):
        return E.call("ceil", a)

    @staticmethod
    def eq(a, b):
        return E.Compare("eq", a, E.Const(float(b), "float64") if isinstance(b, float) else b)

    @staticmethod
    def abs(a):
        return E.select(a < 0.0, 0.0 - a, a)


def _source(attrs: dict, j, n, size, lib=_Exprs):
    """The source coordinate of output ``j`` along an axis of ``n`` resized to ``size``, and
    the scale."""
    where = lib.where
    scale = attrs["scale"]
    if scale is None:
        scale = size / n
    length = scale * n      # ONNX's unrounded output length
    mode = attrs["coordinates"]
    if mode == "asymmetric":
        return j / scale, scale
    if mode == "align_corners":
        return where(lib.eq(length, 1.0), 0.0 * j, j * (n - 1) / (length - 1)), scale
    x = (j + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return where(lib.eq(length, 1.0), 0.0 * j - 0.5, x), scale
    if mode == "half_pixel_symmetric":
        # summed in the frontend's order: where x lands on an input position exactly
        # matters to the nearest modes, and another order rounds it off by an ulp
        return n / 2 * (1 - size / length) + (j + 0.5) / scale - 0.5, scale
    return x, scale


def _cubic(d, a: float, lib=_Exprs):
    d = lib.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return near, far, d


@resample_axis.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axis, n = attrs["axis"], x.shape[attrs["axis"]]
    size = int(attrs["size"])
    j = np.arange(size, dtype=np.float64)
    src, scale = _source(attrs, j, float(n), float(size), _Numpy)
    top = np.ceil(src)
    ratio = src - (top - 1)
    if attrs["mode"] == "nearest":
        index = np.where(_rounds_up(attrs, ratio, scale, _Numpy), top, top - 1)
        return [np.take(x, np.clip(index, 0, n - 1).astype(np.int64), axis=axis)]
    offsets = (0, 1) if attrs["mode"] == "linear" else (-1, 0, 1, 2)
    positions = [top - 1 + k for k in offsets]
    if attrs["mode"] == "linear":
        weights = [1 - ratio, ratio]
    else:
        weights = []
        for k in offsets:
            near, far, d = _cubic(k - ratio, attrs["cubic_coeff_a"], _Numpy)
            weights.append(np.where(d <= 1, near, np.where(d < 2, far, 0.0)))
        if attrs["exclude_outside"]:
            weights = [np.where((p < 0) | (p >= n), 0.0, w) for p, w in zip(positions, weights)]
            total = sum(weights)
            weights = [w / np.where(total == 0, 1.0, total) for w in weights]
    shape = [1] * x.ndim
    shape[axis] = size
    out = sum(np.take(x, np.clip(p, 0, n - 1).astype(np.int64), axis=axis) *
              w.astype(np.float32).reshape(shape) for p, w in zip(positions, weights))
    return [out.astype(x.dtype)]


def _rounds_up(attrs: dict, ratio, scale, lib=_Exprs):
    """Whether nearest takes the right one of the two positions around the coordinate."""
    rule = attrs["nearest_mode"]
    if rule == "simple":    # floor when enlarging, ceil when shrinking (onnxruntime)
        rule = "floor" if attrs["scale"] is not None and attrs["scale"] >= 1 else \
            "ceil" if attrs["scale"] is not None else None
    if rule is None:        # a run-time scale
        return lib.where(scale >= 1.0, lib.eq(ratio, 1.0), ratio > 0.0)
    return {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
            "floor": lib.eq(ratio, 1.0), "ceil": ratio > 0.0}[rule]


def _index(value) -> E.Expr:
    """A length (an int, a Dim or an index expression) as an index expression."""
    if isinstance(value, Dim) or isinstance(value, int):
        return as_expr(value)
    return value


def _f64(value) -> E.Expr:
    if isinstance(value, float):
        return E.Const(value, "float64")
    return E.cast("float64", _index(value))


@resample_axis.compute
def _compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    """The taps' positions and weights as tables over the output positions (computed once
    per call, :func:`_apply`), then resize_axis's weighted gathers from them."""
    axis, mode = attrs["axis"], attrs["mode"]
    n, size = x.shape[axis], attrs["size"]
    shape = x.shape[:axis] + (size,) + x.shape[axis + 1:]
    last = _index(n) - 1
    fattrs = {**attrs, "scale": None if attrs["scale"] is None else
              E.Const(float(attrs["scale"]), "float64")}
    taps = {"nearest": 1, "linear": 2, "cubic": 4}[mode]
    first = {"nearest": 0, "linear": -1, "cubic": -2}[mode]   # the first tap from ceil(x)

    def coordinate(j):
        src, scale = _source(fattrs, _f64(j), _f64(n), _f64(size))
        top = E.call("ceil", src)
        return top, src - (top - 1.0), scale

    def kernel_weight(k, ratio):
        """Keys' weight of the tap at offset ``k`` (-1..2) from the left neighbour."""
        near, far, d = _cubic(float(k) - ratio, attrs["cubic_coeff_a"])
        return E.select(d <= 1.0, near, E.select(d < 2.0, far, E.Const(0.0, "float64")))

    def position(t, j):
        top, ratio, scale = coordinate(j)
        if mode == "nearest":
            at = E.select(_rounds_up(attrs, ratio, scale), top, top - 1.0)
        else:
            at = top + E.cast("float64", t) + float(first)
        return E.cast("int32", E.minimum(E.maximum(E.cast("int64", at), E.const(0)), last))

    def weight(t, j):
        top, ratio, _ = coordinate(j)
        if mode == "linear":
            return E.cast("float32", E.select(E.Compare("eq", t, E.const(0, t.dtype)),
                                              1.0 - ratio, ratio))
        weights = [kernel_weight(k, ratio) for k in (-1, 0, 1, 2)]
        if attrs["exclude_outside"]:
            inside = [E.all_of(top + float(k - 1) >= 0.0,
                               top + float(k - 1) <= E.cast("float64", last))
                      for k in (-1, 0, 1, 2)]
            weights = [E.select(c, w, E.Const(0.0, "float64")) for c, w in zip(inside, weights)]
            total = weights[0] + weights[1] + weights[2] + weights[3]
            total = E.select(_Exprs.eq(total, 0.0), E.Const(1.0, "float64"), total)
            weights = [w / total for w in weights]
        picked = weights[3]
        for k in (2, 1, 0):
            picked = E.select(E.Compare("eq", t, E.const(k, t.dtype)), weights[k], picked)
        return E.cast("float32", picked)

    positions = te.compute((taps, size), position, name="resample_positions")
    weights = None if mode == "nearest" else \
        te.compute((taps, size), weight, name="resample_weights")

    def body(*o):
        j = o[axis]
        total = None
        for t in range(taps):
            source = E.cast("int64", positions[t, j])
            value = x[tuple(source if d == axis else o[d] for d in range(x.ndim))]
            if weights is None:
                return value
            term = E.cast("float32", value) * weights[t, j]
            total = term if total is None else total + term
        return E.cast(x.dtype, total)
    return te.compute(shape, body, name="resample_axis")


def _apply(target, sch, out, anchor, attrs, config) -> None:
    """The injective template, with the tables computed once at the kernel's start; along an
    axis before the last, each output row's entries of them copied to registers at the
    row's loop, as a static resize does (read from the tables at every vector, the H-axis
    resample of a segmenter took 2-3x the static kernel)."""
    schedule_injective(target, sch, out, anchor, attrs, config)
    tables = [t for t in anchor.op.input_tensors() if t.op.name.startswith("resample_")]
    for table in tables:
        sch[table].compute_root()
    if anchor is out:
        taps_per_row(sch, out, attrs["axis"], tables)


resample_axis.schedule(_apply, target="llvm", space=injective_space, symbolic=True)

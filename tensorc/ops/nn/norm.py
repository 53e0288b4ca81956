"""Normalization: batch_norm (inference), normalize (statistics over axes), lrn.

batch_norm: y = (x - mean) / sqrt(var + epsilon) * scale + bias, inputs x[N, C, ...],
scale[C], bias[C], mean[C], var[C]; attr epsilon. The channel axis is 1.
normalize{axes, mode, epsilon}: see NORMALIZE_MODES; the frontend applies scale and bias
with broadcast ops, which fuse into the kernel's epilogue.
lrn{size, alpha, beta, bias}: x / (bias + alpha / size * sum of squares of nearby channels)
** beta.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.reduce import reduce_over
from tensorc.ops.registry import Pattern, define
from tensorc.ops.symbolic import schedule_generic
from tensorc.ops.schedules import (
    PARALLEL_MIN_ELEMENTS,
    clamp,
    in_range,
    reduce_in_row,
    schedule_injective,
    schedule_reduction,
    vector_block,
)
from tensorc.ops.shape_rules import expect_arity, expect_float, expect_same_dtype
from tensorc.target import Target

batch_norm = define("batch_norm", Pattern.BROADCAST)

_PARAMETERS = ("scale", "bias", "mean", "var")


@batch_norm.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("batch_norm", input_types, 5)
    x = input_types[0]
    expect_float("batch_norm", x)
    expect_same_dtype("batch_norm", input_types)
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: input must be [N, C, ...], got {x}")
    for name, t in zip(_PARAMETERS, input_types[1:]):
        if t.shape != (x.shape[1],):
            raise ShapeError(f"batch_norm: {name} must have shape [{x.shape[1]}] (the channels "
                             f"of x {x}), got {t}")
    return [x]


def channel_affine(attrs: dict, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
                   var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """batch_norm as y = x * a + b per channel; returns (a, b) in float64."""
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + attrs["epsilon"])
    b = bias.astype(np.float64) - mean.astype(np.float64) * a
    return a, b


@batch_norm.reference
def _reference(attrs: dict, x: np.ndarray, *params: np.ndarray) -> list[np.ndarray]:
    a, b = channel_affine(attrs, *params)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    return [(x * a.reshape(shape) + b.reshape(shape)).astype(x.dtype)]


@batch_norm.compute
def _compute(attrs: dict, x: te.Tensor, scale: te.Tensor, bias: te.Tensor, mean: te.Tensor,
             var: te.Tensor) -> te.Tensor:
    eps = E.Const(attrs["epsilon"], x.dtype)

    def body(n, c, *rest):
        inv = scale[c] / E.call("sqrt", var[c] + eps)
        return (x[(n, c, *rest)] - mean[c]) * inv + bias[c]
    return te.compute(x.shape, body, name="batch_norm")


# ---------------------------------------------------------------------------------------------
# normalize: x scaled by statistics over a set of axes (layer, instance, group, RMS, Lp, MVN)

normalize = define("normalize", Pattern.REDUCTION)

# y per mode, with mean and var over the axes and n their element count:
NORMALIZE_MODES = {
    "layer": "(x - mean) / sqrt(var + epsilon)",     # layer / instance / group norm
    "std": "(x - mean) / (sqrt(var) + epsilon)",     # MeanVarianceNormalization
    "rms": "x / sqrt(mean(x * x) + epsilon)",        # RMSNormalization
    "l1": "x / sum(|x|), 0 where the sum is 0",      # LpNormalization p=1
    "l2": "x / sqrt(sum(x * x)), 0 where it is 0",   # LpNormalization p=2
}


@normalize.infer
def _normalize_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("normalize", input_types, 1)
    (x,) = input_types
    expect_float("normalize", x)
    axes = tuple(attrs["axes"])
    if not axes or list(axes) != sorted(set(axes)) or not all(0 <= a < x.ndim for a in axes):
        raise ShapeError(f"normalize: axes {axes} must be sorted, distinct axes of {x}")
    if attrs["mode"] not in NORMALIZE_MODES:
        raise ShapeError(f"normalize: mode {attrs['mode']!r} is not one of "
                         f"{', '.join(NORMALIZE_MODES)}")
    groups = attrs.get("groups", 1)
    if groups != 1 and (axes != tuple(range(1, x.ndim)) or x.ndim < 2 or groups < 1
                        or x.shape[1] % groups):
        raise ShapeError(f"normalize: groups={groups} needs axes 1.. of x {x} and must divide "
                         f"its {x.shape[1] if x.ndim > 1 else 0} channels")
    return [x]


@normalize.reference
def _normalize_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axes, eps, mode = tuple(attrs["axes"]), attrs["epsilon"], attrs["mode"]
    groups = attrs.get("groups", 1)
    if groups != 1:     # statistics per channel group: normalize [N, G, rest] over rest
        grouped = x.reshape(x.shape[0], groups, -1)
        flat = _normalize_reference(dict(attrs, axes=(2,), groups=1), grouped)[0]
        return [flat.reshape(x.shape)]
    v = x.astype(np.float64)
    mean = np.mean(v, axis=axes, keepdims=True)
    var = np.mean((v - mean) ** 2, axis=axes, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        if mode == "layer":
            y = (v - mean) / np.sqrt(var + eps)
        elif mode == "std":
            y = (v - mean) / (np.sqrt(var) + eps)
        elif mode == "rms":
            y = v / np.sqrt(np.mean(v * v, axis=axes, keepdims=True) + eps)
        else:
            norm = (np.sum(np.abs(v), axis=axes, keepdims=True) if mode == "l1"
                    else np.sqrt(np.sum(v * v, axis=axes, keepdims=True)))
            y = np.where(norm == 0, 0.0, v / norm)
    return [y.astype(x.dtype)]


@normalize.compute
def _normalize_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    axes, mode = tuple(attrs["axes"]), attrs["mode"]
    groups = attrs.get("groups", 1)
    count = te.extent_of(math.prod(x.shape[a] for a in axes) // groups)
    # 1 / count: a constant, or over symbolic axes computed at run time
    inverse_count = E.Const(1.0 / count, x.dtype) if isinstance(count, int) else \
        E.Const(1.0, x.dtype) / E.cast(x.dtype, count)
    eps = E.Const(attrs["epsilon"], x.dtype)
    one, zero = E.Const(1, x.dtype), E.Const(0, x.dtype)
    source, out_shape = x, x.shape
    if groups != 1:
        # statistics over [N, G, C/G * spatial], a view of x that is contiguous per group
        source = _grouped_view(x, groups)
        axes = (2,)
    per_group = x.shape[1] // groups if groups != 1 else 0

    def stat(t: te.Tensor, index: tuple) -> E.Expr:
        """t (axes kept, extent 1) at the row of x's element ``index``."""
        if per_group:
            return t[index[0], index[1] // per_group, E.const(0)]
        return t[tuple(E.const(0) if d in axes else i for d, i in enumerate(index))]

    if mode in ("layer", "std"):
        total = reduce_over(source, axes, True, "sum", name="norm_sum", tag="anchor:norm_sum")

        def mean(index):
            return t_at(total, index) * inverse_count

        def t_at(t: te.Tensor, index: tuple) -> E.Expr:      # a row statistic, by source index
            return t[tuple(E.const(0) if d in axes else i for d, i in enumerate(index))]
        dev = reduce_over(source, axes, True, "sum",
                          lambda index, v: (v - mean(index)) * (v - mean(index)),
                          name="norm_var", tag="anchor:norm_var")
        if mode == "layer":
            inv = te.compute(dev.shape, lambda *o: one / E.call(
                "sqrt", dev[o] * inverse_count + eps),
                name="norm_inv", tag="anchor:norm_inv")
        else:
            inv = te.compute(dev.shape, lambda *o: one / (E.call(
                "sqrt", dev[o] * inverse_count) + eps),
                name="norm_inv", tag="anchor:norm_inv")
        return te.compute(out_shape, lambda *i: (x[i] - stat(total, i) * inverse_count) *
                          stat(inv, i), name="normalize")
    squares = mode != "l1"
    total = reduce_over(source, axes, True, "sum",
                        lambda index, v: v * v if squares else E.call("fabs", v),
                        name="norm_sum", tag="anchor:norm_sum")
    if mode == "rms":
        inv = te.compute(total.shape, lambda *o: one / E.call(
            "sqrt", total[o] * inverse_count + eps),
            name="norm_inv", tag="anchor:norm_inv")
    else:
        def reciprocal(*o):
            norm = E.call("sqrt", total[o]) if squares else total[o]
            return E.select(E.Compare("gt", norm, zero), one / norm, zero)
        inv = te.compute(total.shape, reciprocal, name="norm_inv", tag="anchor:norm_inv")
    return te.compute(x.shape, lambda *i: x[i] * stat(inv, i), name="normalize")


@normalize.schedule(symbolic=True)
def _normalize_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                        attrs: dict, config) -> None:
    """Over trailing axes (layer, instance, group norm): one row per leading index, rows in
    parallel, each row's statistics computed inside the row loop, the output vectorized.
    Other axes (MVN's N, H, W) keep whole-tensor statistics."""
    axes = tuple(attrs["axes"])
    ndim = len(out.shape)
    st = sch[out]
    groups = attrs.get("groups", 1)
    if not te.is_static(out.shape) and (groups != 1 or axes != tuple(range(axes[0], ndim))
                                        or axes[0] == 0):
        schedule_generic(target, sch, out, anchor, attrs)   # (over symbolic dims)
        return
    if axes != tuple(range(axes[0], ndim)) or axes[0] == 0:
        schedule_injective(target, sch, out)
        return
    leading, trailing = st.op_axis[:axes[0]], st.op_axis[axes[0]:]
    if groups != 1:       # rows are (n, channel group): split the channel axis
        group, channel = st.split(trailing[0], out.shape[1] // groups)
        leading, trailing = [*leading, group], [channel, *trailing[1:]]
    row = st.fuse(*leading) if len(leading) > 1 else leading[0]
    col = st.fuse(*trailing) if len(trailing) > 1 else trailing[0]
    # symbolic dims at their hints (a symbolic row: whole vectors and a guarded tail)
    width = math.prod(te.hint_shape(out.shape[axes[0]:])) // groups
    lanes = target.vector_lanes(out.dtype)
    if width >= lanes:
        block = vector_block(width, lanes) if te.is_static(out.shape[axes[0]:]) else lanes
        st.vectorize(st.split(col, block)[1])
    if math.prod(te.hint_shape(out.shape)) >= PARALLEL_MIN_ELEMENTS:
        st.parallel(row)
    for stage in list(sch.stages):  # producers first: each lands inside its reader's row
        tag = getattr(stage.op, "tag", "")
        if stage is not st and tag.startswith("anchor:norm") and stage.attach == "root":
            reduce_in_row(target, sch, stage.tensor, st, row)


def _grouped_view(x: te.Tensor, groups: int) -> te.Tensor:
    """x [N, C, *S] seen as [N, G, C/G * prod(S)] (inlined: the loads stay contiguous)."""
    n, channels, *spatial = x.shape
    per_group = channels // groups
    inner = int(np.prod(spatial)) if spatial else 1

    def body(b, g, k):
        index = [b, g * per_group + k // inner]
        rest = k % inner
        for d, size in enumerate(spatial):
            stride = int(np.prod(spatial[d + 1:])) if d + 1 < len(spatial) else 1
            index.append((rest // stride) % size if stride > 1 else rest % size)
        return x[tuple(index)]
    return te.compute((n, groups, per_group * inner), body, name="norm_groups")


# ---------------------------------------------------------------------------------------------
# lrn: local response normalization across channels (axis 1)

lrn = define("lrn", Pattern.REDUCTION)


@lrn.infer
def _lrn_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("lrn", input_types, 1)
    (x,) = input_types
    expect_float("lrn", x)
    if x.ndim < 3 or attrs["size"] < 1:
        raise ShapeError(f"lrn: input must be [N, C, spatial...] and size positive, got {x} "
                         f"and size {attrs['size']}")
    return [x]


def _lrn_window(size: int) -> tuple[int, int]:
    """Channels before and after c in c's window (ONNX: floor and ceil of (size-1)/2)."""
    return (size - 1) // 2, size - 1 - (size - 1) // 2


@lrn.reference
def _lrn_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    before, after = _lrn_window(attrs["size"])
    squares = np.pad(x.astype(np.float64) ** 2,
                     [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    channels = x.shape[1]
    total = sum(squares[:, k:k + channels] for k in range(attrs["size"]))
    denom = (attrs["bias"] + attrs["alpha"] / attrs["size"] * total) ** attrs["beta"]
    return [(x / denom).astype(x.dtype)]


@lrn.compute
def _lrn_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    size, channels = attrs["size"], x.shape[1]
    before, _ = _lrn_window(size)
    r = te.reduce_axis(size, "r")

    def window(n, c, *rest):
        src = c - before + r.var
        v = x[(n, clamp(src, channels), *rest)]
        return te.sum_(E.select(in_range(src, channels), v * v, E.Const(0, x.dtype)), axis=r)
    total = te.compute(x.shape, window, name="lrn_sum", tag="anchor:lrn_sum")
    scale = E.Const(attrs["alpha"] / size, x.dtype)
    bias, beta = E.Const(attrs["bias"], x.dtype), E.Const(-attrs["beta"], x.dtype)
    return te.compute(x.shape, lambda *i: x[i] * E.call("pow", bias + scale * total[i], beta),
                      name="lrn")


@lrn.schedule
def _lrn_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                  attrs: dict, config) -> None:
    total = next(t for t in anchor.op.input_tensors() if t.op.name == "lrn_sum")
    schedule_reduction(target, sch, out, total)

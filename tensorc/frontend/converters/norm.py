"""Converters of ONNX normalizations: Layer, Instance, Group, RMS, Lp, MeanVariance, LRN.

Each becomes one ``normalize`` core op over the normalized axes, followed by the scale and
bias as broadcast ``mul`` / ``add`` (which fuse into the normalize kernel's epilogue).
"""
from __future__ import annotations

from typing import Sequence

from tensorc.errors import InvalidModelError, ShapeError, UnsupportedOpError
from tensorc.frontend.converters.common import normalize_axis, reshape, scalar
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value


def _widen(ctx: ImportContext, x: Value, stash_type: int) -> Value:
    """x in the precision the statistics are computed in (stash_type 1: float32)."""
    if stash_type == 1 and x.type.dtype == "float16":
        return ctx.emit("cast", [x], dtype="float32")
    return x


def _affine(ctx: ImportContext, y: Value, scale: Value | None, bias: Value | None,
            dtype: str) -> Value:
    """y * scale + bias (numpy broadcasting), back in ``dtype``."""
    y = ctx.emit("cast", [y], dtype=dtype) if y.type.dtype != dtype else y
    if scale is not None:
        y = ctx.emit("mul", [y, scale])
    if bias is not None:
        y = ctx.emit("add", [y, bias])
    return y


def _per_channel(ctx: ImportContext, v: Value | None, ndim: int) -> Value | None:
    """A [C] vector shaped to broadcast along axis 1 of a rank-``ndim`` tensor."""
    if v is None:
        return None
    return reshape(ctx, v, (1, v.type.size) + (1,) * (ndim - 2))


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether numpy broadcasting takes ``shape`` to ``target`` without growing it."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


@converter("LayerNormalization", since=17)
def layer_norm(ctx: ImportContext, inputs: list[Value], *, axis: int = -1,
               epsilon: float = 1e-5, stash_type: int = 1
               ) -> tuple[Value, Value, Value]:
    x, scale = inputs[:2]
    bias = inputs[2] if len(inputs) > 2 else None
    axis = normalize_axis(axis, x.type.ndim)
    axes = tuple(range(axis, x.type.ndim))
    normalized = x.type.shape[axis:]
    for name, value in (("Scale", scale), ("B", bias)):
        if value is not None and not _broadcasts_to(value.type.shape, normalized):
            raise ShapeError(f"{name} {value.type} must match or broadcast to the normalized "
                             f"shape {list(normalized)} (x {x.type}, axis {axis})")
    wide = _widen(ctx, x, stash_type)
    y = ctx.emit("normalize", [wide], axes=axes, mode="layer", epsilon=float(epsilon))
    y = _affine(ctx, y, scale, bias, x.type.dtype)
    # the Mean and InvStdDev outputs: separate kernels, removed when nothing reads them
    mean = ctx.emit("reduce_mean", [wide], axes=axes, keepdims=True)
    dev = ctx.emit("sub", [wide, mean])
    var = ctx.emit("reduce_mean", [ctx.emit("mul", [dev, dev])], axes=axes, keepdims=True)
    std = ctx.emit("sqrt", [ctx.emit("add", [var, scalar(ctx, epsilon, var)])])
    inv_std = ctx.emit("div", [scalar(ctx, 1.0, std), std])
    return y, mean, inv_std


@converter("RMSNormalization", since=23)
def rms_norm(ctx: ImportContext, inputs: list[Value], *, axis: int = -1,
             epsilon: float = 1e-5, stash_type: int = 1) -> Value:
    x, scale = inputs[:2]
    axis = normalize_axis(axis, x.type.ndim)
    y = ctx.emit("normalize", [_widen(ctx, x, stash_type)], axes=tuple(range(axis, x.type.ndim)),
                 mode="rms", epsilon=float(epsilon))
    return _affine(ctx, y, scale, None, x.type.dtype)


@converter("InstanceNormalization", since=6)
def instance_norm(ctx: ImportContext, inputs: list[Value], *, epsilon: float = 1e-5
                  ) -> Value:
    x, scale, bias = inputs[:3]
    ndim = x.type.ndim
    if ndim < 3:
        raise ShapeError(f"InstanceNormalization: input must be [N, C, spatial...], got {x.type}")
    y = ctx.emit("normalize", [x], axes=tuple(range(2, ndim)), mode="layer",
                 epsilon=float(epsilon))
    return _affine(ctx, y, _per_channel(ctx, scale, ndim), _per_channel(ctx, bias, ndim),
                   x.type.dtype)


@converter("GroupNormalization", since=18)
def group_norm(ctx: ImportContext, inputs: list[Value], *, num_groups: int,
               epsilon: float = 1e-5, stash_type: int = 1) -> Value:
    x, scale, bias = inputs[:3]
    shape = x.type.shape
    if num_groups < 1:
        raise ShapeError(f"GroupNormalization: num_groups={num_groups} must be positive")
    if len(shape) < 3 or shape[1] % num_groups:
        raise ShapeError(f"GroupNormalization: num_groups={num_groups} must divide the "
                         f"channels of x {x.type} ([N, C, spatial...])")
    channels, groups = shape[1], num_groups
    for name, value in (("scale", scale), ("bias", bias)):
        if value.type.shape not in ((groups,), (channels,)):
            raise InvalidModelError(
                f"{name} is {value.type}, but num_groups={groups} and x {x.type} make it "
                f"[{channels}] (one value per channel, opset 21) or [{groups}] (one per "
                f"group, opset 18); fix num_groups or the {name}")
    # statistics per (sample, group); the scale and bias then apply per channel, in the same
    # kernel (opset 18 gives one per group: repeated per channel)
    y = ctx.emit("normalize", [_widen(ctx, x, stash_type)], axes=tuple(range(1, len(shape))),
                 mode="layer", epsilon=float(epsilon), groups=groups)
    if scale.type.size != channels:
        scale, bias = (_repeat_per_channel(ctx, v, channels // groups) for v in (scale, bias))
    return _affine(ctx, y, _per_channel(ctx, scale, len(shape)),
                   _per_channel(ctx, bias, len(shape)), x.type.dtype)


def _repeat_per_channel(ctx: ImportContext, v: Value, per_group: int) -> Value:
    """A [G] vector as [G * per_group], each value repeated for its group's channels."""
    groups = v.type.size
    wide = ctx.emit("broadcast_to", [reshape(ctx, v, (groups, 1))], shape=(groups, per_group))
    return reshape(ctx, wide, (groups * per_group,))


@converter("MeanVarianceNormalization", since=9)
def mean_variance_norm(ctx: ImportContext, inputs: list[Value], *,
                       axes: Sequence[int] = (0, 2, 3)) -> Value:
    x = inputs[0]
    axes = tuple(sorted({normalize_axis(a, x.type.ndim) for a in axes}))
    return ctx.emit("normalize", [x], axes=axes, mode="std", epsilon=1e-9)


@converter("LpNormalization", since=1)
def lp_norm(ctx: ImportContext, inputs: list[Value], *, axis: int = -1, p: int = 2) -> Value:
    x = inputs[0]
    if p not in (1, 2):
        raise UnsupportedOpError(f"LpNormalization with p={p} is not supported (only 1, 2)")
    return ctx.emit("normalize", [x], axes=(normalize_axis(axis, x.type.ndim),),
                    mode=f"l{p}", epsilon=0.0)


@converter("LRN", since=1)
def lrn(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1e-4, beta: float = 0.75,
        bias: float = 1.0, size: int) -> Value:
    return ctx.emit("lrn", [inputs[0]], size=int(size), alpha=float(alpha), beta=float(beta),
                    bias=float(bias))

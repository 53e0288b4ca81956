"""Converters of ONNX shape and data-movement ops (and constants)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

from tensorc.errors import ShapeError, UnsupportedOpError
from tensorc.frontend.converters import (
    converter, normalize_axis, reshape,
)
from tensorc.ir.graph import Value

if TYPE_CHECKING:
    from tensorc.frontend.onnx import ImportContext


@converter("Flatten", since=1)
def flatten(ctx: ImportContext, inputs: list[Value], *, axis: int = 1) -> Value:
    x = inputs[0]
    shape = x.type.shape
    ndim = x.type.ndim
    if not -ndim <= axis <= ndim:  # axis == ndim is allowed: everything goes to the first dim
        raise ShapeError(f"Flatten axis {axis} is out of range for rank {ndim}")
    axis = axis + ndim if axis < 0 else axis
    return reshape(ctx, x, (math.prod(shape[:axis]), math.prod(shape[axis:])))


def resolve_shape(input_shape: Sequence[int], target: Sequence[int], allowzero: bool
                  ) -> tuple[int, ...]:
    """ONNX Reshape's target: 0 copies the input dim (unless allowzero), -1 is inferred."""
    dims = [int(d) for d in target]
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(input_shape):
                    raise ShapeError(f"Reshape target {tuple(target)} copies dim {i} that "
                                     f"input {tuple(input_shape)} does not have")
                dims[i] = input_shape[i]
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise ShapeError(f"Reshape target {tuple(target)} is invalid")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        total = math.prod(input_shape)
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape {tuple(input_shape)} to {tuple(target)}")
        dims[dims.index(-1)] = total // known
    return tuple(dims)


@converter("Reshape", since=1, until=4)
def reshape_attribute(ctx: ImportContext, inputs: list[Value], *, shape: Sequence[int],
                      consumed_inputs: Sequence[int] = ()) -> Value:
    x = inputs[0]
    return reshape(ctx, x, resolve_shape(x.type.shape, shape, False))


@converter("Reshape", since=5)
def reshape_input(ctx: ImportContext, inputs: list[Value], *, allowzero: int = 0) -> Value:
    x, target = inputs
    shape = ctx.require_constant(target, "shape").tolist()
    return reshape(ctx, x, resolve_shape(x.type.shape, shape, bool(allowzero)))


@converter("Transpose", since=1)
def transpose(ctx: ImportContext, inputs: list[Value], *, perm: Sequence[int] | None = None
              ) -> Value:
    x = inputs[0]
    ndim = x.type.ndim
    perm = tuple(range(ndim))[::-1] if perm is None else tuple(normalize_axis(p, ndim)
                                                                  for p in perm)
    return x if perm == tuple(range(ndim)) else ctx.emit("transpose", [x], perm=perm)


@converter("Concat", since=1)
def concat(ctx: ImportContext, inputs: list[Value], *, axis: int = 1) -> Value:
    present = [v for v in inputs if v is not None]
    axis = normalize_axis(axis, present[0].type.ndim)
    return present[0] if len(present) == 1 else ctx.emit("concat", present, axis=axis)


@converter("Identity", since=1)
def identity(ctx: ImportContext, inputs: list[Value]) -> Value:
    return inputs[0]


@converter("Dropout", since=1)
def dropout(ctx: ImportContext, inputs: list[Value], *, ratio: float = 0.5, seed: int = 0,
            is_test: int = 0, consumed_inputs: Sequence[int] = ()) -> tuple[Value, Value]:
    x = inputs[0]
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and ctx.require_constant(training, "training_mode").item():
        raise UnsupportedOpError("Dropout in training mode is not supported")
    # At inference Dropout is the identity and its mask all ones (bool from opset 12 on).
    mask_dtype = bool if ctx.opset >= 12 else x.type.dtype
    return x, ctx.const(np.ones(x.type.shape, dtype=mask_dtype))


@converter("Constant", since=1)
def constant(ctx: ImportContext, inputs: list[Value], *, value: np.ndarray | None = None,
             value_float: float | None = None, value_floats: Sequence[float] | None = None,
             value_int: int | None = None, value_ints: Sequence[int] | None = None,
             value_string: str | None = None, value_strings: Sequence[str] | None = None,
             sparse_value: object = None) -> Value:
    forms = ((value, None), (value_float, np.float32), (value_floats, np.float32),
             (value_int, np.int64), (value_ints, np.int64))
    for raw, dtype in forms:
        if raw is not None:
            return ctx.const(np.array(raw, dtype=dtype))
    raise UnsupportedOpError("Constant holds a string or sparse tensor, which is not supported")


@converter("ConstantOfShape", since=9)
def constant_of_shape(ctx: ImportContext, inputs: list[Value], *,
                      value: np.ndarray | None = None) -> Value:
    shape = ctx.require_constant(inputs[0], "shape").tolist()
    fill = np.zeros(1, np.float32) if value is None else value.reshape(-1)
    return ctx.const(np.full(shape, fill[0], dtype=fill.dtype))


@converter("Shape", since=1)
def shape(ctx: ImportContext, inputs: list[Value], *, start: int = 0, end: int | None = None
          ) -> Value:
    # Shapes are static in tensorc, so Shape is always a constant (clamped like ONNX).
    dims = inputs[0].type.shape
    return ctx.const(np.array(dims[slice(start, end)], dtype=np.int64))


@converter("Gather", since=1)
def gather(ctx: ImportContext, inputs: list[Value], *, axis: int = 0) -> Value:
    data, indices = ctx.constant(inputs[0]), ctx.constant(inputs[1])
    if data is None or indices is None:
        raise UnsupportedOpError("Gather is supported on constant data and indices only (shape "
                                 "arithmetic), not on tensors computed at run time")
    axis = normalize_axis(axis, data.ndim)
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise ShapeError(f"Gather indices {indices.tolist()} are out of range for axis {axis} "
                         f"of size {size}")
    return ctx.const(np.take(data, np.where(indices < 0, indices + size, indices), axis=axis))


def _unsqueeze(ctx: ImportContext, x: Value, axes: Sequence[int]) -> Value:
    ndim = x.type.ndim + len(axes)
    axes = sorted(normalize_axis(a, ndim) for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"Unsqueeze axes {tuple(axes)} repeat an axis")
    dims = list(x.type.shape)
    for axis in axes:
        dims.insert(axis, 1)
    return reshape(ctx, x, dims)


def _squeeze(ctx: ImportContext, x: Value, axes: Sequence[int] | None) -> Value:
    shape = x.type.shape
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = {normalize_axis(a, x.type.ndim) for a in axes}
    bad = [a for a in axes if shape[a] != 1]
    if bad:
        raise ShapeError(f"Squeeze axes {sorted(bad)} of {x.type} are not 1")
    return reshape(ctx, x, [d for i, d in enumerate(shape) if i not in axes])


@converter("Unsqueeze", since=1, until=12)
def unsqueeze_attribute(ctx: ImportContext, inputs: list[Value], *, axes: Sequence[int]
                        ) -> Value:
    return _unsqueeze(ctx, inputs[0], axes)


@converter("Unsqueeze", since=13)
def unsqueeze_input(ctx: ImportContext, inputs: list[Value]) -> Value:
    return _unsqueeze(ctx, inputs[0], ctx.require_constant(inputs[1], "axes").tolist())


@converter("Squeeze", since=1, until=12)
def squeeze_attribute(ctx: ImportContext, inputs: list[Value], *,
                      axes: Sequence[int] | None = None) -> Value:
    return _squeeze(ctx, inputs[0], axes)


@converter("Squeeze", since=13)
def squeeze_input(ctx: ImportContext, inputs: list[Value]) -> Value:
    axes = inputs[1] if len(inputs) > 1 else None
    return _squeeze(ctx, inputs[0],
                    None if axes is None else ctx.require_constant(axes, "axes").tolist())


def _pad(ctx: ImportContext, x: Value, mode: str, pads: Sequence[int], value: float,
         axes: Sequence[int] | None = None) -> Value:
    if mode != "constant":
        raise UnsupportedOpError(f"Pad mode {mode!r} is not supported (only 'constant')")
    ndim = x.type.ndim
    if axes is not None:  # pads given for some axes only (opset 18)
        full = [0] * (2 * ndim)
        axes = [normalize_axis(a, ndim) for a in axes]
        for i, axis in enumerate(axes):
            full[axis], full[axis + ndim] = pads[i], pads[i + len(axes)]
        pads = full
    pads = tuple(int(p) for p in pads)
    if any(p < 0 for p in pads):
        raise UnsupportedOpError(f"Pad with negative pads {pads} is not supported")
    return x if not any(pads) else ctx.emit("pad", [x], pads=pads, value=float(value))


@converter("Pad", since=2, until=10)
def pad_attribute(ctx: ImportContext, inputs: list[Value], *, mode: str = "constant",
                  pads: Sequence[int], value: float = 0.0) -> Value:
    return _pad(ctx, inputs[0], mode, pads, value)


@converter("Pad", since=11)
def pad_input(ctx: ImportContext, inputs: list[Value], *, mode: str = "constant") -> Value:
    x, pads = inputs[:2]
    fill = inputs[2] if len(inputs) > 2 else None
    axes = inputs[3] if len(inputs) > 3 else None
    value = 0.0 if fill is None else ctx.require_constant(fill, "constant_value").item()
    return _pad(ctx, x, mode, ctx.require_constant(pads, "pads").tolist(), value,
                None if axes is None else ctx.require_constant(axes, "axes").tolist())

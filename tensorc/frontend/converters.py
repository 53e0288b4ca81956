"""ONNX op converters, keyed by (op_type, opset range).

A converter is ``fn(ctx, inputs, **attributes) -> Value | tuple[Value | None, ...]``: its
keyword arguments are the ONNX attribute names with their ONNX defaults, ``inputs`` holds one
Value per ONNX input (None for an omitted optional input). It builds core ops with
``ctx.emit`` (which folds constants) and reads constant inputs with ``ctx.constant``.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from tensorc.errors import ShapeError, UnsupportedOpError
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


def _spatial_attrs(x: Value, kernel: Sequence[int], strides: Sequence[int] | None,
                   dilations: Sequence[int] | None, pads: Sequence[int] | None, auto_pad: str
                   ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Resolve ONNX window attributes to explicit (strides, pads, dilations)."""
    spatial = len(kernel)
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


# elementwise ----------------------------------------------------------------------------------
UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
         "Sqrt": "sqrt", "Neg": "neg", "Abs": "abs"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum"}


def _unary(op: str) -> Callable:
    return lambda ctx, inputs: ctx.emit(op, inputs[:1])


def _binary(op: str) -> Callable:
    return lambda ctx, inputs: ctx.emit(op, inputs[:2])


def _variadic(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value]) -> Value:
        result = inputs[0]
        for other in inputs[1:]:
            result = ctx.emit(op, [result, other])
        return result
    return convert


# Opsets before 6/7 had legacy attributes (consumed_inputs, broadcast) we do not read.
for _onnx_op, _core_op in UNARY.items():
    converter(_onnx_op, since=6)(_unary(_core_op))
for _onnx_op, _core_op in BINARY.items():
    converter(_onnx_op, since=7)(_binary(_core_op))
for _onnx_op, _core_op in VARIADIC.items():
    converter(_onnx_op, since=8)(_variadic(_core_op))


@converter("Pow", since=7)
def pow_(ctx: ImportContext, inputs: list[Value]) -> Value:
    base, exponent = inputs
    if exponent.type.dtype != base.type.dtype:  # allowed by ONNX; the result has base's dtype
        exponent = ctx.emit("cast", [exponent], dtype=base.type.dtype)
    return ctx.emit("pow", [base, exponent])


@converter("LeakyRelu", since=6)
def leaky_relu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 0.01) -> Value:
    return ctx.emit("leaky_relu", inputs, alpha=float(alpha))


_FLOAT_LIMIT = float(np.finfo(np.float32).max)


@converter("Clip", since=6, until=10)
def clip_attributes(ctx: ImportContext, inputs: list[Value], *, min: float = -_FLOAT_LIMIT,
                    max: float = _FLOAT_LIMIT) -> Value:
    low = None if min <= -_FLOAT_LIMIT else float(min)
    high = None if max >= _FLOAT_LIMIT else float(max)
    return ctx.emit("clip", inputs[:1], min=low, max=high)


@converter("Clip", since=11)
def clip_inputs(ctx: ImportContext, inputs: list[Value]) -> Value:
    x, low, high = (list(inputs) + [None, None])[:3]
    bounds: dict[str, float | None] = {"min": None, "max": None}
    for key, bound, op in (("min", low, "maximum"), ("max", high, "minimum")):
        if bound is None:
            continue
        array = ctx.constant(bound)
        if array is not None:
            bounds[key] = array.item()
        else:  # a computed bound: clip with a broadcasting maximum / minimum instead
            x = ctx.emit(op, [x, bound])
    if bounds["min"] is None and bounds["max"] is None:
        return x
    return ctx.emit("clip", [x], **bounds)


@converter("Cast", since=6)
def cast(ctx: ImportContext, inputs: list[Value], *, to: int, saturate: int = 1,
         round_mode: str = "up") -> Value:
    dtype = ctx.dtype_name(to)
    x = inputs[0]
    return x if x.type.dtype == dtype else ctx.emit("cast", [x], dtype=dtype)


# linear algebra -------------------------------------------------------------------------------
@converter("MatMul", since=1)
def matmul(ctx: ImportContext, inputs: list[Value]) -> Value:
    a, b = inputs
    if a.type.ndim == 0 or b.type.ndim == 0:
        raise ShapeError(f"MatMul operands must not be scalars, got {a.type} and {b.type}")
    # numpy promotes 1-D operands to matrices and drops the added dim from the result.
    a2 = reshape(ctx, a, (1,) + a.type.shape) if a.type.ndim == 1 else a
    b2 = reshape(ctx, b, b.type.shape + (1,)) if b.type.ndim == 1 else b
    y = ctx.emit("matmul", [a2, b2])
    shape = y.type.shape
    if b.type.ndim == 1:
        shape = shape[:-1]
    if a.type.ndim == 1:
        shape = shape[:-2] + shape[-1:] if b.type.ndim != 1 else shape[:-1]
    return reshape(ctx, y, shape)


@converter("Gemm", since=7)
def gemm(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1.0, beta: float = 1.0,
         transA: int = 0, transB: int = 0) -> Value:
    a, b = inputs[:2]
    c = inputs[2] if len(inputs) > 2 else None
    if transA:
        a = ctx.emit("transpose", [a], perm=(1, 0))
    if transB:
        b = ctx.emit("transpose", [b], perm=(1, 0))  # folds away for a constant weight
    if alpha != 1.0:
        if ctx.constant(b) is not None:
            b = ctx.emit("mul", [b, scalar(ctx, alpha, b)])
        else:
            a = ctx.emit("mul", [a, scalar(ctx, alpha, a)])
    y = ctx.emit("matmul", [a, b])
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.emit("mul", [c, scalar(ctx, beta, c)])
        y = ctx.emit("add", [y, c])
    return y


# convolution and pooling ----------------------------------------------------------------------
@converter("Conv", since=1)
def conv(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
         dilations: Sequence[int] | None = None, group: int = 1,
         kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
         strides: Sequence[int] | None = None) -> Value:
    x, w = inputs[:2]
    bias = inputs[2] if len(inputs) > 2 else None
    kernel = tuple(kernel_shape or w.type.shape[2:])
    strides, pads, dilations = _spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
    y = ctx.emit("conv", [x, w], strides=strides, pads=pads, dilations=dilations,
                 groups=int(group))
    if bias is not None:
        shape = (1, bias.type.size) + (1,) * (y.type.ndim - 2)
        y = ctx.emit("add", [y, reshape(ctx, bias, shape)])
    return y


@converter("MaxPool", since=1)
def max_pool(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
             ceil_mode: int = 0, dilations: Sequence[int] | None = None,
             kernel_shape: Sequence[int], pads: Sequence[int] | None = None,
             storage_order: int = 0, strides: Sequence[int] | None = None
             ) -> tuple[Value, None]:
    x = inputs[0]
    strides, pads, dilations = _spatial_attrs(x, kernel_shape, strides, dilations, pads,
                                              auto_pad)
    y = ctx.emit("max_pool", [x], kernel_shape=tuple(kernel_shape), strides=strides, pads=pads,
                 dilations=dilations, ceil_mode=bool(ceil_mode))
    return y, None  # the Indices output is not supported


@converter("AveragePool", since=1)
def average_pool(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
                 ceil_mode: int = 0, count_include_pad: int = 0,
                 dilations: Sequence[int] | None = None, kernel_shape: Sequence[int],
                 pads: Sequence[int] | None = None, strides: Sequence[int] | None = None
                 ) -> Value:
    x = inputs[0]
    strides, pads, dilations = _spatial_attrs(x, kernel_shape, strides, dilations, pads,
                                              auto_pad)
    if any(d != 1 for d in dilations):
        raise UnsupportedOpError(f"AveragePool with dilations {dilations} is not supported")
    return ctx.emit("avg_pool", [x], kernel_shape=tuple(kernel_shape), strides=strides,
                    pads=pads, ceil_mode=bool(ceil_mode),
                    count_include_pad=bool(count_include_pad))


def _global_pool(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value]) -> Value:
        x = inputs[0]
        return ctx.emit(op, [x], axes=tuple(range(2, x.type.ndim)), keepdims=True)
    return convert


converter("GlobalAveragePool", since=1)(_global_pool("reduce_mean"))
converter("GlobalMaxPool", since=1)(_global_pool("reduce_max"))


@converter("BatchNormalization", since=6)
def batch_norm(ctx: ImportContext, inputs: list[Value], *, epsilon: float = 1e-5,
               momentum: float = 0.9, spatial: int = 1, is_test: int = 0,
               training_mode: int = 0) -> Value:
    if training_mode:
        raise UnsupportedOpError("BatchNormalization in training mode is not supported")
    if not spatial:
        raise UnsupportedOpError("BatchNormalization with spatial=0 is not supported")
    return ctx.emit("batch_norm", inputs[:5], epsilon=float(epsilon))


# reductions and softmax -----------------------------------------------------------------------
REDUCE = {"ReduceSum": ("reduce_sum", 13), "ReduceMean": ("reduce_mean", 18),
          "ReduceMax": ("reduce_max", 18), "ReduceMin": ("reduce_min", 18)}


def _reduce(ctx: ImportContext, x: Value, op: str, axes: Sequence[int] | None, keepdims: int,
            noop_with_empty_axes: int) -> Value:
    if not axes:
        if noop_with_empty_axes:
            return x
        axes = range(x.type.ndim)
    axes = tuple(sorted({normalize_axis(a, x.type.ndim) for a in axes}))
    return ctx.emit(op, [x], axes=axes, keepdims=bool(keepdims))


def _reduce_with_attribute(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, axes: Sequence[int] | None = None,
                keepdims: int = 1) -> Value:
        return _reduce(ctx, inputs[0], op, axes, keepdims, 0)
    return convert


def _reduce_with_input(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, keepdims: int = 1,
                noop_with_empty_axes: int = 0) -> Value:
        axes = inputs[1] if len(inputs) > 1 else None
        values = None if axes is None else ctx.require_constant(axes, "axes")
        return _reduce(ctx, inputs[0], op, None if values is None else values.tolist(),
                       keepdims, noop_with_empty_axes)
    return convert


for _onnx_op, (_core_op, _input_since) in REDUCE.items():
    converter(_onnx_op, since=1, until=_input_since - 1)(_reduce_with_attribute(_core_op))
    converter(_onnx_op, since=_input_since)(_reduce_with_input(_core_op))


@converter("Softmax", since=1, until=12)
def softmax_2d(ctx: ImportContext, inputs: list[Value], *, axis: int = 1) -> Value:
    x = inputs[0]
    shape = x.type.shape
    axis = normalize_axis(axis, x.type.ndim)
    if axis == x.type.ndim - 1:  # flattening at the last axis is a plain last-axis softmax
        return ctx.emit("softmax", [x], axis=axis)
    # Before opset 13, softmax normalizes over all dims from `axis` on, as one flat row.
    flat = reshape(ctx, x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
    return reshape(ctx, ctx.emit("softmax", [flat], axis=1), shape)


@converter("Softmax", since=13)
def softmax(ctx: ImportContext, inputs: list[Value], *, axis: int = -1) -> Value:
    x = inputs[0]
    return ctx.emit("softmax", [x], axis=normalize_axis(axis, x.type.ndim))


# shapes and data movement ---------------------------------------------------------------------
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

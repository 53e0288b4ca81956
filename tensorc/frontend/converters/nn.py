"""Converters of ONNX linear algebra, convolution, pooling, normalization, softmax."""
from __future__ import annotations

import math
from typing import Callable, Sequence

from tensorc.errors import InvalidModelError, ShapeError, SymbolicDimError, UnsupportedOpError
from tensorc.frontend.converters.common import normalize_axis, reshape, scalar, spatial_attrs
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.dims import Dim
from tensorc.ir.graph import Value


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
    for which, v in (("A", a), ("B", b)):
        if v.type.ndim != 2:
            raise InvalidModelError(f"input {which} {v.type} must have rank 2 (a matrix); "
                                    f"use MatMul for batched or vector products")
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
    if c is not None:
        shape = c.type.shape
        if len(shape) > 2 or any(d not in (1, n) for d, n in zip(shape[::-1],
                                                                   y.type.shape[::-1])):
            raise InvalidModelError(f"C {c.type} does not broadcast to the product's shape "
                                    f"{list(y.type.shape)} (M, N); give C of shape [N], "
                                    f"[M, N], [1, N], [M, 1] or a scalar")
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.emit("mul", [c, scalar(ctx, beta, c)])
        y = ctx.emit("add", [y, c])
    return y


# convolution and pooling ----------------------------------------------------------------------
def _kernel_of(w: Value, kernel_shape: Sequence[int] | None) -> tuple[int, ...]:
    """The kernel's spatial shape: the weight's, which kernel_shape (optional) must match."""
    kernel = tuple(w.type.shape[2:])
    if kernel_shape is not None and tuple(kernel_shape) != kernel:
        raise ShapeError(f"kernel_shape {tuple(kernel_shape)} contradicts the weight {w.type}, "
                         f"whose kernel is {kernel}; drop kernel_shape or make it match")
    return kernel


@converter("Conv", since=1)
def conv(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
         dilations: Sequence[int] | None = None, group: int = 1,
         kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
         strides: Sequence[int] | None = None) -> Value:
    x, w = inputs[:2]
    bias = inputs[2] if len(inputs) > 2 else None
    kernel = _kernel_of(w, kernel_shape)
    strides, pads, dilations = spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
    x, pads = run_time_pads(ctx, x, pads, 0.0)
    y = ctx.emit("conv", [x, w], strides=strides, pads=pads, dilations=dilations,
                 groups=int(group))
    return _conv_bias(ctx, y, bias)


def _conv_bias(ctx: ImportContext, y: Value, bias: Value | None) -> Value:
    if bias is None:
        return y
    shape = (1, bias.type.size) + (1,) * (y.type.ndim - 2)
    return ctx.emit("add", [y, reshape(ctx, bias, shape)])


@converter("MaxPool", since=1)
def max_pool(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
             ceil_mode: int = 0, dilations: Sequence[int] | None = None,
             kernel_shape: Sequence[int], pads: Sequence[int] | None = None,
             storage_order: int = 0, strides: Sequence[int] | None = None
             ) -> tuple[Value, None]:
    x = inputs[0]
    strides, pads, dilations = spatial_attrs(x, kernel_shape, strides, dilations, pads,
                                             auto_pad, pool=True)
    x, pads = run_time_pads(ctx, x, pads, float("-inf"))
    y = ctx.emit("max_pool", [x], kernel_shape=tuple(kernel_shape), strides=strides, pads=pads,
                 dilations=dilations, ceil_mode=bool(ceil_mode))
    return y, None  # the Indices output is not supported


def constant_pads(op: str, auto_pad: str, pads: tuple) -> None:
    """Refuse, by name, a window whose divisor counts its live taps where its SAME padding
    is known only at run time (an average or Lp pool at a stride over a symbolic dim)."""
    dim = next((p for p in pads if isinstance(p, Dim)), None)
    if dim is not None:
        raise SymbolicDimError(f"{op} with auto_pad {auto_pad} pads by {dim}, which depends on "
                               f"a symbolic dim's value; this is not supported yet: give "
                               f"concrete input_shapes", dim)


def run_time_pads(ctx: ImportContext, x: Value, pads: tuple, value: float
                  ) -> tuple[Value, tuple]:
    """(x, pads) where the window's pads are ints; where some are expressions of symbolic
    dims (SAME padding at a stride over a run-time size: the begin is 0 or 1 by its parity),
    x padded by ``value`` in a node of its own and no pads left for the window."""
    if all(isinstance(p, int) for p in pads):
        return x, pads
    spatial = len(pads) // 2
    padded = ctx.emit("pad", [x], pads=(0, 0, *pads[:spatial], 0, 0, *pads[spatial:]),
                      mode="constant", value=value)
    return padded, (0,) * len(pads)


@converter("AveragePool", since=1)
def average_pool(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
                 ceil_mode: int = 0, count_include_pad: int = 0,
                 dilations: Sequence[int] | None = None, kernel_shape: Sequence[int],
                 pads: Sequence[int] | None = None, strides: Sequence[int] | None = None
                 ) -> Value:
    x = inputs[0]
    strides, pads, dilations = spatial_attrs(x, kernel_shape, strides, dilations, pads,
                                             auto_pad, pool=True)
    constant_pads("AveragePool", auto_pad, pads)
    return ctx.emit("avg_pool", [x], kernel_shape=tuple(kernel_shape), strides=strides,
                    pads=pads, dilations=dilations, ceil_mode=bool(ceil_mode),
                    count_include_pad=bool(count_include_pad))


def _global_pool(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value]) -> Value:
        x = inputs[0]
        return ctx.emit(op, [x], axes=tuple(range(2, x.type.ndim)), keepdims=True)
    return convert


converter("GlobalAveragePool", since=1)(_global_pool("reduce_mean"))
converter("GlobalMaxPool", since=1)(_global_pool("reduce_max"))


@converter("LpPool", since=1)
def lp_pool(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
            ceil_mode: int = 0, dilations: Sequence[int] | None = None,
            kernel_shape: Sequence[int], p: float = 2, pads: Sequence[int] | None = None,
            strides: Sequence[int] | None = None) -> Value:
    x = inputs[0]
    strides, pads, dilations = spatial_attrs(x, kernel_shape, strides, dilations, pads,
                                             auto_pad, pool=True)
    x, pads = run_time_pads(ctx, x, pads, 0.0)     # (zeros add nothing to a p-norm)
    return ctx.emit("lp_pool", [x], kernel_shape=tuple(kernel_shape), strides=strides,
                    pads=pads, dilations=dilations, ceil_mode=bool(ceil_mode), p=float(p))


@converter("GlobalLpPool", since=1)
def global_lp_pool(ctx: ImportContext, inputs: list[Value], *, p: float = 2) -> Value:
    x = inputs[0]
    spatial = x.type.ndim - 2
    return ctx.emit("lp_pool", [x], kernel_shape=x.type.shape[2:], strides=(1,) * spatial,
                    pads=(0,) * (2 * spatial), dilations=(1,) * spatial, ceil_mode=False,
                    p=float(p))


@converter("ConvTranspose", since=1)
def conv_transpose(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
                   dilations: Sequence[int] | None = None, group: int = 1,
                   kernel_shape: Sequence[int] | None = None,
                   output_padding: Sequence[int] | None = None,
                   output_shape: Sequence[int] | None = None,
                   pads: Sequence[int] | None = None, strides: Sequence[int] | None = None
                   ) -> Value:
    x, w = inputs[:2]
    bias = inputs[2] if len(inputs) > 2 else None
    spatial = x.type.ndim - 2
    kernel = _kernel_of(w, kernel_shape)
    strides = tuple(strides or (1,) * spatial)
    dilations = tuple(dilations or (1,) * spatial)
    extra = list(output_padding or (0,) * spatial)
    sizes = x.type.shape[2:]
    if output_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # pad (crop) the full output down to the wanted size; SAME wants input * stride
        want = (tuple(output_shape)[-spatial:] if output_shape
                else tuple(s * n for s, n in zip(strides, sizes)))
        begins, ends = [], []
        for d in range(spatial):
            full = strides[d] * (sizes[d] - 1) + extra[d] + (kernel[d] - 1) * dilations[d] + 1
            total = full - want[d]
            if total < 0:  # a larger output: the extra elements come at the end
                extra[d] -= total
                total = 0
            small, large = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else large)
            ends.append(large if auto_pad == "SAME_UPPER" else small)
        pads = tuple(begins + ends)
    elif auto_pad == "VALID" or not pads:
        pads = (0,) * (2 * spatial)
    y = ctx.emit("conv_transpose", [x, w], strides=strides, pads=tuple(pads),
                 dilations=dilations, groups=int(group), output_padding=tuple(extra))
    return _conv_bias(ctx, y, bias)


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


def _softmax_2d(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, axis: int = 1) -> Value:
        x = inputs[0]
        shape = x.type.shape
        axis = normalize_axis(axis, x.type.ndim)
        if axis == x.type.ndim - 1:  # flattening at the last axis changes nothing
            return ctx.emit(op, [x], axis=axis)
        # Before opset 13, the op normalizes over all dims from `axis` on, as one flat row.
        flat = reshape(ctx, x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
        return reshape(ctx, ctx.emit(op, [flat], axis=1), shape)
    return convert


def _softmax(op: str) -> Callable:
    def convert(ctx: ImportContext, inputs: list[Value], *, axis: int = -1) -> Value:
        x = inputs[0]
        return ctx.emit(op, [x], axis=normalize_axis(axis, x.type.ndim))
    return convert


for _onnx_op, _core_op in (("Softmax", "softmax"), ("LogSoftmax", "log_softmax"),
                           ("Hardmax", "hardmax")):
    converter(_onnx_op, since=1, until=12)(_softmax_2d(_core_op))
    converter(_onnx_op, since=13)(_softmax(_core_op))

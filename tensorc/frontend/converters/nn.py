"""Converters of ONNX linear algebra, convolution, pooling, normalization, softmax."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Sequence


from tensorc.errors import InvalidModelError, ShapeError, UnsupportedOpError
from tensorc.frontend.converters import (
    converter, normalize_axis, reshape, scalar, spatial_attrs,
)
from tensorc.frontend.converters.rnn import take
from tensorc.ir.graph import Value

if TYPE_CHECKING:
    from tensorc.frontend.onnx import ImportContext


@converter("MatMul", since=1)
def matmul(ctx: ImportContext, inputs: list[Value]) -> Value:
    a, b = inputs
    if a.type.ndim == 0 or b.type.ndim == 0:
        raise ShapeError(f"MatMul operands must not be scalars, got {a.type} and {b.type}")
    # numpy promotes 1-D operands to matrices and drops the added dim from the result.
    a2 = reshape(ctx, a, (1,) + a.type.shape) if a.type.ndim == 1 else a
    b2 = reshape(ctx, b, b.type.shape + (1,)) if b.type.ndim == 1 else b
    if _rows_merge(a2, b2):
        # a matrix B shared by a batch of products of few rows each ([T, 1, C] @ W: a
        # sequence-first export): one GEMM over all the rows, not one GEMV per batch entry
        # (each streaming all of B)
        k, n = b2.type.shape
        y = ctx.emit("matmul", [reshape(ctx, a2, (math.prod(a2.type.shape[:-1]), k)), b2])
        shape = a2.type.shape[:-1] + (n,)
    else:
        y = ctx.emit("matmul", [a2, b2])
        shape = y.type.shape
    if b.type.ndim == 1:
        shape = shape[:-1]
    if a.type.ndim == 1:
        shape = shape[:-2] + shape[-1:] if b.type.ndim != 1 else shape[:-1]
    return reshape(ctx, y, shape)


# a batched product whose matrices have at most this many rows each is one GEMM instead (where
# B is a matrix): fewer rows than a register tile leave each product bound by streaming B
MERGE_ROWS_MAX = 8


def _rows_merge(a: Value, b: Value) -> bool:
    shape = a.type.shape
    return b.type.ndim == 2 and a.type.ndim >= 3 and \
        all(isinstance(d, int) for d in shape) and math.prod(shape[:-2]) > 1 and \
        shape[-2] <= MERGE_ROWS_MAX


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
    if _split_groups(ctx, x, w, int(group)):
        return _grouped_conv_as_convs(ctx, x, w, bias, int(group), strides=strides,
                                      pads=pads, dilations=dilations)
    if x.type.ndim == 5 and int(group) == 1 and ctx.constant(w) is not None and \
            any(k > 1 for k in kernel):      # (a pointwise one runs as a GEMM as it is)
        return _conv_bias(ctx, _conv3d_as_conv2d(ctx, x, w, strides, pads, dilations), bias)
    y = ctx.emit("conv", [x, w], strides=strides, pads=pads, dilations=dilations,
                 groups=int(group))
    return _conv_bias(ctx, y, bias)


def _conv_bias(ctx: ImportContext, y: Value, bias: Value | None) -> Value:
    if bias is None:
        return y
    shape = (1, bias.type.size) + (1,) * (y.type.ndim - 2)
    return ctx.emit("add", [y, reshape(ctx, bias, shape)])


def _conv3d_as_conv2d(ctx: ImportContext, x: Value, w: Value, strides, pads, dilations
                      ) -> Value:
    """A 3-D conv as a 2-D one over the output depths: for each output depth, the input
    slices its depth taps read, stacked as channels [N * Do, kd * C, H, W], convolved with
    the weights [F, kd * C, kh, kw] (a batch of Do 2-D convs under the 2-D schedules), then
    the depths moved back beside the spatial dims. The 3-D conv ran under the generic
    schedule: 64 -> 64 3x3x3 onto 8x28x28, ms at one thread 42.6 -> 8.1 (onnxruntime 13.9)."""
    n, channels, depth = x.type.shape[:3]
    filters, taps = w.type.shape[0], w.type.shape[2]
    sd, dd = strides[0], dilations[0]
    if pads[0] or pads[3]:
        x = ctx.emit("pad", [x], pads=(0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0),
                     mode="constant", value=0.0)
        depth += pads[0] + pads[3]
    out_depth = (depth - dd * (taps - 1) - 1) // sd + 1
    shape = (n, channels, out_depth) + tuple(x.type.shape[3:])
    read = [ctx.emit("slice", [x], starts=(0, 0, k * dd, 0, 0), steps=(1, 1, sd, 1, 1),
                     shape=shape) for k in range(taps)]      # what each depth tap reads
    stacked = ctx.emit("concat", read, axis=1) if taps > 1 else read[0]
    planes = ctx.emit("transpose", [stacked], perm=(0, 2, 1, 3, 4))
    planes = reshape(ctx, planes, (n * out_depth, taps * channels) + tuple(x.type.shape[3:]))
    w2 = ctx.emit("transpose", [w], perm=(0, 2, 1, 3, 4))
    w2 = reshape(ctx, w2, (filters, taps * channels) + tuple(w.type.shape[3:]))
    y = ctx.emit("conv", [planes, w2], strides=tuple(strides[1:]),
                 pads=(pads[1], pads[2], pads[4], pads[5]), dilations=tuple(dilations[1:]),
                 groups=1)
    y = reshape(ctx, y, (n, out_depth) + tuple(y.type.shape[1:]))
    return ctx.emit("transpose", [y], perm=(0, 2, 1, 3, 4))


# a grouped conv whose groups have at least this many input channels runs as one dense conv
# per group (each under the dense conv schedules), concatenated
SPLIT_GROUP_MIN_CHANNELS = 32


def _split_groups(ctx: ImportContext, x: Value, w: Value, groups: int) -> bool:
    """A grouped conv of wide groups (AlexNet's 2, ShuffleNet's 3 or 8, RegNet's 48-wide):
    the grouped schedule computes each filter's group in its inner loop and runs 3x slower
    than onnxruntime there (narrow groups, as ResNeXt's 4 channels, it runs 3x faster)."""
    channels = x.type.shape[1] if x.type.ndim >= 3 else 0
    return 1 < groups < channels and channels % groups == 0 and \
        channels // groups >= SPLIT_GROUP_MIN_CHANNELS and ctx.constant(w) is not None


def _grouped_conv_as_convs(ctx: ImportContext, x: Value, w: Value, bias: Value | None,
                           groups: int, **attrs) -> Value:
    """One dense conv per group (its slice of the input, filters and bias), concatenated
    along the channels. ms at one thread, grouped -> split (onnxruntime): 256 -> 256 3x3 in
    2 groups onto 27x27 9.78 -> 1.88 (2.75); 240 -> 240 1x1 in 3 groups onto 28x28 0.61 ->
    0.41 (0.32); 384 -> 384 1x1 in 8 groups 0.62 -> 0.55 (0.39); 432 -> 432 3x3 in 9 groups
    onto 14x14 1.48 -> 1.18 (0.50), 0.46 of it the concat and ReLU."""
    per_group, filters = x.type.shape[1] // groups, w.type.shape[0] // groups
    outs = []
    for g in range(groups):
        xg = take(ctx, x, 1, g * per_group, per_group)
        wg = take(ctx, w, 0, g * filters, filters)
        bg = None if bias is None else take(ctx, bias, 0, g * filters, filters)
        outs.append(_conv_bias(ctx, ctx.emit("conv", [xg, wg], groups=1, **attrs), bg))
    return ctx.emit("concat", outs, axis=1)


@converter("MaxPool", since=1)
def max_pool(ctx: ImportContext, inputs: list[Value], *, auto_pad: str = "NOTSET",
             ceil_mode: int = 0, dilations: Sequence[int] | None = None,
             kernel_shape: Sequence[int], pads: Sequence[int] | None = None,
             storage_order: int = 0, strides: Sequence[int] | None = None
             ) -> tuple[Value, None]:
    x = inputs[0]
    strides, pads, dilations = spatial_attrs(x, kernel_shape, strides, dilations, pads,
                                             auto_pad, pool=True)
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
    strides, pads, dilations = spatial_attrs(x, kernel_shape, strides, dilations, pads,
                                             auto_pad, pool=True)
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
    return ctx.emit("lp_pool", [x], kernel_shape=tuple(kernel_shape), strides=strides,
                    pads=pads, dilations=dilations, ceil_mode=bool(ceil_mode), p=float(p))


@converter("GlobalLpPool", since=1)
def global_lp_pool(ctx: ImportContext, inputs: list[Value], *, p: float = 2) -> Value:
    x = inputs[0]
    spatial = x.type.ndim - 2
    return ctx.emit("lp_pool", [x], kernel_shape=x.type.shape[2:], strides=(1,) * spatial,
                    pads=(0,) * (2 * spatial), dilations=(1,) * spatial, ceil_mode=False,
                    p=float(p))


def _conv_transpose_as_gemm(ctx: ImportContext, x: Value, w: Value, kernel, strides, pads,
                            dilations, extra, groups: int) -> Value | None:
    """A transposed conv as a GEMM and a col2im: every input pixel's contribution to each
    kernel offset, W[C, F * K]^T @ x[C, L] (the GEMM template, W packed at compile time),
    then each output pixel the sum of the contributions that land on it. The direct form
    (a conv over the input spread out by the strides) multiplies s^2 zeros per product and
    runs under the generic reduction schedule: 256 -> 128 2x2 s2 onto 56x56 took 29.9 ms
    against onnxruntime's 1.58. None where col2im cannot place the output (groups, or an
    output_padding of a stride or more)."""
    spatial = x.type.ndim - 2
    if groups != 1 or ctx.constant(w) is None or \
            any(e >= s for e, s in zip(extra, strides)):
        return None
    n, channels, sizes = x.type.shape[0], x.type.shape[1], x.type.shape[2:]
    filters, taps = w.type.shape[1], math.prod(kernel)
    out = tuple(s * (size - 1) + e + (k - 1) * d + 1 - pads[j] - pads[j + spatial]
                for j, (s, size, e, k, d) in enumerate(zip(strides, sizes, extra, kernel,
                                                             dilations)))
    weights = ctx.emit("transpose", [reshape(ctx, w, (channels, filters * taps))], perm=(1, 0))
    cols = ctx.emit("matmul", [weights, reshape(ctx, x, (n, channels, math.prod(sizes)))])
    return ctx.emit("col2im", [cols], image_shape=out, block_shape=tuple(kernel),
                    strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations))


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
    y = _conv_transpose_as_gemm(ctx, x, w, kernel, strides, tuple(pads), dilations, extra,
                                int(group))
    if y is None:
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

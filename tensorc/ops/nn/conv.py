"""conv: N-D grouped convolution (1 to 3 spatial dims), NCHW layout, no bias.

attrs: strides, pads (ONNX order: all begins, then all ends), dilations, groups, and
kernel_block (0: weights are OIHW; b > 0: packed [F/b, C/g, *K, b] by passes/graph/alter_layout)
or winograd (m > 0: 3x3 weights transformed for F(m x m, 3 x 3), [(m+2)^2, F/b, C, b]; see
``winograd.py``). Inputs x[N, C, *S] and w[F, C/groups, *K]; the frontend adds the bias with an
``add``.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.nn import blocked, winograd
from tensorc.ops.nn.flat_window import (
    flat_layout,
    flat_phases,
    flat_space,
    flat_window,
    flat_window_wins,
    schedule_flat_window,
    unflatten,
)
from tensorc.ops.nn.windows import pad_spatial, window_slices
from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.schedule import schedule_gemm
from tensorc.ops.matmul.space import ROW_CHOICES, gemm_space
from tensorc.ops.matmul.tile import micro_tile
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import (
    RegisterTileFits,
    clamp,
    materialize_pad,
    in_range,
    reduction_depth,
    register_tile,
    schedule_injective,
    schedule_reduction,
    shared_broadcasts,
    vector_block,
    worth_threads,
)
from tensorc.ops.space import Knob, SearchSpace
from tensorc.ops.shape_rules import (
    check_window_attrs,
    expect_arity,
    expect_same_dtype,
    window_output_size,
)
from tensorc.target import Target

conv = define("conv", Pattern.OUT_ELEMWISE_FUSABLE)


def output_spatial(attrs: dict, x: TensorType, w: TensorType) -> tuple[int, ...]:
    spatial = x.ndim - 2
    pads = attrs["pads"]
    return tuple(window_output_size(x.shape[2 + i], w.shape[2 + i], attrs["strides"][i],
                                    attrs["dilations"][i], pads[i], pads[i + spatial])
                 for i in range(spatial))


@conv.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("conv", input_types, 2)
    x, w = input_types
    if attrs.get("layout_block"):     # blocked activations: the plain conv's rule, blocked
        b = attrs["layout_block"]
        x = x if attrs.get("plain_input") else blocked.plain_type(x, b)
        plain = _infer({**attrs, "layout_block": 0}, [x, w])[0]
        return [blocked.blocked_type(plain, b)]
    if attrs.get("kernel_block"):
        w = TensorType(unpacked_weight_shape(attrs, w.shape), w.dtype)
    dtype = expect_same_dtype("conv", input_types)
    if not 3 <= x.ndim <= 5 or w.ndim != x.ndim:
        raise ShapeError(f"conv: expects x[N,C,*S] and w[F,C/groups,*K] of equal rank with 1 "
                         f"to 3 spatial dims, got x {x} and w {w}")
    check_window_attrs("conv", x, w.shape[2:], attrs["strides"], attrs["pads"],
                       attrs["dilations"])
    groups, channels, filters = attrs["groups"], x.shape[1], w.shape[0]
    if groups < 1 or channels % groups or filters % groups:
        raise ShapeError(f"conv: groups={groups} must divide the {channels} input channels of "
                         f"x {x} and the {filters} filters of w {w}")
    if w.shape[1] != channels // groups:
        raise ShapeError(f"conv: w {w} must have {channels // groups} input channels per "
                         f"filter (x has {channels} channels, groups={groups})")
    out = output_spatial(attrs, x, w)
    if min(out) < 1:
        raise ShapeError(f"conv: the kernel of w {w} (dilations {attrs['dilations']}) does not "
                         f"fit in x {x} padded by {attrs['pads']}")
    return [TensorType((x.shape[0], filters) + out, dtype)]


@conv.reference
def _reference(attrs: dict, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    if attrs.get("layout_block"):
        b = attrs["layout_block"]
        x = x if attrs.get("plain_input") else blocked.unblock(x, b)
        plain = _reference({**attrs, "layout_block": 0}, x, w)[0]
        return [blocked.block(plain, b)]
    if attrs.get("kernel_block"):
        w = unpack_weight(attrs, w)
    groups = attrs["groups"]
    n, channels = x.shape[:2]
    filters, kernel = w.shape[0], w.shape[2:]
    out = output_spatial(attrs, TensorType(x.shape, "float32"), TensorType(w.shape, "float32"))
    padded = pad_spatial(x, attrs["pads"], 0)
    # Split channels into groups: x -> [N, G, C/G, *S], w -> [G, F/G, C/G, *K].
    wg = w.reshape((groups, filters // groups, channels // groups) + kernel)
    acc = np.zeros((n, groups, filters // groups) + out, dtype=np.result_type(x, w))
    for offset, view in window_slices(padded, kernel, attrs["strides"], attrs["dilations"],
                                      out):
        xg = view.reshape((n, groups, channels // groups) + out)
        wk = wg[(Ellipsis,) + offset]  # [G, F/G, C/G]
        acc += np.einsum("ngc...,gfc->ngf...", xg, wk)
    return [acc.reshape((n, filters) + out)]


# ---------------------------------------------------------------------------------------------
# kernel: compute and schedule

def unpacked_weight_shape(attrs: dict, w_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The OIHW weight shape; packed weights are [ceil(F/b), C/g, *K, b] (kernel_block b;
    ``filters`` F where zero filters pad the last block)."""
    if attrs.get("winograd"):
        return winograd.transformed_weight_shape(attrs, w_shape)
    block = attrs.get("kernel_block", 0)
    if not block:
        return tuple(w_shape)
    return (attrs.get("filters", w_shape[0] * block), *w_shape[1:-1])


def pack_weight(w: np.ndarray, block: int) -> np.ndarray:
    """OIHW weights in blocks of ``block`` filters, [ceil(F/b), C/g, *K, b], the last block
    padded with zero filters.

    >>> pack_weight(np.arange(3.).reshape(3, 1, 1, 1), 2)[:, 0, 0, 0].tolist()
    [[0.0, 1.0], [2.0, 0.0]]
    """
    f = w.shape[0]
    padded = np.zeros((-(-f // block) * block,) + w.shape[1:], w.dtype)
    padded[:f] = w
    blocks = padded.reshape((-1, block) + w.shape[1:])
    return np.ascontiguousarray(np.moveaxis(blocks, 1, -1))


def _sample_input(attrs: dict, k: int, types: list[TensorType], rng) -> np.ndarray | None:
    """A random valid value of input ``k`` where not every array is one (the autotuner's task
    inputs): Winograd-transformed weights are the transform of random 3x3 weights. Random
    numbers in their place are no transform of any weights, and the kernel and the reference
    (which reads them back through the transform's left inverse) would disagree on them."""
    if k != 1 or not attrs.get("winograd"):
        return None
    x = types[0]
    channels = x.shape[1] * (x.shape[-1] if attrs.get("layout_block") else 1)
    w = rng.standard_normal((attrs["filters"], channels, winograd.KERNEL, winograd.KERNEL))
    return winograd.transform_weight(w, attrs["winograd"], attrs["kernel_block"]).astype(
        types[1].dtype)


conv.extra["sample_input"] = _sample_input


def unpack_weight(attrs: dict, w: np.ndarray) -> np.ndarray:
    """The OIHW weights of packed ones (see :func:`pack_weight`) or Winograd-transformed ones
    (see ``winograd.transform_weight``)."""
    if attrs.get("winograd"):
        return winograd.untransform_weight(w, attrs["winograd"], attrs["filters"])
    flat = np.moveaxis(w, -1, 1).reshape((w.shape[0] * w.shape[-1],) + w.shape[1:-1])
    return flat[:unpacked_weight_shape(attrs, w.shape)[0]]


def padded_input(x: te.Tensor, pads: tuple[int, ...], overhang: tuple[int, ...] = (),
                 value: float = 0.0, name: str = "pad", blocked: bool = False) -> te.Tensor:
    """x with its spatial dims padded by ``value`` (loads clamped, so never out of bounds);
    ``blocked``: x is [N, C/b, *S, b] (ops/nn/blocked.py), its lanes axis not padded."""
    spatial = x.ndim - 2 - blocked
    extra = tuple(overhang) or (0,) * spatial
    if not any(pads) and not any(extra):
        return x
    shape = x.shape[:2] + tuple(x.shape[2 + d] + pads[d] + pads[d + spatial] + extra[d]
                                for d in range(spatial)) + x.shape[2 + spatial:]

    def body(n, c, *pos):
        return _load_or(x, n, c, [p - pads[d] for d, p in enumerate(pos[:spatial])], value,
                        pos[spatial:])
    return te.compute(shape, body, name=name, tag="pad")


def _load_or(x: te.Tensor, n, c, src: list, value: float, lanes: tuple = ()) -> E.Expr:
    """x[n, c, *src, *lanes] where src is inside x's spatial extent, else ``value`` (the
    load clamped, so never out of bounds)."""
    conds = [in_range(s, x.shape[2 + d]) for d, s in enumerate(src)]
    load = x[(n, c, *[clamp(s, x.shape[2 + d]) for d, s in enumerate(src)], *lanes)]
    return E.select(E.all_of(*conds), load, E.Const(value, x.dtype))


def phase_split(x: te.Tensor, pads: tuple[int, ...], strides: tuple[int, int],
                phases: tuple[int, int]) -> te.Tensor:
    """x [N, C, H, W] padded by ``pads`` (the padded sizes multiples of ``strides``) and split
    into its first ``phases`` phases: out[n, c, a, b, i, j] = padded[n, c, i*sh + a, j*sw + b],
    so that a stride-s window's taps read each phase plane with stride 1."""
    sh, sw = strides
    height = (x.shape[2] + pads[0] + pads[2]) // sh
    width = (x.shape[3] + pads[1] + pads[3]) // sw

    def body(n, c, a, b, i, j):
        return _load_or(x, n, c, [i * sh + a - pads[0], j * sw + b - pads[1]], 0.0)
    return te.compute(x.shape[:2] + tuple(phases) + (height, width), body, name="pad",
                      tag="pad")


@conv.compute
def _conv_compute(attrs: dict, x: te.Tensor, w: te.Tensor) -> te.Tensor:
    if attrs.get("layout_block"):
        plain = TensorType(x.shape, x.dtype) if attrs.get("plain_input") else \
            blocked.plain_type(TensorType(x.shape, x.dtype), attrs["layout_block"])
        out = output_spatial(attrs, plain,
                             TensorType(unpacked_weight_shape(attrs, w.shape), w.dtype))
        if attrs.get("winograd"):
            return winograd.winograd_blocked(attrs, x, w, out)
        padded = padded_input(x, attrs["pads"], blocked=not attrs.get("plain_input"))
        return blocked.conv_blocked(attrs, x, w, out, padded)
    spatial = x.ndim - 2
    wshape = unpacked_weight_shape(attrs, w.shape)
    filters, per_group = wshape[0], wshape[1]
    kernel = wshape[2:]
    strides, dilations, groups = attrs["strides"], attrs["dilations"], attrs["groups"]
    block = attrs.get("kernel_block", 0)
    out = output_spatial(attrs, TensorType(x.shape, x.dtype), TensorType(wshape, w.dtype))
    if attrs.get("winograd"):
        return winograd.winograd_conv(attrs, x, w, out)
    if attrs.get("filter_lanes"):
        return _conv_filter_lanes(attrs, x, w, kernel, out)
    if attrs.get("flat_window"):
        return _conv_flat_window(attrs, x, w, kernel, out)
    if _flattens(attrs, spatial, groups, block, kernel, out):
        return _conv_flat(attrs, x, w, kernel, out)
    if block and conv_as_matmul(attrs, kernel):
        return _conv_matmul(attrs, x, w, out)
    if not block and conv_as_gemm(attrs, x.shape, w.shape):
        return _conv_gemm(attrs, x, w, kernel, out)
    padded = padded_input(x, attrs["pads"])
    rc = te.reduce_axis(per_group, "rc")
    rk = [te.reduce_axis(k, "r" + "zyx"[3 - spatial + d]) for d, k in enumerate(kernel)]
    filters_per_group = filters // groups

    acc = te.accumulator_dtype(x.dtype)

    def body(n, f, *o):
        c = (f // filters_per_group) * per_group + rc.var if groups > 1 else rc.var
        pos = [o[d] * strides[d] + rk[d].var * dilations[d] for d in range(spatial)]
        kidx = [r.var for r in rk]
        wv = w[(f // block, rc, *kidx, f % block)] if block else w[(f, rc, *kidx)]
        return te.sum_(E.cast(acc, padded[(n, c, *pos)]) * E.cast(acc, wv), axis=[rc, *rk])
    names = ["n", "f"] + ["zyx"[3 - spatial + d] for d in range(spatial)]
    shape = (x.shape[0], filters, *out)
    if acc == x.dtype:
        return te.compute(shape, body, name="conv", axis_names=names)
    # half precision: accumulate in float32, round once
    total = te.compute(shape, body, name="conv_acc", tag="anchor:conv_acc", axis_names=names)
    return te.compute(shape, lambda *o: E.cast(x.dtype, total[o]), name="conv")


def flat_conv_wins(attrs: dict, x_shape, w_shape, lanes: int) -> bool:
    """Whether a depthwise conv (OIHW weight shape) takes the flat layout on a target with
    ``lanes`` vector lanes (ops/nn/flat_window.py)."""
    out = output_spatial(attrs, TensorType(tuple(x_shape), "float32"),
                         TensorType(tuple(w_shape), "float32"))
    return flat_window_wins(tuple(x_shape), w_shape[2:], out, attrs, lanes)


def _conv_flat_window(attrs: dict, x: te.Tensor, w: te.Tensor, kernel, out) -> te.Tensor:
    """A depthwise conv over its channels' flat phases (see ops/nn/flat_window.py)."""
    layout = flat_layout(attrs, x.shape, kernel, out, lanes=attrs["flat_window"])
    window = flat_window(flat_phases(x, layout, 0.0), layout,
                         lambda c, ky, kx: w[c, 0, ky, kx], te.accumulator_dtype(x.dtype))
    return unflatten(window, layout, lambda v: E.cast(x.dtype, v), name="conv")


# Filters in vector lanes: small maps (13x13, 14x14, 7x7) leave a vector along the output row
# a third empty, and the flattened form's padding columns and separate epilogue pass cost as
# much; strided convs gather (or split into phases) their inputs. Here a register tile is R
# outputs of one row x V vectors of filters: per (channel, tap) V vectors of packed weights
# and R broadcast inputs (any stride: a broadcast has its own address), R*V multiply-adds.
# The tile accumulates in [x, f] order (NHWC), so each of its vectors is a register; the
# epilogue stores it to NCHW lane by lane (R*V*lanes stores per R*V*K multiply-adds: little
# where K = C*KH*KW is large). Measured on Zen 4, one thread, beside the form each replaced
# (tensorc / onnxruntime): 64->256 3x3 on 13x13 1.46 -> 1.06, 512->512 on 7x7 1.22 -> 0.93,
# 256->256 on 14x14 1.08 -> 0.98, 96->96 5x5 on 14x14 1.22 -> 0.90; stride 2: 256->512 on
# 14x14 1.37 -> 0.99, 128->256 on 28x28 1.25 -> 0.97, 16->32 on 208x208 1.39 -> 1.06.
# Stride-1 convs with wider rows keep the flattened form (as fast, or up to 13% faster with
# few filters: 32->32 on 147x147).
FILTER_LANES_MAX_WIDTH = 28     # stride-1 output rows up to this wide
FILTER_LANES_MIN_DEPTH = 64     # C * KH * KW: enough multiply-adds per scattered store


def filter_lanes_wins(attrs: dict, x_shape, w_shape, target: Target) -> bool:
    """Whether a conv (OIHW weight shape) takes the filters-in-lanes form on ``target``."""
    if target is None or target.vector_bits < 512 or len(x_shape) != 4 or \
            attrs["groups"] != 1:
        return False
    out = output_spatial(attrs, TensorType(tuple(x_shape), "float32"),
                         TensorType(tuple(w_shape), "float32"))
    if conv_as_matmul(attrs, w_shape[2:]):
        # 1x1 convs run on the matmul micro-kernel, but for maps whose rows are too short
        # for its columns (7x7 outputs: 49 of 64 columns), with whole pairs of filter
        # vectors. Measured (tensorc / onnxruntime, matmul -> lanes): 960->160 on 7x7 1.61
        # -> 0.98, 160->960 1.50 -> 1.00, 256->512 s2 on 14x14 1.31 -> 1.00, 384->64 on
        # 14x14 1.09 -> 0.87; 28x28 maps equal, 56x56 12% slower, 1000 filters 2.3x slower
        return out[1] <= FILTER_LANES_MAX_WIDTH // 2 and \
            w_shape[0] % (2 * target.vector_lanes("float32")) == 0
    return (out[1] <= FILTER_LANES_MAX_WIDTH or max(attrs["strides"]) > 1) and \
        int(np.prod(w_shape[1:])) >= FILTER_LANES_MIN_DEPTH and \
        w_shape[0] >= target.vector_lanes("float32")


def _conv_filter_lanes(attrs: dict, x: te.Tensor, w: te.Tensor, kernel, out) -> te.Tensor:
    """acc[n, y, x, f] = sum over (c, ky, kx) of padded[n, c, y*sh + ky*dh, x*sw + kx*dw] *
    W[f // b, c, ky, kx, f % b], then the output is acc in NCHW order."""
    n_batch, channels = x.shape[:2]
    block = attrs["kernel_block"]
    filters = unpacked_weight_shape(attrs, w.shape)[0]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilations"]
    padded = padded_input(x, attrs["pads"])
    rc = te.reduce_axis(channels, "rc")
    ry, rx = te.reduce_axis(kernel[0], "ry"), te.reduce_axis(kernel[1], "rx")
    acc = te.accumulator_dtype(x.dtype)

    def body(n, y, xx, f):
        return te.sum_(E.cast(acc, padded[n, rc, y * sh + ry.var * dh, xx * sw + rx.var * dw])
                       * E.cast(acc, w[f // block, rc, ry, rx, f % block]), axis=[rc, ry, rx])
    tile = te.compute((n_batch, *out, filters), body, name="conv_lanes",
                      tag="anchor:conv_lanes", axis_names=["n", "y", "x", "f"])
    return te.compute((n_batch, filters, *out),
                      lambda n, f, y, xx: E.cast(x.dtype, tile[n, y, xx, f]), name="conv")


# Square tiles (a vector of outputs x one vector of filters, stored transposed) where the
# stores would cost most: short reductions, and output planes a multiple of 2 KB apart (16
# lane stores a plane apart then fall in one or two L1 sets). Measured on Zen 4 against
# tiles of 14 x 2 vectors stored lane by lane (tensorc / onnxruntime): 16->32 s2 onto 64x64
# 1.71 -> 0.89, 32->48 s2 onto 32x32 1.26 -> 0.90, 16->32 s2 onto 104x104 1.14 -> 1.00;
# with K >= 432 on other planes the 14 x 2 tiles are 8-20% faster (more reuse of each
# broadcast input). (Storing the 14 x 2 tiles transposed too, as all tiles now are, leaves
# them 6% slower than the square tile on 16->32 s2 onto 64x64 on Zen 5.)
SQUARE_TILE_MAX_DEPTH = 256
# A tile's outputs share each vector of weights it loads: a tile of R outputs x V vectors
# reads V / R weight vectors per multiply-add. Pointwise convs onto 7x7 maps (weights of 4
# to 16 MB, read once per row of tiles) take two lines of the map per tile, 14 outputs as on
# a 14-wide row, which halves the rate at which the first row of tiles pulls each filter
# block's weights from L3. One thread (Zen 5), ms, 7 x 2 -> 2 lines of 7 x 2 (onnxruntime):
# 1024->2048 s2 onto 7x7 0.878 -> 0.814 (0.927), 1024->2048 0.835 -> 0.807 (0.846),
# 2048->512 0.417 -> 0.400 (0.425), 512->2048 0.427 -> 0.413 (0.423), 2048->2048 2.11 ->
# 1.98 (1.93); 4 lines of 7 x 1 measured 0-6% slower than 2 lines of 7 x 2.
FILTER_LANES_TILE_OUTPUTS = 14
TILE_LINE_CHOICES = (1, 2, 3, 4)


def _filter_lanes_space(target: Target, out: te.Tensor, depth: int, taps: int = 1,
                        strided: bool = False) -> SearchSpace:
    """row_tile: outputs of a row per register tile (R; a vector's worth: the square tile,
    stored transposed); filter_vectors: vectors of filters (V, R*V accumulators);
    taps_inner: the kernel taps innermost (each input broadcast serves KW taps: fewer loads,
    more registers) or the channels. ``depth``: the reduction, C * KH * KW; ``taps``: KH *
    KW; ``strided``: the conv has strides."""
    lanes = target.vector_lanes(out.dtype)
    registers = 32 if target.vector_bits >= 512 else 16
    width, vectors = out.shape[3], -(-out.shape[1] // lanes)
    plane_bytes = out.shape[2] * width * (4 if out.dtype == "float32" else 8)
    square = width >= lanes and (depth <= SQUARE_TILE_MAX_DEPTH or plane_bytes % 2048 == 0)
    # else even pieces of a row, at most 14 outputs; of at most 7 for a strided conv's taps,
    # which then run inside the channels: each step reads one input plane's few rows, which
    # stay in L1 for all the taps (the channels inside the taps walk every plane once per
    # tap). One thread (Xeon), ms, 14 -> 7 outputs (onnxruntime): 128->128 3x3 s2 onto
    # 28x28 2.13 -> 1.70 (1.64), 256->256 onto 14x14 2.03 -> 1.60 (1.63), 288->384 onto
    # 17x17 (pieces of 6) 5.78 -> 4.46 (4.46), 64->64 onto 28x28 0.454 -> 0.435 (0.444)
    most = 7 if strided and taps > 1 else 14
    default_rows = lanes if square else -(-width // -(-width // most))
    rows = sorted({r for r in range(1, min(width, lanes) + 1)
                   if width % r == 0 or r >= 7} | {min(width, 14), default_rows})
    choices = [v for v in (1, 2, 3, 4) if v <= vectors]

    fits = RegisterTileFits(registers)
    # (with the taps inside, a row of broadcasts beside the accumulators, as in the blocked
    # conv's tile: 288->384 3x3 s2 onto 17x17, 6 outputs x 4 vectors -> x 3: 5.13 -> 3.90
    # ms, onnxruntime 3.95)
    default_taps_inner = default_rows <= 7
    held = shared_broadcasts(default_rows, default_taps_inner, taps)
    default_vectors = 1 if square else max(v for v in choices if vectors % v == 0 and
                                           fits.holds(default_rows, v, broadcasts=held))
    # pointwise convs onto short rows: lines of the map per tile, up to a 14-wide row's outputs
    height = out.shape[2]
    default_lines = max(k for k in TILE_LINE_CHOICES if k == 1 or (
        taps == 1 and k <= height and k * default_rows <= FILTER_LANES_TILE_OUTPUTS and
        fits.holds(default_rows, default_vectors, lines=k, broadcasts=held)))
    return SearchSpace([
        Knob("row_tile", tuple(rows), default_rows, "outputs of a row per register tile"),
        Knob("filter_vectors", tuple(choices), default_vectors, "vectors of filters per "
             "register tile"),
        Knob("taps_inner", (False, True), default_taps_inner, "kernel taps innermost (else "
             "channels)"),
        Knob("tile_lines", tuple(k for k in TILE_LINE_CHOICES if k <= height), default_lines,
             "lines of the map per register tile"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
    ], [fits], name="conv (filter lanes)")


def _schedule_filter_lanes(target: Target, sch: Schedule, out: te.Tensor, tile: te.Tensor,
                           config) -> None:
    """for (n.f.o.y: parallel) for (x.o)
         acc[L, R, V*lanes] = 0; for (c, ky, kx) [or (ky, kx, c)]: for (line, r: unrolled)
           for (v: unrolled) for (l: vectorized): acc[line, r, v, l] += in[..] * W[..]
         for (line, v, r: unrolled) for (l: vectorized): out[n, f, y, x] = epilogue(acc)

    (L: ``tile_lines``, lines of the map per tile, y then counts tiles of L lines.)"""
    materialize_pad(target, sch, tile)
    lanes = target.vector_lanes(out.dtype)
    st = sch[out]
    n, f, y, x = st.op_axis
    width = out.shape[3]
    rows = min(config["row_tile"], width)
    fo, fi = st.split(f, lanes * config["filter_vectors"])
    fv, fl = st.split(fi, lanes)
    xo, xi = st.split(x, rows, shift_tail=width % rows != 0)
    lines = min(config["tile_lines"], out.shape[2])
    # (the last tile's lines past the map's end are guarded: the guard is the same for the
    # whole tile, which its stores test once, codegen's _guarded_transposed_tile)
    tile_lines = ()
    if lines > 1:
        y, yi = st.split(y, lines)
        tile_lines = (yi,)
    if rows > 1:
        # per filter vector, the tile's R vectors are transposed in registers and stored as
        # a vector's worth of rows of R outputs (codegen's _transposed_tile; masked where R
        # is short of a vector), instead of lane by lane: 16 stores a plane apart fall in one
        # L1 set where planes are 4 KB multiples, and a short reduction pays for each store.
        # One thread (Zen 5), ms, lane stores -> rows (onnxruntime): 256->1024 onto 14x14
        # 0.449 -> 0.414 (0.434), 512->1024 s2 onto 14x14 0.910 -> 0.876 (0.903), 384->64
        # onto 14x14 0.0425 -> 0.0400 (0.0486), 160->960 onto 7x7 0.0715 -> 0.0666 (0.0707),
        # 3x3 64->256 onto 13x13 0.205 -> 0.196 (0.203); 3x3 convs with deep reductions
        # within 1% either way
        st.reorder(n, fo, y, xo, *tile_lines, fv, xi, fl)
    else:
        st.reorder(n, fo, y, xo, *tile_lines, xi, fv, fl)
    block = st.fuse(n, fo, y)
    for loop in (*tile_lines, xi, fv):
        st.unroll(loop)
    st.vectorize(fl)
    if config["parallel"] and worth_threads(math.prod(out.shape), reduction_depth(tile)):
        st.parallel(block)
    ls = register_tile(sch, tile, st, xo)
    ln, ly, lx, lf = ls.op_axis
    lfv, lfl = ls.split(lf, lanes)
    rc, ry, rx = ls.reduce_axis
    # channels innermost: each step's broadcasts and weights are new (no reuse across taps
    # that would hold more registers than there are); taps innermost where a short tile
    # leaves registers for the KW-wider row of broadcasts
    taps = (rc, ry, rx) if config["taps_inner"] else (ry, rx, rc)
    ls.reorder(ln, *taps, ly, lx, lfv, lfl)
    ls.unroll(ly)
    ls.unroll(lx)
    ls.unroll(lfv)
    ls.vectorize(lfl)


# The flattened formulation of stride-1 2-D convs: with the padded input's rows laid end to
# end (row pitch Wp), output (y, x) is q = y*Wp + x of a 1-D convolution whose taps are at
# ry*Wp + rx. Computing every q, also the Wp - W garbage columns of each row that the epilogue
# drops, makes the vectorized axis long (no half-empty vectors at row ends) and its input
# reads contiguous. Measured on ResNet's 3x3 convs: 56x56 171 -> 200 GFLOP/s, 7x7 2.8 -> 1.5
# ms. Pointwise convs stay row-wise: flattened, their epilogue becomes a separate pass over
# memory, which measured slower (MobileNetV2's 1x1 convs lost 10-45%).
FLAT_LANES = 16          # q is computed in whole blocks of this many
# The register tile is F filters x V vectors of q: per tap V input loads and F broadcast
# weights for F*V multiply-adds. One thread (Zen 5), 16 x 1 -> 8 x 3 (onnxruntime): 64->64
# 3x3 onto 56x56 1.083 -> 0.956 ms (0.921), 32->32 onto 147x147 1.91 -> 1.67 (1.72),
# 128->128 onto 56x56 4.25 -> 3.71 (3.61), 16->24 onto 112x112 0.434 -> 0.367 (0.495);
# 8 x 2, 4 x 4 and 6 x 4 measured within 2% of 8 x 3.
FLAT_TILE_FILTERS = 8
FLAT_TILE_ACCUMULATORS = 24
FLAT_TILE_VECTORS = 4     # at most


def flat_tile(filters: int, block: int, registers: int) -> tuple[int, int]:
    """The flattened conv's default register tile: (filters, vectors of q), its
    accumulators, input vectors and a broadcast weight within ``registers``."""
    rows = _divisor_at_most(math.gcd(filters, block), FLAT_TILE_FILTERS)
    vectors = min(FLAT_TILE_VECTORS, FLAT_TILE_ACCUMULATORS // rows)
    while vectors > 1 and not RegisterTileFits(registers).holds(rows, vectors):
        vectors -= 1
    return rows, vectors


def _flattens(attrs: dict, spatial: int, groups: int, block: int, kernel, out) -> bool:
    if spatial != 2 or groups != 1 or not block or tuple(attrs["strides"]) != (1, 1):
        return False
    return tuple(kernel) != (1, 1)


def _conv_flat(attrs: dict, x: te.Tensor, w: te.Tensor, kernel, out) -> te.Tensor:
    n_batch, channels, height, width = x.shape
    block = attrs["kernel_block"]
    filters = w.shape[0] * block
    (dh, dw), pads = attrs["dilations"], list(attrs["pads"])
    pitch = width + pads[1] + pads[3]
    # q in whole register tiles of the default (other tiles that divide them: _conv_space)
    span = FLAT_LANES * flat_tile(filters, block, registers=32)[1]
    steps = -(-out[0] * pitch // span) * span
    # zero rows below the padding, so that the last block's garbage columns read in bounds
    last_read = steps - 1 + (kernel[0] - 1) * dh * pitch + (kernel[1] - 1) * dw
    rows = -(-(last_read + 1) // pitch)
    pads[2] += max(0, rows - (height + pads[0] + pads[2]))
    padded = padded_input(x, tuple(pads))
    rc = te.reduce_axis(channels, "rc")
    ry, rx = te.reduce_axis(kernel[0], "ry"), te.reduce_axis(kernel[1], "rx")

    def tap(n, c, k):
        return padded[n, c, k // pitch, k % pitch]

    acc = te.accumulator_dtype(x.dtype)

    def body(n, f, q):
        k = q + ry.var * (dh * pitch) + rx.var * dw
        return te.sum_(E.cast(acc, tap(n, rc.var, k))
                       * E.cast(acc, w[f // block, rc, ry, rx, f % block]), axis=[rc, ry, rx])
    flat = te.compute((n_batch, filters, steps), body, name="conv_flat",
                      tag="anchor:conv_flat", axis_names=["n", "f", "q"])
    return te.compute((n_batch, filters, *out),
                      lambda n, f, y, xx: E.cast(x.dtype, flat[n, f, y * pitch + xx]),
                      name="conv")


# The GEMM formulation: out[n, f, q] = sum_k W[f, k] * P[n, k, q] over output positions q
# and k = (channel, kernel offsets), P the input patches (im2col). Built for the convs whose
# direct form vectorizes badly along the output row: 1-D front ends with long kernels and
# large strides (gathers), stems with 1 to 4 input channels (a reduction too short to hide
# anything), strided patch convs (stride >= 3), and pointwise convs (a plain matrix
# product). 2-D convs run their columns over the padded input's rows laid end to end, split
# into stride x stride phases when strided, so that a block's patches are contiguous loads;
# pointwise and 1-D convs over their output positions as one flat row. The columns are
# padded to whole blocks of GEMM_COLUMNS (the epilogue drops the padding), so the register
# tile never needs a guard.
GEMM_COLUMNS = 16
# ... and of twice as many where the reduction is at least WIDE_GEMM_DEPTH deep: a tile of
# 14 filters x 2 vectors loads 16 values per 28 multiply-adds where 30 x 1 loads 31 per 30
# (the load ports, not the FMAs, set the pace). One thread (Xeon), ms, 16 -> 32 columns
# (onnxruntime): 80->384 k3 1-D on 3000 4.35 -> 3.56 (3.93), 3->96 4x4 s4 on 224x224 0.55
# -> 0.42 (0.42), 3->32 3x3 s2 on 299x299 0.69 -> 0.60 (0.72), 3->16 3x3 s2 on 416x416
# 0.72 -> 0.63 (0.71), 2->16 5x5 s2 0.098 -> 0.084 (0.097), 1->32 k80 s4 1-D 0.53 -> 0.49
# (0.65); 3->64 7x7 s2 and 64->128 k3 the same; 4->32 3x3 s4 (K = 36) 0.127 -> 0.139
# (0.103); a shallow one, 1->512 k10 s5 (K = 10), 0.79 -> 1.04 (0.70), keeps 16.
WIDE_GEMM_DEPTH = 24
# Few-channel convs (stems) with output rows of two blocks or more run the GEMM along each
# output row instead, the last block of a row overlapping the one before it: their short
# reduction (K = 27 for a 3x3 RGB stem) makes the pitched form's separate epilogue pass a
# large part of the time. Measured 9-16% faster on 3->32 3x3 s2 (224, 299), 3->64 7x7 s2,
# 3->16 3x3 on 416 and 8->16 3x3 on 112; with 16 or more channels it measured 5-13% slower
# (the overlap's extra columns cost more than the pass).
ROW_GEMM_CHANNELS = 8
GEMM_BELOW_VECTOR_BITS = 512    # narrower vectors: every dense conv is a GEMM (conv_as_gemm)


def gemm_columns(depth: int) -> int:
    """The output positions per register tile of a conv's GEMM ``depth`` deep."""
    return 2 * GEMM_COLUMNS if depth >= WIDE_GEMM_DEPTH else GEMM_COLUMNS


def conv_as_gemm(attrs: dict, x_shape, w_shape, target: Target | None = None) -> bool:
    """Whether a conv (OIHW weight shape) takes the GEMM formulation (it then wants its
    weights unpacked: a tile's weights are W[f, k], contiguous in k). With 256-bit vectors
    (16 registers) every dense conv does: a 6 x 2-vector register tile over patches gathered
    once per block measured 1.3-3.8x faster than the direct and flattened forms on stride-1
    3x3, 1x7 and 7x1 convs and 3-4x on stride-2 ones (odd maps: 13, 17, 27, 35, 73, 147).
    With 512-bit vectors the direct forms keep the convs they were measured faster on;
    without a target (weights that cannot be packed) dense convs take GEMM."""
    spatial = len(x_shape) - 2
    if attrs["groups"] != 1 or spatial > 2:
        return False
    if spatial == 1 or target is None or target.vector_bits < GEMM_BELOW_VECTOR_BITS:
        return True
    return w_shape[1] <= 4 or min(attrs["strides"]) >= 2 or _pointwise(attrs, w_shape)


def conv_as_matmul(attrs: dict, kernel) -> bool:
    """Whether a conv is a plain matrix product, out[n, f, p] = sum(W[f, c] * X[n, c, p]):
    a 1x1 conv of one group with no padding (strided: X is the input's every s-th position,
    copied once). With its weights packed into panels of a GEMM tile's rows (kernel_block,
    see passes/graph/alter_layout.py) it runs on the matmul's micro-kernel (``ops/matmul.py``,
    ``schedule_gemm``): the weights are A, the input's channels x positions B. Measured on
    Zen 4 beside the im2col GEMM it replaces: 512 -> 1000 on 13x13 52 -> ~100 GFLOP/s."""
    return attrs["groups"] == 1 and all(k == 1 for k in kernel) and not any(attrs["pads"])


def _conv_matmul(attrs: dict, x: te.Tensor, w: te.Tensor, out) -> te.Tensor:
    """The pointwise conv as a GEMM over flattened positions q: P[n, f, q] = sum over
    channels c of W[f // b, c, .., f % b] * x[n, c, q], then the output is P's rows."""
    n_batch, channels = x.shape[:2]
    block = attrs["kernel_block"]
    filters = unpacked_weight_shape(attrs, w.shape)[0]
    zeros = (0,) * (x.ndim - 2)
    strides = attrs["strides"]
    if any(st > 1 for st in strides):
        x = te.compute((n_batch, channels, *out), lambda n, c, *o: x[(n, c, *[
            o[d] * strides[d] for d in range(len(out))])], name="subsample", tag="subsample")
    rc = te.reduce_axis(channels, "rc")
    acc = te.accumulator_dtype(x.dtype)

    def body(n, f, q):
        # x's positions read as one flat row: (0, .., 0, q) has q's row-major address
        return te.sum_(E.cast(acc, w[(f // block, rc, *zeros, f % block)])
                       * E.cast(acc, x[(n, rc, *zeros[1:], q)]), axis=rc)
    product = te.compute((n_batch, filters, int(np.prod(out))), body, name="conv_matmul",
                         tag="anchor:conv_matmul", axis_names=["n", "f", "q"])

    def result(n, f, *o):
        q = o[0]
        for d in range(1, len(o)):
            q = q * out[d] + o[d]
        return E.cast(x.dtype, product[n, f, q])
    return te.compute((n_batch, filters, *out), result, name="conv")


def _unflatten(index, extents) -> list:
    """Row-major coordinates of a flat index (the last one fastest)."""
    coords = []
    for d in range(len(extents)):
        stride = int(np.prod(extents[d + 1:]))
        v = index // stride if stride > 1 else index
        coords.append(v % extents[d] if d > 0 else v)
    return coords


def matmul_gemm(out: te.Tensor, product: te.Tensor, attrs: dict) -> Gemm:
    """The GEMM a 1x1 conv's group is (see :func:`conv_as_matmul`)."""
    n_batch, filters, positions = product.shape
    return Gemm(filters, positions, product.op.reduce_axis[0].extent, batched=n_batch > 1,
                a_panel=attrs["kernel_block"], itemsize=4 if out.dtype == "float32" else 8,
                packable_b=False)


def filter_panel(target: Target, filters: int) -> int:
    """The weight panel (and GEMM tile) height of a conv on the matmul micro-kernel: all the
    filters where a tile holds them, else the tallest tile that pads the filters with zero
    ones by at most a sixteenth (1000 filters: 14, 1008 computed; 64: 8, not 14 (70) or 12
    (72))."""
    tallest = micro_tile(target)[0]
    if filters <= tallest:
        return filters
    choices = [r for r in ROW_CHOICES if r <= tallest]
    return min(choices, key=lambda r: (-(-filters // r) * r - filters > filters // 16, -r))


def _pointwise(attrs: dict, w_shape) -> bool:
    return tuple(w_shape[2:]) == (1, 1) and tuple(attrs["strides"]) == (1, 1) and \
        not any(attrs["pads"])


def _conv_gemm(attrs: dict, x: te.Tensor, w: te.Tensor, kernel, out) -> te.Tensor:
    n_batch, channels = x.shape[:2]
    spatial = x.ndim - 2
    filters = w.shape[0]
    strides, dilations = attrs["strides"], attrs["dilations"]
    depth = channels * int(np.prod(kernel))
    block = gemm_columns(depth)     # output positions per register tile
    pointwise = _pointwise(attrs, w.shape)
    pads = list(attrs["pads"])
    pitch = None
    by_rows = spatial == 2 and not pointwise and channels <= ROW_GEMM_CHANNELS and \
        out[1] >= 2 * GEMM_COLUMNS
    if by_rows:
        # columns run along each output row; a row's last block overlaps the one before it
        # (a shift_tail split), so there are no garbage columns and the epilogue reads the
        # register tile. With stride s the padded input is split into its phases.
        phases = tuple(min(strides[d], (kernel[d] - 1) * dilations[d] + 1) for d in range(2))
        for d in range(2):
            pads[2 + d] += -(x.shape[2 + d] + pads[d] + pads[2 + d]) % strides[d]
        grid = tuple(out)
        padded = phase_split(x, tuple(pads), tuple(strides), phases) \
            if any(st > 1 for st in strides) else padded_input(x, tuple(pads))
    elif spatial == 2 and not pointwise:
        # columns run over the rows of the padded input laid end to end (pitch Wp), so a
        # block's patches are contiguous loads; the garbage columns at each row's end are
        # computed and dropped by the epilogue, and zero rows below keep the last block's
        # reads in bounds. With stride s the padded input is first split into its s x s
        # phases (phase (a, b) holds rows a, a+s, ... and columns b, b+s, ...): tap (ky, kx)
        # of output (y, x) is then phase (ky % s, kx % s) at (y + ky // s, x + kx // s),
        # contiguous in x again instead of a stride-s gather per block.
        taps = [(kernel[d] - 1) * dilations[d] for d in range(2)]
        phases = tuple(min(strides[d], taps[d] + 1) for d in range(2))
        pitch = -(-(x.shape[3] + pads[1] + pads[3]) // strides[1])
        columns = -(-out[0] * pitch // block) * block
        last_read = columns - 1 + taps[0] // strides[0] * pitch + taps[1] // strides[1]
        grid = (columns,)
        height = x.shape[2] + pads[0] + pads[2]
        rows = max(-(-(last_read + 1) // pitch), -(-height // strides[0]))
        pads[2] += rows * strides[0] - height
        pads[3] += pitch * strides[1] - (x.shape[3] + pads[1] + pads[3])
        padded = phase_split(x, tuple(pads), tuple(strides), phases) \
            if any(st > 1 for st in strides) else padded_input(x, tuple(pads))
    else:
        # pointwise convs and 1-D ones: one flat row of output positions, padded to whole
        # blocks (a block's patches are gathered across row ends: once per block, for all
        # its filters)
        grid = (-(-int(np.prod(out)) // block) * block,)
        padded = padded_input(x, tuple(pads))

    def patch(n, k, *g):
        if pointwise:       # P is x itself, one flat row per channel
            q = E.minimum(g[0], int(np.prod(out)) - 1)
            return x[(n, k, *_unflatten(q, tuple(out)))]
        c, *offset = _unflatten(k, (channels, *kernel))
        if by_rows:
            tap = [offset[d] * dilations[d] for d in range(2)]
            row, col = g[0] + tap[0] // strides[0], g[1] + tap[1] // strides[1]
            if padded.ndim == 6:
                return padded[n, c, tap[0] % strides[0], tap[1] % strides[1], row, col]
            return padded[n, c, row, col]
        if pitch is not None:
            tap = [offset[d] * dilations[d] for d in range(2)]
            t = g[0] + tap[0] // strides[0] * pitch + tap[1] // strides[1]
            row, col = t // pitch, t % pitch
            if padded.ndim == 6:
                return padded[n, c, tap[0] % strides[0], tap[1] % strides[1], row, col]
            return padded[n, c, row, col]
        # 1-D: the padding columns read the last real position
        o = E.minimum(g[0], out[0] - 1)
        return padded[n, c, o * strides[0] + offset[0] * dilations[0]]
    kind = "_rows" if by_rows else "_pitched" if pitch else ""
    patches = te.compute((n_batch, depth, *grid), patch, name="im2col",
                         tag="anchor:im2col" + kind,
                         axis_names=["n", "k", "y", "q"] if by_rows else ["n", "k", "q"])
    rk = te.reduce_axis(depth, "rk")
    acc = te.accumulator_dtype(x.dtype)

    def weight(f, k):
        return w[(f, *_unflatten(k, (channels, *kernel)))]
    gemm = te.compute((n_batch, filters, *grid), lambda n, f, *g: te.sum_(
        E.cast(acc, weight(f, rk.var)) * E.cast(acc, patches[(n, rk, *g)]), axis=rk),
        name="conv_gemm", tag="anchor:conv_gemm",
        axis_names=["n", "f", "y", "q"] if by_rows else ["n", "f", "q"])

    def result(n, f, *o):
        if by_rows:
            return E.cast(x.dtype, gemm[n, f, o[0], o[1]])
        if spatial == 1:
            return E.cast(x.dtype, gemm[n, f, o[0]])
        if pitch is not None:
            return E.cast(x.dtype, gemm[n, f, o[0] * pitch + o[1]])
        q = o[0]
        for d in range(1, spatial):
            q = q * out[d] + o[d]
        return E.cast(x.dtype, gemm[n, f, q])
    return te.compute((n_batch, filters, *out), result, name="conv")


def gemm_tile(target: Target, rows: int, columns: int) -> tuple[int, int]:
    """The register tile of a GEMM micro-kernel: (rows, vectors across ``columns``). The
    accumulators, one row of column vectors and a broadcast value must fit the vector
    registers (16 with AVX2, 32 with AVX-512): 6 x 2 vectors of 8, or 28 x 1 of 16. ``rows``
    is the extent to tile: a divisor of it is taken, so that no tile needs a guard."""
    registers = 32 if target.vector_bits >= 512 else 16
    vectors = max(1, columns // target.vector_lanes("float32"))
    most = (registers - vectors - 1) // vectors
    return min(rows, most), vectors


FILTER_TILE = 16    # filters accumulated per input vector (unrolled, broadcast weights)
SHALLOW_GEMM_DEPTH = 64     # a GEMM conv with at most this many products per output ...
SHALLOW_FILTER_TILE = 8     # ... takes tiles of at most this many filters


def _depthwise(out: te.Tensor, conv_t: te.Tensor, attrs: dict) -> bool:
    """Whether a direct conv is depthwise (one filter per channel)."""
    if not conv_t.op.reduce_axis:
        conv_t = conv_t.op.input_tensors()[0]
    return attrs["groups"] == out.shape[1] and attrs["groups"] > 1 and \
        all(t.shape[1] in (1, attrs["groups"]) for t in conv_t.op.input_tensors())


def _formulation(conv_t: te.Tensor) -> str:
    """direct, flat, gemm, matmul or lanes: how the group's conv was computed (see
    ``_conv_compute``)."""
    if conv_t.op.reduce_axis:
        return "direct"
    inner = conv_t.op.input_tensors()[0].op.name
    return {"conv_flat": "flat", "conv_gemm": "gemm", "conv_matmul": "matmul",
            "conv_lanes": "lanes", "conv_window": "window", "conv_blocked": "blocked",
            "conv_blocked_window": "blocked_window",
            "winograd_output": "winograd"}.get(inner, "direct")


def _conv_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                ) -> SearchSpace:
    """The register tile: ``filter_tile`` filters (direct and flat formulations: x one vector
    of output columns; gemm: x GEMM_COLUMNS positions); ``parallel``: tiles on threads."""
    filters = out.shape[1]
    registers = 32 if target.vector_bits >= 512 else 16
    kind = _formulation(conv_t)
    if kind == "winograd" and attrs.get("layout_block"):
        return winograd.winograd_blocked_space(target, attrs, conv_t)
    if kind == "winograd":
        return winograd.winograd_space(target, attrs, conv_t)
    if kind == "window":
        return flat_space(target, out, conv_t.op.input_tensors()[0])
    if kind == "blocked":
        return blocked.conv_blocked_space(target, out, conv_t.op.input_tensors()[0], attrs)
    if kind == "blocked_window":
        return blocked.window_blocked_space(target, out)
    if kind == "direct" and _depthwise(out, conv_t, attrs):
        from tensorc.ops.nn.pool import window_space
        return window_space(target, out, conv_t, attrs)
    if kind == "lanes":
        tile = conv_t.op.input_tensors()[0]
        depth = math.prod(iv.extent for iv in tile.op.reduce_axis)
        taps = math.prod(iv.extent for iv in tile.op.reduce_axis if iv.name in ("ry", "rx"))
        return _filter_lanes_space(target, out, depth, taps, max(attrs["strides"]) > 1)
    if kind == "matmul":
        product = conv_t.op.input_tensors()[0]
        return gemm_space(target, matmul_gemm(out, product, attrs), out.dtype)
    if kind == "flat":
        return _flat_space(target, filters, attrs["kernel_block"],
                           conv_t.op.input_tensors()[0])
    if kind == "gemm":
        depth = reduction_depth(conv_t.op.input_tensors()[0])
        columns = gemm_columns(depth)
        vectors = max(1, columns // target.vector_lanes(out.dtype))
        limit = (registers - vectors - 1) // vectors
        default = gemm_tile(target, filters, columns)[0]
        if depth <= SHALLOW_GEMM_DEPTH:
            # a short accumulation per tile (a stem's 3 x 3 x 3 taps, a patch embedding's 48):
            # tiles of 8 filters, which the usual filter counts divide, not 14 and a tail.
            # One thread (Xeon), ms, 14 -> 8 (onnxruntime): 3 -> 64 3x3 s2 onto 112x112
            # 0.838 -> 0.742 (0.630), 3 -> 128 4x4 s4 (Swin) 0.545 -> 0.471 (0.428), 3 -> 96
            # 4x4 s4 (ConvNeXt) 0.385 -> 0.327 (0.293), 2 -> 16 5x5 s2 0.067 -> 0.063; deeper
            # ones (the audio model's, K of 192-400) measured the same either way
            default = min(default, SHALLOW_FILTER_TILE)
    else:
        block = attrs.get("kernel_block", 0) or FILTER_TILE
        limit = block if attrs.get("kernel_block") else FILTER_TILE
        # accumulators + the input vector + a broadcast weight
        default = _divisor_at_most(math.gcd(filters, block), min(limit, registers - 2))
    tiles = tuple(d for d in range(1, limit + 1) if filters % d == 0 or kind == "gemm") or (1,)
    return SearchSpace([
        Knob("filter_tile", tiles, default, "filters per register tile"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
    ], name=f"conv ({kind})")


def _flat_space(target: Target, filters: int, block: int, flat: te.Tensor) -> SearchSpace:
    """The flattened conv's register tile: ``filter_tile`` filters (a divisor of the weight
    block's) x ``vectors`` vectors of q (those that divide q's extent)."""
    registers = 32 if target.vector_bits >= 512 else 16
    rows, vectors = flat_tile(filters, block, registers)
    blocks = flat.shape[-1] // FLAT_LANES
    return SearchSpace([
        Knob("filter_tile", tuple(d for d in range(1, block + 1) if filters % d == 0), rows,
             "filters per register tile"),
        Knob("vectors", tuple(v for v in range(1, FLAT_TILE_VECTORS + 1) if blocks % v == 0),
             vectors, "vectors of q per register tile"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
    ], [RegisterTileFits(registers, "filter_tile", "vectors")], name="conv (flat)")


@conv.schedule(space=_conv_space)
def _conv_schedule(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                   attrs: dict, config) -> None:
    """2-D direct convolution, vectorized along the output row: an output tile of
    FILTER_TILE filters x one vector of columns is accumulated in registers over
    (channel, kernel row, kernel column); the padded input is materialized once per call;
    (image, filter block, row) tiles run in parallel, so each thread streams its share of the
    weights. (Splitting input-heavy layers by row instead measured no faster on 2 threads and
    up to 15% slower on one.) Other convs use the generic schedule."""
    spatial = len(out.shape) - 2
    if not conv_t.op.reduce_axis:    # a final stage over the flattened or float32 result
        inner = conv_t.op.input_tensors()[0]
        if inner.op.name == "winograd_output":
            schedule = winograd.schedule_winograd_blocked if attrs.get("layout_block") \
                else winograd.schedule_winograd
            schedule(target, sch, out, conv_t, attrs, config)
            return
        form = _FORM_SCHEDULES.get(inner.op.name)
        if form is not None:
            form(target, sch, out, inner, config)
            return
        if inner.op.name == "conv_matmul":
            # the matmul's GEMM: filters the rows, the positions (fused) the columns
            st = sch[out]
            n, f, *spatial = st.op_axis
            q = st.fuse(*spatial) if len(spatial) > 1 else spatial[0]
            axes = (f, q) if out.shape[0] == 1 else (n, f, q)     # (a fused n and f would
            # hide the tile's rows from bounds inference: all filters computed per tile)
            materialize_pad(target, sch, inner)       # a strided conv's subsampled input
            schedule_gemm(target, sch, out, inner, matmul_gemm(out, inner, attrs), config,
                          axes)
            return
        conv_t = inner
    if _depthwise(out, conv_t, attrs):
        # a weighted pooling window per channel, scheduled as pooling is
        from tensorc.ops.nn.pool import schedule_window
        schedule_window(target, sch, out, conv_t, config)
        return
    if spatial != 2:
        schedule_reduction(target, sch, out, conv_t)
        return
    materialize_pad(target, sch, conv_t)
    lanes = target.vector_lanes(out.dtype)
    block = config["filter_tile"]
    compute_tensor = sch.cache_write(conv_t, "local") if out is conv_t else conv_t
    st = sch[out]
    n, f, y, x = st.op_axis
    xb = vector_block(out.shape[3], lanes)
    fo, fi = st.split(f, block)
    xo, xi = st.split(x, xb)
    st.reorder(n, fo, y, xo, fi, xi)
    fused = st.fuse(n, fo, y)
    st.vectorize(xi)
    if config["parallel"] and worth_threads(math.prod(out.shape), reduction_depth(conv_t)):
        st.parallel(fused)
    _accumulate_in_registers(sch, compute_tensor, st, xo)


def _schedule_flat(target: Target, sch: Schedule, out: te.Tensor, flat: te.Tensor,
                   config) -> None:
    """The flattened conv: tiles of ``filter_tile`` filters x ``vectors`` vectors of q
    accumulate in registers over (channel, kernel row, kernel column) and run in parallel;
    the padded input is materialized first; the epilogue (bias, activation, residual) reads
    the flat result row by row.

        for (n.f.o.q.o: parallel)
          acc[F, V * lanes] = 0
          for (c, ky, kx): for (f: unrolled) for (v: unrolled) for (l: vectorized)
            acc[f, v, l] += W[f, c, ky, kx] * pad[c, q + ky * pitch + kx]
          flat[f, q] = acc"""
    materialize_pad(target, sch, flat)
    local = sch.cache_write(flat, "local")
    st = sch[flat]
    n, f, q = st.op_axis
    fo, fi = st.split(f, config["filter_tile"])
    qo, qi = st.split(q, FLAT_LANES * config["vectors"])
    st.reorder(n, fo, qo, fi, qi)
    fused = st.fuse(n, fo, qo)
    st.vectorize(qi)
    if config["parallel"] and worth_threads(math.prod(flat.shape), reduction_depth(flat)):
        st.parallel(fused)
    ls = sch[local]
    ls.compute_at(st, fused)
    ln, lf, lq = ls.op_axis
    lv, ll = ls.split(lq, FLAT_LANES)
    # each broadcast weight serves the tile's V input vectors, which stay in registers
    ls.reorder(ln, *ls.reduce_axis, lf, lv, ll)
    ls.unroll(lf)
    ls.unroll(lv)
    ls.vectorize(ll)
    schedule_injective(target, sch, out)


def _schedule_gemm(target: Target, sch: Schedule, out: te.Tensor, gemm: te.Tensor,
                   config) -> None:
    """The GEMM formulation, tiled for registers: for each block of GEMM_COLUMNS output
    positions of a row (blocks in parallel) the block's patches are gathered once (im2col,
    K x columns), then every tile of ``rows`` filters x the block accumulates over K in
    registers (the filters unrolled, their weights broadcast) and the epilogue writes it:

        for (n.y.q.o: parallel)
          P[k, q.i] = patches                                   (once per block)
          for (f.o)  [for (k)  for (f.i: unrolled)  for (q.i: vectorized)  acc += W * P]
                     out[f, y, q] = epilogue(acc)
    """
    patches = next(t for t in gemm.op.input_tensors() if t.op.name == "im2col")
    rows = config["filter_tile"]
    if patches.op.tag == "anchor:im2col_pitched":
        _schedule_gemm_pitched(target, sch, out, gemm, patches, config)
        return
    if patches.op.tag == "anchor:im2col_rows":
        _schedule_gemm_rows(target, sch, out, gemm, patches, config)
        return
    local = sch.cache_write(gemm, "local")
    sch[gemm].compute_inline()       # the epilogue reads the register tile itself
    st = sch[out]
    n, f, *spatial = st.op_axis
    flat = len(gemm.shape) == 3 and len(spatial) > 1       # a pointwise conv's flat rows
    if flat:
        lines, q = [], st.fuse(*spatial)
    else:
        *lines, q = spatial
    fo, fi = st.split(f, rows)
    qo, qi = st.split(q, gemm_columns(reduction_depth(gemm)))
    st.reorder(n, *lines, qo, fo, fi, qi)
    st.vectorize(qi)
    block = st.fuse(n, *lines, qo)
    if config["parallel"] and worth_threads(math.prod(out.shape), reduction_depth(gemm)):
        st.parallel(block)
    _accumulate_in_registers(sch, local, st, fo)
    ps = sch[patches]
    ps.compute_at(st, block)
    ps.vectorize(ps.op_axis[-1])


def _schedule_gemm_pitched(target: Target, sch: Schedule, out: te.Tensor, gemm: te.Tensor,
                           patches: te.Tensor, config) -> None:
    """A stride-1 conv's GEMM over the padded rows laid end to end: the padded input is
    materialized once; per block of GEMM_COLUMNS columns (blocks in parallel) the patches are
    copied with contiguous loads, and each register tile of filters accumulates over K; the
    epilogue then reads the GEMM's result row by row, dropping the garbage columns."""
    materialize_pad(target, sch, patches)
    local = sch.cache_write(gemm, "local")
    st = sch[gemm]
    n, f, q = st.op_axis
    fo, fi = st.split(f, config["filter_tile"])
    qo, qi = st.split(q, gemm_columns(reduction_depth(gemm)))
    st.reorder(n, qo, fo, fi, qi)
    block = st.fuse(n, qo)
    st.vectorize(qi)
    if config["parallel"] and worth_threads(math.prod(gemm.shape), reduction_depth(gemm)):
        st.parallel(block)
    _accumulate_in_registers(sch, local, st, fo)
    ps = sch[patches]
    ps.compute_at(st, block)
    ps.vectorize(ps.op_axis[-1])
    schedule_injective(target, sch, out)


def _schedule_gemm_rows(target: Target, sch: Schedule, out: te.Tensor, gemm: te.Tensor,
                        patches: te.Tensor, config) -> None:
    """The GEMM along output rows: the padded input is materialized once; rows run in
    parallel; per block of GEMM_COLUMNS columns of a row (the last one shifted back to end
    at the row's end) the patches are copied with contiguous loads, each register tile of
    filters accumulates over K, and the epilogue writes the tile from registers."""
    materialize_pad(target, sch, patches)
    local = sch.cache_write(gemm, "local")
    sch[gemm].compute_inline()
    st = sch[out]
    n, f, y, q = st.op_axis
    fo, fi = st.split(f, config["filter_tile"])
    columns = min(gemm_columns(reduction_depth(gemm)), out.shape[3])
    if out.shape[3] % columns:
        qo, qi = st.split(q, columns, shift_tail=True)
    else:
        qo, qi = st.split(q, columns)
    st.reorder(n, y, qo, fo, fi, qi)
    st.vectorize(qi)
    line = st.fuse(n, y)
    if config["parallel"] and worth_threads(math.prod(out.shape), reduction_depth(gemm)):
        st.parallel(line)
    _accumulate_in_registers(sch, local, st, fo)
    ps = sch[patches]
    ps.compute_at(st, qo)
    ps.vectorize(ps.op_axis[-1])


# the schedule of each form whose inner stage alone decides it (see ``_conv_compute``)
_FORM_SCHEDULES = {"conv_flat": _schedule_flat, "conv_gemm": _schedule_gemm,
                   "conv_lanes": _schedule_filter_lanes, "conv_window": schedule_flat_window,
                   "conv_blocked": blocked.schedule_conv_blocked,
                   "conv_blocked_window": blocked.schedule_window_blocked}


def _accumulate_in_registers(sch: Schedule, local: te.Tensor, st, at) -> None:
    """A register tile: ``local`` (n, filters, [rows,] columns), computed at ``st``'s loop
    ``at`` with its reduction loops outside the unrolled filters and vectorized columns."""
    ls = sch[local]
    ls.compute_at(st, at)
    ln, lf, *lines, lq = ls.op_axis
    ls.reorder(ln, *lines, *ls.reduce_axis, lf, lq)
    ls.unroll(lf)
    ls.vectorize(lq)


def _divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, limit + 1) if n % d == 0)

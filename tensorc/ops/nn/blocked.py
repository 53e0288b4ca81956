"""The blocked activation layout NCHW[b]c, and the conv and pooling kernels that run on it.

A blocked tensor holds the channels of an NCHW tensor in blocks of ``b`` (the target's
float32 vector lanes), the block innermost: ``[N, C/b, H, W, b]``, element (n, c, y, x) at
``[n, c // b, y, x, c % b]``. Each (y, x) position's ``b`` channels are one vector, so

- a conv computes a vector of ``b`` filters per output position and stores it whole (in
  NCHW the same register tile is stored transposed or lane by lane), and its epilogue and
  the next op read it as whole vectors;
- pooling and elementwise ops work on whole vectors whatever the map's width (13, 27, 55:
  no half-empty vector at each row's end).

``passes/graph/alter_layout.py`` carries the layout across chains of convs, pools and
elementwise ops and inserts ``layout_transform`` only at the chain's boundaries:

    %t = layout_transform(%x) {block=16, to="blocked"}     # [1,64,28,28] -> [1,4,28,28,16]
    %y = conv(%t, %w) {layout_block=16, kernel_block=16}   # -> [1,8,14,14,16]
    %z = relu(%y)
    %o = layout_transform(%z) {block=16, to="plain"}       # -> [1,128,14,14]

Ops on blocked tensors carry attr ``layout_block = b``; their shape rules and numpy
references are the plain op's through :func:`plain_type` / :func:`blocked_type` and
:func:`unblock` / :func:`block`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.loop import CACHE_LINE, itemsize
from tensorc.ir.lower import PREFETCH_MAX_LINES
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.types import TensorType
from tensorc.ops.matmul.gemm import second_operand
from tensorc.ops.matmul.space import L2_BYTES
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import (
    PARALLEL_MIN_ELEMENTS, RegisterTileFits, injective_space, materialize_pad,
    reduction_depth, register_tile, schedule_injective, shared_broadcasts, worth_threads,
)
from tensorc.ops.shape_rules import expect_arity
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

# an anchor: its own schedule (below), elementwise consumers fused after it
layout_transform = define("layout_transform", Pattern.OUT_ELEMWISE_FUSABLE)


# ---------------------------------------------------------------------------------------------
# the layout: numpy and types

def block(x: np.ndarray, b: int) -> np.ndarray:
    """[N, C, *S] -> [N, C/b, *S, b] (C a multiple of b).

    >>> block(np.arange(4.).reshape(1, 4, 1), 2)[0, :, 0].tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    n, c = x.shape[:2]
    grouped = x.reshape((n, c // b, b) + x.shape[2:])
    return np.ascontiguousarray(np.moveaxis(grouped, 2, -1))


def unblock(x: np.ndarray, b: int) -> np.ndarray:
    """[N, C/b, *S, b] -> [N, C, *S] (the inverse of :func:`block`)."""
    n, blocks = x.shape[:2]
    return np.ascontiguousarray(np.moveaxis(x, -1, 2)).reshape((n, blocks * b) + x.shape[2:-1])


def blocked_type(t: TensorType, b: int) -> TensorType:
    return TensorType((t.shape[0], t.shape[1] // b, *t.shape[2:], b), t.dtype)


def plain_type(t: TensorType, b: int) -> TensorType:
    if t.ndim < 3 or t.shape[-1] != b:
        raise ShapeError(f"expected a blocked tensor [N, C/{b}, *S, {b}], got {t}")
    return TensorType((t.shape[0], t.shape[1] * b, *t.shape[2:-1]), t.dtype)


def blocked_constant(array: np.ndarray, channels: int, b: int) -> np.ndarray | None:
    """A constant operand of an elementwise op on an [N, C, *S] tensor, for the same op on
    the blocked tensor: per-channel values ([C, 1, 1], [1, C, 1, 1]) and values the same for
    every channel (scalars, [1, 1, H, W]) broadcast the same way against [N, C/b, *S, b].
    None where the array varies along another axis too and has no blocked form here."""
    ndim = 4
    if array.ndim > ndim:
        return None
    full = array.reshape((1,) * (ndim - array.ndim) + array.shape)
    if full.shape[1] == 1:
        return full[:, :, ..., None]
    if full.shape[1] != channels or any(d != 1 for d in full.shape[2:]):
        return None
    return block(full, b)


# ---------------------------------------------------------------------------------------------
# layout_transform{block, to}: to="blocked" [N, C, *S] -> [N, C/b, *S, b]; to="plain" back

@layout_transform.infer
def _transform_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("layout_transform", input_types, 1)
    (x,) = input_types
    b = attrs["block"]
    if attrs["to"] == "plain":
        return [plain_type(x, b)]
    if x.ndim < 3 or x.shape[1] % b:
        raise ShapeError(f"layout_transform: {x} has no blocks of {b} channels")
    return [blocked_type(x, b)]


@layout_transform.reference
def _transform_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    convert = unblock if attrs["to"] == "plain" else block
    return [convert(x, attrs["block"])]


@layout_transform.compute
def _transform_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    b = attrs["block"]
    if attrs["to"] == "plain":
        shape = plain_type(TensorType(x.shape, x.dtype), b).shape
        return te.compute(shape, lambda n, c, *s: x[(n, c // b, *s, c % b)],
                          name="layout_transform")
    shape = blocked_type(TensorType(x.shape, x.dtype), b).shape
    return te.compute(shape, lambda n, c, *s: x[(n, c * b + s[-1], *s[:-1])],
                      name="layout_transform")


@layout_transform.schedule(space=injective_space)
def _transform_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                        attrs: dict, config) -> None:
    """To blocked, the injective schedule (it finds the transposition: vectors along each
    channel's row, stored transposed into the blocks). To plain, each block's [H*W, b] is
    transposed into [b, H*W] in tiles of lanes x b: a vector of b channels loaded whole per
    position (unrolled over ``lanes`` positions), stored transposed as vectors along the
    row (codegen's transposed tile); the index c // b, c % b is not linear in c, so the
    injective schedule's search for the contiguous axis does not see it."""
    if attrs["to"] == "blocked" or len(out.shape) != 4:
        schedule_injective(target, sch, out, anchor, attrs, config)
        return
    b, lanes = attrs["block"], target.vector_lanes(out.dtype)
    st = sch[out]
    n, c, y, x = st.op_axis
    position = st.fuse(y, x)
    co, ci = st.split(c, b)
    po, pi = st.split(position, lanes)
    st.reorder(n, co, po, pi, ci)
    st.unroll(pi)
    st.vectorize(ci)
    if config["parallel"] and np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS:
        st.parallel(st.fuse(n, co))


# ---------------------------------------------------------------------------------------------
# conv on blocked tensors

def conv_blocked(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, int],
                 padded: te.Tensor) -> te.Tensor:
    """out[n, f // b, y, x, f % b] = sum over (c, ky, kx) of
    x[n, c // b, y*sh + ky*dh, x*sw + kx*dw, c % b] * W[f // b, c, ky, kx, f % b] (weights
    packed in blocks of b filters, ``kernel_block`` = b), ``padded`` the padded input. With
    attr ``plain_input`` the input is NCHW, x[n, c, y*sh + ky*dh, x*sw + kx*dw]: a conv whose
    input channels come in no whole blocks (a stem conv's 3) starts a chain. A depthwise conv
    (groups = C, weights [C/b, 1, KH, KW, b]) is a weighted pooling window per vector of
    channels."""
    b = attrs["layout_block"]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilations"]
    if attrs["groups"] > 1:
        return _depthwise_blocked(x, w, padded, out, (sh, sw), (dh, dw))
    ry, rx = te.reduce_axis(w.shape[2], "ry"), te.reduce_axis(w.shape[3], "rx")
    acc = te.accumulator_dtype(x.dtype)
    if attrs.get("plain_input"):
        rc = te.reduce_axis(x.shape[1], "rc")
        axes = [rc, ry, rx]

        def pixel(n, y, xx):
            return padded[n, rc, y * sh + ry.var * dh, xx * sw + rx.var * dw]

        def weight(f, lane):
            return w[f, rc, ry, rx, lane]
    else:
        rco, rci = te.reduce_axis(x.shape[1], "rco"), te.reduce_axis(b, "rci")
        axes = [rco, ry, rx, rci]

        def pixel(n, y, xx):
            return padded[n, rco, y * sh + ry.var * dh, xx * sw + rx.var * dw, rci]

        def weight(f, lane):
            return w[f, rco.var * b + rci.var, ry, rx, lane]

    def body(n, f, y, xx, lane):
        return te.sum_(E.cast(acc, pixel(n, y, xx)) * E.cast(acc, weight(f, lane)), axis=axes)
    tile = te.compute((x.shape[0], w.shape[0], *out, b), body, name="conv_blocked",
                      tag="anchor:conv_blocked", axis_names=["n", "f", "y", "x", "lane"])
    return te.compute(tile.shape, lambda *i: E.cast(x.dtype, tile[i]), name="conv")


def _depthwise_blocked(x: te.Tensor, w: te.Tensor, padded: te.Tensor, out: tuple[int, int],
                       strides, dilations) -> te.Tensor:
    ry, rx = te.reduce_axis(w.shape[2], "ry"), te.reduce_axis(w.shape[3], "rx")
    acc = te.accumulator_dtype(x.dtype)

    def body(n, c, y, xx, lane):
        pixel = padded[n, c, y * strides[0] + ry.var * dilations[0],
                       xx * strides[1] + rx.var * dilations[1], lane]
        return te.sum_(E.cast(acc, pixel) * E.cast(acc, w[c, 0, ry, rx, lane]), axis=[ry, rx])
    tile = te.compute((*x.shape[:2], *out, x.shape[4]), body, name="conv_blocked_window",
                      tag="anchor:conv_blocked_window", axis_names=["n", "c", "y", "x", "lane"])
    return te.compute(tile.shape, lambda *i: E.cast(x.dtype, tile[i]), name="conv")


ROW_BANDS_TWO = 2       # filters x taps at most this many times the output's pixels
CONV_PREFETCH_CHOICES = (0, 1, 2, 4, 8, 16)
CONV_PREFETCH_POINTWISE = 16
CONV_PREFETCH_WINDOW = 16
STRIDED_ROWS_MAX = 8    # a strided tile's outputs of a row (its taps inside the channels)
# Accumulators a strided tile needs for its FMAs to run back to back beside its loads (2R+1
# broadcasts and 3V weight vectors per row of taps); fewer leave the FMA pipes waiting
STRIDED_BUSY_ACCUMULATORS = 12
# Rows shorter than this read each weight vector for too few outputs (YOLO's 64 -> 128 onto
# 26x26, 7 x 2 -> 3 x 4 outputs x vectors: 0.39 -> 0.42 ms)
STRIDED_REUSE_ROWS = 4


@dataclass(frozen=True)
class PrefetchFits:
    """A blocked conv space's constraint: the weights that one step of the channel loop
    reads (a run per filter block: its taps where they are inside the channels, else one
    vector) take at most PREFETCH_MAX_LINES cache lines, where the tile prefetches them."""

    taps: int
    vector_bytes: int

    def lines(self, c) -> int:
        run = self.vector_bytes * (self.taps if c["taps_inner"] else 1)
        return c["filter_vectors"] * -(-run // CACHE_LINE)

    def __call__(self, c) -> str | None:
        if c["prefetch"] and self.lines(c) > PREFETCH_MAX_LINES:
            return (f"prefetch: a step of the channel loop reads {self.lines(c)} cache lines "
                    f"of weights (at most {PREFETCH_MAX_LINES})")
        return None


# A stride-1 conv's channel blocks go outside its tiles where a tile's weights (filter
# vectors x channels x taps) exceed TILE_WEIGHTS_L1, one channel block's fit in
# BLOCK_WEIGHTS_L1 and the band's partial sums in BAND_SUMS_L1: each block's weights then
# serve the band's tiles from L1, where the plain order streams all of them from L2 for every
# tile. Direct convs, ms at one thread, that lost: 5x5 with 51 KB of weights a block (48 ->
# 64 onto 35x35) 1.24 -> 1.57; 3x3 whose 36 KB tiles L1 holds (32 -> 64 onto 147x147) 2.4 ->
# 4.6; 3x3 whose band sums take 100-157 KB (128 -> 128 onto 28x28 2.17 -> 2.86, 96 -> 96
# onto 35x35 1.25 -> 1.48, 256 -> 256 onto 28x28 8.6 -> 11.7).
TILE_WEIGHTS_L1 = 48 << 10
BLOCK_WEIGHTS_L1 = 24 << 10
BAND_SUMS_L1 = 48 << 10


def _weights_outrun_l1(vectors: int, channel_blocks: int, taps: int, band_pixels: int,
                       out: te.Tensor) -> bool:
    """Whether a register tile of ``vectors`` filter vectors reads more weights than
    TILE_WEIGHTS_L1 over its ``channel_blocks`` blocks of input channels, while one block's
    weights fit BLOCK_WEIGHTS_L1 and the partial sums of a band of ``band_pixels`` outputs
    BAND_SUMS_L1."""
    vector = out.shape[4] * itemsize(out.dtype)
    block = vectors * out.shape[4] * taps * vector
    return block * channel_blocks > TILE_WEIGHTS_L1 and block <= BLOCK_WEIGHTS_L1 and \
        band_pixels * vectors * vector <= BAND_SUMS_L1


def _taps(tile: te.Tensor) -> int:
    """The kernel taps (ry x rx) that a conv tile's reduction sums."""
    return math.prod(iv.extent for iv in tile.op.reduce_axis if iv.name in ("ry", "rx"))


def _default_prefetch(out: te.Tensor, tile: te.Tensor, taps: int) -> int:
    """Steps of the channel loop ahead that a conv's register tile prefetches its weights,
    where they stream from beyond L2 on every call: a 1x1 conv's step is short (one weight
    vector per filter block for a row of FMAs) and the hardware prefetchers fall behind; a
    3x3 conv's step reads its taps' weights in runs they follow, except where the weights
    are many times L2. ResNet-50 (Xeon), kernel ms at one thread, none -> 16 steps: 1024 ->
    2048 1x1 s2 onto 7x7 2.05 -> 1.87, 512 -> 1024 s2 1.46 -> 1.33, 2048 -> 512 0.94 ->
    0.87, 64 -> 256 (64 KB of weights, in L2) 0.63 -> 0.65; 512 -> 512 3x3 onto 7x7, 4
    steps: 2.02 -> 1.93; 3x3 s2 convs and the stem lost up to 6% with any prefetch. A 3x3
    conv's weights of more than 2 MB, 16 steps ahead rather than 4 (Zen 5, ms at one thread):
    ResNet-50's 512 -> 512 onto 7x7 0.994 -> 0.897 and 0.985 -> 0.901, its s2 onto 7x7 1.013
    -> 0.932, ResNet-18's 0.956 -> 0.863 and 0.488 -> 0.444 (end to end 5.17 -> 5.08 at one
    thread, 2.63 -> 2.56 at two); 8 steps gained half of that; Inception's and YOLO's convs
    unchanged."""
    weight_bytes = out.shape[1] * out.shape[4] * itemsize(out.dtype) * \
        math.prod(iv.extent for iv in tile.op.reduce_axis)
    if taps == 1:
        return CONV_PREFETCH_POINTWISE if weight_bytes >= L2_BYTES // 4 else 0
    return CONV_PREFETCH_WINDOW if weight_bytes > 4 * L2_BYTES else 0


def conv_blocked_space(target: Target, out: te.Tensor, tile: te.Tensor, attrs: dict
                       ) -> SearchSpace:
    """row_tile: outputs of a row per register tile (R); filter_vectors: filter blocks per
    tile (V; R*V accumulators); taps_inner: the kernel taps inside the channels of a block
    (each broadcast input serves one tap) or outside them; row_bands: the parallel loop's
    outer axis; parallel; prefetch: steps of the channel loop ahead that the tile prefetches
    its weights. ``attrs``: the conv's."""
    registers = 32 if target.vector_bits >= 512 else 16
    width, blocks = out.shape[3], out.shape[1]
    rows = tuple(range(1, min(width, 16) + 1))
    vectors = tuple(v for v in (1, 2, 3, 4) if blocks % v == 0)
    # the parallel loop's outer axis, and so what each thread's share of it reads: output
    # rows (all the weights, its band of the input) where the weights are the smaller, as
    # in the early layers; filter blocks (its part of the weights, all the input) where the
    # input is. Consecutive convs that both split rows keep each band on one core
    taps = _taps(tile)
    pixels = out.shape[0] * out.shape[2] * out.shape[3]
    height = out.shape[2]
    bands = tuple(sorted({1, 2, 4, height} & set(range(1, height + 1))))
    # (two bands where the weights are the larger, so that each thread reads half of the
    # input and each band reuses the weights: ResNet-50, ms at 1 / 2 threads, 61.8 / 36.4
    # -> 71.9 / 37.7, each band reads the weights from memory again; only where they are at
    # most 2 MB, 61.8 / 36.4 -> 63.3 / 35.7)
    default_bands = height if blocks * out.shape[4] * taps <= pixels else 1
    if default_bands == 1 and 2 in bands and \
            blocks * out.shape[4] * taps <= ROW_BANDS_TWO * pixels:
        # weights about the input's size: two bands, so that each thread reads half of the
        # input (the half its core's cache holds where the conv before split rows too) for
        # all of the weights. ResNet-50's 1024 -> 256 1x1 convs onto 14x14, ms at 2 threads
        # 0.44 -> 0.37 (one thread 0.65 -> 0.65-0.69); end to end, alternating in one
        # process, ms at 1 / 2 threads: ResNet-50 55.5 / 30.9 -> 55.6 / 30.6 and 57.4 / 33.1
        # -> 58.1 / 31.8 (two runs), ResNet-10 11.32 / 6.08 -> 11.15 / 5.96
        default_bands = 2
    # even pieces of the row, at most 14 outputs; then as many filter vectors as still fit
    default_rows = -(-width // -(-width // 14))
    registers_fit = RegisterTileFits(registers)
    strided = taps > 1 and attrs["strides"][1] > 1 and not attrs.get("plain_input")
    if strided:
        # a strided conv's taps (3x3 s2): short rows, so taps inside a block's channels. In
        # ResNet-50, ms at 1 / 2 threads, its three 3x3 s2 convs' kernel groups, rows of 14
        # -> 7: 128 -> 128 onto 28x28, 4.01 / 2.30 -> 3.84 / 2.14; onto 14x14 5.58 / 3.49
        # -> 5.37 / 3.46 (the model's kernels: 57.5 / 32.7 -> 57.4 / 32.5)
        default_rows, default_vectors = _strided_tile(width, vectors, registers_fit)
    # rows of at most 7 outputs leave registers for reusing each weight vector across the
    # taps (256->512 3x3 s2 onto 7x7: 1.09 -> 0.89 ms); longer ones gain nothing
    default_taps_inner = default_rows <= 7 or strided
    if not strided:
        # as many filter vectors as the registers hold beside the tile's weight vectors and
        # one broadcast, or, with the taps inside, a row of broadcasts (each input serves the
        # taps that read it). Inception's 288 -> 384 3x3 s2 onto 17x17, 6 outputs x 4
        # vectors -> x 3: LLVM spilled 18 vectors per channel step; one thread 5.71 -> 3.87
        # ms (onnxruntime 3.88)
        held = shared_broadcasts(default_rows, default_taps_inner, taps)
        default_vectors = max(v for v in vectors if registers_fit.holds(default_rows, v,
                                                                        broadcasts=held))
    # a 1x1 conv on a narrow map (7x7) whose tile is a whole row: two rows per tile, so that
    # each weight vector read from L2 serves 14 outputs, not 7. ResNet-50's 2048 -> 512 and
    # 512 -> 2048 onto 7x7, ms at 1 / 2 threads: 0.74 / 0.50 -> 0.67 / 0.42 and 0.75 / 0.39
    # -> 0.68 / 0.34 (3x3 convs lost: their taps already reuse each weight across a row)
    lines = (1, 2) if taps == 1 and out.shape[2] > 1 else (1,)
    default_lines = 2 if lines[-1] == 2 and default_rows == width and default_bands == 1 and \
        registers_fit.holds(default_rows, default_vectors, lines=2) else 1
    fits = PrefetchFits(taps, out.shape[4] * itemsize(out.dtype))
    default_prefetch = _default_prefetch(out, tile, taps)
    channel_blocks = tile.op.reduce_axis[0].extent if len(tile.op.reduce_axis) == 4 else 1
    outer_choices = (False, True) if channel_blocks > 1 and width > 1 else (False,)
    # the channel blocks outside the tiles where a tile's weights would otherwise stream from
    # L2 for few outputs: strided 3x3 convs, and convs whose tile is the whole row of a narrow
    # map (a 1x1 conv's two rows of it). ResNet-50's kernels, ms at one thread: 3x3 s2 onto
    # 7x7 2.24 -> 2.03, 14x14 1.87 -> 1.81, 28x28 1.85 -> 1.82; 3x3 onto 7x7 1.93 -> 1.84;
    # 1x1 onto 7x7: 1024 -> 2048 s2 1.73 -> 1.62, 2048 -> 512 0.78 -> 0.73, 512 -> 2048 0.78
    # -> 0.77. Longer rows lost: 1x1 s2 256 -> 512 onto 28x28 1.42 -> 1.62, 512 -> 1024
    # onto 14x14 1.52 -> 1.60
    # Strided convs whose tiles do not divide the row too (a guarded last tile, peeled), ms
    # at one thread: Inception's 288 -> 384 3x3 s2 onto 17x17 4.21 -> 3.75 (onnxruntime
    # 3.70), YOLO's s2 onto 26x26 0.726 -> 0.640 and 0.410 -> 0.365, onto 13x13 0.760 ->
    # 0.628 and 0.401 -> 0.312 (two threads: 0.412 -> 0.337)
    default_outer = outer_choices[-1] and (
        (taps > 1 and (strided or default_rows == width)) or default_lines == 2)
    if outer_choices[-1] and not default_outer and taps > 1 and not strided and \
            default_bands == 1 and \
            _weights_outrun_l1(default_vectors, channel_blocks, taps, pixels, out):
        # a stride-1 conv over a small map whose tile reads more weights than L1 holds
        # (Inception's 1x7 and 7x1 convs onto 17x17: 143 KB for each 9-output tile) while
        # one channel block's weights and the map's partial sums fit: the blocks outside the
        # tiles (whether or not the tiles divide the row: 9 + 8), the taps inside each
        # channel where the registers hold a row of broadcasts (each serves the taps that
        # read it). Inception's 7-tap convs, ms at one thread: 160 -> 160 1x7 0.795 -> 0.638
        # (onnxruntime 0.755), 7x1 0.772 -> 0.721 (0.626), 128 -> 128 0.494 -> 0.415 (0.454)
        # and 0.498 -> 0.458 (0.391); 256 -> 256 1x5 onto 19x19 1.59 -> 1.40. End to end,
        # Inception 38.5 -> 37.6 at one thread, 20.7 at two either way (the 160-filter convs
        # have five filter blocks to share)
        default_outer = True
        default_taps_inner = registers_fit.holds(default_rows, default_vectors,
                                                 broadcasts=default_rows)
    if fits({"taps_inner": default_taps_inner, "filter_vectors": default_vectors,
             "prefetch": default_prefetch}):
        default_prefetch = 0
    return SearchSpace([
        Knob("row_tile", rows, default_rows, "outputs of a row per register tile"),
        Knob("filter_vectors", vectors, default_vectors, "filter blocks per register tile"),
        Knob("taps_inner", (False, True), default_taps_inner, "kernel taps inside a block's "
             "channels"),
        Knob("row_bands", bands, default_bands, "bands of output rows outside the filter "
             "blocks in the parallel loop (1: filter blocks outer; a thread reads part of the "
             "weights, all of the input; the map's height: rows outer, all of the weights, "
             "part of the input)"),
        Knob("tile_lines", lines, default_lines, "output rows per register tile (a 1x1 "
             "conv's)"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
        Knob("prefetch", CONV_PREFETCH_CHOICES, default_prefetch, "steps of the input "
             "channel loop ahead that the register tile prefetches its weights (0: none)"),
        Knob("channels_outer", outer_choices, default_outer, "the input channel blocks "
             "outside a band's register tiles (each block's weights serve the whole band "
             "from L1; the band's partial sums add up in a buffer) or inside each tile"),
    ], [registers_fit, fits],
        name="conv (blocked)")


def _strided_tile(width: int, vectors: tuple[int, ...], fits: RegisterTileFits
                  ) -> tuple[int, int]:
    """(row_tile, filter_vectors) of a strided conv whose taps run inside the channels: rows
    of at most STRIDED_ROWS_MAX outputs, each with the most filter vectors that the registers
    hold beside a row of broadcasts; of these, the tile that wastes the least work, counting
    both the outputs computed past the row's end (a tile that does not divide the row) and
    a tile of fewer than STRIDED_BUSY_ACCUMULATORS accumulators; then the longest row (each
    weight vector read serves more outputs). ms at one thread, the old rule (even pieces of
    at most 7) -> this one: the detector's 48 -> 64 onto 16x16, 6 x 2 -> 8 x 2, 0.118 ->
    0.098; 32 -> 48 onto 32x32, 7 x 3 -> 4 x 3, 0.226 -> 0.195; 16 -> 32 onto 64x64, 7 x 2
    -> 8 x 2, 0.336 -> 0.316 (ResNet-50's 28x28, 14x14 and 7x7 keep 7 x 2)."""
    tiles = []
    for rows in range(1, min(width, STRIDED_ROWS_MAX) + 1):
        held = [v for v in vectors if fits.holds(rows, v, broadcasts=rows)]
        if held:
            v = max(held)
            useful = width / (-(-width // rows) * rows) * \
                min(rows * v, STRIDED_BUSY_ACCUMULATORS) / STRIDED_BUSY_ACCUMULATORS * \
                min(rows, STRIDED_REUSE_ROWS) / STRIDED_REUSE_ROWS
            tiles.append((useful, rows, v))
    _, rows, v = max(tiles, default=(0.0, 1, min(vectors)))
    return rows, v


def schedule_conv_blocked(target: Target, sch: Schedule, out: te.Tensor, tile: te.Tensor,
                          config) -> None:
    """for (n.band.f.o.y.o: parallel) for (x.o)  [row_bands: 1, or the height: n.y.f.o]
         acc[L, R, V, b] = 0
         for (c.o, ky, kx, c.i) [or (c.o, c.i, ky, kx)]:
           for (l, r, v: unrolled) for (lane: vectorized):
             acc[l, r, v, lane] += in[.., c.i] * W[.., lane]
         for (l, r, v: unrolled) for (lane: vectorized): out[n, f, y, x, lane] = epilogue(acc)

    (L = tile_lines output rows of R = row_tile outputs.)

    Every input element is one broadcast, every weight row and output one whole vector."""
    if config.get("channels_outer"):
        _schedule_channels_outer(target, sch, out, tile, config)
        return
    if not _pad_in_place(out, tile, config):
        materialize_pad(target, sch, tile)
    st = sch[out]
    n, f, y, x, lane = st.op_axis
    width = out.shape[3]
    rows = min(config["row_tile"], width)
    fo, fv = st.split(f, config["filter_vectors"])
    xo, xi = st.split(x, rows, shift_tail=width % rows != 0)
    band, y = st.split(y, -(-out.shape[2] // config["row_bands"]))
    y, yi = st.split(y, config["tile_lines"])
    st.reorder(n, band, fo, y, xo, yi, xi, fv, lane)
    outer = st.fuse(n, band, fo, y)
    st.unroll(yi)
    st.unroll(xi)
    st.unroll(fv)
    st.vectorize(lane)
    if config["parallel"] and worth_threads(math.prod(out.shape), reduction_depth(tile)):
        st.parallel(outer)
    ls = register_tile(sch, tile, st, xo)
    ln, lf, ly, lx, llane = ls.op_axis
    if len(ls.reduce_axis) == 3:        # a plain input's channels, unblocked
        rc, ry, rx = ls.reduce_axis
        _order_register_tile(ls, config, (ln,), rc, ry, rx, (ly, lx, lf, llane))
    else:
        rco, ry, rx, rci = ls.reduce_axis
        _order_register_tile(ls, config, (ln, rco), rci, ry, rx, (ly, lx, lf, llane))


def _order_register_tile(ls: Stage, config, outer: tuple, channel: te.IterVar,
                         ry: te.IterVar, rx: te.IterVar, tile: tuple) -> None:
    """A register tile's loops: ``outer``, then the channel step and the kernel taps (the
    taps inside the step where ``taps_inner``), then the ``tile``'s rows, outputs and
    filter vectors unrolled and its lanes vectorized; the weights (the second operand)
    prefetched ``prefetch`` channel steps on."""
    taps = (channel, ry, rx) if config["taps_inner"] else (ry, rx, channel)
    ls.reorder(*outer, *taps, *tile)
    *unrolled, lanes = tile
    for axis in unrolled:
        ls.unroll(axis)
    ls.vectorize(lanes)
    if config["prefetch"]:
        ls.prefetch(second_operand(ls.op.body), channel, config["prefetch"])


def _pad_in_place(out: te.Tensor, tile: te.Tensor, config) -> bool:
    """Whether a conv in the plain order reads its blocked input in place, the padding
    inlined as a select that loop partitioning decides for all but the border rows and tiles:
    where its tiles divide the row. A shifted last tile keeps the selects in every piece
    (YOLO's 13x13 and 26x26 convs lost 10-15%, Inception's up to 2x). ms at one thread, the
    padded copy -> in place: YOLO's 16 -> 32 3x3 s2 onto 104x104 1.05 -> 0.73, the
    detector's 16 -> 32 s2 onto 64x64 0.33 -> 0.28; end to end at 1 / 2 threads, YOLO 16.4 /
    9.13 -> 15.9 / 8.87, the detector 1.096 / 0.611 -> 1.046 / 0.575."""
    width = out.shape[3]
    return len(tile.op.reduce_axis) == 4 and _taps(tile) > 1 and \
        width % min(config["row_tile"], width) == 0


def _schedule_channels_outer(target: Target, sch: Schedule, out: te.Tensor, tile: te.Tensor,
                             config) -> None:
    """The blocked conv with the input channel blocks outside a band's register tiles (as
    onnxruntime's NCHWc convs run): each block's weights (filter vectors x taps x 16
    channels) and input rows stay in L1 while every tile of the band uses them, where the
    plain order streams all of a tile's weights from L2 (or memory) for each tile.

        for (n.band.f.o: parallel)
          rows[band, W, V, b] = 0                    # the band's sums (row_bands)
          for c.o:
            for (y.o, x.o):
              acc[L, R, V, b] = 0
              for (ky, kx, c.i) [or (c.i, ky, kx)]: acc += in[.., c.i] * W[.., lane]
              rows[y.o tile, x.o tile, ..] += acc
          for (y, x, v) for (lane: vectorized): out[n, f, y, x, lane] = epilogue(rows)

    The padding is not copied: the tiles read the input in place, the padding inlined as a
    select whose condition loop partitioning decides for all but the border rows and tiles
    (their loops are serial inside the band). A row that the tiles do not divide ends in a
    guarded tile, which partitioning gives its own shorter copy (17 outputs: 9 + 8); no
    output is computed twice, as a shifted tile would (and add into the sums twice).
    ResNet-50's kernels, ms at one thread, the padded copy -> in place: 3x3 s2 onto 28x28
    1.77 -> 1.50 (onnxruntime 1.47), onto 14x14 1.73 -> 1.54, onto 7x7 1.99 -> 1.79; 3x3
    onto 7x7 1.78 -> 1.72.
    """
    rco = tile.op.reduce_axis[0]
    depth = reduction_depth(tile)
    partial = sch.rfactor_axis(tile, rco)
    st = sch[out]
    n, f, y, x, lane = st.op_axis
    width = out.shape[3]
    rows = min(config["row_tile"], width)
    fo, fv = st.split(f, config["filter_vectors"])
    band, y = st.split(y, -(-out.shape[2] // config["row_bands"]))
    st.reorder(n, band, fo, y, x, fv, lane)
    outer = st.fuse(n, band, fo)
    st.vectorize(lane)
    if config["parallel"] and worth_threads(math.prod(out.shape), depth):
        st.parallel(outer)
    buffer = sch.cache_write(tile, "local")
    sch[tile].compute_inline()
    bs = sch[buffer]
    bs.compute_at(st, outer)
    bn, bf, by, bx, blane = bs.op_axis
    (bc,) = bs.reduce_axis
    byo, byi = bs.split(by, config["tile_lines"])
    bxo, bxi = bs.split(bx, rows)
    bs.reorder(bn, bc, byo, bxo, byi, bxi, bf, blane)
    bs.unroll(byi)
    bs.unroll(bxi)
    bs.unroll(bf)
    bs.vectorize(blane)
    ps = sch[partial]
    ps.compute_at(bs, bxo)
    pn, pf, py, px, plane, pc = ps.op_axis
    pry, prx, pci = ps.reduce_axis
    _order_register_tile(ps, config, (pn, pc), pci, pry, prx, (py, px, pf, plane))


# ---------------------------------------------------------------------------------------------
# pooling on blocked tensors

def pool_blocked(kind: str, attrs: dict, padded: te.Tensor, out: tuple[int, int],
                 divisor=None) -> te.Tensor:
    """max_pool or avg_pool of a blocked [N, C/b, H, W, b] tensor (``padded``: padded by the
    pool's padding, overhang and value): the window reduction per vector of b channels.
    ``divisor(o)``: avg_pool's window count at output position o."""
    strides, kernel = attrs["strides"], attrs["kernel_shape"]
    dilations = tuple(attrs.get("dilations", (1, 1)))
    ry, rx = te.reduce_axis(kernel[0], "r0"), te.reduce_axis(kernel[1], "r1")
    shape = (*padded.shape[:2], *out, padded.shape[4])

    def tap(n, c, y, xx, lane):
        return padded[n, c, y * strides[0] + ry.var * dilations[0],
                      xx * strides[1] + rx.var * dilations[1], lane]
    if kind == "max_pool":
        return te.compute(shape, lambda *i: te.max_ordered(tap(*i), axis=[ry, rx]),
                          name="max_pool")
    total = te.compute(shape, lambda *i: te.sum_(tap(*i), axis=[ry, rx]),
                       name="pool_sum", tag="anchor:pool_sum")
    return te.compute(shape, lambda n, c, y, xx, lane: total[n, c, y, xx, lane] /
                      divisor((y, xx)), name="avg_pool")


def window_blocked_space(target: Target, out: te.Tensor) -> SearchSpace:
    """Pools and depthwise convs on blocked tensors: row_tile outputs of a row accumulated
    in registers at once (the default: up to 8, in even pieces of the row); parallel."""
    width = out.shape[3]
    return SearchSpace([
        Knob("row_tile", tuple(range(1, min(width, 12) + 1)), -(-width // -(-width // 8)),
             "outputs of a row per register tile"),
        Knob("parallel", (True, False), True, "rows on threads (when large enough)"),
    ], name="window (blocked)")


def schedule_window_blocked(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                            config) -> None:
    """for (n.c.y: parallel) for (x.o) [for (ry, rx) for (x.i: unrolled)
    for (lane: vectorized) acc = max(acc, in[..]) (or acc += in[..] * w[..])]: row_tile
    outputs of a row in registers, every tap a whole vector of channels. Pools and
    depthwise convs. The padding stays inline: whether a tap is inside the input depends on
    (y, x) only, not on the lanes, so it is one select per vector, which loop partitioning
    removes from the rows and columns away from the edges (a materialized padded input
    measured 1.4-2x slower: one more pass over a tensor these kernels read once)."""
    local = sch.cache_write(window, "local") if window is out else window
    st = sch[out]
    n, c, y, x, lane = st.op_axis
    rows = min(config["row_tile"], out.shape[3])
    xo, xi = st.split(x, rows, shift_tail=out.shape[3] % rows != 0)
    st.reorder(n, c, y, xo, xi, lane)
    outer = st.fuse(n, c, y)
    st.unroll(xi)
    st.vectorize(lane)
    if config["parallel"] and np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS:
        st.parallel(outer)
    ls = sch[local]
    ls.compute_at(st, xo)
    ln, lc, ly, lx, llane = ls.op_axis
    ls.reorder(ln, lc, ly, *ls.reduce_axis, lx, llane)
    ls.unroll(lx)
    ls.vectorize(llane)

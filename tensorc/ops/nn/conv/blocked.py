"""Dense convs on blocked tensors (``ops/nn/blocked_layout.py``): a register tile of R
outputs of a row x V vectors of b filters, every input element one broadcast, every weight
row and output one whole vector; the input channels inside each tile, or their blocks
outside a band of tiles (``channels_outer``)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.loop import CACHE_LINE, itemsize
from tensorc.ir.lower import PREFETCH_MAX_LINES
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ops.matmul.gemm import second_operand
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.schedules import (
    RegisterTileFits, materialize_pad, reduction_depth, register_tile, shared_broadcasts,
    worth_threads,
)
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target


def blocked_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, int]
                    ) -> te.Tensor:
    """out[n, f // b, y, x, f % b] = sum over (c, ky, kx) of
    x[n, c // b, y*sh + ky*dh, x*sw + kx*dw, c % b] * W[f // b, c, ky, kx, f % b] (weights
    packed in blocks of b filters, ``kernel_block`` = b), read from the padded input. With
    attr ``plain_input`` the input is NCHW, x[n, c, y*sh + ky*dh, x*sw + kx*dw]: a conv whose
    input channels come in no whole blocks (a stem conv's 3) starts a chain."""
    padded = padded_input(x, attrs["pads"], blocked=not attrs.get("plain_input"))
    b = attrs["layout_block"]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilations"]
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


ROW_BANDS_TWO = 2       # filters x taps at most this many times the output's pixels
CONV_PREFETCH_CHOICES = (0, 1, 2, 4, 8, 16)
CONV_PREFETCH_POINTWISE = 16
CONV_PREFETCH_WINDOW = 16
STRIDED_ROWS_MAX = 8    # a strided tile's outputs of a row (its taps inside the channels)
# Accumulators a strided tile needs for its FMAs to run back to back beside its loads (2R+1
# broadcasts and 3V weight vectors per row of taps); fewer leave the FMA pipes waiting
STRIDED_BUSY_ACCUMULATORS = 12
# Rows shorter than this read each weight vector for too few outputs (f3a2e16)
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
# vectors x channels x taps) exceed L1, one channel block's fit in half of it and the band's
# partial sums in all of it: each block's weights then serve the band's tiles from L1, where
# the plain order streams all of them from L2 for every tile; convs past any of the three
# bounds lost (5ed92ad, with 48 KB of L1).


def _weights_outrun_l1(vectors: int, channel_blocks: int, taps: int, band_pixels: int,
                       out: te.Tensor, l1_bytes: int) -> bool:
    """Whether a register tile of ``vectors`` filter vectors reads more weights than L1
    (``l1_bytes``) holds over its ``channel_blocks`` blocks of input channels, while one
    block's weights fit half of it and the partial sums of a band of ``band_pixels`` outputs
    all of it."""
    vector = out.shape[4] * itemsize(out.dtype)
    block = vectors * out.shape[4] * taps * vector
    return block * channel_blocks > l1_bytes and block <= l1_bytes // 2 and \
        band_pixels * vectors * vector <= l1_bytes


def _taps(tile: te.Tensor) -> int:
    """The kernel taps (ry x rx) that a conv tile's reduction sums."""
    return math.prod(iv.extent for iv in tile.op.reduce_axis if iv.name in ("ry", "rx"))


def _default_prefetch(out: te.Tensor, tile: te.Tensor, taps: int, l2_bytes: int) -> int:
    """Steps of the channel loop ahead that a conv's register tile prefetches its weights,
    where they stream from beyond L2 on every call: a 1x1 conv's step is short (one weight
    vector per filter block for a row of FMAs) and the hardware prefetchers fall behind; a
    3x3 conv's step reads its taps' weights in runs they follow, except where the weights
    are many times L2 (``l2_bytes``; measured in 2af2f3b and ef3b3be)."""
    weight_bytes = out.shape[1] * out.shape[4] * itemsize(out.dtype) * \
        math.prod(iv.extent for iv in tile.op.reduce_axis)
    if taps == 1:
        return CONV_PREFETCH_POINTWISE if weight_bytes >= l2_bytes // 4 else 0
    return CONV_PREFETCH_WINDOW if weight_bytes > 4 * l2_bytes else 0


def blocked_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                  ) -> SearchSpace:
    """The space of the group's register tile (:func:`blocked_tile_space`)."""
    return blocked_tile_space(target, out, conv_t.op.input_tensors()[0], attrs)


def blocked_tile_space(target: Target, out: te.Tensor, tile: te.Tensor, attrs: dict
                       ) -> SearchSpace:
    """row_tile: outputs of a row per register tile (R); filter_vectors: filter blocks per
    tile (V; R*V accumulators); taps_inner: the kernel taps inside the channels of a block
    (each broadcast input serves one tap) or outside them; row_bands: the parallel loop's
    outer axis; parallel; prefetch: steps of the channel loop ahead that the tile prefetches
    its weights; channels_outer: the channel blocks outside a band's tiles. ``attrs``: the
    conv's."""
    registers = target.vector_registers
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
    # (two bands where the weights are the larger lost: each band reads them from memory
    # again, 471b46f)
    default_bands = height if blocks * out.shape[4] * taps <= pixels else 1
    if default_bands == 1 and 2 in bands and \
            blocks * out.shape[4] * taps <= ROW_BANDS_TWO * pixels:
        # weights about the input's size: two bands, so that each thread reads half of the
        # input (the half its core's cache holds where the conv before split rows too) for
        # all of the weights (861e214)
        default_bands = 2
    # even pieces of the row, at most 14 outputs; then as many filter vectors as still fit
    default_rows = -(-width // -(-width // 14))
    registers_fit = RegisterTileFits(registers)
    strided = taps > 1 and attrs["strides"][1] > 1 and not attrs.get("plain_input")
    if strided:
        # a strided conv's taps (3x3 s2): short rows, so taps inside a block's channels
        # (f3a2e16)
        default_rows, default_vectors = _strided_tile(width, vectors, registers_fit)
    # rows of at most 7 outputs leave registers for reusing each weight vector across the
    # taps; longer ones gain nothing (f3a2e16)
    default_taps_inner = default_rows <= 7 or strided
    if not strided:
        # as many filter vectors as the registers hold beside the tile's weight vectors and
        # one broadcast, or, with the taps inside, a row of broadcasts (each input serves the
        # taps that read it); more spilled (7e6e95d)
        held = shared_broadcasts(default_rows, default_taps_inner, taps)
        default_vectors = max(v for v in vectors if registers_fit.holds(default_rows, v,
                                                                        broadcasts=held))
    # a 1x1 conv on a narrow map (7x7) whose tile is a whole row: two rows per tile, so that
    # each weight vector read from L2 serves 14 outputs, not 7 (90046ae; 3x3 convs lost:
    # their taps already reuse each weight across a row)
    lines = (1, 2) if taps == 1 and out.shape[2] > 1 else (1,)
    default_lines = 2 if lines[-1] == 2 and default_rows == width and default_bands == 1 and \
        registers_fit.holds(default_rows, default_vectors, lines=2) else 1
    fits = PrefetchFits(taps, out.shape[4] * itemsize(out.dtype))
    default_prefetch = _default_prefetch(out, tile, taps, target.l2_bytes)
    channel_blocks = tile.op.reduce_axis[0].extent if len(tile.op.reduce_axis) == 4 else 1
    outer_choices = (False, True) if channel_blocks > 1 and width > 1 else (False,)
    # the channel blocks outside the tiles where a tile's weights would otherwise stream from
    # L2 for few outputs: strided 3x3 convs (also where their tiles do not divide the row),
    # and convs whose tile is the whole row of a narrow map (a 1x1 conv's two rows of it);
    # longer rows lost (8bd51ee)
    default_outer = outer_choices[-1] and (
        (taps > 1 and (strided or default_rows == width)) or default_lines == 2)
    if outer_choices[-1] and not default_outer and taps > 1 and not strided and \
            default_bands == 1 and \
            _weights_outrun_l1(default_vectors, channel_blocks, taps, pixels, out,
                               target.l1_bytes):
        # a stride-1 conv over a small map whose tile reads more weights than L1 holds
        # (Inception's 1x7 and 7x1 convs onto 17x17) while one channel block's weights and
        # the map's partial sums fit: the blocks outside the tiles, the taps inside each
        # channel where the registers hold a row of broadcasts (5ed92ad)
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
    weight vector read serves more outputs) (f3a2e16)."""
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


def schedule_blocked(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                     attrs: dict, config) -> None:
    """for (n.band.f.o.y.o: parallel) for (x.o)  [row_bands: 1, or the height: n.y.f.o]
         acc[L, R, V, b] = 0
         for (c.o, ky, kx, c.i) [or (c.o, c.i, ky, kx)]:
           for (l, r, v: unrolled) for (lane: vectorized):
             acc[l, r, v, lane] += in[.., c.i] * W[.., lane]
         for (l, r, v: unrolled) for (lane: vectorized): out[n, f, y, x, lane] = epilogue(acc)

    (L = tile_lines output rows of R = row_tile outputs.)

    Every input element is one broadcast, every weight row and output one whole vector."""
    tile = conv_t.op.input_tensors()[0]
    if config["channels_outer"]:
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
    order_tile(register_tile(sch, tile, st, xo), config)


def order_tile(ls: Stage, config) -> None:
    """The loops of a conv's register tile ``ls`` (:func:`_order_register_tile`), over a
    plain input's channels or a blocked input's blocks and their lanes."""
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
    (YOLO's 13x13 and 26x26 convs lost 10-15%, Inception's up to 2x; 10635eb)."""
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
    output is computed twice, as a shifted tile would (and add into the sums twice;
    8bd51ee).
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


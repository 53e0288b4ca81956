"""Filters in vector lanes: a register tile is R outputs of one row x V vectors of filters;
per (channel, tap) V vectors of packed weights and R broadcast inputs (any stride: a
broadcast has its own address), R*V multiply-adds. Small maps (13x13, 14x14, 7x7) leave a
vector along the output row a third empty, and the flattened form's padding columns and
separate epilogue pass cost as much; strided convs gather (or split into phases) their
inputs: this form serves both (5a0026e). The tile accumulates in [x, f] order (NHWC), so
each of its vectors is a register, and is stored to NCHW transposed in registers (rows of R
outputs per filter).
"""
from __future__ import annotations

import math

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.conv.shapes import unpacked_weight_shape
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.schedules import (
    RegisterTileFits, materialize_pad, reduction_depth, register_tile, shared_broadcasts,
    worth_threads,
)
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

# Square tiles (a vector of outputs x one vector of filters, stored transposed) where the
# stores would cost most: short reductions, and output planes a multiple of 2 KB apart (16
# lane stores a plane apart then fall in one or two L1 sets) (1fc0ead).
SQUARE_TILE_MAX_DEPTH = 256
# A tile's outputs share each vector of weights it loads: pointwise convs onto 7x7 maps take
# two lines of the map per tile, 14 outputs as on a 14-wide row, which halves the rate at
# which the first row of tiles pulls each filter block's weights from L3 (390924d).
FILTER_LANES_TILE_OUTPUTS = 14
TILE_LINE_CHOICES = (1, 2, 3, 4)


def filter_lanes_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, ...]
                         ) -> te.Tensor:
    """acc[n, y, x, f] = sum over (c, ky, kx) of padded[n, c, y*sh + ky*dh, x*sw + kx*dw] *
    W[f // b, c, ky, kx, f % b], then the output is acc in NCHW order."""
    kernel = unpacked_weight_shape(attrs, w.shape)[2:]
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


def filter_lanes_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                       ) -> SearchSpace:
    """The register tile's space (:func:`filter_lanes_tile_space`) of the group's tile."""
    tile = conv_t.op.input_tensors()[0]
    depth = math.prod(iv.extent for iv in tile.op.reduce_axis)
    taps = math.prod(iv.extent for iv in tile.op.reduce_axis if iv.name in ("ry", "rx"))
    return filter_lanes_tile_space(target, out, depth, taps, max(attrs["strides"]) > 1)


def filter_lanes_tile_space(target: Target, out: te.Tensor, depth: int, taps: int = 1,
                            strided: bool = False) -> SearchSpace:
    """row_tile: outputs of a row per register tile (R; a vector's worth: the square tile,
    stored transposed); filter_vectors: vectors of filters (V, R*V accumulators);
    taps_inner: the kernel taps innermost (each input broadcast serves KW taps: fewer loads,
    more registers) or the channels. ``depth``: the reduction, C * KH * KW; ``taps``: KH *
    KW; ``strided``: the conv has strides."""
    lanes = target.vector_lanes(out.dtype)
    registers = target.vector_registers
    width, vectors = out.shape[3], -(-out.shape[1] // lanes)
    plane_bytes = out.shape[2] * width * (4 if out.dtype == "float32" else 8)
    square = width >= lanes and (depth <= SQUARE_TILE_MAX_DEPTH or plane_bytes % 2048 == 0)
    # else even pieces of a row, at most 14 outputs; of at most 7 for a strided conv's taps,
    # which then run inside the channels: each step reads one input plane's few rows, which
    # stay in L1 for all the taps (0574ae5)
    most = 7 if strided and taps > 1 else 14
    default_rows = lanes if square else -(-width // -(-width // most))
    rows = sorted({r for r in range(1, min(width, lanes) + 1)
                   if width % r == 0 or r >= 7} | {min(width, 14), default_rows})
    choices = [v for v in (1, 2, 3, 4) if v <= vectors]

    fits = RegisterTileFits(registers)
    # (with the taps inside, a row of broadcasts beside the accumulators, as in the blocked
    # conv's tile, 7e6e95d)
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

def schedule_filter_lanes(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                          attrs: dict, config) -> None:
    """for (n.f.o.y: parallel) for (x.o)
         acc[L, R, V*lanes] = 0; for (c, ky, kx) [or (ky, kx, c)]: for (line, r: unrolled)
           for (v: unrolled) for (l: vectorized): acc[line, r, v, l] += in[..] * W[..]
         for (line, v, r: unrolled) for (l: vectorized): out[n, f, y, x] = epilogue(acc)

    (L: ``tile_lines``, lines of the map per tile, y then counts tiles of L lines.)"""
    tile = conv_t.op.input_tensors()[0]
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
        # (1bedb86)
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

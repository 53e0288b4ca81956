"""Winograd F(m x m, 3 x 3) on blocked tensors (``ops/nn/blocked_layout.py``): its compute,
search space and schedule, and the band and weight panel sizes the layout pass plans with."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.conv.winograd import pass_in_registers
from tensorc.ops.nn.conv.winograd_transforms import (
    KERNEL, out_size, pick, row_sum, stages, tile_grid, transforms,
)
from tensorc.ops.schedules import RegisterTileFits, clamp, in_range
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

# Transformed weights larger than this are read as few times as the bands allow (the bands
# as large as BAND_BUFFER_BYTES lets them); smaller ones (in L2) once per tile row, each
# band's transformed tiles staying in L2
BAND_WEIGHT_BYTES = 1 << 20
# A band's transformed input and GEMM results (on the stack of the thread that runs it) take
# at most this
BAND_BUFFER_BYTES = 2 << 20


def band_rows(attrs: dict, x_shape, filters: int, m: int) -> tuple[int, int]:
    """(default, most) tile rows per band of a blocked F(m, 3) conv on a plain-shaped input
    ``x_shape``: the most whose transformed tiles fit BAND_BUFFER_BYTES (0: not even one
    tile row's), and the default: one tile row where the transformed weights stay in L2,
    else the most (the weights read once per band)."""
    tile_rows, tile_cols = tile_grid(m, out_size(attrs, x_shape))
    alpha2 = (m + KERNEL - 1) ** 2
    per_row = alpha2 * tile_cols * (x_shape[1] + filters) * 4
    most = min(tile_rows, BAND_BUFFER_BYTES // per_row)
    weights = alpha2 * x_shape[1] * filters * 4
    return (most if weights > BAND_WEIGHT_BYTES else min(1, most)), most


def blocked_panel(filters: int, lanes: int) -> int:
    """nr: the filters per panel of a blocked Winograd conv's transformed weights (the B
    of its GEMMs): up to four vectors, a divisor of the filter count."""
    return next(v * lanes for v in (4, 2, 1) if filters % (v * lanes) == 0)


def winograd_blocked(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, int]
                     ) -> te.Tensor:
    """F(m x m, 3 x 3) on blocked tensors (``ops/nn/blocked.py``): x [N, C/b, H, W, b] ->
    [N, F/b, Ho, Wo, b], transformed weights ``w`` [alpha^2, F/nr, C, nr] (B panels of nr
    filters). The tiles are indexed (tile row, tile column); the transforms run on vectors
    of b channels (or filters), no padded copy of the input and no layout transform:

        rows[n, ty, tx, cb, a, k, ci]    B^T d over the patch rows (the input read in place,
                                         zero outside it)
        V[n, ab, t, c]                   (B^T d) B, t = ty * (tile columns) + tx
        M[n, ab, t, f]                   sum_c V[.., c] U[ab, c, f]: per band of tile rows,
                                         alpha^2 GEMMs of (tiles x C) @ (C x F)
        cols[n, ty, tx, fb, i, b, fi]    A^T M
        conv[n, fb, y, x, fi]            (A^T M) A"""
    m = attrs["winograd"]
    alpha = m + KERNEL - 1
    at, _, bt = transforms(m)
    b, nr, filters = attrs["layout_block"], attrs["kernel_block"], attrs["filters"]
    n_batch, cblocks, height, width = x.shape[:4]
    tile_rows, tile_cols = tile_grid(m, out)
    top, left = attrs["pads"][0], attrs["pads"][1]

    def pixel(n, cb, i, j, ci):
        inside = E.all_of(in_range(i, height), in_range(j, width))
        load = x[n, cb, clamp(i, height), clamp(j, width), ci]
        return E.select(inside, load, E.Const(0.0, x.dtype))

    # each tile's patch, zero outside the input: at the edges, the loop partition copies only
    # these loads per edge piece and runs one transform body after them (copying the
    # transform's 72 vectors of sums per piece made the largest kernels of resnet, squeezenet,
    # inception and yolo, 9 pieces each)
    patch = te.compute((n_batch, tile_rows, tile_cols, cblocks, alpha, alpha, b),
                       lambda n, ty, tx, cb, i, k, ci: pixel(n, cb, ty * m + i - top,
                                                            tx * m + k - left, ci),
                       name="winograd_patch", tag="anchor:winograd_patch")

    def rows_pass(n, ty, tx, cb, a, k, ci):
        column = [patch[n, ty, tx, cb, i, k, ci] for i in range(alpha)]
        return pick(a, [row_sum(bt[r], column) for r in range(alpha)])
    rows = te.compute((n_batch, tile_rows, tile_cols, cblocks, alpha, alpha, b), rows_pass,
                      name="winograd_rows", tag="anchor:winograd_rows")

    def input_pass(n, ab, t, c):
        ty, tx = t // tile_cols, t % tile_cols
        terms = [rows[n, ty, tx, c // b, ab // alpha, k, c % b] for k in range(alpha)]
        return pick(ab % alpha, [row_sum(bt[r], terms) for r in range(alpha)])
    v = te.compute((n_batch, alpha * alpha, tile_rows * tile_cols, cblocks * b), input_pass,
                   name="winograd_input", tag="anchor:winograd_input")

    rc = te.reduce_axis(cblocks * b, "rc")
    gemm = te.compute((n_batch, alpha * alpha, tile_rows * tile_cols, filters),
                      lambda n, ab, t, f: te.sum_(v[n, ab, t, rc] * w[ab, f // nr, rc, f % nr],
                                                  axis=rc),
                      name="winograd_gemm", tag="anchor:winograd_gemm")

    def cols_pass(n, ty, tx, fb, i, bb, fi):
        terms = [gemm[n, a * alpha + bb, ty * tile_cols + tx, fb * b + fi]
                 for a in range(alpha)]
        return pick(i, [row_sum(at[r], terms) for r in range(m)])
    cols = te.compute((n_batch, tile_rows, tile_cols, filters // b, m, alpha, b), cols_pass,
                      name="winograd_output", tag="anchor:winograd_output")

    def output_pass(n, fb, y, xx, fi):
        terms = [cols[n, y // m, xx // m, fb, y % m, bb, fi] for bb in range(alpha)]
        return pick(xx % m, [row_sum(at[r], terms) for r in range(m)])
    return te.compute((n_batch, filters // b, *out, b), output_pass, name="conv",
                      axis_names=["n", "f", "y", "x", "lane"])


def winograd_blocked_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                           ) -> SearchSpace:
    """tiles: the band's tiles per register tile (its rows; the last tile shifted back to end
    with the band); filter_vectors: vectors of filters per register tile (a divisor of the
    weight panel's); band: tile rows per band (each band's transformed input and GEMM
    results computed together, the transformed weights read once per band; one band: the
    stages' own loops on threads)."""
    found = stages(conv_t)
    filters = found["gemm"].shape[-1]
    tile_cols = found["cols"].shape[2]
    lanes = target.vector_lanes(conv_t.dtype)
    fits = RegisterTileFits(target.vector_registers, rows_knob="tiles")
    vectors = tuple(v for v in (1, 2, 3, 4) if attrs["kernel_block"] // lanes % v == 0)
    x = found["patch"].op.input_tensors()[0]         # [N, C/b, H, W, b]
    plain = (x.shape[0], x.shape[1] * x.shape[4], x.shape[2], x.shape[3])
    band, most = band_rows(attrs, plain, filters, attrs["winograd"])
    bands = tuple(sorted({1, band, most}))
    tiles = band * tile_cols
    rows, vecs = register_tile_of(tiles, vectors, fits)
    return SearchSpace([
        Knob("tiles", tuple(range(1, min(tiles, 16) + 1)), rows, "tiles per register tile"),
        Knob("filter_vectors", vectors, vecs, "filter vectors per register tile"),
        Knob("band", bands, band, "tile rows per band"),
        Knob("parallel", (True, False), True, "bands (or one band's loops) on threads"),
    ], [fits], name="conv (winograd, blocked)")


# A register tile keeps both FMA pipes busy with at least BUSY_ACCUMULATORS accumulators and
# FMAS_PER_LOAD FMAs per load (r tiles x v filter vectors: r * v FMAs per r broadcasts and v
# weight vectors), fitted on ResNet's bands (2a61620).
BUSY_ACCUMULATORS = 24
FMAS_PER_LOAD = 2.2


def register_tile_of(tiles: int, vectors: tuple[int, ...], fits) -> tuple[int, int]:
    """(rows, filter vectors) of a band of ``tiles``: the tile that wastes least, counting
    rows computed twice (the last tile shifted back), fewer than BUSY_ACCUMULATORS
    accumulators and fewer than FMAS_PER_LOAD FMAs per load; then the most accumulators."""
    best = None
    for v in vectors:
        for r in range(1, min(tiles, 16) + 1):
            if not fits.holds(r, v):
                continue
            useful = tiles / (-(-tiles // r) * r) * \
                min(r * v, BUSY_ACCUMULATORS) / BUSY_ACCUMULATORS * \
                min(1.0, r * v / (r + v) / FMAS_PER_LOAD)
            key = (round(useful, 3), r * v)
            if best is None or key > best[0]:
                best = (key, r, v)
    _, rows, vecs = best            # (a row of one vector always fits)
    return rows, vecs


def schedule_winograd_blocked(target: Target, sch: Schedule, out: te.Tensor,
                              conv_t: te.Tensor, attrs: dict, config) -> None:
    """for (n.band: parallel)
         for (t, c.o): rows = B^T d (36 vectors of channels); V[ab, t, c] = rows B
         for (ab, panel, f.o, t.o): acc[t.i, f.v, lane] over c (register tile); M = acc
         for (f.b, ty, tx): cols = A^T M; out[.., lane] = epilogue(cols A) (vectors of
                                                                          filters)
    (one band: the t, the (ab, panel) and the (f.b, ty) loops on threads instead)."""
    m = attrs["winograd"]
    lanes = target.vector_lanes(out.dtype)
    found = stages(conv_t)
    rows, v, gemm, cols = (found[k] for k in ("rows", "input", "gemm", "cols"))
    tile_rows, tile_cols = cols.shape[1:3]

    st = sch[out]
    n, fb, y, x, lane = st.op_axis
    ty, yi = st.split(y, m)
    tx, xi = st.split(x, m)
    band, ty = st.split(ty, config["band"])
    st.reorder(n, band, fb, ty, tx, yi, xi, lane)
    outer = st.fuse(n, band)
    st.unroll(yi)
    st.unroll(xi)
    st.vectorize(lane)
    # one band: its stages' own loops on threads instead
    inside = config["parallel"] and out.shape[0] * -(-tile_rows // config["band"]) == 1
    if config["parallel"] and not inside:
        st.parallel(outer)
    elif inside:
        st.parallel(st.fuse(fb, ty))
    pass_in_registers(sch, cols, st, tx)

    # the band's GEMMs: each weight panel read once per band, a register tile of tile
    # columns x filter vectors accumulating over the channels
    gs = sch[gemm]
    gs.compute_at(st, outer)
    local = sch.cache_write(gemm, "local")
    _, gab, gt, gf = gs.op_axis
    # within a weight panel (its index f // nr then constant across the tile: no gathers)
    panel, within = gs.split(gf, attrs["kernel_block"])
    fo, fi = gs.split(within, config["filter_vectors"] * lanes)
    count = config["band"] * tile_cols
    per_tile = min(config["tiles"], count)
    to, ti = gs.split(gt, per_tile, shift_tail=count % per_tile != 0)
    fvo, fvi = gs.split(fi, lanes)
    gs.reorder(gab, panel, fo, to, ti, fvo, fvi)
    if inside:
        gs.parallel(gs.fuse(gab, panel))
    gs.unroll(ti)
    gs.unroll(fvo)
    gs.vectorize(fvi)
    ls = sch[local]
    ls.compute_at(gs, to)
    *_, lt, lf = ls.op_axis
    lfo, lfi = ls.split(lf, lanes)
    ls.reorder(*ls.reduce_axis, lt, lfo, lfi)
    ls.unroll(lt)
    ls.unroll(lfo)
    ls.vectorize(lfi)

    # the band's transformed input
    vs = sch[v]
    vs.compute_at(st, outer)
    _, vab, vt, vc = vs.op_axis
    vcb, vci = vs.split(vc, lanes)
    vs.reorder(vt, vcb, vab, vci)
    if inside:
        vs.parallel(vt)
    vs.unroll(vab)
    vs.vectorize(vci)
    pass_in_registers(sch, rows, vs, vcb)
    pass_in_registers(sch, found["patch"], vs, vcb)

"""Winograd F(m x m, 3 x 3) on NCHW tensors: its compute, search space and schedule (the
transforms and the algorithm: ``conv/winograd_transforms.py``)."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.schedule import schedule_gemm
from tensorc.ops.matmul.space import gemm_space
from tensorc.ops.nn.conv.winograd_transforms import (
    KERNEL, padded_tiles, pick, row_sum, stages, tile_grid, transforms,
)
from tensorc.ops.schedules import clamp, in_range
from tensorc.ops.space import SearchSpace
from tensorc.target import Target


def winograd_conv(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, int]
                  ) -> te.Tensor:
    """The conv as F(m x m, 3 x 3) on transformed weights ``w`` [alpha^2, F/mr, C, mr]."""
    m = attrs["winograd"]
    alpha = m + KERNEL - 1
    at, _, bt = transforms(m)
    n_batch, channels = x.shape[:2]
    filters, panel = attrs["filters"], attrs["kernel_block"]
    tile_rows, tile_cols = tile_grid(m, out)
    tiles = padded_tiles(n_batch * tile_rows * tile_cols)
    top, left = attrs["pads"][0], attrs["pads"][1]

    def in_bounds(n, c, i, j):
        inside = E.all_of(in_range(i, x.shape[2]), in_range(j, x.shape[3]))
        load = x[n, c, clamp(i, x.shape[2]), clamp(j, x.shape[3])]
        return E.select(inside, load, E.Const(0.0, x.dtype))

    # the padded input in m column phases: pad[n, c, p, i, j] = padded[n, c, i, m * j + p]
    pad = te.compute((n_batch, channels, m, m * tile_rows + KERNEL - 1, tile_cols + 1),
                     lambda n, c, p, i, j: in_bounds(n, c, i - top, j * m + p - left),
                     name="pad", tag="pad")

    def tile_of(t):
        # the padding tiles past the last (whole vectors for the GEMM) repeat the last
        # image's: finite values, which no output reads
        row = t // tile_cols
        n = E.minimum(row // tile_rows, n_batch - 1) if n_batch > 1 else E.const(0)
        return n, row % tile_rows, t % tile_cols

    def rows_pass(c, a, k, t):
        n, ty, tx = tile_of(t)
        patch = [pad[n, c, k % m, ty * m + i, tx + k // m] for i in range(alpha)]
        return pick(a, [row_sum(bt[r], patch) for r in range(alpha)])
    rows = te.compute((channels, alpha, alpha, tiles), rows_pass, name="winograd_rows",
                      tag="anchor:winograd_rows", axis_names=["c", "a", "k", "t"])

    def input_pass(ab, c, t):
        terms = [rows[c, ab // alpha, k, t] for k in range(alpha)]
        return pick(ab % alpha, [row_sum(bt[b], terms) for b in range(alpha)])
    v = te.compute((alpha * alpha, channels, tiles), input_pass, name="winograd_input",
                   tag="anchor:winograd_input", axis_names=["ab", "c", "t"])

    rc = te.reduce_axis(channels, "rc")
    gemm = te.compute((alpha * alpha, filters, tiles),
                      lambda ab, f, t: te.sum_(w[ab, f // panel, rc, f % panel] * v[ab, rc, t],
                                               axis=rc),
                      name="winograd_gemm", tag="anchor:winograd_gemm",
                      axis_names=["ab", "f", "t"])

    def cols_pass(n, f, ty, i, b, tx):
        t = (n * tile_rows + ty) * tile_cols + tx
        terms = [gemm[a * alpha + b, f, t] for a in range(alpha)]
        return pick(i, [row_sum(at[r], terms) for r in range(m)])
    cols = te.compute((n_batch, filters, tile_rows, m, alpha, tile_cols), cols_pass,
                      name="winograd_output", tag="anchor:winograd_output",
                      axis_names=["n", "f", "ty", "i", "b", "tx"])

    def output_pass(n, f, y, xx):
        terms = [cols[n, f, y // m, y % m, b, xx // m] for b in range(alpha)]
        return pick(xx % m, [row_sum(at[r], terms) for r in range(m)])
    return te.compute((n_batch, filters, *out), output_pass, name="conv",
                      axis_names=["n", "f", "y", "x"])



def gemm_of(attrs: dict, gemm: te.Tensor) -> Gemm:
    """The alpha^2 GEMMs: M = filters, N = tiles, K = channels, A the weight panels."""
    n_ab, filters, tiles = gemm.shape
    return Gemm(filters, tiles, gemm.op.reduce_axis[0].extent, batched=True,
                a_panel=attrs["kernel_block"], k_blockable=True)


def winograd_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                   ) -> SearchSpace:
    """The GEMMs' knobs (``ops/matmul.py``'s ``gemm_space``): the register tile's column
    vectors (its rows are the weight panels'), the cache blocks, the loop order. The
    transforms' schedules are fixed; whether a conv runs as Winograd at all is decided with
    its weight layout, at graph level (``conv/strategy.py``)."""
    space = gemm_space(target, gemm_of(attrs, stages(conv_t)["gemm"]), conv_t.dtype)
    return SearchSpace(list(space.knobs.values()), space.constraints, name="conv (winograd)")


def pass_in_registers(sch: Schedule, t: te.Tensor, stage, at) -> None:
    """A transform's pass ``t`` computed at ``stage``'s loop ``at``: its two innermost
    index axes (the transform matrix's rows and columns) unrolled, so each select on them
    folds to one row, and its last axis (tiles, channels or filters) in vectors."""
    ts = sch[t]
    ts.compute_at(stage, at)
    *_, rows, cols, lanes = ts.op_axis
    ts.unroll(rows)
    ts.unroll(cols)
    ts.vectorize(lanes)


def schedule_winograd(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                      attrs: dict, config) -> None:
    """The five stages, each at the root but the transforms' first passes (computed per
    row of tiles, in registers):

        pad                                  (planes in parallel, rows vectorized)
        for (c: parallel) for (tile row)     rows[a, k, tiles] = B^T d   (vectorized: tiles)
          for a, b (unrolled)                V[ab, c, tiles] = rows B
        M = U @ V                            (schedule_gemm: the alpha^2 GEMMs in parallel)
        for (n, f: parallel) for (tile row) for (block of L tiles)
          cols[i, b, tiles] = A^T M          (vectorized: tiles)
          for i, j (unrolled): out[n, f, m*ty + i, m*tx + j] = epilogue(cols A)
                                             (the j vectors interleaved into whole rows)
    """
    m = attrs["winograd"]
    lanes = target.vector_lanes(out.dtype)
    found = stages(conv_t)
    pad, rows, v, gemm, cols = (found[k] for k in ("pad", "rows", "input", "gemm", "cols"))
    tile_cols = cols.shape[-1]

    st = sch[pad]
    st.compute_root()
    n, c, p, i, j = st.op_axis
    _, ji = st.split(j, lanes)
    st.vectorize(ji)
    st.parallel(st.fuse(n, c, p))

    st = sch[v]
    ab, c, t = st.op_axis
    to, ti = st.split(t, tile_cols)
    # a tile row in vectors of at most one register (the rows pass keeps alpha^2 of them)
    tio, tii = st.split(ti, lanes)
    a, b = st.split(ab, m + KERNEL - 1)
    st.reorder(c, to, tio, a, b, tii)
    st.unroll(b)
    st.vectorize(tii)
    st.parallel(c)
    pass_in_registers(sch, rows, st, tio)

    schedule_gemm(target, sch, gemm, gemm, gemm_of(attrs, gemm), config)

    st = sch[out]
    n, f, y, x = st.op_axis
    width = min(lanes, 1 << (tile_cols - 1).bit_length())
    yo, yi = st.split(y, m)
    xo, xi = st.split(x, m)
    xoo, xoi = st.split(xo, width)
    st.reorder(n, f, yo, xoo, yi, xi, xoi)
    st.unroll(yi)
    st.unroll(xi)
    st.vectorize(xoi)
    st.parallel(st.fuse(n, f))
    pass_in_registers(sch, cols, st, xoo)

"""The GEMM formulation (im2col): out[n, f, q] = sum_k W[f, k] * P[n, k, q] over output
positions q and k = (channel, kernel offsets), P the input patches. Built for the convs whose
direct form vectorizes badly along the output row: 1-D front ends with long kernels and
large strides (gathers), stems with 1 to 4 input channels (a reduction too short to hide
anything), strided patch convs (stride >= 3), pointwise convs (a plain matrix product), and
every dense conv on targets with narrower vectors (``conv/strategy.py``). 2-D convs run
their columns over the padded input's rows laid end to end, split into stride x stride
phases when strided, so that a block's patches are contiguous loads; few-channel convs along
each output row; pointwise and 1-D convs over their output positions as one flat row. The
columns are padded to whole blocks of GEMM_COLUMNS (the epilogue drops the padding), so the
register tile never needs a guard.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.conv.tiles import accumulate_in_registers
from tensorc.ops.nn.padding import padded_input, phase_split
from tensorc.ops.schedules import (
    materialize_pad, reduction_depth, schedule_injective, worth_threads,
)
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

GEMM_COLUMNS = 16
# ... and twice as many where the reduction is at least WIDE_GEMM_DEPTH deep: a tile of 14
# filters x 2 vectors loads 16 values per 28 multiply-adds where 30 x 1 loads 31 per 30 (the
# load ports, not the FMAs, set the pace; b0aed53).
WIDE_GEMM_DEPTH = 24
# Few-channel convs (stems) with output rows of two blocks or more run the GEMM along each
# output row, the last block of a row overlapping the one before it: their short reduction
# makes the pitched form's separate epilogue pass a large part of the time (a4c8ec4).
ROW_GEMM_CHANNELS = 8
# A GEMM conv with at most SHALLOW_GEMM_DEPTH products per output (a stem's 3 x 3 x 3 taps, a
# patch embedding's 48) takes tiles of at most SHALLOW_FILTER_TILE filters, which the usual
# filter counts divide, not 14 and a tail (12e5634).
SHALLOW_GEMM_DEPTH = 64
SHALLOW_FILTER_TILE = 8
# Over symbolic dims a row's last block is partial at most widths: blocks of GEMM_COLUMNS,
# not twice that, waste less of it (a 16-wide row in a 32-wide block computed half garbage)
SYMBOLIC_COLUMNS = GEMM_COLUMNS


def gemm_columns(depth: int) -> int:
    """The output positions per register tile of a conv's GEMM ``depth`` deep."""
    return 2 * GEMM_COLUMNS if depth >= WIDE_GEMM_DEPTH else GEMM_COLUMNS


def unflatten_index(index, extents) -> list:
    """Row-major coordinates of a flat index (the last one fastest)."""
    coords = []
    for d in range(len(extents)):
        stride = int(np.prod(extents[d + 1:]))
        v = index // stride if stride > 1 else index
        coords.append(v % extents[d] if d > 0 else v)
    return coords


def pointwise(attrs: dict, w_shape) -> bool:
    return tuple(w_shape[2:]) == (1, 1) and tuple(attrs["strides"]) == (1, 1) and \
        not any(attrs["pads"])


def conv_gemm_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, ...]
                      ) -> te.Tensor:
    if not te.is_static(x.shape):
        if len(x.shape) == 4 and pointwise(attrs, w.shape):
            return _positions_over_symbolic_dims(x, w)
        return _rows_over_symbolic_dims(attrs, x, w, out)
    kernel = w.shape[2:]
    n_batch, channels = x.shape[:2]
    spatial = x.ndim - 2
    filters = w.shape[0]
    strides, dilations = attrs["strides"], attrs["dilations"]
    depth = channels * int(np.prod(kernel))
    block = gemm_columns(depth)     # output positions per register tile
    pointwise_conv = pointwise(attrs, w.shape)
    pads = list(attrs["pads"])
    pitch = None
    by_rows = spatial == 2 and not pointwise_conv and channels <= ROW_GEMM_CHANNELS and \
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
    elif spatial == 2 and not pointwise_conv:
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
        if pointwise_conv:       # P is x itself, one flat row per channel
            q = E.minimum(g[0], int(np.prod(out)) - 1)
            return x[(n, k, *unflatten_index(q, tuple(out)))]
        c, *offset = unflatten_index(k, (channels, *kernel))
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
        return w[(f, *unflatten_index(k, (channels, *kernel)))]
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


def _rows_over_symbolic_dims(attrs: dict, x: te.Tensor, w: te.Tensor, out) -> te.Tensor:
    """The GEMM along output rows over symbolic dims: a block's patches read the input
    directly (the graph pads a symbolic conv's input first: passes/graph/lower_for_target.py),
    strided where the conv is; the last block of a row is guarded, not shifted back (a row
    may be narrower than a block)."""
    (kh, kw), (sh, sw), (dh, dw) = w.shape[2:], attrs["strides"], attrs["dilations"]
    n_batch, channels = x.shape[:2]
    filters = w.shape[0]
    padded = padded_input(x, tuple(attrs["pads"]))
    grid = tuple(te.extent_of(d) for d in out)
    depth = channels * kh * kw

    def patch(n, k, y, q):
        c, i, j = unflatten_index(k, (channels, kh, kw))
        return padded[n, c, y * sh + i * dh, q * sw + j * dw]
    patches = te.compute((n_batch, depth, *grid), patch, name="im2col",
                         tag="anchor:im2col_rows", axis_names=["n", "k", "y", "q"])
    rk = te.reduce_axis(depth, "rk")
    acc = te.accumulator_dtype(x.dtype)

    def weight(f, k):
        return w[(f, *unflatten_index(k, (channels, kh, kw)))]
    gemm = te.compute((n_batch, filters, *grid), lambda n, f, y, q: te.sum_(
        E.cast(acc, weight(f, rk.var)) * E.cast(acc, patches[n, rk, y, q]), axis=rk),
        name="conv_gemm", tag="anchor:conv_gemm", axis_names=["n", "f", "y", "q"])
    return te.compute((n_batch, filters, *grid),
                      lambda n, f, y, q: E.cast(x.dtype, gemm[n, f, y, q]), name="conv")


def _positions_over_symbolic_dims(x: te.Tensor, w: te.Tensor) -> te.Tensor:
    """A pointwise conv over symbolic dims as one GEMM over each image's positions, H x W
    of them in a row: no patches to copy, the input read as it lies (a detector head's 18
    filters over an 8 x 2 map: rows of 2 made blocks of 16 columns mostly guarded tail)."""
    n_batch, channels, height, width = x.shape
    rc = te.reduce_axis(channels, "rc")
    acc = te.accumulator_dtype(x.dtype)
    gemm = te.compute((n_batch, w.shape[0], height * width), lambda n, f, p: te.sum_(
        E.cast(acc, w[f, rc, 0, 0]) * E.cast(acc, x[n, rc, p // width, p % width]),
        axis=rc), name="conv_gemm", tag="anchor:conv_gemm", axis_names=["n", "f", "p"])
    return te.compute((n_batch, w.shape[0], height, width),
                      lambda n, f, y, q: E.cast(x.dtype, gemm[n, f, y * width + q]),
                      name="conv")


def schedule_conv_gemm_symbolic(target: Target, sch: Schedule, out: te.Tensor,
                                conv_t: te.Tensor, attrs: dict, config) -> None:
    """``_schedule_gemm_rows`` over symbolic dims: rows (batch x output rows) in parallel,
    per block of GEMM_COLUMNS columns the patches copied once, each register tile of
    filters accumulated over K and written through the epilogue; the last block of each row
    guarded (passes/loop/symbolic_tails.py runs the others without the guard)."""
    gemm = conv_t.op.input_tensors()[0]
    patches = next((t for t in gemm.op.input_tensors() if t.op.name == "im2col"), None)
    if patches is None:
        _schedule_positions_symbolic(sch, out, gemm, config)
        return
    local = sch.cache_write(gemm, "local")
    sch[gemm].compute_inline()
    st = sch[out]
    n, f, y, q = st.op_axis
    fo, fi = st.split(f, config["filter_tile"])
    qo, qi = st.split(q, SYMBOLIC_COLUMNS)
    st.reorder(n, y, qo, fo, fi, qi)
    st.vectorize(qi)
    # rows on threads inside the batch loop: fused with it, the fused loop's quotient by a
    # run-time height is a guard no range decides, tested at every multiply-add
    if config["parallel"] and worth_threads(math.prod(te.hint_shape(out.shape)),
                                            reduction_depth(gemm)):
        st.parallel(y)
    accumulate_in_registers(sch, local, st, fo)
    # a row's last block: its multiply-adds past the row's end read the block's patch
    # buffer only; the epilogue's store keeps the guard
    sch[local].overcompute(sch[local].op_axis[-1])
    ps = sch[patches]
    ps.compute_at(st, qo)
    ps.vectorize(ps.op_axis[-1])


def _schedule_positions_symbolic(sch: Schedule, out: te.Tensor, gemm: te.Tensor,
                                 config) -> None:
    """The pointwise GEMM over a map's positions: blocks of SYMBOLIC_COLUMNS positions (on
    threads), each register tile of filters accumulated over the channels, read in place."""
    local = sch.cache_write(gemm, "local")
    sch[gemm].compute_inline()
    st = sch[out]
    n, f, y, q = st.op_axis
    position = st.fuse(y, q)
    fo, fi = st.split(f, config["filter_tile"])
    po, pi = st.split(position, SYMBOLIC_COLUMNS)
    st.reorder(n, po, fo, fi, pi)
    st.vectorize(pi)
    if config["parallel"] and worth_threads(math.prod(te.hint_shape(out.shape)),
                                            reduction_depth(gemm)):
        st.parallel(po)
    accumulate_in_registers(sch, local, st, fo)


def gemm_tile(target: Target, rows: int, columns: int) -> tuple[int, int]:
    """The register tile of a GEMM micro-kernel: (rows, vectors across ``columns``). The
    accumulators, one row of column vectors and a broadcast value must fit the vector
    registers (16 with AVX2, 32 with AVX-512): 6 x 2 vectors of 8, or 28 x 1 of 16. ``rows``
    is the extent to tile: a divisor of it is taken, so that no tile needs a guard."""
    vectors = max(1, columns // target.vector_lanes("float32"))
    most = (target.vector_registers - vectors - 1) // vectors
    return min(rows, most), vectors


def conv_gemm_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                    ) -> SearchSpace:
    """The register tile: ``filter_tile`` filters x GEMM columns positions (any count: the
    last tile of filters is guarded); ``parallel``: blocks of columns on threads."""
    filters = out.shape[1]
    depth = reduction_depth(conv_t.op.input_tensors()[0])
    columns = gemm_columns(depth) if te.is_static(out.shape) else SYMBOLIC_COLUMNS
    vectors = max(1, columns // target.vector_lanes(out.dtype))
    limit = (target.vector_registers - vectors - 1) // vectors
    default = gemm_tile(target, filters, columns)[0]
    if depth <= SHALLOW_GEMM_DEPTH:
        default = min(default, SHALLOW_FILTER_TILE)
    tiles = tuple(range(1, limit + 1)) or (1,)
    return SearchSpace([
        Knob("filter_tile", tiles, default, "filters per register tile"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
    ], name="conv (gemm)")


def schedule_conv_gemm(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                       attrs: dict, config) -> None:
    """The GEMM formulation, tiled for registers: for each block of GEMM_COLUMNS output
    positions of a row (blocks in parallel) the block's patches are gathered once (im2col,
    K x columns), then every tile of ``rows`` filters x the block accumulates over K in
    registers (the filters unrolled, their weights broadcast) and the epilogue writes it:

        for (n.y.q.o: parallel)
          P[k, q.i] = patches                                   (once per block)
          for (f.o)  [for (k)  for (f.i: unrolled)  for (q.i: vectorized)  acc += W * P]
                     out[f, y, q] = epilogue(acc)
    """
    gemm = conv_t.op.input_tensors()[0]
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
    accumulate_in_registers(sch, local, st, fo)
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
    accumulate_in_registers(sch, local, st, fo)
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
    accumulate_in_registers(sch, local, st, fo)
    ps = sch[patches]
    ps.compute_at(st, qo)
    ps.vectorize(ps.op_axis[-1])


"""The GEMM schedule (BLIS-style): cache blocks of A and B around a register-tile
micro-kernel, with K in blocks or a GEMV's panels read as several streams where the config
says so. Every choice is a knob of ``space.py``'s :func:`gemm_space`.
"""
from __future__ import annotations

import math

from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.matmul.gemm import Gemm, first_operand, second_operand
from tensorc.ops.matmul.tile import tile_columns
from tensorc.target import Target


def schedule_gemm(target: Target, sch: Schedule, out: te.Tensor, mm: te.Tensor, gemm: Gemm,
                  config, axes=None) -> None:
    """BLIS-style register-blocked GEMM.

        for (batch, jc, ic: parallel)          # nc columns x mc rows: the cache blocks
          for jr                               # an nr-wide panel of B (the block in L2)
            for ir                             # an mr-row strip of A (streams from L3)
              C.local[mr, nr] = 0
              for k:
                prefetch B[panel, k + prefetch, :]               # a row some steps ahead
                for r (unrolled): for c (vectorized):
                  C.local[r, c] += A[i + r, k] * B[panel, k, c]  # broadcast x vector FMA
              out[i:i+mr, j:j+nr] = epilogue(C.local)

    The accumulator tile lives in registers (mr x nr/lanes vectors plus one B vector per
    column vector and one broadcast: no spills); the epilogue (bias, activation, residual)
    is applied as the tile is stored. ``axes``: out's loops (*batch, i, j), when they are
    not its own axes (a conv's output rows and columns fused into j)."""
    if not mm.op.reduce_axis:      # a rounding stage: tile the accumulation under it
        mm = mm.op.input_tensors()[0]
    if config["k_streams"] > 1:
        _schedule_gemv_streams(target, sch, out, mm, gemm, config)
        return
    if config["k_block"] < gemm.k:
        _schedule_k_blocked(target, sch, out, mm, gemm, config)
        return
    if out is mm:
        compute_tensor = sch.cache_write(mm, "local")
    else:
        compute_tensor = mm
    outer = sch[out]
    *batch, i, j = axes or outer.op_axis
    # dims of one: no batch
    batched = any(extent > 1 for extent in te.hint_shape(out.shape[:len(batch)]))
    m, n = gemm.m, gemm.n
    cols = tile_columns(n, target.vector_lanes(out.dtype), gemm.b_panel, config["vectors"])
    rows = min(config["rows"], m)
    row_tiles = -(-m // rows)
    if not isinstance(out.shape[-2], int) and config["row_tiles"] < row_tiles:
        # symbolic rows in blocks: split by the block's rows, then by the tile's, so that
        # one guard (the rows' end) is all there is, which the last block's tail tile
        # decides per remainder (passes/loop/symbolic_tails.py); a block of tiles split from
        # the tiles' count would guard that count too, inside the micro-kernel
        ic, i_in = outer.split(i, rows * config["row_tiles"])
        io, ii = outer.split(i_in, rows)
        jo, ji = outer.split(j, cols)
    else:
        io, jo, ii, ji = outer.tile(i, j, rows, cols)
        ic = None
    # the cache blocks (a block at least the extent leaves an outer loop of one iteration)
    jc, jo = outer.split(jo, config["col_panels"])
    if ic is None:
        ic, io = outer.split(io, config["row_tiles"])
    outer.vectorize(ji)
    tile_loops = (jo, io) if config["order"] == "panels" else (io, jo)
    # (symbolic columns end in a partial panel at some runs: the same; symbolic rows in
    # blocks: each row block against every column panel in turn, on one thread, while the
    # block stays in cache)
    if (n % cols or not isinstance(out.shape[-1], int) or
            not isinstance(out.shape[-2], int)) and \
            (batched or config["row_tiles"] < row_tiles):
        # the last column panel overhangs: keep the column blocks out of the parallel loop,
        # serial, where loop partitioning peels that panel off and the other panels' inner
        # loops run without a guard (a parallel loop is never partitioned)
        outer.reorder(ic, jc, *tile_loops, ii, ji)
        block = outer.fuse(*batch, ic)
    else:
        outer.reorder(jc, ic, *tile_loops, ii, ji)
        block = outer.fuse(*batch, jc, ic)
    work = math.prod(te.hint_shape(out.shape)) * gemm.k
    if config["parallel"] and work >= 1 << 16:
        outer.parallel(block)
    if config["pack_a"] and rows > 1:
        # A's block, packed into mr-row panels [tiles, K, mr]: the micro-kernel's broadcasts
        # walk one contiguous stream
        a_tensor = first_operand(sch[compute_tensor].op.body)
        packed = sch.pack(a_tensor, "local", [compute_tensor], axis=-2, factor=rows)
        if config["row_tiles"] < row_tiles or batched:
            sch[packed].compute_at(outer, block)
        # else one row block: A is packed once, before the column blocks
    if config["pack_b"]:
        # B an input: its column block, copied into nr-wide panels [panels, K, nr] (as a
        # constant B is at compile time), so that the micro-kernel streams one panel
        # instead of striding over B's rows
        b_tensor = second_operand(sch[compute_tensor].op.body)
        packed_b = sch.pack(b_tensor, "local", [compute_tensor], axis=-1, factor=cols)
        sch[packed_b].compute_at(outer, block)
    inner = sch[compute_tensor]
    inner.compute_at(outer, tile_loops[1])
    *cb, ci, cj = inner.op_axis
    (ck,) = inner.reduce_axis
    inner.reorder(*cb, ck, ci, cj)
    _micro_kernel(inner, ck, ci, cj, config, (outer, jo) if config["order"] == "panels" else None)


def _schedule_k_blocked(target: Target, sch: Schedule, out: te.Tensor, mm: te.Tensor,
                        gemm: Gemm, config) -> None:
    """The GEMM with K in blocks (BLIS's kc), so that the B panel of one block (k_block x
    nr) stays in L1 while the A strips pass: a blocked rfactor gives each k block its own
    partial sum, accumulated in registers by the micro-kernel and added to the output tile.

        for (batch, jc: parallel)
          for ic:                               # C's block (mc x nc) stays in L2
            out[block] = 0
            for kc:
              A.packed = A[ic rows, kc]         # (pack_a)
              for jr: for ir:
                P.local[mr, nr] = 0
                for k in block kc: for r (unrolled): for c (vectorized):
                  P.local[r, c] += A[i + r, k] * B[panel, k, c]
                out[i:i+mr, j:j+nr] += P.local

    An epilogue (bias, activation, residual) waits for the last k block: the matmul's
    column block is then a buffer of its own, and the epilogue passes over it while it is
    still in the cache:

        for (batch, jc: parallel)
          block = the k-blocked GEMM above, for column block jc
          for i: for j (vectorized): out[i, jc + j] = epilogue(block[i, j])
    """
    partial = sch.rfactor(mm, config["k_block"], blocked=True)
    stage = sch[mm]
    *batch, i, j = stage.op_axis
    (kc,) = stage.reduce_axis
    m, n = gemm.m, gemm.n
    lanes = target.vector_lanes(out.dtype)
    cols = tile_columns(n, lanes, gemm.b_panel, config["vectors"])
    rows = min(config["rows"], m)
    io, jo, ii, ji = stage.tile(i, j, rows, cols)
    jc, jo = stage.split(jo, config["col_panels"])
    ic, io = stage.split(io, config["row_tiles"])
    tile_loops = (jo, io) if config["order"] == "panels" else (io, jo)
    stage.reorder(jc, ic, kc, *tile_loops, ii, ji)
    stage.unroll(ii)
    stage.vectorize(ji)
    block = stage.fuse(*batch, jc)
    work = math.prod(te.hint_shape(out.shape)) * te.hint(partial.shape[-1]) * config["k_block"]
    _column_blocks_on_threads(target, sch, out, mm, block, cols, config["col_panels"],
                              config["parallel"] and work >= 1 << 16)
    if config["pack_a"] and rows > 1:
        # the A block of one k block and row block, packed into mr-row panels
        a_tensor = first_operand(sch[partial].op.body)
        packed = sch.pack(a_tensor, "local", [partial], axis=-2, factor=rows)
        sch[packed].compute_at(stage, kc)
    inner = sch[partial]
    inner.compute_at(stage, tile_loops[1])
    *cb, ci, cj, cl = inner.op_axis
    (ck,) = inner.reduce_axis
    inner.reorder(cl, ck, ci, cj)
    _micro_kernel(inner, ck, ci, cj, config,
                  (stage, tile_loops[0]) if config["order"] == "panels" else None)


def _column_blocks_on_threads(target: Target, sch: Schedule, out: te.Tensor, mm: te.Tensor,
                              block, cols: int, col_panels: int, parallel: bool) -> None:
    """The threads of a GEMM whose stage ``mm`` runs its column blocks (``col_panels``
    panels of ``cols`` columns) in loop ``block``: that loop in parallel, or, under an
    epilogue (``out`` is not ``mm``), the epilogue in the same column blocks, each computing
    its block of ``mm`` first (still in the cache when the epilogue passes over it), those
    blocks in parallel."""
    if out is mm:
        if parallel:
            sch[mm].parallel(block)
        return
    epilogue = sch[out]
    *obatch, oi, oj = epilogue.op_axis
    ojc, oj = epilogue.split(oj, cols * min(col_panels, -(-te.hint(out.shape[-1]) // cols)))
    oj, ojv = epilogue.split(oj, target.vector_lanes(out.dtype))
    epilogue.reorder(*obatch, ojc, oi, oj, ojv)
    epilogue.vectorize(ojv)
    oblock = epilogue.fuse(*obatch, ojc)
    if parallel:
        epilogue.parallel(oblock)
    sch[mm].compute_at(epilogue, oblock)


def _schedule_gemv_streams(target: Target, sch: Schedule, out: te.Tensor, mm: te.Tensor,
                           gemm: Gemm, config) -> None:
    """A one-row product (GEMV) that reads each B panel as ``k_streams`` streams at once: K
    in that many consecutive parts (a blocked rfactor, its part axis first), the parts'
    partial sums side by side in registers, so that each step of k loads a row from each
    part of the panel (memory serves several streams faster than one).

        for (batch, jc: parallel)
          for jo:                                  # a B panel
            P.local[parts, nr] = 0
            for k in K / parts: for part (unrolled): for c (vectorized):
              P.local[part, c] += A[part * K / parts + k] * B[panel, part * K / parts + k, c]
            for part: for c (vectorized): out[jo, c] (+)= P.local[part, c]
    """
    partial = sch.rfactor(mm, -(-gemm.k // config["k_streams"]), blocked=True,
                          lane_first=True)
    stage = sch[mm]
    *batch, i, j = stage.op_axis
    (kb,) = stage.reduce_axis
    lanes = target.vector_lanes(out.dtype)
    cols = tile_columns(gemm.n, lanes, gemm.b_panel, config["vectors"])
    jo, ji = stage.split(j, cols)
    jc, jo = stage.split(jo, config["col_panels"])
    stage.reorder(*batch, i, jc, jo, kb, ji)
    stage.vectorize(ji)
    block = stage.fuse(*batch, i, jc)
    _column_blocks_on_threads(target, sch, out, mm, block, cols, config["col_panels"],
                              config["parallel"] and
                              math.prod(te.hint_shape(out.shape)) * gemm.k >= 1 << 16)
    inner = sch[partial]
    inner.compute_at(stage, jo)
    cl, *cb, ci, cj = inner.op_axis
    (ck,) = inner.reduce_axis
    inner.reorder(*cb, ci, ck, cl, cj)
    _micro_kernel(inner, ck, cl, cj, config)    # the parts unrolled, as a tile's rows


def _micro_kernel(inner, ck, ci, cj, config, panels=None) -> None:
    """The register tile's loops inside k: rows unrolled, columns vectorized, and B's row
    ``prefetch`` steps of k on asked for at the top of each step; with ``prefetch_next``,
    also the same row of the next B panel, into L2 (``panels``: the block's stage and its
    loop over B panels, outside the tiles)."""
    inner.unroll(ci)
    inner.vectorize(cj)
    b = second_operand(inner.op.body)
    if config["prefetch"]:
        inner.prefetch(b, ck, config["prefetch"])
    if config["prefetch_next"] and panels is not None:
        inner.prefetch(b, ck, 1, along=panels, level=2)

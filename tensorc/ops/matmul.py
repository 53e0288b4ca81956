"""matmul: numpy.matmul semantics for operands of rank >= 2 (batch dims broadcast).

The frontend turns 1-D operands into 2-D with a reshape, so the core op never sees them.

A constant right operand ``B[K, N]`` is repacked at compile time (``passes/graph/
alter_layout.py``) into column panels ``[ceil(N/nr), K, nr]`` with attrs ``b_panel=nr`` and
``n=N``: one panel is what the micro-kernel's register tile (``rows x nr``) reads per step of
k, contiguous. The schedule (BLIS-style, see ``_matmul_schedule``) is a function of the
register tile and the cache blocks, all knobs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import broadcast_shapes, expect_arity, expect_same_dtype
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

matmul = define("matmul", Pattern.OUT_ELEMWISE_FUSABLE)


@matmul.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("matmul", input_types, 2)
    a, b = input_types
    dtype = expect_same_dtype("matmul", input_types)
    if attrs.get("b_panel"):        # B packed into column panels [N/nr, K, nr]
        if b.ndim != 3 or b.shape[2] != attrs["b_panel"] or a.shape[-1] != b.shape[1]:
            raise ShapeError(f"matmul: packed operand {b} does not match {a} and panel "
                             f"width {attrs['b_panel']}")
        return [TensorType(a.shape[:-1] + (attrs["n"],), dtype)]
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: operands must have rank >= 2 (reshape vectors first), "
                         f"got {a} and {b}")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: inner dimensions differ: input 0 {a} has {a.shape[-1]} "
                         f"columns, input 1 {b} has {b.shape[-2]} rows")
    batch = broadcast_shapes("matmul (batch dims)", [TensorType(a.shape[:-2], dtype),
                                                      TensorType(b.shape[:-2], dtype)])
    return [TensorType(batch + (a.shape[-2], b.shape[-1]), dtype)]


@matmul.reference
def _reference(attrs: dict, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    if attrs.get("b_panel"):
        b = unpack_b_panels(b, attrs["n"])
    return [np.matmul(a, b)]


def pack_b_panels(b: np.ndarray, nr: int) -> np.ndarray:
    """``B[K, N]`` as column panels ``[ceil(N/nr), K, nr]``, the last one padded with zeros.

    >>> pack_b_panels(np.arange(6.).reshape(2, 3), 2)[:, :, 0].tolist()
    [[0.0, 3.0], [2.0, 5.0]]
    """
    k, n = b.shape
    panels = -(-n // nr)
    padded = np.zeros((k, panels * nr), b.dtype)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, panels, nr).transpose(1, 0, 2))


def unpack_b_panels(packed: np.ndarray, n: int) -> np.ndarray:
    panels, k, nr = packed.shape
    return packed.transpose(1, 0, 2).reshape(k, panels * nr)[:, :n]


def micro_tile(target: Target, vectors: int = 2) -> tuple[int, int]:
    """The micro-kernel's register tile (rows, vectors) for the target's vector registers:
    rows x vectors accumulators, plus the vectors of B and one broadcast of A, fit the
    register file with none to spill (AVX2: 16 ymm -> 6 x 2; AVX-512: 32 zmm -> 14 x 2, or
    6 x 4 for panels of 4 vectors)."""
    registers = 32 if target.vector_bits >= 512 else 16
    rows = (registers - vectors - 1) // vectors
    return rows, vectors


# A matmul's constant B, on AVX-512, is packed in panels of this many vectors (a 6 x 4 tile:
# 10 loads per 24 FMAs, against 16 per 28 for 14 x 2). One thread (Zen 5), ms, 14 x 2 -> 6 x
# 4, onnxruntime alongside: 500x384x768 1.213 -> 1.161 (1.210), 500x1024x1024 4.227 -> 4.120
# (4.388), 500x768x3072 9.710 -> 9.466 (10.06), 128x1024x3072 3.467 -> 3.242 (3.578),
# 77x3072x768 1.434 -> 1.391 (1.433); M = 16 and 77x768x768 within 1% either way.
PACKED_PANEL_VECTORS = 4
GEMV_VECTORS = 4     # a one-row product: 4 accumulator chains hide the FMA latency
# A GEMV whose B takes this much or more streams it from beyond L2: each B panel is then read
# as GEMV_STREAMS streams at once (K's halves), which memory serves faster than one.
GEMV_STREAMS = 2
GEMV_STREAMS_BYTES = 4 << 20
GEMV_ROW_VECTORS = (1, 2, 4, 8, 16, 32)


def panel_width(target: Target, n: int, m: int = 2) -> int:
    """Columns of a packed B panel: the register tile's width (one vector for narrow B; a
    one-row A (GEMV) has a one-row tile and takes wider panels, for more FMA chains)."""
    lanes = target.vector_lanes("float32")
    if n <= lanes:
        return lanes
    if m == 1:
        vectors = GEMV_VECTORS
    elif target.vector_bits >= 512:
        vectors = PACKED_PANEL_VECTORS
    else:
        vectors = micro_tile(target)[1]
    return lanes * min(vectors, -(-n // lanes))


@matmul.compute
def _matmul_compute(attrs: dict, a: te.Tensor, b: te.Tensor) -> te.Tensor:
    *batch_a, m, k = a.shape
    nr = attrs.get("b_panel")
    if nr:
        batch_b, n = [], attrs["n"]
    else:
        *batch_b, _, n = b.shape
    batch = tuple(np.broadcast_shapes(tuple(batch_a), tuple(batch_b)))
    nb = len(batch)
    r = te.reduce_axis(k, "k")

    def body(*idx):
        bi, i, j = idx[:nb], idx[nb], idx[nb + 1]
        ai = [E.const(0) if d == 1 else bi[nb - len(batch_a) + q]
              for q, d in enumerate(batch_a)]
        bj = [E.const(0) if d == 1 else bi[nb - len(batch_b) + q]
              for q, d in enumerate(batch_b)]
        b_load = b[(j // nr, r, j % nr)] if nr else b[(*bj, r, j)]
        return te.sum_(E.cast(acc, a[(*ai, i, r)]) * E.cast(acc, b_load), axis=r)
    names = [f"b{q}" for q in range(nb)] + ["i", "j"]
    acc = te.accumulator_dtype(a.dtype)
    if acc == a.dtype:
        return te.compute((*batch, m, n), body, name="matmul", axis_names=names)
    # half precision: accumulate in float32, round once
    total = te.compute((*batch, m, n), body, name="matmul_acc", tag="anchor:matmul_acc",
                       axis_names=names)
    return te.compute(total.shape, lambda *o: E.cast(a.dtype, total[o]), name="matmul")


# The cache blocks. The micro-kernel reads nr floats of B per step of k and mr of A, so B's
# panels are what must stay close: a column block of B (col_panels x K x nr) is kept in half
# of L2 while every row strip of A streams past it (from L3; measured on Zen 3, 1024^3: 80
# GFLOP/s with the B block in L2 and A streaming, 31-38 with A blocks in L2 and B streaming
# from L3). A row block (row_tiles strips of A, optionally packed) is the searchable
# alternative. A block knob's value must divide the number of tiles or panels (or cover them
# all: WHOLE): a block that overhangs puts a guard inside the micro-kernel.
L2_BYTES = 512 * 1024
# A B larger than this is streamed from memory: a packed A's row blocks (each against every
# column) would stream all of it once per block, where column blocks of B read it once and
# reuse each block across A's strips. One thread (Xeon), packed A -> B's column blocks:
# 128x3072x3072 (B 38 MB) 26.4 -> 20.9 ms, 500x3072x3072 93 -> 69 (onnxruntime 65); with B
# of 9.4 MB the packed A still wins or ties (500x3072x768 16.7 against 18.1, 500x768x3072
# 16.6 against 18.2, 128x3072x768 5.2 against 4.9), and with 4 MB both tie (1024^3).
B_STREAM_BYTES = 16 << 20
PACKED_A_BYTES = 1 << 20          # the most a packed A block (a stack buffer) may take
# A packed A block is copied once for all of B's panels. One thread (Xeon), ms, 56-row blocks
# packed -> read in place, onnxruntime alongside: 500x768x256 (8 panels) 1.38 -> 1.23 (1.30),
# 500x384x384 (12) 0.97 -> 0.91 (0.94), 500x1024x384 2.62 -> 2.54 (2.64), 500x3072x256
# 5.58 -> 5.41 (5.25); against 24 panels packing wins (500x768x768 3.74 against 3.88).
PACK_A_MIN_PANELS = 16
WHOLE = 1 << 20
PARALLEL_BLOCKS = 8
ROW_CHOICES = (1, 2, 4, 6, 8, 10, 12, 14)     # the searched tile rows (and the default)
ROW_BLOCK_MIN_ROWS = 64                       # fewer rows of A: no row blocks
K_BLOCK_CHOICES = (128, 256, 512)
ROWS_ORDER_MAX_DEPTH = 256                    # shallower: A strips outer in a block
BLOCK_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, WHOLE)


def _fits(block: int, count: int) -> bool:
    return block >= count or count % block == 0


@dataclass(frozen=True)
class Gemm:
    """What the GEMM template knows of a group: ``out[*batch, i, j] = epilogue(C)`` with
    ``C[*batch, i, j] = sum(A[.., i, k] * B[.., k, j] for k)``, M x N x K. A constant A may
    come packed into mr-row panels [M/mr, K, mr] (``a_panel``: a conv's weights), a constant
    B into nr-column panels [N/nr, K, nr] (``b_panel``); ``k_blockable``: K may be cut
    into blocks (a matmul's, with or without an epilogue, and Winograd's)."""

    m: int
    n: int
    k: int
    batched: bool = False
    a_panel: int = 0
    b_panel: int = 0
    same_operands: bool = False     # x @ x: one tensor is both A and B
    itemsize: int = 4
    packable_b: bool = True         # B is a [.., K, N] tensor that pack_b may copy in panels
    k_blockable: bool = False

    @classmethod
    def of_matmul(cls, out: te.Tensor, mm: te.Tensor, attrs: dict) -> Gemm:
        if not mm.op.reduce_axis:
            mm = mm.op.input_tensors()[0]
        m, n = out.shape[-2:]
        nr = attrs.get("b_panel") or 0
        return cls(m, n, mm.op.reduce_axis[0].extent, batched=out.ndim > 2, b_panel=nr,
                   k_blockable=True,
                   same_operands=not nr and first_operand(mm.op.body) is second_operand(mm.op.body),
                   itemsize=4 if out.dtype == "float32" else 8)


def _matmul_space(target: Target, out: te.Tensor, mm: te.Tensor, attrs: dict) -> SearchSpace:
    return gemm_space(target, Gemm.of_matmul(out, mm, attrs), out.dtype)


def gemm_space(target: Target, gemm: Gemm, dtype: str) -> SearchSpace:
    """rows x vectors: the register tile (mr x nr/lanes); col_panels: B panels per column
    block (nc / nr); row_tiles: A strips per row block (mc / mr; WHOLE: no row blocks);
    pack_a: copy each row block of A into mr-row panels; parallel: blocks on threads."""
    m, n, k = gemm.m, gemm.n, gemm.k
    lanes = target.vector_lanes(dtype)
    tile_vectors = micro_tile(target)[1]
    # a packed B's panel fixes the tile's vectors, and so the rows that fit beside them
    tile_rows = micro_tile(target, gemm.b_panel // lanes if gemm.b_panel else tile_vectors)[0]
    limit = 14 if target.vector_bits >= 512 else 8
    candidates = [r for r in (1, 2, 3, 4, 5, 6, 8, 10, 12, 14) if r <= min(m, limit)] or [1]
    fitting = [r for r in candidates if r <= tile_rows]      # the micro-tile's registers hold
    if gemm.a_panel:        # a packed A's tile is its panel
        default_rows = min(gemm.a_panel, m)
        rows = (default_rows,)
    else:
        default_rows = _default_rows(m, fitting)
        rows = tuple(sorted({r for r in candidates if r in ROW_CHOICES} | {default_rows}))
    nr = gemm.b_panel
    if nr:
        vectors = (max(1, nr // lanes),)
    elif m == 1:
        # a GEMV over a B that is an input walks B's rows: a wide row segment per step of k
        # (accumulators spill to L1, which still outruns the stream of B from memory)
        vectors = GEMV_ROW_VECTORS
    else:
        registers = 32 if target.vector_bits >= 512 else 16
        # a packed A fixes the tile's rows: as many column vectors as the registers hold
        vectors = tuple(v for v in (1, 2, 3) if not gemm.a_panel or
                        (gemm.a_panel + 1) * v + 1 <= registers) or (1,)
    default_vectors = min(vectors, key=lambda v: abs(v - tile_vectors))
    if m == 1 and not nr:
        default_vectors = max(v for v in vectors if v * lanes <= max(lanes, n))

    rules = _BlockRules(m, n, k, lanes, nr, gemm.itemsize, gemm.k_blockable)

    def panels(c) -> int:
        return rules.panels(c)
    default = {"rows": default_rows, "vectors": default_vectors, "row_tiles": WHOLE,
               "pack_a": False}
    panel_count, tile_count = panels(default), rules.tiles(default)
    width = _cols(n, lanes, nr, default_vectors)
    k_choices = [WHOLE] + [c for c in K_BLOCK_CHOICES if c < k and k % c == 0 and
                           gemm.k_blockable]
    k_block = _default_k_block(m, k, k_choices)
    # a column block's panels (of one k block) fit half of L2
    fits_l2 = max(1, (L2_BYTES // 2) // (width * min(k, k_block) * gemm.itemsize))
    # and at least PARALLEL_BLOCKS column blocks, to share among threads
    most = min(fits_l2, max(1, panel_count // PARALLEL_BLOCKS))
    col_choices = [c for c in BLOCK_CHOICES if c < panel_count] + [WHOLE]
    col_panels = max([c for c in col_choices[:-1] if c <= most and _fits(c, panel_count)],
                     default=WHOLE)
    if k_block < k and m * k * gemm.itemsize > A_REREAD_BYTES and \
            K_BLOCK_WIDE in k_choices:
        wide = _core_column_blocks(panel_count, width * K_BLOCK_WIDE * gemm.itemsize,
                                   target.num_cores, col_choices)
        if wide:
            k_block, col_panels = K_BLOCK_WIDE, wide
    # knobs that change nothing on a small problem keep one value (a small space)
    big = m >= ROW_BLOCK_MIN_ROWS
    row_choices = [c for c in BLOCK_CHOICES if c < tile_count and big] + [WHOLE]
    orders = ("panels", "rows") if tile_count > 1 and panel_count > 1 else ("panels",)
    # x @ x: one tensor is both operands, and a packed copy of it would serve both reads
    # (its region, all of it, recomputed per block): neither is packed
    same = gemm.same_operands
    pack = (False, True) if tile_count > 2 and not same and not gemm.a_panel else (False,)
    # a B that is an input, read by several row tiles: pack its column blocks (not with
    # batch dims: a batched B is small (attention), a shared one would be packed per batch)
    pack_b = (False, True) if not nr and m > 1 and not gemm.batched and not same and \
        gemm.packable_b else (False,)
    # an A larger than half of L2: a tile's mr broadcast streams, each a row of A, become
    # one packed stream. A is packed once: every column in each row block (B streams past
    # from L3), at least PARALLEL_BLOCKS row blocks for the threads. On Zen 4: 1024^3 85 ->
    # 104-109 GFLOP/s (onnxruntime 97-99), 500x1024x1024 84 -> 110, 128x3072x768 86 -> 107;
    # an A that L2 holds measured 4-10% slower packed (77x768, 128x256).
    # (K in blocks: the threads share column blocks, and A's k block stays in L2 unpacked;
    # 128x3072x768, ms at 1 / 2 threads: A packed, one column block 5.49 / 5.70 (one
    # thread's work), unpacked in 8 column blocks 5.07 / 2.62)
    # Only tiles of TALLEST_PACKED_TILE_MIN rows or more: that many streams of A were what
    # the prefetchers lost (the figures above were 14-row tiles). A 6-row tile's six streams
    # they follow, and its A is read in place, in B's column blocks. One thread (Zen 5), ms,
    # packed -> in place (onnxruntime): 500x3072x1024 13.08 -> 12.43 (13.11), 1024^3 8.23 ->
    # 8.14 (8.64), 500x3072x768 9.73 -> 9.42 (9.84), 500x768x3072 9.02 -> 9.15 (9.76); two
    # threads 1024^3 4.60 -> 4.05 (4.30), 500x3072x1024 6.65 -> 6.24 (6.60)
    a_streams = pack[-1] and big and m * k * gemm.itemsize > L2_BYTES and \
        k * n * gemm.itemsize <= B_STREAM_BYTES and k_block >= k and \
        max(fitting) >= TALLEST_PACKED_TILE_MIN
    if a_streams:
        packed_rows, packed_block = _packed_row_blocks(m, k, gemm.itemsize, fitting)
        packed_tiles = rules.tiles({"rows": packed_rows})
        # a tile count that only divides into blocks of one tile (15 tiles: enough blocks to
        # share among threads): every block would stream all of B for one tile. ViT's 197
        # rows of 768, ms at 1 / 2 threads, 197x768x3072 6.49 / 3.32 -> (A read in place,
        # column blocks) 5.71 / 2.88 (onnxruntime 5.77 / 2.92); one thread 256x768x768 2.09
        # -> 1.81 (1.87), 512x3072x768 16.5 -> 15.7 (15.9). Blocks of 2 tiles still win
        # (1024x3072x1024 40.9 against 42.2 unpacked, 300x3072x768 9.16 against 9.30)
        a_streams = min(packed_block, packed_tiles) >= PACKED_BLOCK_MIN_TILES
    # (a packed A pays for its copy where its block meets PACK_A_MIN_PANELS B panels or more;
    # against fewer, the row blocks stay and A is read in place)
    pack_default = a_streams and panel_count >= PACK_A_MIN_PANELS
    row_tiles = WHOLE
    if a_streams:
        default_rows, row_tiles = packed_rows, packed_block
        tile_count = packed_tiles
        row_choices = sorted({*row_choices, row_tiles})
        col_panels = WHOLE
    pack_b_default = pack_b[-1] and row_tiles >= tile_count
    if gemm.a_panel and 1 in row_choices and m * k > k * n and \
            k * n * gemm.itemsize <= L2_BYTES:
        # a conv's packed weights (A) larger than its input (B), which L2 holds: one A
        # panel per block, against all columns, so that A streams from memory once (column
        # blocks stream all of A once each) and the blocks share evenly among threads. A
        # 512 -> 1000 1x1 conv on 13x13 (SqueezeNet's classifier; 2 MB of weights, 346 KB
        # of input): 1.44 -> 1.35 ms at one thread, 1.11 -> 0.72 at two (onnxruntime 1.20,
        # 0.62)
        row_tiles, col_panels = 1, WHOLE
    # B streams from memory where it is a matmul's constant (weights), not where it is a
    # conv's input (activations, which the cache holds; SqueezeNet's 1x1 convs measured the
    # same either way, within this VM's noise)
    prefetch_default = 0 if same or gemm.a_panel else PREFETCH_DEFAULT
    # a shallow matmul's A strip (14 rows of K <= 256: 14 KB) stays in L1 against the
    # block's B panels, which stream from L2 as whole vectors, rather than each B panel
    # against strips that stream as 14 rows of broadcasts. One thread (Xeon), ms, panels ->
    # rows outer (onnxruntime): 500x256x3072 5.10 -> 4.97 (4.98), 500x256x1024 1.72 ->
    # 1.68 (1.67), 128x256x3072 1.27 -> 1.23 (1.30); two threads 500x256x3072 2.69 -> 2.57
    # (2.63). From K = 384 the rows lose (500x384x3072 7.47 -> 8.00)
    order = "rows" if "rows" in orders and k <= ROWS_ORDER_MAX_DEPTH and \
        not gemm.a_panel else "panels"
    # a k-blocked GEMM whose B streams from memory: each B panel's first tile would wait
    # for it, the next panel is asked for while this one's tiles run
    # (a panel that one tile reads is the next tile's: the prefetch steps of k ahead cover it)
    next_choices = (False, True) if tile_count > 1 and panel_count > 1 and not same else \
        (False,)
    next_default = k_block < k and order == "panels" and tile_count >= PREFETCH_NEXT_MIN_TILES \
        and k * n * gemm.itemsize >= B_MEMORY_BYTES and next_choices[-1]
    # a GEMV over packed panels of B: each panel read as several streams (K in parts)
    stream_choices = (1, GEMV_STREAMS) if m == 1 and nr and gemm.k_blockable and \
        k % GEMV_STREAMS == 0 and not gemm.batched else (1,)
    streams = stream_choices[-1] if k * n * gemm.itemsize >= GEMV_STREAMS_BYTES else 1
    if streams > 1:
        k_block = WHOLE
    return SearchSpace([
        Knob("rows", rows, default_rows, "rows of the register tile (mr; fixed by a packed "
             "A's panel height)"),
        Knob("vectors", vectors, default_vectors, "column vectors of the register tile "
             "(nr = vectors * lanes; fixed by the packed B's panel width)"),
        Knob("col_panels", col_choices, col_panels, "B panels per column block (nc / nr)"),
        Knob("row_tiles", row_choices, row_tiles, "A strips per row block (mc / mr)"),
        Knob("pack_a", pack, pack_default, "copy each row block of A into mr-row panels"),
        Knob("pack_b", pack_b, pack_b_default, "copy each column block of B (an input) "
             "into nr-wide panels"),
        Knob("k_block", k_choices, k_block, "rows of B per k "
             "block (kc; WHOLE: none; a matmul's only)"),
        Knob("order", orders, order, "inside a block, B panels outer (each panel meets "
             "every A strip) or A strips outer"),
        Knob("parallel", (True, False), True, "blocks on threads (when large enough)"),
        # (x @ x reads its one operand at two places: which would a prefetch mean?)
        Knob("prefetch", (0,) if same else PREFETCH_CHOICES, prefetch_default,
             "steps of k ahead that the micro-kernel prefetches its B panel's row (0: none)"),
        Knob("k_streams", stream_choices, streams, "a GEMV reads each B panel as this many "
             "streams at once (K in that many parts, their partial sums side by side)"),
        Knob("prefetch_next", next_choices, next_default,
             "the micro-kernel also prefetches the next B panel's row into L2 (B panels "
             "outer)"),
    ], [rules], name="matmul")


# A deep reduction over few rows: K in blocks of K_BLOCK_DEFAULT, so that a tile's A panel
# and B panel of one block stay in L1 between the row tiles that share them. Measured at one
# thread (Xeon, L2 2 MB; ms, whole K -> blocks of 256): 128x3072x768 5.01 -> 4.04
# (onnxruntime 3.87), 16x3072x768 0.736 -> 0.678; no gain with more rows or a shorter K
# (500x3072x768 16.1 -> 16.7, 1024^3 14.2 -> 14.6, 128x1024x1024 1.82 -> 1.83).
# A B block in L1 pays for the restarted streams of B (each panel read in pieces) only over
# K_BLOCK_MIN_ROWS rows or more; fewer, and each panel streams whole. One thread
# (Zen 5, L2 1 MB; 14 x 2 tiles), ms, blocks of 256 (or 512 over a large A) -> K whole,
# onnxruntime alongside: 16x3072x3072 2.200 -> 1.880 (2.824; 8-row tiles), 16x3072x1024 0.421
# -> 0.391 (0.428), 32x3072x3072 3.620 -> 3.177 (4.351), 48x3072x3072 4.780 -> 4.262 (5.245),
# 64x3072x3072 6.318 -> 5.622 (6.780); from 77 rows, within 3% either way
# (77x3072x1024 1.949 -> 2.007, 77x3072x768 1.500 -> 1.466, 128x3072x1024 3.232 -> 3.248).
K_BLOCK_DEFAULT = 256
# The micro-kernel asks for the row of its B panel PREFETCH_DEFAULT steps of k ahead (two
# cache lines per step at 32 columns): the hardware prefetchers follow one panel's stream,
# but not far enough ahead to hide memory latency behind a short tile's few FMAs per row.
# One thread (Xeon), ms, onnxruntime alongside in one process, none -> 8 steps:
# 16x768x3072 0.682 -> 0.610 (ort 0.545), 16x768x768 0.157 -> 0.140 (0.138), 1024^3 14.20 ->
# 13.58 (14.37), 500x1024x1024 6.94 -> 6.40 (6.87), 128x768x3072 3.69 -> 3.55 (3.71);
# BERT-base end to end 60.0 -> 54.4 (1 thread), 31.7 -> 28.1 (2). 4 steps measured the
# same or 1% slower, 16 steps the same.
PREFETCH_CHOICES = (0, 4, 8, 16)
PREFETCH_DEFAULT = 8
# A B this large streams from memory (its panels are read once per call): the micro-kernel
# of a k-blocked GEMM whose panels serve PREFETCH_NEXT_MIN_TILES tiles or more asks for the
# next panel's row into L2 as well, so that a panel's first tile finds it there (prefetchers
# start over at each panel). One thread (Xeon), ms, onnxruntime alongside: 128x3072x3072
# 17.47 -> 16.27 (16.80), 77x3072x3072 10.90 -> 10.04 (10.75), 128x3072x1024 5.45 -> 5.19
# (5.38); two threads 128x3072x3072 8.53 -> 8.07 (8.31). Where B is smaller or the tiles
# fewer it lost: 128x3072x768 (9 MB) 3.99 -> 4.06, 16x3072x3072 2.39 -> 2.72, 1024^3 (A
# packed, 4 MB of B) 13.8 -> 14.4.
B_MEMORY_BYTES = 10 << 20
PREFETCH_NEXT_MIN_TILES = 6
K_BLOCK_MIN_DEPTH = 2048
K_BLOCK_MAX_ROWS = 256
K_BLOCK_MIN_ROWS = 72


# Each column block of a k-blocked GEMM reads all of A, and an A larger than this does not
# stay in L2 from one block to the next beside B's blocks: the column blocks are then as
# few as the cores (so that each core reads A once), wide enough that each core's share of
# B's columns is a block, its k block (K_BLOCK_WIDE deep) within WIDE_B_BLOCK_BYTES. One
# thread (Xeon, L2 2 MB), ms, 8 column blocks of K = 256 -> blocks per core of K = 512,
# onnxruntime alongside: 128x3072x256 1.560 -> 1.433 (1.476), 128x3072x768 4.346 -> 4.184
# (4.232), 77x3072x1024 3.444 -> 3.293 (3.279), 128x3072x3072 (6 blocks) 19.39 -> 19.14
# (18.69); two threads 128x3072x768 2.343 -> 2.268 (2.203), 128x3072x256 0.850 -> 0.821
# (0.888). A block count that the cores do not divide leaves a core idle at the end (three
# blocks on two threads: 2.27 -> 2.96).
A_REREAD_BYTES = 512 * 1024
K_BLOCK_WIDE = 512
WIDE_B_BLOCK_BYTES = 1 << 20


def _core_column_blocks(panels: int, panel_bytes: int, cores: int,
                        choices: list[int]) -> int | None:
    """Panels per column block for the fewest blocks that are a multiple of ``cores`` and
    hold each block's B (``panel_bytes`` a panel) within WIDE_B_BLOCK_BYTES; None when no
    block size in ``choices`` does."""
    fitting = [c for c in choices if c < panels and panels % c == 0 and
               (panels // c) % max(1, cores) == 0 and c * panel_bytes <= WIDE_B_BLOCK_BYTES]
    return max(fitting, default=None)


def _default_k_block(m: int, k: int, choices: list[int]) -> int:
    if k >= K_BLOCK_MIN_DEPTH and K_BLOCK_MIN_ROWS <= m <= K_BLOCK_MAX_ROWS and \
            K_BLOCK_DEFAULT in choices:
        return K_BLOCK_DEFAULT
    return WHOLE


# A packed A's row block: each B panel, read into L1, serves every tile of the block, so a
# block of few rows reads B from L2 often. One thread (Xeon), ms, 14-row tiles in blocks of 2
# (28 rows) -> 8-row tiles in blocks of 16 (128 rows): 1024^3 17.4 -> 15.9 (two threads 8.72
# -> 7.97); 768x1024x1024, 14 rows in blocks of 1 -> 12 in blocks of 8: 14.9 -> 11.8. At
# 1024^3, blocks of 32 rows (8-row tiles) took 19.0 ms, of 128 or 256 rows 15.9-16.2.
PANEL_REUSE_ROWS = 96
PACKED_BLOCK_MIN_TILES = 2        # packed blocks of fewer tiles: A is read in place instead
TALLEST_PACKED_TILE_MIN = 8       # shorter tiles load B too often per FMA to be worth it


def _packed_row_blocks(m: int, k: int, itemsize: int, rows: list[int]) -> tuple[int, int]:
    """(tile rows, tiles per row block) for a packed A: the tallest tile whose tile count
    divides into at least PARALLEL_BLOCKS blocks of PANEL_REUSE_ROWS rows or more, the packed
    block within PACKED_A_BYTES; where none does, the tallest tile in the largest blocks."""
    def blocks(tallest: int) -> tuple[int, int]:
        r = _default_rows(m, [tallest])
        tiles = -(-m // r)
        fit = [c for c in range(1, tiles + 1) if tiles % c == 0 and
               c * r * k * itemsize <= PACKED_A_BYTES]
        return r, max([c for c in fit if c <= max(1, tiles // PARALLEL_BLOCKS)] or fit[:1] or
                      [WHOLE])
    for tallest in sorted((r for r in rows if r >= TALLEST_PACKED_TILE_MIN), reverse=True):
        r, block = blocks(tallest)
        if block < WHOLE and block * r >= PANEL_REUSE_ROWS:
            return r, block
    return blocks(max(rows))


def _default_rows(m: int, rows: list[int]) -> int:
    """The register tile's rows: as tall as fits the registers (taller tiles load B less
    often per FMA: on Zen 3, 6x16 ran 3-40% faster than 4x16 at M = 128 and 16), in as few
    tiles as that takes, evened out: each tile is a pass over B, and a short last tile has too
    few accumulators to keep two FMA pipes busy (a 2 x 2 tile: 4 chains of 4-cycle FMAs,
    half of Zen 5's rate). One thread (Zen 5), ms, 14 + 2 -> 8 + 8 rows, onnxruntime
    alongside: 16x768x768 0.087 -> 0.079 (0.084), 16x768x3072 0.330 -> 0.296 (0.317),
    16x3072x768 0.351 -> 0.308 (0.324), 16x1024x1024 0.162 -> 0.140 (0.151). (A Xeon, whose
    B streamed from memory, measured the opposite: 16x768x3072 0.596 -> 0.549 with 14 + 2,
    the tall tile's FMAs hiding the first pass's loads of B.)"""
    tallest = max(rows)
    return -(-m // -(-m // tallest))


def _cols(n: int, lanes: int, nr: int, vectors: int) -> int:
    width = nr if nr else lanes * vectors
    return width if n >= width else (lanes if n >= lanes and not nr else n)


@dataclass(frozen=True)
class _BlockRules:
    """The constraint between the matmul knobs (plain data, so a space pickles for the
    autotuner's measuring processes): block knobs divide the tile and panel counts, k blocks
    divide K of a matmul, a packed A block fits PACKED_A_BYTES."""

    m: int
    n: int
    k: int
    lanes: int
    nr: int
    itemsize: int
    k_blockable: bool

    def tiles(self, c) -> int:
        return -(-self.m // min(c["rows"], self.m))

    def panels(self, c) -> int:
        return -(-self.n // _cols(self.n, self.lanes, self.nr, c["vectors"]))

    def __call__(self, c) -> str | None:
        tiles, panels = self.tiles(c), self.panels(c)
        if not _fits(c["row_tiles"], tiles):
            return f"row_tiles={c['row_tiles']} does not divide the {tiles} row tiles"
        if not _fits(c["col_panels"], panels):
            return f"col_panels={c['col_panels']} does not divide the {panels} panels"
        if c["k_block"] < self.k and (self.k % c["k_block"] or not self.k_blockable):
            return f"k_block={c['k_block']}: needs a matmul whose K ({self.k}) it divides"
        if c["pack_a"] and min(c["row_tiles"], tiles) * c["rows"] * min(self.k, c["k_block"]) \
                * self.itemsize > PACKED_A_BYTES:
            return "pack_a: the packed A block would exceed PACKED_A_BYTES"
        if c["pack_b"] and c["col_panels"] >= panels and c["row_tiles"] < tiles:
            return "pack_b: one column block is all of B, packed again for every row block"
        if c["k_streams"] > 1 and c["k_block"] < self.k:
            return "k_streams: K in parts already; no k blocks beside them"
        if c["prefetch_next"] and c["order"] != "panels":
            return "prefetch_next: the next B panel is the next tile's only with panels outer"
        return None


@matmul.schedule(space=_matmul_space)
def _matmul_schedule(target: Target, sch: Schedule, out: te.Tensor, mm: te.Tensor,
                     attrs: dict, config) -> None:
    schedule_gemm(target, sch, out, mm, Gemm.of_matmul(out, mm, attrs), config)


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
    batched = any(extent > 1 for extent in out.shape[:len(batch)])   # dims of one: no batch
    m, n = gemm.m, gemm.n
    cols = _cols(n, target.vector_lanes(out.dtype), gemm.b_panel, config["vectors"])
    rows = min(config["rows"], m)
    io, jo, ii, ji = outer.tile(i, j, rows, cols)
    row_tiles = -(-m // rows)
    # the cache blocks (a block at least the extent leaves an outer loop of one iteration)
    jc, jo = outer.split(jo, config["col_panels"])
    ic, io = outer.split(io, config["row_tiles"])
    outer.vectorize(ji)
    tile_loops = (jo, io) if config["order"] == "panels" else (io, jo)
    if n % cols and (batched or config["row_tiles"] < row_tiles):
        # the last column panel overhangs: keep the column blocks out of the parallel loop,
        # serial, where loop partitioning peels that panel off and the other panels' inner
        # loops run without a guard (a parallel loop is never partitioned)
        outer.reorder(ic, jc, *tile_loops, ii, ji)
        block = outer.fuse(*batch, ic)
    else:
        outer.reorder(jc, ic, *tile_loops, ii, ji)
        block = outer.fuse(*batch, jc, ic)
    work = np.prod(out.shape) * gemm.k
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
    cols = _cols(n, lanes, gemm.b_panel, config["vectors"])
    rows = min(config["rows"], m)
    io, jo, ii, ji = stage.tile(i, j, rows, cols)
    jc, jo = stage.split(jo, config["col_panels"])
    ic, io = stage.split(io, config["row_tiles"])
    tile_loops = (jo, io) if config["order"] == "panels" else (io, jo)
    stage.reorder(jc, ic, kc, *tile_loops, ii, ji)
    stage.unroll(ii)
    stage.vectorize(ji)
    block = stage.fuse(*batch, jc)
    work = np.prod(out.shape) * partial.shape[-1] * config["k_block"]
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
    ojc, oj = epilogue.split(oj, cols * min(col_panels, -(-out.shape[-1] // cols)))
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
    cols = _cols(gemm.n, lanes, gemm.b_panel, config["vectors"])
    jo, ji = stage.split(j, cols)
    jc, jo = stage.split(jo, config["col_panels"])
    stage.reorder(*batch, i, jc, jo, kb, ji)
    stage.vectorize(ji)
    block = stage.fuse(*batch, i, jc)
    _column_blocks_on_threads(target, sch, out, mm, block, cols, config["col_panels"],
                              config["parallel"] and np.prod(out.shape) * gemm.k >= 1 << 16)
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


def second_operand(body) -> te.Tensor:
    """The right operand read by a product's reduction (the second tensor it loads): a
    matmul's B, a conv's weights."""
    loads = [x for x in E.walk(body.source if isinstance(body, E.Reduce) else body)
             if isinstance(x, E.Load) and isinstance(x.source, te.Tensor)]
    return loads[1].source


def first_operand(body) -> te.Tensor:
    """The left operand read by a matmul stage's reduction (the first tensor it loads)."""
    for load in E.walk(body.source if isinstance(body, E.Reduce) else body):
        if isinstance(load, E.Load) and isinstance(load.source, te.Tensor):
            return load.source
    raise ValueError("matmul stage reads no tensor")

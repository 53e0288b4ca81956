"""The GEMM template's search space: the register tile, the cache blocks of A and B, K in
blocks, packing, prefetching, and the rules that pick a good config without measuring.

``gemm_space(target, gemm, dtype)`` serves every GEMM-shaped group (:class:`Gemm`); every
knob it lists is read by ``schedule.py``'s :func:`schedule_gemm`.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.tile import micro_tile, tile_columns
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

# The cache blocks. The micro-kernel reads nr floats of B per step of k and mr of A, so B's
# panels are what must stay close: a column block of B (col_panels x K x nr) is kept in half
# of L2 (target.l2_bytes) while every row strip of A streams past it (b4ebe05). A row block
# (row_tiles strips of A, optionally packed) is the searchable alternative. A block knob's
# value must divide the number of tiles or panels (or cover them all: WHOLE): a block that
# overhangs puts a guard inside the micro-kernel.

# A B larger than this is streamed from memory: a packed A's row blocks (each against every
# column) would stream all of it once per block, where column blocks of B read it once and
# reuse each block across A's strips (3ddaaae).
B_STREAM_BYTES = 16 << 20
PACKED_A_BYTES = 1 << 20          # the most a packed A block (a stack buffer) may take
# A packed A block is copied once for all of B's panels: against fewer than this many it
# does not pay for the copy (1c6f8df).
PACK_A_MIN_PANELS = 16
WHOLE = 1 << 20
PARALLEL_BLOCKS = 8                           # blocks enough to share among threads
ROW_CHOICES = (1, 2, 4, 6, 8, 10, 12, 14)     # the searched tile rows (and the default)
ROW_BLOCK_MIN_ROWS = 64                       # fewer rows of A: no row blocks
K_BLOCK_CHOICES = (128, 256, 512)
ROWS_ORDER_MAX_DEPTH = 256                    # shallower: A strips outer in a block
BLOCK_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, WHOLE)

# A GEMV whose B takes GEMV_STREAMS_BYTES or more streams it from beyond L2: each B panel is
# then read as GEMV_STREAMS streams at once (K's halves), which memory serves faster than one
# (a16d0c5).
GEMV_STREAMS = 2
GEMV_STREAMS_BYTES = 4 << 20
GEMV_ROW_VECTORS = (1, 2, 4, 8, 16, 32)     # a GEMV over an input B: wide rows (538a02d)


def _fits(block: int, count: int) -> bool:
    return block >= count or count % block == 0


def gemm_space(target: Target, gemm: Gemm, dtype: str) -> SearchSpace:
    """rows x vectors: the register tile (mr x nr/lanes); col_panels: B panels per column
    block (nc / nr); row_tiles: A strips per row block (mc / mr; WHOLE: no row blocks);
    pack_a: copy each row block of A into mr-row panels; parallel: blocks on threads."""
    m, n, k = gemm.m, gemm.n, gemm.k
    lanes = target.vector_lanes(dtype)
    tile_vectors = micro_tile(target)[1]
    # a packed B's panel is the tile's vectors (another value of the knob repacks B:
    # compiler/kernel.py, group_space), and so decides the rows that fit beside them
    tile_rows = micro_tile(target, gemm.b_panel // lanes if gemm.b_panel else tile_vectors)[0]
    candidates = [r for r in (1, 2, 3, 4, 5, 6, 8, 10, 12, 14)
                  if r <= min(m, target.max_tile_rows)] or [1]
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
        # a packed A fixes the tile's rows: as many column vectors as the registers hold
        vectors = tuple(v for v in (1, 2, 3) if not gemm.a_panel or
                        (gemm.a_panel + 1) * v + 1 <= target.vector_registers) or (1,)
    default_vectors = min(vectors, key=lambda v: abs(v - tile_vectors))
    if m == 1 and not nr:
        default_vectors = max(v for v in vectors if v * lanes <= max(lanes, n))

    rules = _BlockRules(m, n, k, lanes, nr, gemm.itemsize, gemm.k_blockable,
                        gemm.symbolic_m, gemm.symbolic_n)

    def panels(c) -> int:
        return rules.panels(c)
    default = {"rows": default_rows, "vectors": default_vectors, "row_tiles": WHOLE,
               "pack_a": False}
    panel_count, tile_count = panels(default), rules.tiles(default)
    width = tile_columns(n, lanes, nr, default_vectors)
    k_choices = [WHOLE] + [c for c in K_BLOCK_CHOICES if c < k and k % c == 0 and
                           gemm.k_blockable and not gemm.symbolic_k]
    k_block = _default_k_block(m, k, k_choices)
    # a column block's panels (of one k block) fit half of L2
    fits_l2 = max(1, (target.l2_bytes // 2) // (width * min(k, k_block) * gemm.itemsize))
    # and at least PARALLEL_BLOCKS column blocks, to share among threads
    most = min(fits_l2, max(1, panel_count // PARALLEL_BLOCKS))
    col_choices = [c for c in BLOCK_CHOICES if c < panel_count] + [WHOLE]
    col_panels = max([c for c in col_choices[:-1] if c <= most and _fits(c, panel_count)],
                     default=WHOLE)
    if gemm.symbolic_n and gemm.batched:
        # run-time columns under batch dims: the schedule keeps the column blocks serial
        # (no threads to share them among), and blocks of several panels ended in a partial
        # block whose last panel was a masked full-width tile, a tail inside a tail (2.5x the
        # static GEMM of a transposed conv at N = 40); one panel per block leaves one tail,
        # which narrows where its remainder fits half a panel (passes/loop/narrow_tails.py)
        col_panels = col_choices[0]     # (WHOLE where the hints give one panel)
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
    # a symbolic K: no copy of A or B (its block would need a run-time size), no k blocks
    pack = (False, True) if tile_count > 2 and not same and not gemm.a_panel and \
        not gemm.symbolic_k else (False,)
    # a B that is an input, read by several row tiles: pack its column blocks (not with
    # batch dims: a batched B is small (attention), a shared one would be packed per batch)
    pack_b = (False, True) if not nr and m > 1 and not gemm.batched and not same and \
        gemm.packable_b and not gemm.symbolic_k else (False,)
    # an A larger than L2: a tile's mr broadcast streams, each a row of A, become one packed
    # stream, packed once per row block against every column, at least PARALLEL_BLOCKS
    # blocks for the threads (1d3d814); not with K in blocks, whose threads share column
    # blocks and whose k block of A stays in L2 unpacked (633a1dd); only for tiles of
    # TALLEST_PACKED_TILE_MIN rows or more, whose many streams of A the prefetchers lose
    # (dbf02ba)
    a_streams = pack[-1] and big and m * k * gemm.itemsize > target.l2_bytes and \
        k * n * gemm.itemsize <= B_STREAM_BYTES and k_block >= k and \
        max(fitting) >= TALLEST_PACKED_TILE_MIN
    if a_streams:
        packed_rows, packed_block = _packed_row_blocks(m, k, gemm.itemsize, fitting)
        packed_tiles = rules.tiles({"rows": packed_rows})
        # a tile count that only divides into blocks of one tile (15 tiles: enough blocks to
        # share among threads): every block would stream all of B for one tile (309e1b6)
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
    if gemm.symbolic_m and big and not a_streams and panel_count > 1 and not gemm.batched:
        # rows of symbolic count (batch x sequence, flattened) in blocks of about
        # PANEL_REUSE_ROWS, each against every column panel while it stays in L2: without
        # them each panel streamed all of A (a static build's batch loop blocks the rows so)
        fit = [c for c in row_choices[:-1] if c * default_rows <= PANEL_REUSE_ROWS and
               c * default_rows * k * gemm.itemsize <= target.l2_bytes // 4]
        if fit:
            row_tiles = max(fit)
    pack_b_default = pack_b[-1] and row_tiles >= tile_count
    if gemm.a_panel and 1 in row_choices and m * k > k * n and \
            k * n * gemm.itemsize <= target.l2_bytes:
        # a conv's packed weights (A) larger than its input (B), which L2 holds: one A
        # panel per block, against all columns, so that A streams from memory once (column
        # blocks stream all of A once each) and the blocks share evenly among threads
        # (59d0a10)
        row_tiles, col_panels = 1, WHOLE
    # B streams from memory where it is a matmul's constant (weights), not where it is a
    # conv's input (activations, which the cache holds; 18319fd)
    prefetch_default = 0 if same or gemm.a_panel else PREFETCH_DEFAULT
    # a shallow matmul's A strip (14 rows of K <= 256: 14 KB) stays in L1 against the
    # block's B panels, which stream from L2 as whole vectors, rather than each B panel
    # against strips that stream as 14 rows of broadcasts (30ae5c3)
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
        k % GEMV_STREAMS == 0 and not gemm.batched and not gemm.symbolic_k else (1,)
    streams = stream_choices[-1] if k * n * gemm.itemsize >= GEMV_STREAMS_BYTES else 1
    if streams > 1:
        k_block = WHOLE
    return SearchSpace([
        Knob("rows", rows, default_rows, "rows of the register tile (mr; fixed by a packed "
             "A's panel height)"),
        Knob("vectors", vectors, default_vectors, "column vectors of the register tile "
             "(nr = vectors * lanes; a packed B is repacked for it)"),
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


# A deep reduction (K_BLOCK_MIN_DEPTH or more) over few rows: K in blocks of K_BLOCK_DEFAULT,
# so that a tile's A panel and B panel of one block stay in L1 between the row tiles that
# share them (d5ad747); only over K_BLOCK_MIN_ROWS rows or more, which pay for the restarted
# streams of B (a7aa2f6).
K_BLOCK_DEFAULT = 256
# The micro-kernel asks for the row of its B panel PREFETCH_DEFAULT steps of k ahead: the
# hardware prefetchers follow one panel's stream, but not far enough ahead to hide memory
# latency behind a short tile's few FMAs per row (bad222f).
PREFETCH_CHOICES = (0, 4, 8, 16)
PREFETCH_DEFAULT = 8
# A B this large streams from memory (its panels are read once per call): the micro-kernel
# of a k-blocked GEMM whose panels serve PREFETCH_NEXT_MIN_TILES tiles or more asks for the
# next panel's row into L2 as well, so that a panel's first tile finds it there (prefetchers
# start over at each panel); smaller B or fewer tiles lost (600e0d3).
B_MEMORY_BYTES = 10 << 20
PREFETCH_NEXT_MIN_TILES = 6
K_BLOCK_MIN_DEPTH = 2048
K_BLOCK_MAX_ROWS = 256
K_BLOCK_MIN_ROWS = 72


# Each column block of a k-blocked GEMM reads all of A, and an A larger than this does not
# stay in L2 from one block to the next beside B's blocks: the column blocks are then as
# few as the cores (so that each core reads A once; a count the cores do not divide leaves
# one idle), wide enough that each core's share of B's columns is a block, its k block
# (K_BLOCK_WIDE deep) within WIDE_B_BLOCK_BYTES (3468d52).
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
# block of few rows reads B from L2 often (9d9f765).
PANEL_REUSE_ROWS = 96
PACKED_BLOCK_MIN_TILES = 2        # fewer tiles: A is read in place instead (309e1b6)
TALLEST_PACKED_TILE_MIN = 8       # shorter tiles' streams of A the prefetchers follow (dbf02ba)


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
    often per FMA; 1466956), in as few tiles as that takes, evened out: each tile is a pass
    over B, and a short last tile has too few accumulators to keep two FMA pipes busy (a 2 x 2
    tile: 4 chains of 4-cycle FMAs, half of Zen 5's rate; a7aa2f6)."""
    tallest = max(rows)
    return -(-m // -(-m // tallest))


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
    symbolic_m: bool = False
    symbolic_n: bool = False

    def tiles(self, c) -> int:
        return -(-self.m // min(c["rows"], self.m))

    def panels(self, c) -> int:
        return -(-self.n // tile_columns(self.n, self.lanes, self.nr, c["vectors"]))

    def __call__(self, c) -> str | None:
        tiles, panels = self.tiles(c), self.panels(c)
        # (over a symbolic dim the counts are the hints': a block that does not divide it
        # ends in a guarded block, whatever the run's count)
        if not self.symbolic_m and not _fits(c["row_tiles"], tiles):
            return f"row_tiles={c['row_tiles']} does not divide the {tiles} row tiles"
        if not self.symbolic_n and not _fits(c["col_panels"], panels):
            return f"col_panels={c['col_panels']} does not divide the {panels} panels"
        if c["pack_a"] and self.symbolic_m and c["row_tiles"] >= tiles:
            return "pack_a: one row block is all of A's symbolic rows (a block of run-time size)"
        if c["pack_b"] and self.symbolic_n and c["col_panels"] >= panels:
            return "pack_b: one column block is all of B's symbolic columns (a block of " \
                "run-time size)"
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

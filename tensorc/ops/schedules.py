"""Default CPU schedules shared by op families, and tensor-expression helpers they use.

Every op's ``schedule(target, sch, out, anchor, attrs)`` gets the group's schedule after the
elementwise stages around the anchor were inlined: ``out`` is the group's output tensor (the
anchor itself, or the end of an elementwise epilogue fused after it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.bounds import loop_extents
from tensorc.ir.loop import Buffer, flat_index
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.te import ComputeOp, Tensor, hint, hint_shape, is_static, post_order
from tensorc.ops.registry import Template
from tensorc.ops.space import Knob, SearchSpace
from tensorc.ops.symbolic import parallel_outermost, schedule_symbolic_injective
from tensorc.target import Target

# below this many output elements a kernel runs on one thread: waking the pool costs more
PARALLEL_MIN_ELEMENTS = 16384
# ... unless each element is this many multiply-adds' work together (a conv's reduction;
# 44f3156)
PARALLEL_MIN_WORK = 1 << 19


def reduction_depth(t: Tensor) -> int:
    """The terms each element of a reduction stage sums (1 for other stages)."""
    return math.prod(iv.extent for iv in t.op.reduce_axis) if isinstance(t.op, ComputeOp) \
        else 1


def worth_threads(elements: int, depth: int = 1) -> bool:
    """Whether a kernel of ``elements`` outputs, each a reduction ``depth`` deep, runs its
    outer loop on threads."""
    return elements >= PARALLEL_MIN_ELEMENTS or elements * depth >= PARALLEL_MIN_WORK


def clamp(index: E.Expr, extent: int) -> E.Expr:
    """``index`` clamped into [0, extent): loads stay in bounds even where a select discards
    them (padding, concat)."""
    return E.minimum(E.maximum(index, 0), E.as_expr(extent - 1))


def in_range(index: E.Expr, extent: int) -> E.Expr:
    return E.Logical("and", E.Compare("ge", index, E.const(0)),
                     E.Compare("lt", index, E.as_expr(extent)))


def _size(t: Tensor) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def vector_block(extent: int, lanes: int) -> int:
    """Elements per vector along an axis. Up to two registers' worth, the whole axis is one
    vector (an odd width runs on the next power of two, the extra lanes masked). Longer axes
    take a divisor of the extent, preferably between half a register and a register, else up
    to two registers, so that every block is whole; only an extent with no such divisor gets
    register-sized blocks and a guarded (masked) tail block."""
    if extent <= 2 * lanes:
        return extent
    for low, high in ((lanes // 2, lanes), (lanes + 1, 2 * lanes)):
        fits = [d for d in range(max(1, low), high + 1) if extent % d == 0]
        if fits:
            return max(fits)
    return lanes


def vectorize_inner(target: Target, stage: Stage, extent: int, dtype: str, registers: int = 1):
    """Split the stage's innermost loop (of extent ``extent``) by the vector width (times
    ``registers``) and vectorize the inner part; return the outer loops (outermost first)."""
    axes = [sv for sv in stage.leaf_vars if sv.kind == "spatial"]
    lanes = target.vector_lanes(dtype) * registers
    if not axes:
        return []
    if extent >= lanes:
        block = vector_block(extent, lanes)
        if len(axes) > 1 and extent > 2 * lanes and (block < lanes or extent % block):
            # no divisor of a register's width (150 = 25 x 6): whole registers, the last one
            # overlapping the one before it, instead of narrow or masked vectors; the rows
            # outside it are the loops to run in parallel
            outer, inner = stage.split(axes[-1], lanes, shift_tail=True)
            stage.vectorize(inner)
            return list(axes[:-1])
        outer, inner = stage.split(axes[-1], block)
        stage.vectorize(inner)
        return [*axes[:-1], outer]
    if len(axes) > 1:
        # a short innermost axis: fuse it with the others and vectorize the fused loop
        fused = stage.fuse(*axes)
        outer, inner = stage.split(fused, lanes)
        stage.vectorize(inner)
        return [outer]
    stage.vectorize(axes[0])
    return []


def parallel_outer(stage: Stage, loops: list, size: int):
    """Fuse the given outer loops and run them in parallel when the work is large enough;
    returns the fused loop (or the innermost given one)."""
    if not loops:
        return None
    fused = stage.fuse(*loops) if len(loops) > 1 else loops[0]
    if size >= PARALLEL_MIN_ELEMENTS:
        stage.parallel(fused)
    return fused


def materialize_pad(target: Target, sch: Schedule, consumer: Tensor) -> None:
    """The padded (or subsampled) input that ``consumer`` reads, if any, computed once at
    the root (the padding decided there, not at every tap)."""
    pad = next((t for t in consumer.op.input_tensors() if t.op.name in ("pad", "subsample")),
               None)
    if pad is None:
        return
    sch[pad].compute_root()
    # rows of whole vectors and a guarded tail (loop partitioning peels it), rather than
    # vectors of a divisor of the row (5 lanes for 65), planes in parallel; a phase split's
    # loads are strided (one wide load and a shuffle each)
    st = sch[pad]
    *rows, j = st.op_axis
    _, ji = st.split(j, target.vector_lanes(pad.dtype))
    st.vectorize(ji)
    st.parallel(st.fuse(*rows[:len(rows) - 1]))


@dataclass(frozen=True)
class RegisterTileFits:
    """A register-tiled conv space's constraint (``tile_lines`` rows, where the space has
    that knob, of ``row_tile`` x ``filter_vectors``): the tile's accumulators, its vectors of
    weights and a broadcast input fit the vector registers. (A module-level class, not a
    closure: the autotuner pickles spaces into its build workers.) ``rows_knob``: the knob
    that holds the tile's rows (a Winograd band's ``tiles``); ``vectors_knob``: the one that
    holds its vectors (the flattened conv's vectors of outputs, beside broadcast weights)."""

    registers: int
    rows_knob: str = "row_tile"
    vectors_knob: str = "filter_vectors"

    def holds(self, rows: int, vectors: int, lines: int = 1, broadcasts: int = 1) -> bool:
        """Whether ``lines`` x ``rows`` x ``vectors`` accumulators, ``vectors`` weight vectors
        and ``broadcasts`` broadcast inputs fit the registers (a tile whose kernel taps run
        inside the channels holds a row of broadcasts, which its taps share)."""
        return lines * rows * vectors + vectors + broadcasts <= self.registers

    def __call__(self, c) -> str | None:
        if not self.holds(c[self.rows_knob], c[self.vectors_knob], c.get("tile_lines", 1)):
            return (f"{self.rows_knob} x {self.vectors_knob} accumulators exceed the vector "
                    f"registers")
        return None


def shared_broadcasts(rows: int, taps_inner: bool, taps: int) -> int:
    """The broadcast inputs a conv's register tile of ``rows`` outputs keeps live: with more
    than one kernel tap inside the channels, a row of them (each serves the taps that read
    it); else one at a time."""
    return rows if taps_inner and taps > 1 else 1


def register_tile(sch: Schedule, tile: Tensor, stage: Stage, at) -> Stage:
    """``tile``'s accumulation, moved into a local buffer computed at ``stage``'s loop
    ``at`` (its register tile); ``tile`` itself is inlined into its consumer, which then
    reads the buffer. Returns the buffer's stage, for its loop order."""
    local = sch.cache_write(tile, "local")
    sch[tile].compute_inline()
    ls = sch[local]
    ls.compute_at(stage, at)
    return ls


def injective_space(target: Target, out: Tensor, anchor: Tensor | None, attrs: dict | None
                    ) -> SearchSpace:
    return SearchSpace([
        Knob("registers", (1, 2, 4), 1, "vector registers per vectorized block"),
        Knob("parallel", (True, False), True, "outer loops on threads (when large enough)"),
    ], name="injective")


PARALLEL_GRAIN = 64     # parallel iterations enough to balance two to a few dozen threads


def parallel_prefix(stage: Stage, loops: list, size: int) -> None:
    """Run the fewest outer loops that give PARALLEL_GRAIN iterations in parallel (fused);
    the loops inside stay nested, so that values that do not depend on them (a per-channel
    bias) are loaded once per inner loop, not once per vector."""
    if not loops or size < PARALLEL_MIN_ELEMENTS:
        return
    extents = loop_extents(stage)
    take, count = 0, 1
    while take < len(loops) and count < PARALLEL_GRAIN:
        count *= extents[loops[take]]
        take += 1
    prefix = loops[:take]
    stage.parallel(stage.fuse(*prefix) if len(prefix) > 1 else prefix[0])


def schedule_injective(target: Target, sch: Schedule, out: Tensor, anchor: Tensor | None = None,
                       attrs: dict | None = None, config=None) -> None:
    """Elementwise, broadcast and injective groups: vectorize the inner loop, parallel outer
    (in the stage's current loop order). A transposing group, whose innermost axis reads its
    input with a stride, is vectorized along the axis its input is contiguous in instead
    (``transposed_axis``): contiguous loads and full vectors for the math, rather than a
    gather per vector; in square tiles stored transposed from registers where both axes are
    a vector long, else with the stores scattered."""
    config = config or injective_space(target, out, anchor, attrs).default()
    if not is_static(out.shape):
        _schedule_symbolic_injective(target, sch, out, config)
        return
    stage = sch[out]
    extent = out.shape[-1] if out.shape else 1
    lanes = target.vector_lanes(out.dtype)
    axis = transposed_axis(out, lanes)
    if axis is not None and stage.leaf_vars == stage.op_axis and \
            min(out.shape[axis], out.shape[-1]) >= lanes:
        _schedule_transposed_tiles(stage, axis, lanes, out, config)
        return
    if axis is not None and out.shape[-1] % lanes == 0 and out.shape[-1] >= 4 * lanes:
        axis = None     # long whole-vector rows: vectorized along them (gathering)
    if axis is not None and stage.leaf_vars == stage.op_axis:
        order = list(stage.op_axis)
        stage.reorder(*order[:axis], *order[axis + 1:], order[axis])
        extent = out.shape[axis]
        if extent > lanes and vector_block(extent, lanes) < lanes and len(order) > 2:
            # no divisor of a register's width (52 = 13 x 4): whole registers, the last
            # one overlapping the one before it (the math of a YOLO head's decode is most of
            # its cost, at half width in 4-lane vectors); a loop inside the parallel ones
            outer, inner = stage.split(order[axis], lanes, shift_tail=True)
            stage.vectorize(inner)
            parallel_prefix(stage, [*order[:axis], *order[axis + 1:]],
                            _size(out) if config["parallel"] else 0)
            return
    joined = concat_axis(out)
    if joined is not None and extent < lanes and joined < len(out.shape) - 1 and \
            stage.leaf_vars == stage.op_axis and math.prod(out.shape[joined + 1:]) >= lanes:
        # a concat's short rows: fused only below its axis, which stays a loop of its own
        # where loop partitioning cuts one piece per input (each a plain copy); fused with it
        # every vector tested every input's range (510f9b0)
        rows = list(stage.op_axis)[joined + 1:]
        if len(rows) > 1:
            stage.fuse(*rows)
        extent = math.prod(out.shape[joined + 1:])
    outer = vectorize_inner(target, stage, extent, out.dtype, config["registers"])
    parallel_prefix(stage, outer, _size(out) if config["parallel"] else 0)


def _schedule_symbolic_injective(target: Target, sch: Schedule, out: Tensor, config) -> None:
    """An injective group over symbolic dims (ops/symbolic.py). A transposing group whose
    two axes are a vector long or more at the hints runs in transposed register tiles, as a
    static one does (attention's keys at 7 x 40: 5.7 us in gathers, 1.6 us in tiles).
    Otherwise it is vectorized along the axis its inputs are read contiguously in, its
    stores scattered, where its innermost output axis is short:

    - symbolic and short at the hints, the contiguous axis a constant count of whole vectors
      (the small-dims variant of attention's keys [batch, heads, head_dim, seq] at a few
      tokens): along the short axis every vector was a tail of masked gathers;
    - a constant shorter than a vector (a detector head's [batch, 3, H*W, 6] from
      [batch, 3, 6, H*W]): every vector was a masked gather of 6 lanes."""
    stage = sch[out]
    lanes = target.vector_lanes(out.dtype)
    axis = transposed_axis(out, lanes)
    inner = out.shape[-1]
    if axis is not None and stage.leaf_vars == stage.op_axis and \
            min(hint(out.shape[axis]), hint(inner)) >= lanes:
        _symbolic_transposed_tiles(stage, axis, lanes, out, config)
        return
    if axis is not None and stage.leaf_vars == stage.op_axis and (
            isinstance(out.shape[axis], int) and out.shape[axis] % lanes == 0 and
            not isinstance(inner, int) and hint(inner) <= lanes or
            isinstance(inner, int) and inner < lanes):
        order = list(stage.op_axis)
        stage.reorder(*order[:axis], *order[axis + 1:], order[axis])
    schedule_symbolic_injective(target, sch, out, config)


def concat_axis(out: Tensor) -> int | None:
    """The axis of a concat computed inside ``out``'s group (the group's inputs are
    placeholders), or None."""
    for t in post_order([out]):
        inputs = t.op.input_tensors()
        if t.op.name == "concat" and inputs and len(t.shape) == len(out.shape):
            differ = [d for d in range(len(t.shape)) if inputs[0].shape[d] != t.shape[d]]
            if len(differ) == 1:
                return differ[0]
    return None


def _schedule_transposed_tiles(stage: Stage, axis: int, lanes: int, out: Tensor, config
                               ) -> None:
    """A transposing group in tiles of lanes x lanes: a vector along ``axis`` (contiguous
    loads) for each of ``lanes`` elements of the innermost output axis (unrolled), which
    codegen stores transposed from registers as whole vectors along the innermost axis
    instead of scattering each vector lane by lane (the transposed register tiles of
    codegen/llvm/tiles.py):

        for (outer axes: parallel)  for (v.o)  for (u.o)  for (u.i: unrolled)  for (v.i: vec)

    ``axis`` (v) ends in a block shifted back to end at its end (whole vectors, no guard),
    or with no outer axes to run in parallel, in a guarded block and v.o runs in parallel.
    The innermost axis (u) ends in a guarded block, which loop partitioning peels into a
    shorter tile (codegen stores its rows masked); a concat's parts along u stay selects in
    the unrolled tile, decided in each unrolled copy (measured in 642bb9a)."""
    order = list(stage.op_axis)
    v, u = order[axis], order[-1]
    rest = [a for d, a in enumerate(order[:-1]) if d != axis]
    vo, vi = stage.split(v, lanes, shift_tail=bool(rest) and out.shape[axis] % lanes != 0)
    uo, ui = stage.split(u, lanes)
    stage.reorder(*rest, vo, uo, ui, vi)
    stage.unroll(ui)
    stage.vectorize(vi)
    parallel_prefix(stage, rest or [vo], _size(out) if config["parallel"] else 0)


def _symbolic_transposed_tiles(stage: Stage, axis: int, lanes: int, out: Tensor, config
                               ) -> None:
    """``_schedule_transposed_tiles`` over symbolic dims: both axes split by whole vectors,
    the symbolic ones with a guarded last tile (passes/loop/symbolic_tails.py runs the whole
    tiles without it and the last one in a copy per remainder), the outer axes on threads at
    the dims' hints. Codegen stores each tile's rows at a run-time stride."""
    order = list(stage.op_axis)
    v, u = order[axis], order[-1]
    rest = [a for d, a in enumerate(order[:-1]) if d != axis]
    vo, vi = stage.split(v, lanes)
    uo, ui = stage.split(u, lanes)
    stage.reorder(*rest, vo, uo, ui, vi)
    stage.unroll(ui)
    stage.vectorize(vi)
    parallel_outermost(stage, rest or [vo], math.prod(hint_shape(out.shape))
                       if config["parallel"] else 0)


def _input_loads(t: Tensor, indices: tuple, depth: int = 0) -> list:
    """The loads of placeholders that computing ``t[indices]`` makes, through the compute
    stages in between (as if all were inlined): (tensor, index expressions) pairs."""
    op = t.op
    if not isinstance(op, ComputeOp) or op.reduce_axis or depth > 12:
        return [(t, indices)]
    body = E.substitute(op.body, {iv.var: i for iv, i in zip(op.axis, indices)})
    loads = []
    for e in E.walk(body):
        if isinstance(e, E.Load) and isinstance(e.source, Tensor):
            loads += _input_loads(e.source, e.indices, depth + 1)
    return loads


def _unclamp(e: E.Expr) -> E.Expr | None:
    """min(x, c), max(x, c) and clamp(x, lo, hi) as x: the clamps that keep a concat's or a
    pad's discarded loads in bounds do not change which way the kept ones walk memory."""
    if isinstance(e, E.Binary) and e.op in ("min", "max") and isinstance(e.b, E.Const):
        return e.a
    if isinstance(e, E.Call) and e.name == "clamp":
        return e.args[0]
    return None


def transposed_axis(out: Tensor, lanes: int) -> int | None:
    """The output axis to vectorize instead of the innermost one, when the group transposes:
    its large inputs are all read with a stride along the innermost output axis and
    contiguously along one other axis (at least a vector long). None otherwise. Over
    symbolic dims the sizes and strides are taken at the dims' hints: which axis walks
    memory contiguously does not depend on their values."""
    if len(out.shape) < 2:
        return None
    axes = [iv.var for iv in out.op.axis] if isinstance(out.op, ComputeOp) else []
    if not axes:
        return None
    size = math.prod(hint_shape(out.shape))      # symbolic dims at their hints
    votes = set()
    for tensor, indices in _input_loads(out, tuple(axes)):
        if math.prod(hint_shape(tensor.shape)) * 2 < size or \
                len(indices) != len(tensor.shape):
            continue
        flat = E.transform(flat_index(Buffer(tensor.name, tensor.shape, tensor.dtype), indices),
                           _unclamp)
        if not (is_static(tensor.shape) and is_static(out.shape)):
            flat = E.substitute(flat, {v: E.const(hint(v)) for v in E.free_vars(flat)
                                       if v not in axes})
        coeffs = [arith.linear_coeff(flat, v) for v in axes]
        if coeffs[-1] is None:
            continue
        if coeffs[-1][1] in (0, 1):
            return None
        unit = [d for d, c in enumerate(coeffs[:-1]) if c is not None and c[1] == 1]
        if len(unit) != 1:
            return None
        votes.add(unit[0])
    if len(votes) != 1:
        return None
    (axis,) = votes
    return axis if hint(out.shape[axis]) >= lanes else None


def reduction_space(target: Target, out: Tensor, anchor: Tensor, attrs: dict | None
                    ) -> SearchSpace:
    return SearchSpace([
        Knob("rfactor", (True, False), True, "partial sums in a vector for row reductions"),
        Knob("parallel", (True, False), True, "output rows on threads (when large enough)"),
    ], name="reduction")


COLUMN_REGISTERS = 4


def schedule_reduction(target: Target, sch: Schedule, out: Tensor, anchor: Tensor,
                       attrs: dict | None = None, config=None) -> None:
    """Any reduction anchor (reduce_*, arg reductions, scans, N-d convs, ...).

    A row reduction (its innermost reduction axis walks contiguous memory and the output has
    no long contiguous axis, as reduce_mean over H, W of NCHW) keeps ``lanes`` partial results
    in a vector (rfactor) and runs output elements in parallel:

        for (n.c: parallel)  [for (k.o)  for (j: vectorized)  rf[j] += x[k.o*lanes + j]]
                             out = sum(rf[j])

    Otherwise the innermost output axis is vectorized (masked when it is short) with the
    reduction loops just outside it, and the other output axes run in parallel:

        for (n.c.y: parallel)  for (x.o)  [for (k...)  for (x.i: vectorized)]
    """
    config = config or reduction_space(target, out, anchor, attrs).default()
    lanes = target.vector_lanes(out.dtype)
    if config["rfactor"] and _row_reduction(anchor, lanes):
        _schedule_row_reduction(target, sch, out, anchor, lanes, config["parallel"])
        return
    if out is anchor:
        # accumulate in a local (register) block, copied out once
        anchor = sch.cache_write(anchor, "local")
    stage = sch[out]
    axes = stage.op_axis
    if not axes:
        return
    last = out.shape[-1]
    block = 0
    if last > 2 * lanes:
        # blocks of up to COLUMN_REGISTERS vectors: a column sum then reads whole cache lines
        # of each row (over rows 16 KiB apart it read half lines, all in one L1 set; 963c487)
        block = vector_block(last, lanes * COLUMN_REGISTERS)
        outer, inner = stage.split(axes[-1], block)
        stage.vectorize(inner)
        loops = [*axes[:-1], outer]
    else:
        # a short row is one (masked) vector: never fuse it with the axes outside, whose
        # fused index the anchor's region could not be inferred through
        stage.vectorize(axes[-1])
        loops = list(axes[:-1])
    # the work is the reduction's (its output times the elements reduced into each)
    work = _size(anchor) * math.prod(iv.extent for iv in anchor.op.reduce_axis)
    attach = parallel_outer(stage, loops, work if config["parallel"] else 0)
    if attach is None:
        return
    sch[anchor].compute_at(stage, attach)
    acc = sch[anchor]
    if block > lanes and acc.op_axis:
        # the block's vectors side by side inside the reduction loops: one chain of
        # dependent adds per register, each step reading a row's whole block (each vector
        # alone over the whole reduction was one chain at a time, and over rows far apart
        # one cache miss at a time; 94c31d4). A block that is no whole number of vectors
        # (56) ends with a vector overlapping the one before it where the combiner may see
        # an element twice (max, min), else with a masked vector.
        *rows, x = acc.op_axis
        body = anchor.op.body
        idempotent = isinstance(body, E.Reduce) and body.combiner in ("max", "min", "max_ordered")
        x_outer, x_inner = acc.split(x, lanes, shift_tail=block % lanes != 0 and idempotent)
        acc.reorder(*rows, *acc.reduce_axis, x_outer, x_inner)
        acc.unroll(x_outer)
        acc.vectorize(x_inner)
        return
    vectorize_inner_reduction(target, acc, anchor)


_ROW_COMBINERS = ("sum", "max", "min", "prod")


def _row_reduction(t: Tensor, lanes: int) -> bool:
    """A reduction whose innermost reduction axis walks the last (contiguous) dim of a tensor
    it reads, with no output axis in that dim, over at least a vector of elements, and an
    output whose own last axis is too short to vectorize."""
    op = t.op
    if not op.reduce_axis or not isinstance(op.body, E.Reduce) or \
            op.body.combiner not in _ROW_COMBINERS:
        return False
    if t.shape and hint(t.shape[-1]) >= lanes:
        return False
    total = 1
    for iv in op.reduce_axis:
        total *= hint(iv.extent)
    if total < lanes:
        return False
    inner = op.reduce_axis[-1].var
    spatial = {iv.var for iv in op.axis}
    for load in E.walk(op.body.source):
        if isinstance(load, E.Load) and load.indices:
            last = load.indices[-1]
            lin = arith.linear_coeff(last, inner)
            if lin is not None and lin[1] == 1 and not (E.free_vars(last) & spatial):
                return True
    return False


# Partial results of a row reduction (reduce ops over contiguous rows, softmax,
# normalizations): up to this many registers of them, while each still takes at least 8
# vectors of the row, so that the additions (or max) form independent chains rather than one
# waiting on the last; rows of 64 keep one register (8568341).
ROW_REGISTERS = 4


def reduce_in_row(target: Target, sch: Schedule, reduction: Tensor, parent: Stage, row,
                  rfactor: bool = True, interleave: bool = False) -> Stage | None:
    """Compute ``reduction`` (one value per row, reducing contiguous elements) inside
    ``parent``'s ``row`` loop, with partial results in up to ROW_REGISTERS vectors (rfactor)
    when the row is long enough and the combiner allows it. ``interleave``: ``row`` holds
    several rows, whose partial results are updated in turn at each step along the rows
    (independent chains). Returns the stage of the partial results (None without)."""
    lanes = target.vector_lanes(reduction.dtype)
    stage = sch[reduction]
    stage.compute_at(parent, row)
    if not rfactor or not _row_reduction(reduction, lanes):
        return None
    rf = sch.rfactor(reduction, lanes * _row_registers(reduction, lanes))
    rf_stage = sch[rf]
    rf_stage.compute_at(parent, row)
    *spatial, j = rf_stage.op_axis
    if interleave:
        rf_stage.reorder(*rf_stage.reduce_axis, *spatial, j)
        for axis in spatial:
            rf_stage.unroll(axis)
    else:
        rf_stage.reorder(*rf_stage.reduce_axis, j)
    rf_stage.vectorize(j)
    return rf_stage


def _row_registers(reduction: Tensor, lanes: int) -> int:
    """Registers of partial results for a row reduction (see ROW_REGISTERS)."""
    registers = ROW_REGISTERS
    total = math.prod(hint(iv.extent) for iv in reduction.op.reduce_axis)
    while registers > 1 and total < 8 * registers * lanes:
        registers //= 2
    return registers


def _schedule_row_reduction(target: Target, sch: Schedule, out: Tensor, anchor: Tensor,
                            lanes: int, parallel: bool = True) -> None:
    rf = sch.rfactor(anchor, lanes * _row_registers(anchor, lanes))
    stage = sch[out]
    axes = stage.op_axis
    work = _size(anchor) * lanes * 4 if parallel else 0
    row = parallel_outer(stage, axes, work) if axes else None
    if row is None:         # a 0-d output: the whole reduction in one row
        rf_stage = sch[rf]
        *_, j = rf_stage.op_axis
        rf_stage.reorder(*rf_stage.reduce_axis, j)
        rf_stage.vectorize(j)
        return
    if anchor is not out:
        sch[anchor].compute_at(stage, row)
    rf_stage = sch[rf]
    rf_stage.compute_at(stage, row)
    *_, j = rf_stage.op_axis
    rf_stage.reorder(*rf_stage.reduce_axis, j)
    rf_stage.vectorize(j)


def vectorize_inner_reduction(target: Target, stage: Stage, t: Tensor) -> list:
    """Reorder so that reduction loops sit just outside the vectorized innermost spatial
    loop; return the outer spatial loops."""
    axes = stage.op_axis
    reduce_axes = stage.reduce_axis
    if not axes:
        return []
    lanes = target.vector_lanes(t.dtype)
    last = t.shape[-1]
    if last > 1:
        if last > 2 * lanes:
            outer, inner = stage.split(axes[-1], vector_block(last, lanes))
            stage.reorder(*axes[:-1], outer, *reduce_axes, inner)
            stage.vectorize(inner)
            return [*axes[:-1], outer]
        stage.reorder(*axes[:-1], *reduce_axes, axes[-1])
        stage.vectorize(axes[-1])
        return list(axes[:-1])
    return list(axes)


# The template of groups without an anchor (elementwise, broadcast, injective), by target kind.
INJECTIVE: dict[str, Template] = {"llvm": Template(schedule_injective, injective_space,
                                                   symbolic=True)}

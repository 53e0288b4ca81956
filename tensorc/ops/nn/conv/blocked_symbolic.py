"""Dense convs on blocked tensors (``conv/blocked.py``) over symbolic dims: the register tile
of the static schedule (R outputs of a row x V vectors of b filters, every input element one
broadcast), with the row's run-time width split into whole tiles and a last, partial one.

The input is padded by a node of its own (``passes/graph/lower_for_target.py``), so a tile
reads it in place with no select. A row's whole tiles run unguarded and its partial tile
runs as one guard-free copy per remainder (``passes/loop/symbolic_tails.py``; a tile of at
most SYMBOLIC_TILE_ROWS outputs, so at most that many copies). Rows, filter blocks and the
rows run on threads.

    for (n) for (y: parallel) for (f.o)
      for (x.o: whole tiles)  acc[R, V, b] = 0
                              for (c.o, ky, kx, c.i) [or (c.o, c.i, ky, kx)]:
                                for (r, v: unrolled) for (lane: vectorized):
                                  acc[r, v, lane] += in[n, c.o, y*sh + ky, x*sw + kx, c.i] * W[..]
                              out[n, f, y, x, lane] = epilogue(acc)
      (the row's last tile: the same, for the remainder's outputs only)
"""
from __future__ import annotations

from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.conv.blocked import _strided_tile, _taps, order_tile
from tensorc.ops.schedules import RegisterTileFits, register_tile
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

# Outputs of a row per register tile: the partial tile gets one copy per remainder, so the
# tile stays short (symbolic_tails copies tails of at most this many iterations)
SYMBOLIC_TILE_ROWS = 8


def blocked_symbolic_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                           ) -> SearchSpace:
    """row_tile (R), filter_vectors (V), taps_inner and parallel, as the static space's
    (``blocked.blocked_tile_space``), chosen at the width's hint."""
    tile = conv_t.op.input_tensors()[0]
    blocks = out.shape[1]
    width = te.hint(out.shape[3])
    rows = tuple(range(1, SYMBOLIC_TILE_ROWS + 1))
    vectors = tuple(v for v in (1, 2, 3, 4) if blocks % v == 0)
    fits = RegisterTileFits(target.vector_registers)
    taps = _taps(tile)
    strided = taps > 1 and attrs["strides"][1] > 1 and not attrs.get("plain_input")
    if width < SYMBOLIC_TILE_ROWS:
        # a small map (the small-dims variant, compiler/variants.py): a row's remainder
        # copies hold at most its width of outputs, so a tile gains from the filter vectors
        # only: the most that fit, then the longest row beside them (where that is the
        # large map's tile, the variant is not built). A strided tile keeps the large map's.
        if strided:
            default_rows, default_vectors = _strided_tile(SYMBOLIC_TILE_ROWS, vectors, fits)
        else:
            default_vectors = max((v for v in vectors if fits.holds(1, v)), default=1)
            default_rows = max((r for r in rows if fits.holds(r, default_vectors)),
                               default=1)
    elif strided:
        default_rows, default_vectors = _strided_tile(max(width, 1), vectors, fits)
        default_rows = min(default_rows, SYMBOLIC_TILE_ROWS)
    else:
        # the most accumulators the registers hold beside the tile's weight vectors and one
        # broadcast (the taps outside the channels), the more filter vectors the better:
        # each broadcast input then serves V multiply-adds
        default_rows, default_vectors = max(
            ((r, v) for r in rows[:max(1, min(width, SYMBOLIC_TILE_ROWS))] for v in vectors
             if fits.holds(r, v)), key=lambda t: (t[0] * t[1], t[1]), default=(1, 1))
    taps_inner = strided
    return SearchSpace([
        Knob("row_tile", rows, default_rows, "outputs of a row per register tile"),
        Knob("filter_vectors", vectors, default_vectors, "filter blocks per register tile"),
        Knob("taps_inner", (False, True), taps_inner, "kernel taps inside a block's "
             "channels"),
        Knob("parallel", (True, False), True, "rows and filter blocks on threads"),
    ], [fits], name="conv (blocked, symbolic)")


def schedule_blocked_symbolic(target: Target, sch: Schedule, out: te.Tensor,
                              conv_t: te.Tensor, attrs: dict, config) -> None:
    """The register tile of ``blocked.schedule_blocked`` over a run-time row (module doc)."""
    tile = conv_t.op.input_tensors()[0]
    st = sch[out]
    n, f, y, x, lane = st.op_axis
    fo, fv = st.split(f, config["filter_vectors"])
    xo, xi = st.split(x, config["row_tile"])
    # rows on threads inside the batch loop, every filter block of a row on one thread (it
    # reads the row's input once): a loop fused over a run-time height would leave guards
    # like fused // height < batch, which no range decides, at every multiply-add
    st.reorder(n, y, fo, xo, xi, fv, lane)
    st.unroll(xi)
    st.unroll(fv)
    st.vectorize(lane)
    if config["parallel"]:
        st.parallel(y)
    # no prefetch knob: the static space's distance is chosen from the weights per shape
    order_tile(register_tile(sch, tile, st, xo),
               {"taps_inner": config["taps_inner"], "prefetch": 0})

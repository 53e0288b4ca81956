"""The window schedule on blocked tensors (ops/nn/blocked_layout.py): max and average pools
and depthwise convs whose every tap is a whole vector of channels."""
from __future__ import annotations

import numpy as np

from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.schedules import PARALLEL_MIN_ELEMENTS
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target


def window_blocked_space(target: Target, out: te.Tensor) -> SearchSpace:
    """Pools and depthwise convs on blocked tensors: row_tile outputs of a row accumulated
    in registers at once (the default: up to 8, in even pieces of the row); parallel."""
    width = out.shape[3]
    return SearchSpace([
        Knob("row_tile", tuple(range(1, min(width, 12) + 1)), -(-width // -(-width // 8)),
             "outputs of a row per register tile"),
        Knob("parallel", (True, False), True, "rows on threads (when large enough)"),
    ], name="window (blocked)")


def schedule_window_blocked(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                            config) -> None:
    """for (n.c.y: parallel) for (x.o) [for (ry, rx) for (x.i: unrolled)
    for (lane: vectorized) acc = max(acc, in[..]) (or acc += in[..] * w[..])]: row_tile
    outputs of a row in registers, every tap a whole vector of channels. Pools and
    depthwise convs. The padding stays inline: whether a tap is inside the input depends on
    (y, x) only, not on the lanes, so it is one select per vector, which loop partitioning
    removes from the rows and columns away from the edges (a materialized padded input
    measured 1.4-2x slower: one more pass over a tensor these kernels read once)."""
    local = sch.cache_write(window, "local") if window is out else window
    st = sch[out]
    n, c, y, x, lane = st.op_axis
    rows = min(config["row_tile"], out.shape[3])
    xo, xi = st.split(x, rows, shift_tail=out.shape[3] % rows != 0)
    st.reorder(n, c, y, xo, xi, lane)
    outer = st.fuse(n, c, y)
    st.unroll(xi)
    st.vectorize(lane)
    if config["parallel"] and np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS:
        st.parallel(outer)
    _window_tile(sch[local], st, xo)


# Outputs of a row per register tile over a run-time width: the partial tile gets one copy
# per remainder (passes/loop/symbolic_tails.py), so the tile stays short
SYMBOLIC_ROW_TILE = 8


def window_blocked_symbolic_space(target: Target, out: te.Tensor) -> SearchSpace:
    """:func:`window_blocked_space` over symbolic dims: the row tile chosen at the width's
    hint, at most SYMBOLIC_ROW_TILE."""
    width = max(1, te.hint(out.shape[3]))
    default = min(SYMBOLIC_ROW_TILE, -(-width // -(-width // SYMBOLIC_ROW_TILE)))
    return SearchSpace([
        Knob("row_tile", tuple(range(1, SYMBOLIC_ROW_TILE + 1)), default,
             "outputs of a row per register tile"),
        Knob("parallel", (True, False), True, "rows on threads"),
    ], name="window (blocked, symbolic)")


def schedule_window_blocked_symbolic(target: Target, sch: Schedule, out: te.Tensor,
                                     window: te.Tensor, config) -> None:
    """:func:`schedule_window_blocked` over symbolic dims: for (n) for (y: parallel)
    for (c) for (x.o) [row_tile outputs in registers]; the rows on threads inside the batch
    loop (a loop fused over a run-time height leaves guards no range decides), each row's
    partial tile a guard-free copy per remainder. The padding stays inline (a symbolic
    depthwise conv's input is padded by the graph: passes/graph/lower_for_target.py)."""
    local = sch.cache_write(window, "local") if window is out else window
    st = sch[out]
    n, c, y, x, lane = st.op_axis
    xo, xi = st.split(x, config["row_tile"])
    st.reorder(n, y, c, xo, xi, lane)
    st.unroll(xi)
    st.vectorize(lane)
    if config["parallel"]:
        st.parallel(y)
    _window_tile(sch[local], st, xo)


def _window_tile(ls, st, xo) -> None:
    """The register tile (``ls``) of a row's outputs at ``st``'s loop ``xo``: every tap
    outside its outputs, unrolled, and its lanes vectorized."""
    ls.compute_at(st, xo)
    ln, lc, ly, lx, llane = ls.op_axis
    ls.reorder(ln, lc, ly, *ls.reduce_axis, lx, llane)
    ls.unroll(lx)
    ls.vectorize(llane)

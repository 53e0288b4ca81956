"""The single-pass window schedule: a reduction over each window of a padded input,
accumulated in registers in blocks of an output row. Max, average and Lp pools run on it,
and depthwise convs (a weighted window per channel); the two-pass pools
(``pool/separable.py``, ``pool/nan_split.py``) reuse its blocks and buffers.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.schedules import PARALLEL_MIN_ELEMENTS, parallel_outer, vector_block
from tensorc.ops.space import Knob, SearchSpace, divisors
from tensorc.target import Target

PLANE_BUFFER = 4096     # padded planes up to this many elements are buffered whole


def padded_input_of(window: te.Tensor) -> te.Tensor | None:
    return next((t for t in window.op.input_tensors() if getattr(t.op, "tag", "") == "pad"),
                None)


def window_space(target: Target, out: te.Tensor, anchor: te.Tensor, attrs: dict
                 ) -> SearchSpace:
    """buffer: where the padded input is copied to a local buffer (each output row's input
    rows, or a channel's whole padded plane, which small maps reuse across their rows);
    registers: vector registers per output block; parallel."""
    window = anchor if anchor.op.reduce_axis else anchor.op.input_tensors()[0]
    pad = padded_input_of(window)
    plane = int(np.prod(pad.shape[2:])) if pad is not None else 0
    choices = ("rows", "plane", "none") if pad is not None and len(out.shape) > 3 else \
        (("rows", "none") if pad is not None else ("none",))
    default = choices[0] if plane > PLANE_BUFFER or "plane" not in choices else "plane"
    height = out.shape[-2] if len(out.shape) > 3 else 1
    rows = default_rows(target, out, window, default)
    unroll = default_unroll(target, out, window, rows)
    row_choices = sorted({r for r in (1, 2, 3, 4, 7, 8) if r <= height} | {rows})
    # (single-value knobs where a choice does not arise: a row of one block, strided windows
    # or no buffer, maps too small for threads)
    wide = out.shape[-1] > target.vector_lanes(out.dtype)      # (else a row is one block)
    stacked = len(row_choices) > 1 and _row_stride(window) == 1 and choices != ("none",)
    threads = np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS      # (else one thread in any case)
    knobs = [
        Knob("buffer", choices, default, "where the padded input is buffered"),
        Knob("registers", (1, 2, 4) if wide else (4,), 4, "vector registers per output block "
             "(at most): 1, a register-wide vector; 2, a vector of up to two registers; 4, "
             "up to four such vectors accumulated side by side"),
        Knob("rows", tuple(row_choices) if stacked else (1,), rows if stacked else 1,
             "output rows accumulated side by side (the input buffered, stride 1): rows x "
             "blocks chains"),
        Knob("unroll_taps", (False, True), unroll, "the window's taps unrolled"),
        Knob("parallel", (True, False) if threads else (False,), bool(threads),
             "output rows on threads"),
    ]
    return SearchSpace(knobs, name="pool")


def default_rows(target: Target, out: te.Tensor, window: te.Tensor, buffer: str) -> int:
    """Output rows accumulated side by side: enough chains of dependent operations to hide
    their latency (a multiply-add's is 4 cycles, a max's or an add's 1 to 3), few enough to
    keep the loads flowing; the rows a block does not divide are computed twice."""
    if buffer == "none" or len(out.shape) < 4 or _row_stride(window) > 1:
        return 1
    lanes = target.vector_lanes(out.dtype)
    width, height = out.shape[-1], out.shape[-2]
    _, vectors, _, whole_row = _row_blocks(target, out, window, 4)
    per_row = -(-width // lanes) if whole_row else vectors
    if width <= lanes // 2:
        per_row = 0.5        # half a register
    chains = 8 if _weighted(window) and (per_row <= 1 or _taps(window) <= 9) else 4
    limit = max(1, min(height, int(chains / per_row)))
    # (with each band of rows buffered, the bands run in parallel: whole ones)
    waste = ROW_WASTE if buffer == "plane" else 0
    return max(r for r in range(1, limit + 1)
               if -(-height // r) * r - height <= height * waste)


def default_unroll(target: Target, out: te.Tensor, window: te.Tensor, rows: int) -> bool:
    """Whether the taps of a window of up to 25 accumulated in blocks of rows are unrolled:
    pooling windows, and convs on rows of one whole register (depthwise convs on rows of
    half a register ran slower unrolled, on rows of two no faster: da265d2)."""
    if rows < 2 or _taps(window) > 25:
        return False
    lanes = target.vector_lanes(out.dtype)
    return not _weighted(window) or lanes // 2 < out.shape[-1] <= lanes


def _taps(window: te.Tensor) -> int:
    return math.prod(iv.extent for iv in window.op.reduce_axis)


def _weighted(window: te.Tensor) -> bool:
    """Whether the window multiplies its taps by weights (a depthwise conv: chains of
    multiply-adds, 4 cycles each) rather than taking their maximum or sum."""
    return any(isinstance(e, E.Binary) and e.op == "mul" and E.is_float(e.dtype)
               for e in E.walk(window.op.body))


ROW_WASTE = 0.125       # rows computed twice, at most, as a part of the height


def _row_stride(window: te.Tensor) -> int:
    """How far apart in its input the window's consecutive outputs along the row start."""
    x = window.op.axis[-1].var
    strides = [arith.linear_coeff(load.indices[-1], x) for load in E.walk(window.op.body)
               if isinstance(load, E.Load) and len(load.indices) == len(window.shape)]
    return max([abs(s[1]) for s in strides if s is not None] or [1])


def schedule_window(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                    config) -> None:
    """Pooling (a reduction over a window of a padded input, ``window``; depthwise convs
    too) on any shape.

    Output rows (n, c, leading spatial dims) run in parallel; the padded input is copied into
    a local buffer once (the padding decided there, not at every tap): each output row's
    input rows, or for a small map the channel's whole padded plane; the output row is split
    into blocks of up to four vectors (the last block of a row they do not divide overlaps
    the one before it), each accumulated in registers over the window with unconditional
    loads from that buffer:

        for (n.c.y: parallel)
          pad_rows[K, Wp] = padded input rows y*s .. y*s+K-1      (masked loads at the edges)
          for (x.o)  [for (ry, rx)  for (x.i: vectorized)  acc = max(acc, pad_rows[ry, ...])]
    """
    stage, plane, window = window_blocks(target, sch, out, window, config["registers"],
                                         config["parallel"], config["buffer"],
                                         rows_per_block=config["rows"],
                                         unroll_taps=config["unroll_taps"])
    pad = padded_input_of(window)
    if pad is not None and config["buffer"] != "none":
        buffer_at(target, sch[pad], stage, plane)


def buffer_at(target: Target, st, stage, loop) -> None:
    """A copy (padding) stage computed once per iteration of ``stage``'s ``loop``, in a
    register-wide block with a masked tail."""
    st.compute_at(stage, loop)
    st.vectorize(st.split(st.op_axis[-1], target.vector_lanes(st.tensor.dtype))[1])


def _row_blocks(target: Target, out: te.Tensor, window: te.Tensor, registers: int
                ) -> tuple[int, int, bool, bool]:
    """How an output row is split into blocks accumulated in registers: (elements per
    block, vectors per block, whether the last block overlaps the one before it, whether
    the row is one block)."""
    lanes = target.vector_lanes(out.dtype)
    width = out.shape[-1]
    block = vector_block(width, lanes) if registers >= 2 else \
        (width if width <= lanes else lanes)
    vectors, shift = 1, False
    if registers == 4 and width % block == 0 and block % lanes == 0:
        # several vectors per output block, each its own accumulator: the window's taps are
        # a chain of dependent adds (or maxes) per accumulator, and one chain leaves the
        # vector units idle for most of each add's latency
        vectors = max(d for d in range(1, 5) if (width // block) % d == 0)
        block *= vectors
    strided = _row_stride(window) > 1
    whole = width % block == 0 and block >= lanes
    if registers == 4 and width > 2 * lanes and not (whole and strided):
        # else blocks of whole registers, up to four side by side, as few vector operations
        # per row as can be: a row of 110 is 7 blocks of two vectors, not 22 chains of 5
        # lanes. A block that does not divide the row ends the row overlapping the one
        # before it: a guarded last block runs masked loads and stores at every tap, as
        # slow as several blocks. (Strided windows keep whole blocks of 9 lanes: a strided
        # vector load is a shuffle of two, and the overlap would add shuffles.)
        vectors = min(range(1, min(4, width // lanes) + 1),
                      key=lambda v: (-(-width // (v * lanes)) * v, -v))
        block = vectors * lanes
        shift = width % block != 0
    return block, vectors, shift, block >= width


def window_blocks(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                  registers: int, parallel: bool, buffer: str, row_registers: int | None = None,
                  rows_per_block: int = 1, unroll_taps: bool = False):
    """The output's loops and the window's accumulation in registers (see
    :func:`schedule_window`): ``rows_per_block`` output rows side by side (stride 1, the
    input buffered), or as many as make ``row_registers`` vector registers; the window's
    taps unrolled with ``unroll_taps``. Returns the output stage, the loop per buffered input
    (a channel's plane with ``buffer`` "plane", else a block of output rows) and the tensor
    that accumulates the window."""
    if out is window:
        window = sch.cache_write(window, "local")
    lanes = target.vector_lanes(out.dtype)
    stage = sch[out]
    *rows, x = stage.op_axis
    width = out.shape[-1]
    block, vectors, shift, whole_row = _row_blocks(target, out, window, registers)
    if not whole_row:
        x_outer, x_inner = stage.split(x, block, shift_tail=shift)
    else:
        x_outer, x_inner = None, x
    stage.vectorize(x_inner)
    work = int(np.prod(out.shape)) if parallel else 0
    row_block = 1
    height = out.shape[-2]
    if buffer != "none" and len(rows) >= 3 and _row_stride(window) == 1:
        row_block = min(rows_per_block, height)
        if row_registers is not None:
            if x_outer is None:
                row_block = min(max(1, row_registers // -(-width // lanes)), height)
            else:
                row_block = divisors(height, max(1, row_registers // vectors))[-1]
    y_inner = None
    if row_block > 1:
        rows[-1], y_inner = stage.split(rows[-1], row_block,
                                        shift_tail=height % row_block != 0)
        if x_outer is not None:
            stage.reorder(*rows, x_outer, y_inner, x_inner)
    if buffer == "plane":
        # (n, c) in parallel, the leading spatial loops inside: the plane is reused by them
        plane = parallel_outer(stage, rows[:2], work)
        row = rows[-1]
    else:
        plane = row = parallel_outer(stage, rows, work)
    acc = sch[window]
    acc.compute_at(stage, x_outer if x_outer is not None else row)
    *acc_rows, acc_x = acc.op_axis
    if y_inner is not None:
        *acc_rows, acc_y = acc_rows
        if vectors > 1:
            acc_o, acc_x = acc.split(acc_x, block // vectors)
            acc.reorder(*acc_rows, *acc.reduce_axis, acc_y, acc_o, acc_x)
            acc.unroll(acc_o)
        else:
            acc.reorder(*acc_rows, *acc.reduce_axis, acc_y, acc_x)
        acc.unroll(acc_y)
        acc.vectorize(acc_x)
    elif vectors > 1:
        acc_o, acc_i = acc.split(acc_x, block // vectors)
        acc.reorder(*acc_rows, *acc.reduce_axis, acc_o, acc_i)
        acc.unroll(acc_o)
        acc.vectorize(acc_i)
    else:
        acc.reorder(*acc_rows, *acc.reduce_axis, acc_x)
        acc.vectorize(acc_x)
    if unroll_taps:
        for r in acc.reduce_axis:
            acc.unroll(r)
    return stage, plane, window

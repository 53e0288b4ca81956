"""Separable pooling windows: a window's maximum or sum as a pass along the rows and a pass
across them, about KH + KW taps per output instead of KH * KW (twice that for float max
pooling, see below).

    pool_rows[n, c, y, x] = max over kx of padded[n, c, y + pad_top, x*sx + kx*dx]
    out[n, c, y, x]       = max over ky of pool_rows_padded[n, c, y*sy + ky*dy, x]

The row pass covers the input's rows, and its result is padded across the rows as the input
is (-inf for max, 0 for sums, the ceil-mode overhang too); where that copy costs more than
running the row pass over the padding rows as well (small windows on tall maps), the row
pass runs over the padded rows instead. With 3 spatial dims the row pass runs along the last
one and the second pass over the other two.

Max pooling folds ``acc > v ? acc : v`` (te.max_ordered) over the window in row-major order,
and that fold splits into rows exactly only with one more value per row. A NaN tap makes
the next tap restart the running maximum, so folding a row into ``acc`` gives
``fold(acc, row maximum)`` for a row without NaN, but the row's own fold (whatever ``acc``
was) for a row with one. The row pass therefore also sums ``isnan(v) ? NaN : -inf`` over
each row (``pool_row_nans``: NaN where the row holds a NaN, else -inf; sums of these two
values are exact in any order), and the pass across rows folds each row's mark just before
its maximum: a NaN mark makes the fold restart at the row's maximum, a -inf mark changes
nothing (``fold(acc, -inf)`` is ``acc``; after a NaN it is -inf, which the row's maximum
then replaces as it would have replaced the NaN). So every window gives exactly what the
single pass gives, NaN, -inf padding and all, at 2 (KH + KW) taps per output.

Float max pooling takes the NaN-split form instead (``pool/nan_split.py``) wherever it
costs fewer taps than one pass, which is everywhere the form with marks would: each
channel's plane is tested for NaN first (a vector of counts, then their sum), a plane
without NaN takes the two passes without marks (KH + KW taps: on NaN-free values the ordered
fold is the maximum, the last of equal values in window order, which the rows' maxima and
then their maximum keep, -0 and +0 included), and a plane with a NaN the single pass
(``Stage.compute_if``), exact whatever its NaN. The form with marks stays the exact two-pass
form that the cycle model's constants select where the split form is turned off.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.nn.pool.shapes import output_spatial, overhang
from tensorc.ops.nn.pool.window import average
from tensorc.ops.nn.window_schedule import buffer_at, window_blocks
from tensorc.ops.schedules import PARALLEL_MIN_ELEMENTS
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

ROWS = ("pool_rows", "pool_row_sums")     # the names of the row pass's results


def separable_compute(kind: str, attrs: dict, x: te.Tensor) -> te.Tensor:
    """max_pool (``kind``) or avg_pool in two passes."""
    out = output_spatial(attrs, x.shape)
    if kind == "max_pool":
        return separable_max(x, attrs, out, overhang(attrs, x.shape, out))
    return average(attrs, x, out, separable_sum(x, attrs, out, overhang(attrs, x.shape, out)))


def _row_pass(padded: te.Tensor, attrs: dict, rows: tuple[int, ...], offsets: tuple[int, ...],
              width: int, reducer, name: str) -> te.Tensor:
    """``reducer`` over each output column's taps along the row, for the ``rows`` (leading
    spatial extents) starting at ``offsets`` in ``padded``."""
    spatial = len(rows) + 1
    stride = attrs["strides"][-1]
    dilation = tuple(attrs.get("dilations", (1,) * spatial))[-1]
    rx = te.reduce_axis(attrs["kernel_shape"][-1], "rx")

    def body(n, c, *index):
        *lead, x = index
        at = [i + o for i, o in zip(lead, offsets)]
        return reducer(padded[(n, c, *at, x * stride + rx.var * dilation)], axis=[rx])
    return te.compute(padded.shape[:2] + rows + (width,), body, name=name,
                      axis_names=["n", "c", *"zy"[3 - spatial:], "x"])


def across(shape: tuple[int, ...], attrs: dict, value_at, reducer, name: str, tag: str = "",
           extra_axes: tuple = ()) -> te.Tensor:
    """``reducer`` over the window's taps across the rows: ``value_at(n, c, index)`` is the
    row pass's value at padded row position ``index`` (its last entry the output column)."""
    spatial = len(shape) - 2
    strides = attrs["strides"]
    dilations = tuple(attrs.get("dilations", (1,) * spatial))
    rk = [te.reduce_axis(k, f"r{'zy'[3 - spatial + d]}")
          for d, k in enumerate(attrs["kernel_shape"][:-1])]

    def body(n, c, *o):
        index = [o[d] * strides[d] + rk[d].var * dilations[d] for d in range(spatial - 1)]
        return reducer(value_at(n, c, (*index, o[-1])), axis=[*rk, *extra_axes])
    return te.compute(shape, body, name=name, tag=tag,
                      axis_names=["n", "c", *"zyx"[3 - spatial:]])


class Rows:
    """The row pass over a padded input, its results padded across the rows."""

    def __init__(self, x_shape: tuple[int, ...], padded_shape: tuple[int, ...], attrs: dict,
                 extra: tuple[int, ...], width: int):
        spatial = len(x_shape) - 2
        self.attrs, self.width = attrs, width
        pads = attrs["pads"]
        self.lead_pads = tuple(pads[:spatial - 1]) + (0,) + \
            tuple(pads[spatial:2 * spatial - 1]) + (0,)
        self.lead_extra = tuple(extra[:-1]) + (0,)
        inner, outer = x_shape[2:-1], padded_shape[2:-1]
        # a row pass over the padding rows too (their taps all padding) costs more taps per
        # padding row than a copy of the row pass's result costs per row
        kernel_along = attrs["kernel_shape"][-1]
        self.over_padding = (math.prod(outer) - math.prod(inner)) * kernel_along < \
            math.prod(outer)
        self.rows = outer if self.over_padding else inner
        self.offsets = (0,) * len(inner) if self.over_padding else tuple(pads[:spatial - 1])

    def __call__(self, source: te.Tensor, reducer, name: str, value: float) -> te.Tensor:
        rows = _row_pass(source, self.attrs, self.rows, self.offsets, self.width, reducer,
                         name)
        if self.over_padding:
            return rows
        return padded_input(rows, self.lead_pads, self.lead_extra, value,
                            name=f"{name}_padded")


def separable_max(x: te.Tensor, attrs: dict, out: tuple[int, ...], extra: tuple[int, ...]
                  ) -> te.Tensor:
    """max_pool in two passes (see the module docstring); ``extra``: the ceil-mode
    overhang per spatial dim."""
    lowest = te.min_value(x.dtype).value
    padded = padded_input(x, attrs["pads"], extra, lowest)
    row_pass = Rows(x.shape, padded.shape, attrs, extra, out[-1])
    shape = x.shape[:2] + tuple(out)
    rows = row_pass(padded, te.max_ordered, "pool_rows", lowest)
    if not E.is_float(x.dtype):       # no NaN: the maximum of the rows' maxima
        return across(shape, attrs, lambda n, c, i: rows[(n, c, *i)], te.max_ordered,
                      "max_pool")
    nan, inf = E.Const(float("nan"), x.dtype), E.Const(float("-inf"), x.dtype)
    marks = te.compute(padded.shape, lambda *i: E.select(
        E.Call("isnan", (padded[i],), "bool"), nan, inf), name="pool_nan_marks")
    nans = row_pass(marks, te.sum_, "pool_row_nans", lowest)
    # each row's NaN mark, then its maximum: the innermost reduction axis picks which
    part = te.reduce_axis(2, "rp")
    mark = E.Compare("eq", part.var, E.const(0))
    return across(shape, attrs, lambda n, c, i: E.select(mark, nans[(n, c, *i)],
                                                         rows[(n, c, *i)]),
                  te.max_ordered, "max_pool", extra_axes=(part,))


def separable_sum(x: te.Tensor, attrs: dict, out: tuple[int, ...], extra: tuple[int, ...]
                  ) -> te.Tensor:
    """The window sums of avg_pool in two passes (zero padding)."""
    padded = padded_input(x, attrs["pads"], extra, 0.0)
    rows = Rows(x.shape, padded.shape, attrs, extra, out[-1])(padded, te.sum_,
                                                              "pool_row_sums", 0.0)
    return across(x.shape[:2] + tuple(out), attrs, lambda n, c, i: rows[(n, c, *i)],
                  te.sum_, "pool_sum", tag="anchor:pool_sum")



def separable_space(target: Target, out: te.Tensor, anchor: te.Tensor, attrs: dict
                    ) -> SearchSpace:
    """registers: vector registers per block of either pass; across_rows: how many
    registers' worth of output rows the pass across rows accumulates side by side (each row
    of the row pass's result it loads serves them all); parallel."""
    knobs = [
        Knob("registers", (1, 2, 4), 4, "vector registers per block of either pass (at "
             "most): 1, a register-wide vector; 2, a vector of up to two registers; 4, up to "
             "four such vectors (or rows of the row pass) accumulated side by side"),
        Knob("across_rows", (1, 4, 8), 8, "vector registers of output rows accumulated "
             "side by side in the pass across rows"),
    ]
    threads = np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS   # (else one thread in any case)
    knobs.append(Knob("parallel", (True, False) if threads else (False,), bool(threads),
                      "channels on threads"))
    return SearchSpace(knobs, name="pool (separable)")


def separable_window(anchor: te.Tensor) -> te.Tensor | None:
    """The pass across the rows of a separable pooling group, or None for a single pass."""
    window = anchor if anchor.op.reduce_axis else anchor.op.input_tensors()[0]
    frontier = list(window.op.input_tensors())
    while frontier:         # the row pass's result, padded or not
        t = frontier.pop()
        if t.op.name in ROWS:
            return window
        if isinstance(t.op, te.ComputeOp) and not t.op.reduce_axis:
            frontier += t.op.input_tensors()
    return None


def schedule_separable(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                       config) -> None:
    """The two passes of a separable window, both once per channel plane, so that the row
    pass's result stays in cache for the pass across rows:

        for (n.c: parallel)
          padded[H, Wp]                the input rows, padded along the row
          rows[H, OW] = max over kx    (a few rows side by side, each in vector registers)
          rows_padded[Hp, OW]          padded across the rows (or the row pass ran over
                                       the padding rows too)
          for (y.o)  for (x.o)  [for (ry)  for (y.i: unrolled)  for (x.i: vectorized)
                                    acc[y.i] = max(acc[y.i], rows_padded[y*sy + ry, x])]

    Max pooling carries each row's NaN marks the same way (see pool_separable.py), folded
    just before the row's maximum (the unrolled ``rp`` loop inside ``ry``). Every stage is a
    plane's buffer, none the whole tensor.
    """
    stage, plane, window = window_blocks(target, sch, out, window, config["registers"],
                                         config["parallel"], "plane", config["across_rows"])
    acc = sch[window]
    for sv in acc.reduce_axis:
        if sv.name == "rp":
            acc.unroll(sv)
    plane_producers_at(target, sch, window, stage, plane, config["registers"])


def plane_producers_at(target: Target, sch: Schedule, window: te.Tensor, stage: Stage,
                       plane, registers: int) -> None:
    """Every stage between the input and the pass across rows ``window``, computed per
    plane at ``stage``'s loop ``plane``: the row pass in register blocks, the paddings and
    copies as plane buffers."""
    producers, frontier = [], [window]
    while frontier:
        for t in frontier.pop().op.input_tensors():
            if isinstance(t.op, te.ComputeOp) and all(t is not p for p in producers):
                producers.append(t)
                frontier.append(t)
    for t in sorted(producers, key=lambda t: sch.stages.index(sch[t])):
        if t.op.reduce_axis:
            _schedule_row_pass(target, sch[t], stage, plane, registers)
        else:
            buffer_at(target, sch[t], stage, plane)


def _schedule_row_pass(target: Target, st: Stage, stage: Stage, plane, registers: int
                       ) -> None:
    """The pass along the rows, computed once per plane: each block of an output row (up to
    ``registers`` vectors, the last block of a row they do not divide overlapping the one
    before it) accumulates over the row's taps in registers, beside the same block of the
    next rows up to ``registers`` vectors in all (independent chains of maxes or adds)."""
    st.compute_at(stage, plane)
    *lead, x = st.op_axis[2:]
    lanes = target.vector_lanes(st.tensor.dtype)
    width = st.tensor.shape[-1]
    if width <= 2 * lanes or registers == 1:
        block = width if registers >= 2 or width <= lanes else lanes
        vectors = 1
    else:
        vectors = min(range(1, min(registers, width // lanes) + 1),
                      key=lambda v: (-(-width // (v * lanes)) * v, -v))
        block = vectors * lanes
    x_outer = x_vector = y_inner = None
    if block < width:
        x_outer, x = st.split(x, block, shift_tail=width % block != 0)
    if vectors > 1:
        x_vector, x = st.split(x, lanes)
    per_row = vectors if vectors > 1 else -(-min(block, width) // lanes)
    height = st.tensor.shape[-2]
    row_block = min(max(1, registers // per_row), height)
    if row_block > 1:
        lead[-1], y_inner = st.split(lead[-1], row_block, shift_tail=height % row_block != 0)
    inner = [v for v in (y_inner, x_vector) if v is not None]
    st.reorder(*lead, *([x_outer] if x_outer is not None else []), *st.reduce_axis, *inner, x)
    for v in inner:
        st.unroll(v)
    st.vectorize(x)

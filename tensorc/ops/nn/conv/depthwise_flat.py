"""Strided depthwise convs over each channel's plane split into phases and laid out flat.

A window vectorized along each output row loads every tap of a stride-s window with a stride
(a wide masked load and a permute), and a short output row (7 wide) leaves a vector half
empty. Here each channel's padded plane is first split into its stride x stride phases, each
phase a plane of rows P wide laid end to end (phase (a, b) holds padded rows a, a + sy, ...
and columns b, b + sx, ...). Output (y, x) is then position q = y*P + x of a 1-D window over
those flat phases: tap (ky, kx) reads phase (ky*dy % sy, kx*dx % sx) at q + (ky*dy // sy)*P
+ kx*dx // sx, so that every tap of a vector of consecutive q is one contiguous load, and
the vectors run across row ends (the P - OW columns between rows are computed and dropped):

    phases[n, c, a, b, k]  = padded[n, c, (k // P)*sy + a, (k % P)*sx + b]
    window[n, c, q]        = sum over (ky, kx) of phases[n, c, a, b, q + off(ky, kx)] * w[c, ky, kx]
    out[n, c, y, x]        = window[n, c, y*P + x]

A 7x7 output of a 5x5 stride-2 window is 4 vectors of 16 per tap (7 rows 9 apart: 61
positions) instead of 7 strided loads of 7 lanes (measured in da265d2). Stride-1 windows
gain nothing (P = OW + KW - 1 columns per row), and pooling windows lose: the phase split
costs more than the few adds per tap it saves.

``flat_window`` (an attr set by passes/graph/alter_layout.py for CPU targets, where
``conv/strategy.py`` picks this form) is the vector width the flat positions are rounded up
to.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.schedules import PARALLEL_MIN_ELEMENTS, clamp, in_range, parallel_outer
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target


@dataclass(frozen=True)
class FlatLayout:
    """Where a window's taps lie in its channel's flat phases."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int]           # top, left (the bottom and right are zero-filled rows)
    out: tuple[int, int]
    phases: tuple[int, int]          # phases used along the rows and across them
    pitch: int                       # P: a phase row's width
    rows: int                        # rows per phase (room for every tap of every position)
    positions: int                   # flat positions: a whole number of vectors

    def tap(self, ky: E.Expr | int, kx: E.Expr | int) -> tuple:
        """(row phase, column phase, offset of the tap from q in the phase)."""
        (sy, sx), (dy, dx) = self.strides, self.dilations
        row, col = ky * dy, kx * dx
        return row % sy, col % sx, (row // sy) * self.pitch + col // sx


def flat_layout(attrs: dict, x_shape: tuple[int, ...], kernel, out, lanes: int = 16
                ) -> FlatLayout:
    """The flat layout of a 2-D window (``attrs``: strides, pads, dilations) over input
    ``x_shape`` [N, C, H, W] with ``out`` output rows x columns.

    >>> flat_layout({"strides": (2, 2), "pads": (2,) * 4}, (1, 8, 14, 14), (5, 5), (7, 7)).pitch
    9
    """
    pads = attrs["pads"]
    dilations = tuple(attrs.get("dilations", (1, 1)))
    strides = tuple(attrs["strides"])
    height = x_shape[2] + pads[0] + pads[2]
    width = x_shape[3] + pads[1] + pads[3]
    phases = tuple(max((k * d) % s for k in range(kk)) + 1
                   for kk, s, d in zip(kernel, strides, dilations))
    pitch = -(-width // strides[1])
    span = (out[0] - 1) * pitch + out[1]
    positions = -(-span // lanes) * lanes
    last = ((kernel[0] - 1) * dilations[0] // strides[0]) * pitch + \
        (kernel[1] - 1) * dilations[1] // strides[1]
    rows = max(-(-height // strides[0]), -(-(positions + last) // pitch))
    return FlatLayout(tuple(kernel), strides, dilations, (pads[0], pads[1]), tuple(out),
                      phases, pitch, rows, positions)


def flat_phases(x: te.Tensor, layout: FlatLayout, value: float) -> te.Tensor:
    """x's padded plane split into its phases, each laid out flat: [N, C, pa, pb, rows*P]
    (``value`` outside x)."""
    (sy, sx), (top, left), pitch = layout.strides, layout.pads, layout.pitch
    height, width = x.shape[2:]

    def body(n, c, a, b, k):
        row, col = (k // pitch) * sy + a - top, (k % pitch) * sx + b - left
        load = x[n, c, clamp(row, height), clamp(col, width)]
        return E.select(E.all_of(in_range(row, height), in_range(col, width)), load,
                        E.Const(value, x.dtype))
    return te.compute(x.shape[:2] + layout.phases + (layout.rows * pitch,), body,
                      name="flat_pad", tag="pad", axis_names=["n", "c", "a", "b", "k"])


def flat_window(phases: te.Tensor, layout: FlatLayout, weight, dtype: str,
                name: str = "conv_window") -> te.Tensor:
    """The sum over each flat position's taps times ``weight(c, ky, kx)``, in ``dtype``."""
    ry, rx = (te.reduce_axis(k, f"r{a}") for k, a in zip(layout.kernel, "yx"))

    def body(n, c, q):
        a, b, offset = layout.tap(ry.var, rx.var)
        return te.sum_(E.cast(dtype, phases[n, c, a, b, q + offset]) *
                       E.cast(dtype, weight(c, ry.var, rx.var)), axis=[ry, rx])
    return te.compute(phases.shape[:2] + (layout.positions,), body, name=name,
                      tag=f"anchor:{name}", axis_names=["n", "c", "q"])


def unflatten(window: te.Tensor, layout: FlatLayout, fn=None, name: str = "window"
              ) -> te.Tensor:
    """out[n, c, y, x] = fn(window[n, c, y*P + x]) (the value itself without ``fn``)."""
    pitch = layout.pitch

    def body(n, c, y, x):
        v = window[n, c, y * pitch + x]
        return fn(v) if fn is not None else v
    return te.compute(window.shape[:2] + layout.out, body, name=name)



def depthwise_flat_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, ...]
                           ) -> te.Tensor:
    """A depthwise conv (OIHW weights) over its channels' flat phases."""
    layout = flat_layout(attrs, x.shape, w.shape[2:], out, lanes=attrs["flat_window"])
    window = flat_window(flat_phases(x, layout, 0.0), layout,
                         lambda c, ky, kx: w[c, 0, ky, kx], te.accumulator_dtype(x.dtype))
    return unflatten(window, layout, lambda v: E.cast(x.dtype, v), name="conv")


# ---------------------------------------------------------------------------------------------
# schedule

def flat_window_space(target: Target, out: te.Tensor, window: te.Tensor) -> SearchSpace:
    """block: vectors of flat positions accumulated side by side (independent chains of
    multiply-adds over the taps); unroll_taps: the taps unrolled (constant offsets) or a
    loop; parallel."""
    lanes = target.vector_lanes(out.dtype)
    span = (out.shape[-2] - 1) * window_pitch(out, window) + out.shape[-1]
    vectors = -(-span // lanes)
    taps = math.prod(iv.extent for iv in window.op.reduce_axis)
    blocks = tuple(b for b in (1, 2, 3, 4, 5, 6, 8) if b <= vectors) or (1,)
    # at least FLAT_CHAINS vectors where there are as many (independent chains of
    # dependent adds), the fewest vectors computed (the last block overlaps the one before
    # it), then the largest block
    default = min((b for b in blocks if b <= FLAT_BLOCK),
                  key=lambda b: (b < min(FLAT_CHAINS, vectors), -(-span // (b * lanes)) * b,
                                 -b))
    knobs = [
        Knob("block", blocks, default, "vectors of flat positions per register block"),
        Knob("unroll_taps", (False, True), taps <= FLAT_UNROLL_TAPS, "the window's taps "
             "unrolled"),
    ]
    threads = math.prod(out.shape) >= PARALLEL_MIN_ELEMENTS   # (else one thread in any case)
    knobs.append(Knob("parallel", (True, False) if threads else (False,), threads,
                      "channels on threads"))
    return SearchSpace(knobs, name="window (flat)")


FLAT_BLOCK = 6            # vectors per register block, at most, by default
FLAT_CHAINS = 4           # vectors per register block, at least, by default
FLAT_UNROLL_TAPS = 25     # windows of at most this many taps are unrolled, by default


def schedule_flat_window(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                         config) -> None:
    """Each channel's plane at a time (channels in parallel):

        for (n.c: parallel)
          phases[pa, pb, rows*P]     the padded plane split into phases, rows P wide
          for (q.o)                  blocks of ``block`` vectors (the last one overlapping)
            acc[block vectors] over (ky, kx) of phases[a, b, q + off]     (in registers)
            window[q] = acc
          for (y)  for (x: vectorized)  out[y, x] = epilogue(window[y*P + x])
    """
    lanes = target.vector_lanes(out.dtype)
    stage = sch[out]
    n, c, y, x = stage.op_axis
    width = out.shape[-1]
    if width > 2 * lanes:
        _, x = stage.split(x, lanes, shift_tail=width % lanes != 0)
    stage.vectorize(x)
    parallel = config["parallel"]
    plane = parallel_outer(stage, [n, c], math.prod(out.shape) if parallel else 0)

    # the window, a channel's flat positions, in blocks of ``block`` vectors (the last block
    # overlapping the one before it), each accumulated in registers over the taps
    win = sch[window]
    local = sch.cache_write(window, "local")
    win.compute_at(stage, plane)
    *win_lead, q = win.op_axis
    block = config["block"] * lanes
    at = win_lead[-1]
    span = (out.shape[-2] - 1) * window_pitch(out, window) + width
    if block < span:
        at, q = win.split(q, block, shift_tail=span % block != 0)
    wv, q = win.split(q, lanes)
    win.unroll(wv)
    win.vectorize(q)
    acc = sch[local]
    acc.compute_at(win, at)
    *acc_lead, acc_q = acc.op_axis
    av, al = acc.split(acc_q, lanes)
    acc.reorder(*acc.reduce_axis, av, al)
    acc.unroll(av)
    acc.vectorize(al)
    if config["unroll_taps"]:
        for r in acc.reduce_axis:
            acc.unroll(r)

    pad = next(t for t in window.op.input_tensors() if t.op.name == "flat_pad")
    ps = sch[pad]
    ps.compute_at(win, win_lead[-1])     # (the accumulators' stage reads it at a loop inside)
    pitch = window_pitch(out, window)
    _, k = ps.split(ps.op_axis[-1], pitch)
    if pitch > 4 * lanes:
        # (a row's last vector overlapping the one before it: an index that stays inside
        # the row, which a guarded tail's would not)
        _, k = ps.split(k, lanes, shift_tail=pitch % lanes != 0)
    ps.vectorize(k)


def window_pitch(out: te.Tensor, window: te.Tensor) -> int:
    """P, the width of a phase row: how far apart the output rows read ``window``."""
    frontier = [out]
    while frontier:
        t = frontier.pop()
        for load in E.walk(t.op.body):
            if isinstance(load, E.Load) and load.source is window:
                return arith.linear_coeff(load.indices[-1], t.op.axis[-2].var)[1]
        frontier += [s for s in t.op.input_tensors() if isinstance(s.op, te.ComputeOp)]
    raise ValueError(f"{out.name} does not read {window.name}")

"""Depthwise convs on blocked tensors (``ops/nn/blocked_layout.py``, groups = C, weights
[C/b, 1, KH, KW, b]): a weighted pooling window per vector of b channels, scheduled as the
blocked pools are (``ops/nn/window_blocked.py``)."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.nn.window_blocked import (
    schedule_window_blocked, schedule_window_blocked_symbolic, window_blocked_space,
    window_blocked_symbolic_space,
)
from tensorc.ops.space import SearchSpace
from tensorc.target import Target


def blocked_window_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, int]
                           ) -> te.Tensor:
    padded = padded_input(x, attrs["pads"], blocked=True)
    strides, dilations = attrs["strides"], attrs["dilations"]
    ry, rx = te.reduce_axis(w.shape[2], "ry"), te.reduce_axis(w.shape[3], "rx")
    acc = te.accumulator_dtype(x.dtype)

    def body(n, c, y, xx, lane):
        pixel = padded[n, c, y * strides[0] + ry.var * dilations[0],
                       xx * strides[1] + rx.var * dilations[1], lane]
        return te.sum_(E.cast(acc, pixel) * E.cast(acc, w[c, 0, ry, rx, lane]), axis=[ry, rx])
    tile = te.compute((*x.shape[:2], *out, x.shape[4]), body, name="conv_blocked_window",
                      tag="anchor:conv_blocked_window", axis_names=["n", "c", "y", "x", "lane"])
    return te.compute(tile.shape, lambda *i: E.cast(x.dtype, tile[i]), name="conv")


def blocked_window_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                         ) -> SearchSpace:
    return window_blocked_space(target, out)


def schedule_blocked_window(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                            attrs: dict, config) -> None:
    schedule_window_blocked(target, sch, out, conv_t.op.input_tensors()[0], config)


def blocked_window_symbolic_space(target: Target, out: te.Tensor, conv_t: te.Tensor,
                                  attrs: dict) -> SearchSpace:
    return window_blocked_symbolic_space(target, out)


def schedule_blocked_window_symbolic(target: Target, sch: Schedule, out: te.Tensor,
                                     conv_t: te.Tensor, attrs: dict, config) -> None:
    schedule_window_blocked_symbolic(target, sch, out, conv_t.op.input_tensors()[0], config)

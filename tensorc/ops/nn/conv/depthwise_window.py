"""Depthwise convs (one filter per channel) on NCHW tensors: the direct conv's compute, each
output a weighted window of its channel, scheduled as pooling is
(``ops/nn/window_schedule.py``: blocks of an output row in registers over a buffered
input)."""
from __future__ import annotations

from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.window_schedule import schedule_window, window_space
from tensorc.ops.space import SearchSpace
from tensorc.target import Target


def is_depthwise(out: te.Tensor, conv_t: te.Tensor, attrs: dict) -> bool:
    """Whether a directly computed conv is depthwise (one filter per channel)."""
    if not conv_t.op.reduce_axis:
        conv_t = conv_t.op.input_tensors()[0]
    return attrs["groups"] == out.shape[1] and attrs["groups"] > 1 and \
        all(t.shape[1] in (1, attrs["groups"]) for t in conv_t.op.input_tensors())


def depthwise_window_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                           ) -> SearchSpace:
    return window_space(target, out, conv_t, attrs)


def schedule_depthwise_window(target: Target, sch: Schedule, out: te.Tensor,
                              conv_t: te.Tensor, attrs: dict, config) -> None:
    if not conv_t.op.reduce_axis:    # half precision: the window is the float32 stage
        conv_t = conv_t.op.input_tensors()[0]
    schedule_window(target, sch, out, conv_t, config)

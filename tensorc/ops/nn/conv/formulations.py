"""The formulations of conv, one table: each entry's compute, search space, schedule and
weight layout. The conv's compute takes the entry that ``conv/strategy.py`` names, the layout
pass writes the entry's weight layout, and the space and schedule take the entry the computed
group shows (its inner stage), so none of them can branch differently.

    name              computes                                     file
    direct            out summed over (channel, taps), any rank    direct.py
    depthwise_window  the same, one filter per channel, as pooling  depthwise_window.py
    depthwise_flat    strided depthwise over flat phases            depthwise_flat.py
    filter_lanes      filters in the vector lanes (NHWC tiles)      filter_lanes.py
    flattened         stride-1 2-D over the rows laid end to end    flattened.py
    conv_matmul       1x1 convs on the matmul micro-kernel          conv_matmul.py
    conv_gemm         im2col patches times OIHW weights             conv_gemm.py
    blocked           dense convs on NCHW[b]c                       blocked.py
    blocked_window    depthwise convs on NCHW[b]c                   blocked_window.py
    winograd          F(m x m, 3 x 3) on NCHW                       winograd.py
    winograd_blocked  F(m x m, 3 x 3) on NCHW[b]c                   winograd_blocked.py
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tensorc.ir import te
from tensorc.ops.nn.conv.blocked import blocked_compute, blocked_space, schedule_blocked
from tensorc.ops.nn.conv.blocked_window import (
    blocked_window_compute, blocked_window_space, schedule_blocked_window,
)
from tensorc.ops.nn.conv.conv_gemm import conv_gemm_compute, conv_gemm_space, schedule_conv_gemm
from tensorc.ops.nn.conv.conv_matmul import (
    conv_matmul_compute, conv_matmul_space, schedule_conv_matmul,
)
from tensorc.ops.nn.conv.depthwise_flat import (
    depthwise_flat_compute, flat_window_space, schedule_flat_window,
)
from tensorc.ops.nn.conv.depthwise_window import (
    depthwise_window_space, is_depthwise, schedule_depthwise_window,
)
from tensorc.ops.nn.conv.direct import direct_compute, direct_space, schedule_direct
from tensorc.ops.nn.conv.filter_lanes import (
    filter_lanes_compute, filter_lanes_space, schedule_filter_lanes,
)
from tensorc.ops.nn.conv.flattened import flattened_compute, flattened_space, schedule_flattened
from tensorc.ops.nn.conv.shapes import pack_weight
from tensorc.ops.nn.conv.winograd import schedule_winograd, winograd_conv, winograd_space
from tensorc.ops.nn.conv.winograd_blocked import (
    schedule_winograd_blocked, winograd_blocked, winograd_blocked_space,
)
from tensorc.ops.nn.conv.winograd_transforms import transform_weight


def _packed(w: np.ndarray, attrs: dict) -> np.ndarray:
    return pack_weight(w, attrs["kernel_block"])


def _transformed(w: np.ndarray, attrs: dict) -> np.ndarray:
    return transform_weight(w, attrs["winograd"], attrs["kernel_block"])


@dataclass(frozen=True)
class Formulation:
    """One way to compute a conv.

    ``compute(attrs, x, w, out)``: the conv's tensor (``out``: the output's spatial size);
    ``space(target, out, conv_t, attrs)`` and ``schedule(target, sch, out, conv_t, attrs,
    config)``: its knobs and schedule, ``conv_t`` the group's conv stage; ``stage``: the name
    of the stage that the conv stage reads and that shows this formulation (None: the conv
    stage itself reduces); ``blocked``: runs on NCHW[b]c tensors; ``weights``: the name of
    the weight layout that ``pack(w, attrs)`` writes from OIHW weights at compile time (None:
    OIHW); ``reads_target``: ``compute`` takes the target too (``compute(attrs, x, w, out,
    target)``)."""

    name: str
    compute: Callable
    space: Callable
    schedule: Callable
    stage: str | None = None
    blocked: bool = False
    weights: str | None = None
    pack: Callable | None = None
    reads_target: bool = False


def _on_inner(schedule: Callable) -> Callable:
    """A schedule of the stage the conv stage reads, as a formulation's schedule."""
    def apply(target, sch, out, conv_t, attrs, config) -> None:
        schedule(target, sch, out, conv_t.op.input_tensors()[0], config)
    return apply


FORMULATIONS: dict[str, Formulation] = {f.name: f for f in (
    Formulation("direct", direct_compute, direct_space, schedule_direct,
                weights="packed", pack=_packed),
    Formulation("depthwise_window", direct_compute, depthwise_window_space,
                schedule_depthwise_window),
    Formulation("depthwise_flat", depthwise_flat_compute,
                lambda target, out, conv_t, attrs: flat_window_space(
                    target, out, conv_t.op.input_tensors()[0]),
                _on_inner(schedule_flat_window), stage="conv_window"),
    Formulation("filter_lanes", filter_lanes_compute, filter_lanes_space,
                schedule_filter_lanes, stage="conv_lanes", weights="packed", pack=_packed),
    Formulation("flattened", flattened_compute, flattened_space, schedule_flattened,
                stage="conv_flat", weights="packed", pack=_packed, reads_target=True),
    Formulation("conv_matmul", conv_matmul_compute, conv_matmul_space, schedule_conv_matmul,
                stage="conv_matmul", weights="packed", pack=_packed),
    Formulation("conv_gemm", conv_gemm_compute, conv_gemm_space, schedule_conv_gemm,
                stage="conv_gemm"),
    Formulation("blocked", blocked_compute, blocked_space, schedule_blocked,
                stage="conv_blocked", blocked=True, weights="packed", pack=_packed),
    Formulation("blocked_window", blocked_window_compute, blocked_window_space,
                schedule_blocked_window, stage="conv_blocked_window", blocked=True,
                weights="packed", pack=_packed),
    Formulation("winograd", winograd_conv, winograd_space, schedule_winograd,
                stage="winograd_output", weights="winograd", pack=_transformed),
    Formulation("winograd_blocked", winograd_blocked, winograd_blocked_space,
                schedule_winograd_blocked, stage="winograd_output", blocked=True,
                weights="winograd", pack=_transformed),
)}

def formulation_of(out: te.Tensor, conv_t: te.Tensor, attrs: dict) -> Formulation:
    """The formulation a computed conv group is: the one whose stage the conv stage reads,
    else (the conv stage reduces itself, or its float32 stage does) the depthwise window or
    the direct conv."""
    if not conv_t.op.reduce_axis:
        inner = conv_t.op.input_tensors()[0].op.name
        blocked = bool(attrs.get("layout_block"))
        found = [f for f in FORMULATIONS.values() if f.stage == inner and f.blocked == blocked]
        if found:
            return found[0]
    return FORMULATIONS["depthwise_window" if is_depthwise(out, conv_t, attrs) else "direct"]

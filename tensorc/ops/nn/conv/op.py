"""conv: N-D grouped convolution (1 to 3 spatial dims), NCHW layout, no bias.

attrs: strides, pads (ONNX order: all begins, then all ends), dilations, groups, and what
``passes/graph/alter_layout.py`` stamps for the formulation ``conv/strategy.py`` picks:
kernel_block (0: weights are OIHW; b > 0: packed [F/b, C/g, *K, b]), winograd (m > 0: 3x3
weights transformed for F(m x m, 3 x 3), [(m+2)^2, F/b, C, b]; see
``conv/winograd_transforms.py``), filter_lanes, flat_window, layout_block (NCHW[b]c
activations), plain_input. Where the weights may take another formulation's layout, the
kernel's ``algorithm`` knob picks one (``conv/algorithm.py``). Inputs x[N, C, *S] and
w[F, C/groups, *K]; the frontend adds the bias with an ``add``. The kernels are the
formulations of ``conv/formulations.py``.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.nn import blocked_layout
from tensorc.ops.nn.conv import strategy, winograd_transforms
from tensorc.ops.nn.conv.algorithm import conv_layouts
from tensorc.ops.nn.conv.blocked_window import (
    blocked_window_symbolic_space, schedule_blocked_window_symbolic,
)
from tensorc.ops.nn.conv.blocked_symbolic import (
    blocked_symbolic_space, schedule_blocked_symbolic,
)
from tensorc.ops.nn.conv.conv_gemm import schedule_conv_gemm_symbolic
from tensorc.ops.nn.conv.formulations import FORMULATIONS, formulation_of
from tensorc.ops.nn.conv.shapes import output_spatial, unpack_weight, unpacked_weight_shape
from tensorc.ops.nn.windows import pad_spatial, window_slices
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import check_window_attrs, expect_arity, expect_same_dtype
from tensorc.ops.space import SearchSpace
from tensorc.ops.symbolic import GENERIC
from tensorc.target import Target

conv = define("conv", Pattern.OUT_ELEMWISE_FUSABLE)


@conv.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("conv", input_types, 2)
    x, w = input_types
    if attrs.get("layout_block"):     # blocked activations: the plain conv's rule, blocked
        b = attrs["layout_block"]
        x = x if attrs.get("plain_input") else blocked_layout.plain_type(x, b)
        plain = _infer({**attrs, "layout_block": 0}, [x, w])[0]
        return [blocked_layout.blocked_type(plain, b)]
    if attrs.get("kernel_block"):
        w = TensorType(unpacked_weight_shape(attrs, w.shape), w.dtype)
    dtype = expect_same_dtype("conv", input_types)
    if not 3 <= x.ndim <= 5 or w.ndim != x.ndim:
        raise ShapeError(f"conv: expects x[N,C,*S] and w[F,C/groups,*K] of equal rank with 1 "
                         f"to 3 spatial dims, got x {x} and w {w}")
    check_window_attrs("conv", x, w.shape[2:], attrs["strides"], attrs["pads"],
                       attrs["dilations"])
    groups, channels, filters = attrs["groups"], x.shape[1], w.shape[0]
    if groups < 1 or channels % groups or filters % groups:
        raise ShapeError(f"conv: groups={groups} must divide the {channels} input channels of "
                         f"x {x} and the {filters} filters of w {w}")
    if w.shape[1] != channels // groups:
        raise ShapeError(f"conv: w {w} must have {channels // groups} input channels per "
                         f"filter (x has {channels} channels, groups={groups})")
    out = output_spatial(attrs, x, w)
    if any(isinstance(d, int) and d < 1 for d in out):  # symbolic: window_output_size checks
        raise ShapeError(f"conv: the kernel of w {w} (dilations {attrs['dilations']}) does not "
                         f"fit in x {x} padded by {attrs['pads']}")
    return [TensorType((x.shape[0], filters) + out, dtype)]


@conv.reference
def _reference(attrs: dict, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    if attrs.get("layout_block"):
        b = attrs["layout_block"]
        x = x if attrs.get("plain_input") else blocked_layout.unblock(x, b)
        plain = _reference({**attrs, "layout_block": 0}, x, w)[0]
        return [blocked_layout.block(plain, b)]
    if attrs.get("kernel_block"):
        w = unpack_weight(attrs, w)
    groups = attrs["groups"]
    n, channels = x.shape[:2]
    filters, kernel = w.shape[0], w.shape[2:]
    out = output_spatial(attrs, TensorType(x.shape, "float32"), TensorType(w.shape, "float32"))
    padded = pad_spatial(x, attrs["pads"], 0)
    # Split channels into groups: x -> [N, G, C/G, *S], w -> [G, F/G, C/G, *K].
    wg = w.reshape((groups, filters // groups, channels // groups) + kernel)
    acc = np.zeros((n, groups, filters // groups) + out, dtype=np.result_type(x, w))
    for offset, view in window_slices(padded, kernel, attrs["strides"], attrs["dilations"],
                                      out):
        xg = view.reshape((n, groups, channels // groups) + out)
        wk = wg[(Ellipsis,) + offset]  # [G, F/G, C/G]
        acc += np.einsum("ngc...,gfc->ngf...", xg, wk)
    return [acc.reshape((n, filters) + out)]


def _sample_input(attrs: dict, k: int, types: list[TensorType], rng) -> np.ndarray | None:
    """A random valid value of input ``k`` where not every array is one (the autotuner's task
    inputs): Winograd-transformed weights are the transform of random 3x3 weights. Random
    numbers in their place are no transform of any weights, and the kernel and the reference
    (which reads them back through the transform's left inverse) would disagree on them."""
    if k != 1 or not attrs.get("winograd"):
        return None
    x = types[0]
    channels = x.shape[1] * (x.shape[-1] if attrs.get("layout_block") else 1)
    kernel = winograd_transforms.KERNEL
    w = rng.standard_normal((attrs["filters"], channels, kernel, kernel))
    return winograd_transforms.transform_weight(w, attrs["winograd"],
                                                attrs["kernel_block"]).astype(types[1].dtype)


conv.extra["sample_input"] = _sample_input


conv.layouts(conv_layouts)


@conv.compute(reads_target=True)
def _conv_compute(attrs: dict, x: te.Tensor, w: te.Tensor, target: Target | None = None
                  ) -> te.Tensor:
    x_type = TensorType(x.shape, x.dtype)
    if attrs.get("layout_block") and not attrs.get("plain_input"):
        x_type = blocked_layout.plain_type(x_type, attrs["layout_block"])
    out = output_spatial(attrs, x_type,
                         TensorType(unpacked_weight_shape(attrs, w.shape), w.dtype))
    formulation = FORMULATIONS[strategy.formulation(attrs, x_type.shape, w.shape)]
    if formulation.reads_target:
        return formulation.compute(attrs, x, w, out, target)
    return formulation.compute(attrs, x, w, out)


# Over symbolic dims, the formulations with a schedule of their own for them: (space,
# schedule); the others run the generic schedule (``ops/symbolic.py``)
_SYMBOLIC = {
    "conv_gemm": (None, schedule_conv_gemm_symbolic),
    "blocked": (blocked_symbolic_space, schedule_blocked_symbolic),
    "blocked_window": (blocked_window_symbolic_space, schedule_blocked_window_symbolic),
}


def _symbolic_form(out: te.Tensor, conv_t: te.Tensor, attrs: dict) -> str | None:
    """Over symbolic dims, the group's formulation where it has a schedule for them, else
    "generic"; None for static shapes."""
    if te.is_static(out.shape):
        return None
    name = formulation_of(out, conv_t, attrs).name
    return name if name in _SYMBOLIC else "generic"


def _conv_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                ) -> SearchSpace:
    """The knobs of the group's formulation."""
    form = _symbolic_form(out, conv_t, attrs)
    if form == "generic":
        return GENERIC.search_space(target, out, conv_t, attrs)
    if form is not None and _SYMBOLIC[form][0] is not None:
        return _SYMBOLIC[form][0](target, out, conv_t, attrs)
    return formulation_of(out, conv_t, attrs).space(target, out, conv_t, attrs)


@conv.schedule(space=_conv_space, symbolic=True)
def _conv_schedule(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                   attrs: dict, config) -> None:
    """The schedule of the group's formulation (``conv/formulations.py``); over symbolic
    dims, its symbolic schedule or the generic one (``ops/symbolic.py``)."""
    form = _symbolic_form(out, conv_t, attrs)
    if form is None:
        formulation_of(out, conv_t, attrs).schedule(target, sch, out, conv_t, attrs, config)
    elif form == "generic":
        GENERIC.apply(target, sch, out, conv_t, attrs, config)
    else:
        _SYMBOLIC[form][1](target, sch, out, conv_t, attrs, config)

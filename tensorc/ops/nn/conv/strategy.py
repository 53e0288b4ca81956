"""Which formulation a conv runs as (``conv/formulations.py``): the one place that decides.

On CPU targets the decision is made at graph level, by ``passes/graph/alter_layout.py``,
which asks :func:`blocked_choice` for the convs of blocked chains and :func:`plain_choice`
for the others, writes the weight layout the chosen formulation wants into the constant pool
and stamps its attrs on the node (``winograd``, ``filter_lanes``, ``flat_window``,
``kernel_block``, ``layout_block``, ...). The compute then reads the formulation off those
attrs (:func:`formulation`): the stamped ones name it, and the weights' layout decides among
the rest (packed: flattened, pointwise on the GEMM or direct; OIHW: im2col GEMM, depthwise
window or direct). A conv compiled without a target (or for CUDA) keeps OIHW weights.

The choice is the default of the kernel's ``algorithm`` knob where the weights may take
another formulation's layout (``conv/algorithm.py``: Winograd or the choice without it, from
:func:`plain_choice` and :func:`blocked_choice` with ``winograd=False``); a tuned config that
picks the other has the weights repacked at compile time (``compiler/kernel.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tensorc.ir.types import TensorType
from tensorc.ops.nn.conv import winograd_cost
from tensorc.ops.nn.conv.conv_gemm import pointwise
from tensorc.ops.nn.conv.conv_matmul import conv_as_matmul, filter_panel
from tensorc.ops.nn.conv.depthwise_flat import flat_layout
from tensorc.ops.nn.conv.shapes import output_spatial, unpacked_weight_shape
from tensorc.ops.nn.conv.winograd_blocked import band_rows, blocked_panel
from tensorc.target import Target

KERNEL_BLOCKS = (16, 8)     # filters per block, the first that divides the filter count
BLOCKED_WINOGRAD = True     # Winograd convs join blocked chains (2a61620)

# Filters in vector lanes (``conv/filter_lanes.py``) on stride-1 maps up to this wide, and on
# strided ones; stride-1 convs with wider rows keep the flattened form, as fast or faster
# with few filters (5a0026e)
FILTER_LANES_MAX_WIDTH = 28
FILTER_LANES_MIN_DEPTH = 64     # C * KH * KW: enough multiply-adds per scattered store
GEMM_BELOW_VECTOR_BITS = 512    # narrower vectors: every dense conv is a GEMM (conv_as_gemm)
FLAT_MAX_PLANE = 16384      # elements of a channel's phases, buffered whole (64 KB)


@dataclass(frozen=True)
class Choice:
    """A formulation (a name in ``conv/formulations.py``) and the attrs it stamps on the
    conv node (its weight layout among them)."""

    name: str
    attrs: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# the compute: the formulation the node's attrs name

def formulation(attrs: dict, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> str:
    """The formulation of a conv with ``attrs`` over input ``x_shape``, its weights (as
    stored: packed, transformed or OIHW) ``w_shape``.

    >>> formulation({"groups": 1, "strides": (1, 1), "pads": (0,) * 4, "dilations": (1, 1)},
    ...             (1, 8, 9, 9), (16, 8, 3, 3))
    'conv_gemm'
    """
    if attrs.get("layout_block"):
        if attrs.get("winograd"):
            return "winograd_blocked"
        return "blocked_window" if attrs["groups"] > 1 else "blocked"
    if attrs.get("winograd"):
        return "winograd"
    if not all(isinstance(d, int) for d in x_shape):
        # symbolic dims: the window formulations, whose computes take run-time extents
        # (the generic schedule runs them until conv's templates take symbolic shapes)
        filters = unpacked_weight_shape(attrs, w_shape)[0]
        if attrs["groups"] > 1 and attrs["groups"] == filters == x_shape[1]:
            return "depthwise_window"
        if attrs["groups"] == 1 and len(x_shape) == 4 and not any(attrs["pads"]):
            return "conv_gemm"      # along output rows (the graph padded its input)
        return "direct"
    if attrs.get("filter_lanes"):
        return "filter_lanes"
    if attrs.get("flat_window"):
        return "depthwise_flat"
    kernel = unpacked_weight_shape(attrs, w_shape)[2:]
    block = attrs.get("kernel_block", 0)
    if flattens(attrs, len(x_shape) - 2, block, kernel):
        return "flattened"
    if block and conv_as_matmul(attrs, kernel):
        return "conv_matmul"
    if not block and conv_as_gemm(attrs, x_shape, w_shape):
        return "conv_gemm"
    filters = unpacked_weight_shape(attrs, w_shape)[0]
    if attrs["groups"] > 1 and attrs["groups"] == filters == x_shape[1]:
        return "depthwise_window"
    return "direct"


def flattens(attrs: dict, spatial: int, block: int, kernel) -> bool:
    """Whether a conv with packed weights runs flattened: 2-D, one group, stride 1, not 1x1."""
    if spatial != 2 or attrs["groups"] != 1 or not block or tuple(attrs["strides"]) != (1, 1):
        return False
    return tuple(kernel) != (1, 1)


def conv_as_gemm(attrs: dict, x_shape, w_shape, target: Target | None = None) -> bool:
    """Whether a conv (OIHW weight shape) takes the GEMM formulation (it then wants its
    weights unpacked: a tile's weights are W[f, k], contiguous in k). With 256-bit vectors
    (16 registers) every dense conv does: a 6 x 2-vector register tile over patches gathered
    once per block measured faster than the direct and flattened forms on every shape tried
    (7342543). With 512-bit vectors the direct forms keep the convs they were measured faster
    on; without a target (weights that cannot be packed) dense convs take GEMM."""
    spatial = len(x_shape) - 2
    if attrs["groups"] != 1 or spatial > 2:
        return False
    if spatial == 1 or target is None or target.vector_bits < GEMM_BELOW_VECTOR_BITS:
        return True
    return w_shape[1] <= 4 or min(attrs["strides"]) >= 2 or pointwise(attrs, w_shape)


# ---------------------------------------------------------------------------------------------
# the layout pass: which formulation, and so which weight layout

def plain_choice(attrs: dict, x: TensorType, w: TensorType, target: Target | None,
                 weight_bytes: int = 0, constant: bool = True,
                 winograd: bool = True) -> Choice | None:
    """The formulation of a conv outside blocked chains that needs attrs of its own, or None
    (OIHW weights, the compute's own choice: :func:`formulation`). ``constant``: its weights
    are constants (only those can be repacked); ``weight_bytes``: all the model's weights;
    ``winograd=False``: the choice among the others (a tuning config's direct conv)."""
    filters, per_group = w.shape[:2]
    if not x.is_static:
        return None             # symbolic dims: OIHW weights, the direct window
    if constant:
        tile = winograd_cost.tile_size(attrs, x, w, target, weight_bytes) if winograd else 0
        if tile:
            return winograd_choice(x, w, target, tile)
        name, stamped, block = "", {}, None
        if w.dtype == "float32" and filter_lanes_wins(attrs, x.shape, w.shape, target):
            # filters in vector lanes: blocks of a vector (the last one padded)
            block = target.vector_lanes("float32")
            name, stamped = "filter_lanes", {"filter_lanes": block}
        elif target is not None and w.dtype == "float32" and \
                conv_as_matmul(attrs, w.shape[2:]):
            # a 1x1 conv on the matmul micro-kernel: panels of a tile's rows
            name, block = "conv_matmul", filter_panel(target, filters)
        elif w.ndim == 4:
            block = next((b for b in KERNEL_BLOCKS if filters % b == 0), None)
            if per_group == 1 or block is None or \
                    conv_as_gemm(attrs, x.shape, w.shape, target):
                block = None    # depthwise convs, odd filter counts and GEMM convs keep OIHW
            else:
                name = "flattened" if flattens(attrs, 2, block, w.shape[2:]) else "direct"
        if block:
            stamped["kernel_block"] = block
            if filters % block:
                stamped["filters"] = filters
            return Choice(name, stamped)
    if target is not None and x.dtype == "float32" and x.ndim == 4 and w.shape[1] == 1 and \
            attrs["groups"] == x.shape[1] == w.shape[0] and \
            flat_conv_wins(attrs, x.shape, w.shape, target.vector_lanes("float32")):
        return Choice("depthwise_flat", {"flat_window": target.vector_lanes("float32")})
    return None


def winograd_choice(x: TensorType, w: TensorType, target: Target, tile: int,
                    b: int = 0) -> Choice:
    """F(``tile``, 3) of a conv outside blocked chains (the transformed weights in panels of
    the GEMM tile's rows), or on blocks of ``b`` channels."""
    filters = w.shape[0]
    if b:
        return Choice("winograd_blocked", {"layout_block": b, "winograd": tile,
                                           "filters": filters,
                                           "kernel_block": blocked_panel(filters, b)})
    return Choice("winograd", {"winograd": tile, "kernel_block": filter_panel(target, filters),
                               "filters": filters})


def filter_lanes_wins(attrs: dict, x_shape, w_shape, target: Target) -> bool:
    """Whether a conv (OIHW weight shape) takes the filters-in-lanes form on ``target``."""
    if target is None or target.vector_bits < 512 or len(x_shape) != 4 or \
            attrs["groups"] != 1:
        return False
    out = output_spatial(attrs, TensorType(tuple(x_shape), "float32"),
                         TensorType(tuple(w_shape), "float32"))
    if conv_as_matmul(attrs, w_shape[2:]):
        # 1x1 convs run on the matmul micro-kernel, but for maps whose rows are too short
        # for its columns (7x7 outputs: 49 of 64 columns), with whole pairs of filter
        # vectors (8e72739)
        return out[1] <= FILTER_LANES_MAX_WIDTH // 2 and \
            w_shape[0] % (2 * target.vector_lanes("float32")) == 0
    return (out[1] <= FILTER_LANES_MAX_WIDTH or max(attrs["strides"]) > 1) and \
        int(np.prod(w_shape[1:])) >= FILTER_LANES_MIN_DEPTH and \
        w_shape[0] >= target.vector_lanes("float32")


def flat_conv_wins(attrs: dict, x_shape, w_shape, lanes: int) -> bool:
    """Whether a depthwise conv (OIHW weight shape) takes the flat phases
    (``conv/depthwise_flat.py``) on a target with ``lanes`` vector lanes: strided, with a
    channel's phases small enough to buffer whole."""
    out = output_spatial(attrs, TensorType(tuple(x_shape), "float32"),
                         TensorType(tuple(w_shape), "float32"))
    if len(x_shape) != 4 or max(attrs["strides"]) < 2:
        return False
    layout = flat_layout(attrs, tuple(x_shape), w_shape[2:], out, lanes=lanes)
    return math.prod(layout.phases) * layout.rows * layout.pitch <= FLAT_MAX_PLANE


# ---------------------------------------------------------------------------------------------
# blocked chains (NCHW[b]c)

def blocks(attrs: dict, x: TensorType, w: TensorType, target: Target, weight_bytes: int,
           b: int) -> bool:
    """Whether a conv with constant weights runs on blocked tensors of ``b`` channels: 2-D
    float32 convs, plain or depthwise, with filters in whole blocks. The input channels come
    in whole blocks too, except a plain conv's (:func:`plain_input`); a Winograd conv's
    always, and a band of one tile row must fit its buffers (``band_rows``; 2a61620)."""
    if not x.is_static:
        return symbolic_blocks(attrs, x, w, b)
    if attrs["groups"] != 1 and not attrs["groups"] == x.shape[1] == w.shape[0]:
        return False
    if x.dtype != "float32" or w.dtype != "float32" or x.ndim != 4 or w.shape[0] % b or \
            (x.shape[1] % b and not plain_input(attrs, x, b)):
        return False
    tile = winograd_cost.tile_size(attrs, x, w, target, weight_bytes)
    return not tile or winograd_blocks(attrs, x, w, tile, b)


def symbolic_blocks(attrs: dict, x: TensorType, w: TensorType, b: int) -> bool:
    """Whether a conv over symbolic dims runs on blocked tensors: a dense or depthwise 2-D
    float32 conv whose channels are known, with filters in whole blocks and its padding
    already a node of its own (``passes/graph/lower_for_target.py``), so that its register
    tiles read the input in place at every size; no Winograd (its tiles over a run-time map
    are not built)."""
    depthwise = attrs["groups"] == x.shape[1] == w.shape[0] > 1
    return (attrs["groups"] == 1 or depthwise) and x.ndim == 4 and \
        x.dtype == w.dtype == "float32" and isinstance(x.shape[1], int) and \
        w.shape[0] % b == 0 and not any(attrs["pads"])


def winograd_blocks(attrs: dict, x: TensorType, w: TensorType, tile: int, b: int) -> bool:
    """Whether F(``tile``, 3) runs on blocks of ``b`` channels: its input channels in whole
    blocks, and a band of one tile row fitting its buffers (``band_rows``; 2a61620)."""
    return BLOCKED_WINOGRAD and x.shape[1] % b == 0 and \
        band_rows(attrs, x.shape, w.shape[0], tile)[1] >= 1


def blocked_choice(attrs: dict, x: TensorType, w: TensorType, target: Target,
                   weight_bytes: int, b: int, winograd: bool = True) -> Choice:
    """The formulation of a conv of a blocked chain (plain types ``x`` and ``w``);
    ``winograd=False``: the choice among the others."""
    tile = winograd_cost.tile_size(attrs, x, w, target, weight_bytes) \
        if winograd and x.is_static else 0
    if tile:
        return winograd_choice(x, w, target, tile, b)
    stamped = {"layout_block": b, "kernel_block": b}
    if plain_input(attrs, x, b):
        stamped["plain_input"] = True
    return Choice("blocked_window" if attrs["groups"] > 1 else "blocked", stamped)


def plain_input(attrs: dict, x: TensorType, b: int) -> bool:
    """A dense conv whose input channels come in no whole blocks (a stem conv's 3) reads its
    input plain and writes blocks."""
    return attrs["groups"] == 1 and x.ndim == 4 and x.shape[1] % b != 0


def counts_alone(attrs: dict, x: TensorType, out: TensorType, b: int) -> bool:
    """Whether a conv is worth the blocked layout on its own, its two layout transforms
    included: :func:`narrow_depthwise` or :func:`dilated`."""
    return narrow_depthwise(attrs, x, out, b) or dilated(attrs, x, b)


def narrow_depthwise(attrs: dict, x: TensorType, out: TensorType, b: int) -> bool:
    """A depthwise conv whose output rows fill at most half a vector: on plain planes its
    vectors run mostly empty (7a9b3e0; rows of 14 stay plain)."""
    return attrs["groups"] == x.shape[1] > 1 and out.ndim == 4 and \
        isinstance(out.shape[3], int) and 2 * out.shape[3] <= b


def dilated(attrs: dict, x: TensorType, b: int) -> bool:
    """A dense dilated conv on whole channel blocks (DeepLab's atrous convs): on plain
    planes it runs flattened over rows padded by the dilation, (W + 2 d) / W of the work
    (d371961)."""
    return attrs["groups"] == 1 and x.shape[1] % b == 0 and \
        any(d > 1 for d in attrs.get("dilations", ()))

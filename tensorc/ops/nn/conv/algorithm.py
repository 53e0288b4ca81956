"""The conv's ``algorithm`` knob: where a conv's weights may take the layout of another
formulation with the same activations, the tuner weighs them (``ops/weight_layouts.py``).

Today that is a stride-1 3x3 conv that may run as Winograd: F(m, 3) on transformed weights or
the formulation ``conv/strategy.py`` picks without Winograd (flattened, im2col GEMM or direct on
plain maps; the blocked conv on NCHW[b]c), whichever of the two the strategy chose. The knob's
default is the strategy's choice, so a tuning record without the knob keeps it.

>>> conv_layouts(node.attrs, [x.type, w.type], Target.from_string("llvm -mcpu=znver4")).values
('winograd', 'filter_lanes')
"""
from __future__ import annotations

import numpy as np

from tensorc.ir.types import TensorType
from tensorc.ops.nn import blocked_layout
from tensorc.ops.nn.conv import strategy, winograd_cost
from tensorc.ops.nn.conv.formulations import FORMULATIONS
from tensorc.ops.nn.conv.shapes import unpack_weight, unpacked_weight_shape
from tensorc.ops.nn.conv.winograd_transforms import KERNEL, eligible
from tensorc.ops.weight_layouts import WeightLayouts
from tensorc.target import Target

# The attrs a formulation stamps on the conv beside the activations' layout (layout_block,
# plain_input), which the knob leaves as they are.
FORMULATION_ATTRS = ("kernel_block", "winograd", "filter_lanes", "flat_window", "filters")
WINOGRAD = ("winograd", "winograd_blocked")


def conv_layouts(attrs: dict, input_types: list[TensorType], target: Target | None
                 ) -> WeightLayouts | None:
    """The formulations a conv (its attrs as the layout pass stamped them, its input types)
    may take on ``target`` by repacking its weights alone, or None where it has one."""
    if target is None or target.kind != "llvm" or len(input_types) != 2:
        return None
    x, w = input_types
    if not x.is_static:
        return None     # over symbolic dims: the rows GEMM on OIHW weights, no other
    b = attrs.get("layout_block", 0)
    plain_x = blocked_layout.plain_type(x, b) if b and not attrs.get("plain_input") else x
    base = {k: v for k, v in attrs.items() if k not in FORMULATION_ATTRS}
    oihw = TensorType(unpacked_weight_shape(attrs, w.shape), w.dtype)
    if not eligible(base, plain_x.shape, oihw.shape) or attrs.get("plain_input"):
        return None
    current = strategy.formulation(attrs, plain_x.shape, w.shape)
    if current in WINOGRAD:
        other = strategy.blocked_choice(base, plain_x, oihw, target, 0, b, winograd=False) \
            if b else strategy.plain_choice(base, plain_x, oihw, target, winograd=False)
        if other is None:       # OIHW weights: the compute's own choice
            other = strategy.Choice(strategy.formulation(base, plain_x.shape, oihw.shape))
    else:
        tile = winograd_cost.tile_size(base, plain_x, oihw, target, direct=False)
        if not tile or b and not strategy.winograd_blocks(base, plain_x, oihw, tile, b):
            return None
        other = strategy.winograd_choice(plain_x, oihw, target, tile, b)
    choices = {current: dict(attrs), other.name: {**base, **other.attrs}}
    if len(choices) < 2:
        return None
    types = {name: TensorType(_weight_shape(a, oihw.shape), w.dtype)
             for name, a in choices.items()}

    def repack(array: np.ndarray, name: str) -> np.ndarray:
        weights = unpack_weight(attrs, array) if attrs.get("kernel_block") else array
        formulation, stamped = FORMULATIONS[name], choices[name]
        if formulation.pack is None or not stamped.get("kernel_block"):
            return weights
        return formulation.pack(weights, stamped)

    return WeightLayouts("algorithm", current, choices, types, repack)


def _weight_shape(attrs: dict, oihw: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of OIHW weights of shape ``oihw`` in the layout ``attrs`` stamp."""
    block = attrs.get("kernel_block", 0)
    if not block:
        return oihw
    panels = -(-oihw[0] // block)
    if attrs.get("winograd"):
        alpha = attrs["winograd"] + KERNEL - 1
        return (alpha * alpha, panels, oihw[1], block)
    return (panels, *oihw[1:], block)

"""Knobs that pick a constant operand's layout: the algorithm of a conv (Winograd's transformed
weights or the direct conv's packed ones), the panel width of a matmul's packed B.

The layout pass (``passes/graph/alter_layout.py``) writes the layout the heuristic picks; an op
whose weights could take others declares them with its registry entry's ``layouts`` function,
and the kernel's search space (``compiler/kernel.py``) then holds a knob (``knob``) whose value
picks one. A tuned config that picks another layout has the constant repacked at compile time,
as TVM's alter-layout reads the tuned config.

>>> layouts = get_op("conv").layouts_fn(node.attrs, [x.type, w.type], target)
>>> layouts.knob, layouts.values            # a 3x3 conv that the strategy runs as Winograd
('algorithm', ('winograd', 'filter_lanes'))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tensorc.ir.types import TensorType


@dataclass(frozen=True)
class WeightLayouts:
    """The layouts input ``operand`` of a node may take, one per value of knob ``knob``.

    ``current``: the value of the layout the node has now (the space's default, the value
    today's heuristic picks); ``attrs``: for each value, the node's attrs in that layout;
    ``types``: the operand's type in it; ``repack(array, value)``: the operand's array (in the
    current layout) in the layout of ``value``. ``new_knob``: the knob is not one of the
    schedule's own (conv's ``algorithm``), so the space adds it; else (matmul's ``vectors``)
    the schedule's space has it, fixed to ``current`` by the node's layout."""

    knob: str
    current: Any
    attrs: dict[Any, dict]
    types: dict[Any, TensorType]
    repack: Callable[[np.ndarray, Any], np.ndarray]
    operand: int = 1
    new_knob: bool = True

    @property
    def values(self) -> tuple:
        """The knob's values, the current one first."""
        return (self.current, *[v for v in self.attrs if v != self.current])

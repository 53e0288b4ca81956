"""The formulations of max and average pooling, one table: each entry's compute, search
space and schedule, and how a computed group shows which formulation it is. The pool's
compute takes the entry that ``pool/strategy.py`` names; its space and schedule take the
entry the group shows, so the three cannot disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tensorc.ir import te
from tensorc.ops.nn.pool.blocked import blocked_compute
from tensorc.ops.nn.pool.nan_split import nan_split_compute, nan_split_parts, schedule_nan_split
from tensorc.ops.nn.pool.separable import (
    schedule_separable, separable_compute, separable_space, separable_window,
)
from tensorc.ops.nn.pool.window import window_compute
from tensorc.ops.nn.window_blocked import schedule_window_blocked, window_blocked_space
from tensorc.ops.nn.window_schedule import schedule_window, window_space


@dataclass(frozen=True)
class PoolFormulation:
    """One way to compute a pool. ``compute(kind, attrs, x)``: the op's result for ``kind``
    max_pool or avg_pool; ``space(target, out, anchor, attrs)`` and ``schedule(target, sch,
    out, window, config)``: its knobs and schedule (``window``: the stage that reduces over
    the windows); ``shown_by(anchor, attrs)``: whether a computed group is this one."""

    name: str
    compute: Callable
    space: Callable
    schedule: Callable
    shown_by: Callable


FORMULATIONS: dict[str, PoolFormulation] = {f.name: f for f in (
    PoolFormulation("blocked", blocked_compute,
                    lambda target, out, anchor, attrs: window_blocked_space(target, out),
                    schedule_window_blocked,
                    lambda anchor, attrs: bool(attrs.get("layout_block"))),
    PoolFormulation("nan_split", nan_split_compute, separable_space, schedule_nan_split,
                    lambda anchor, attrs: nan_split_parts(anchor) is not None),
    PoolFormulation("separable", separable_compute, separable_space, schedule_separable,
                    lambda anchor, attrs: separable_window(anchor) is not None),
    PoolFormulation("window", window_compute, window_space, schedule_window,
                    lambda anchor, attrs: True),
)}


def formulation_of(anchor: te.Tensor, attrs: dict) -> PoolFormulation:
    """The formulation a computed pool group is (the table's first entry it shows)."""
    return next(f for f in FORMULATIONS.values() if f.shown_by(anchor, attrs))

"""CPU schedules for groups over symbolic dims: constant tiles, run-time trip counts.

A loop of symbolic extent is split only by constant factors: lowering guards the last,
partial tile and passes/loop/symbolic_tails.py runs the whole tiles before it without the
guard. Choices (how many vector registers per block, whether to run on threads) are made at
the dims' hints (``te.hint``); they decide speed, never results.

``schedule_symbolic_injective`` serves elementwise, broadcast and injective groups.
``GENERIC`` serves a group whose anchor's template does not take symbolic shapes yet
(``Template.symbolic``): every kept stage at the root, its innermost spatial loop vectorized
where no reduction runs inside it, its outermost loop on threads. It is correct for every op
and every shape; the ported templates are the fast ones.
"""
from __future__ import annotations

from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.te import Tensor, hint, hint_shape
from tensorc.ops.registry import Template
from tensorc.target import Target

# outputs below this many elements (at the hints) run on one thread; the parallel loop's
# own chunking still keeps a small run-time extent on one thread
PARALLEL_MIN_ELEMENTS = 16384


def _elements(t: Tensor) -> int:
    n = 1
    for d in hint_shape(t.shape):
        n *= d
    return n


def vectorize_innermost(target: Target, stage: Stage, dtype: str, registers: int = 1) -> list:
    """Split the stage's innermost spatial loop by whole vectors (``registers`` of them) and
    vectorize the inner part: a short static axis is one vector; a symbolic or long one
    gets constant blocks and a guarded tail. Returns the spatial loops left outside it."""
    axes = [sv for sv in stage.leaf_vars if sv.kind == "spatial"]
    if not axes:
        return []
    lanes = target.vector_lanes(dtype) * registers
    extent = axes[-1].root_extent if axes[-1] in stage.root_vars else None
    if isinstance(extent, int) and extent <= lanes:
        stage.vectorize(axes[-1])
        return axes[:-1]
    outer, inner = stage.split(axes[-1], lanes)
    stage.vectorize(inner)
    return [*axes[:-1], outer]


def parallel_outermost(stage: Stage, loops: list, elements: int) -> None:
    if loops and elements >= PARALLEL_MIN_ELEMENTS:
        stage.parallel(loops[0])


def schedule_symbolic_injective(target: Target, sch: Schedule, out: Tensor, config) -> None:
    """An injective group over symbolic dims: the innermost axis in whole vectors (and a
    guarded tail where it is symbolic), the outermost loop on threads (a transposing group:
    in the loop order ops/schedules.py gave it)."""
    stage = sch[out]
    outer = vectorize_innermost(target, stage, out.dtype, config["registers"])
    parallel_outermost(stage, outer, _elements(out) if config["parallel"] else 0)


def schedule_generic(target: Target, sch: Schedule, out: Tensor, anchor: Tensor | None,
                     attrs: dict | None, config=None) -> None:
    """Any group over symbolic dims: each kept stage at the root, vectorized along its
    innermost spatial loop where it has no reduction, its outermost loop on threads."""
    for stage in sch.compute_stages:
        if stage.attach == "inline":
            continue
        t = stage.tensor
        if stage.reduce_axis:
            spatial = [sv for sv in stage.leaf_vars if sv.kind == "spatial"]
            _lanes_innermost(target, stage, spatial)
            if spatial and hint(spatial[0].root_extent) > 1:
                parallel_outermost(stage, spatial[:1], _elements(t) * 64)
            continue
        outer = vectorize_innermost(target, stage, t.dtype)
        parallel_outermost(stage, outer, _elements(t))


def _lanes_innermost(target: Target, stage: Stage, spatial: list) -> None:
    """A reduction whose innermost axis is one whole vector of a constant extent (a blocked
    tensor's lanes: a pool's or a global pool's windows over NCHW[b]c): the reduction
    loops moved outside that axis, which is vectorized, so each step reduces a vector."""
    lanes = target.vector_lanes(stage.tensor.dtype)
    if not spatial or spatial[-1] not in stage.root_vars or \
            spatial[-1].root_extent != lanes:
        return
    stage.reorder(*spatial[:-1], *stage.reduce_axis, spatial[-1])
    stage.vectorize(spatial[-1])


GENERIC = Template(schedule_generic, symbolic=True)

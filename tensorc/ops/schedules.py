"""Default CPU schedules shared by op families, and tensor-expression helpers they use.

Every op's ``schedule(target, sch, out, anchor, attrs)`` gets the group's schedule after the
elementwise stages around the anchor were inlined: ``out`` is the group's output tensor (the
anchor itself, or the end of an elementwise epilogue fused after it).
"""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.te import Tensor
from tensorc.ops.registry import Template
from tensorc.target import Target

# below this many output elements a kernel runs on one thread: waking the pool costs more
PARALLEL_MIN_ELEMENTS = 16384


def clamp(index: E.Expr, extent: int) -> E.Expr:
    """``index`` clamped into [0, extent): loads stay in bounds even where a select discards
    them (padding, concat)."""
    return E.minimum(E.maximum(index, 0), extent - 1)


def in_range(index: E.Expr, extent: int) -> E.Expr:
    return E.Logical("and", E.Compare("ge", index, E.const(0)),
                     E.Compare("lt", index, E.const(extent)))


def _size(t: Tensor) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def vector_block(extent: int, lanes: int) -> int:
    """Elements per vector along an axis: at most ``lanes``, preferably a divisor of the
    extent (a tail block needs a guard, and inside a reduction a scalar fallback)."""
    if extent <= lanes:
        return extent
    fits = [d for d in range(lanes // 2, lanes + 1) if extent % d == 0]
    return max(fits) if fits else lanes


def vectorize_inner(target: Target, stage: Stage, extent: int, dtype: str):
    """Split the stage's innermost loop (of extent ``extent``) by the vector width and
    vectorize the inner part; return the outer loops (outermost first, in loop order)."""
    axes = [sv for sv in stage.leaf_vars if sv.kind == "spatial"]
    lanes = target.vector_lanes(dtype)
    if not axes:
        return []
    if extent >= lanes:
        outer, inner = stage.split(axes[-1], vector_block(extent, lanes))
        stage.vectorize(inner)
        return [*axes[:-1], outer]
    if len(axes) > 1:
        # a short innermost axis: fuse it with the others and vectorize the fused loop
        fused = stage.fuse(*axes)
        outer, inner = stage.split(fused, lanes)
        stage.vectorize(inner)
        return [outer]
    stage.vectorize(axes[0])
    return []


def parallel_outer(stage: Stage, loops: list, size: int):
    """Fuse the given outer loops and run them in parallel when the work is large enough;
    returns the fused loop (or the innermost given one)."""
    if not loops:
        return None
    fused = stage.fuse(*loops) if len(loops) > 1 else loops[0]
    if size >= PARALLEL_MIN_ELEMENTS:
        stage.parallel(fused)
    return fused


def schedule_injective(target: Target, sch: Schedule, out: Tensor, anchor: Tensor | None = None,
                       attrs: dict | None = None, config=None) -> None:
    """Elementwise, broadcast and injective groups: vectorize the inner loop, parallel outer
    (in the stage's current loop order)."""
    stage = sch[out]
    outer = vectorize_inner(target, stage, out.shape[-1] if out.shape else 1, out.dtype)
    parallel_outer(stage, outer, _size(out))


def schedule_reduction(target: Target, sch: Schedule, out: Tensor, anchor: Tensor,
                       attrs: dict | None = None, config=None) -> None:
    """Any reduction anchor (pooling, reduce_*, depthwise or N-d conv): vectorize the
    innermost output axis, run the reduction loops just outside it, parallel the rest.

        for (n.c.y.f: parallel)  for (x.o)  [for (k...)  for (x.i: vectorized)]
    """
    if out is anchor:
        # accumulate in a local (register) block, copied out once
        anchor = sch.cache_write(anchor, "local")
    # compute the anchor in vector-sized blocks at the output's loop (the copy-out, or the
    # fused epilogue)
    stage = sch[out]
    outer = vectorize_inner(target, stage, out.shape[-1] if out.shape else 1, out.dtype)
    attach = parallel_outer(stage, outer, _size(out))
    anchor_stage = sch[anchor]
    if attach is None:
        return
    anchor_stage.compute_at(stage, attach)
    vectorize_inner_reduction(target, anchor_stage, anchor)


def vectorize_inner_reduction(target: Target, stage: Stage, t: Tensor) -> list:
    """Reorder so that reduction loops sit just outside the vectorized innermost spatial
    loop; return the outer spatial loops."""
    axes = stage.op_axis
    reduce_axes = stage.reduce_axis
    if not axes:
        return []
    lanes = target.vector_lanes(t.dtype)
    last = t.shape[-1]
    if last > 1:
        if last > lanes:
            outer, inner = stage.split(axes[-1], vector_block(last, lanes))
            stage.reorder(*axes[:-1], outer, *reduce_axes, inner)
            stage.vectorize(inner)
            return [*axes[:-1], outer]
        stage.reorder(*axes[:-1], *reduce_axes, axes[-1])
        stage.vectorize(axes[-1])
        return list(axes[:-1])
    return list(axes)


# The template of groups without an anchor (elementwise, broadcast, injective), by target kind.
INJECTIVE: dict[str, Template] = {"llvm": Template(schedule_injective)}

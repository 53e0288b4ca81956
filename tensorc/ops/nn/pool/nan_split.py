"""Float max pooling split per channel plane on its NaN: the two passes without NaN marks
(``pool/separable.py``) where the plane holds no NaN, the single pass over each window where
it holds one (see ``separable.py``'s docstring for why both are exact).
"""
from __future__ import annotations

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.nn.pool.separable import Rows, across, plane_producers_at
from tensorc.ops.nn.pool.shapes import output_spatial, overhang
from tensorc.ops.nn.window_schedule import (
    buffer_at, default_rows, default_unroll, padded_input_of, window_blocks,
)
from tensorc.ops.schedules import parallel_outer
from tensorc.target import Target


def nan_split_compute(kind: str, attrs: dict, x: te.Tensor) -> te.Tensor:
    """max_pool (the only ``kind`` this form serves) split on each plane's NaN."""
    out = output_spatial(attrs, x.shape)
    return nan_split_max(x, attrs, out, overhang(attrs, x.shape, out))


def nan_split_max(x: te.Tensor, attrs: dict, out: tuple[int, ...], extra: tuple[int, ...]
                  ) -> te.Tensor:
    """Float max pooling in two forms chosen per channel plane: the two passes without NaN
    marks where the plane holds no NaN (on NaN-free values the fold is the maximum, last of
    equals in window order, which any grouping of the taps keeps: the rows' maxima, then
    their maximum), and the single pass over each window, exact for any input, where it
    holds one. ``pool_has_nan[n, c]`` counts the plane's NaN; the schedule computes the
    single pass only for the planes it counts NaN in (``Stage.compute_if``).

        pool_has_nan[n, c]      = sum over the plane of isnan(x)
        max_pool_exact          = the single pass (te.max_ordered over each window)
        max_pool_fast           = the pass across rows of the row pass's maxima
        max_pool[n, c, ...]     = pool_has_nan[n, c] > 0 ? max_pool_exact : max_pool_fast
    """
    spatial = x.ndim - 2
    lowest = te.min_value(x.dtype).value
    # (each path its own padded copy, computed inside it: the single pass's only for the
    # planes that take it)
    padded = padded_input(x, attrs["pads"], extra, lowest, name="pad_exact")
    shape = x.shape[:2] + tuple(out)
    planes = [te.reduce_axis(n, f"h{d}") for d, n in enumerate(x.shape[2:])]
    one, zero = E.Const(1.0, x.dtype), E.Const(0.0, x.dtype)
    has_nan = te.compute(x.shape[:2], lambda n, c: te.sum_(E.select(
        E.Call("isnan", (x[(n, c, *(r.var for r in planes))],), "bool"), one, zero),
        axis=planes), name="pool_has_nan", tag="anchor:pool_has_nan")
    strides, kernel = attrs["strides"], attrs["kernel_shape"]
    dilations = tuple(attrs.get("dilations", (1,) * spatial))
    taps = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(kernel)]

    def window(n, c, *o):
        at = [o[d] * strides[d] + taps[d].var * dilations[d] for d in range(spatial)]
        return te.max_ordered(padded[(n, c, *at)], axis=taps)
    exact = te.compute(shape, window, name="max_pool_exact", tag="anchor:max_pool_exact")
    padded = padded_input(x, attrs["pads"], extra, lowest)
    rows = Rows(x.shape, padded.shape, attrs, extra, out[-1])(padded, te.max_ordered,
                                                              "pool_rows", lowest)
    fast = across(shape, attrs, lambda n, c, i: rows[(n, c, *i)], te.max_ordered,
                  "max_pool_fast", tag="anchor:max_pool_fast")
    return te.compute(shape, lambda n, c, *o: E.select(
        E.Compare("gt", has_nan[n, c], zero), exact[(n, c, *o)], fast[(n, c, *o)]),
        name="max_pool")


def nan_split_parts(anchor: te.Tensor) -> dict[str, te.Tensor] | None:
    """The NaN count, single pass and two passes that a NaN-split max pool chooses from
    (by name), or None for another form."""
    parts = {t.op.name: t for t in anchor.op.input_tensors()}
    names = ("pool_has_nan", "max_pool_exact", "max_pool_fast")
    return parts if not anchor.op.reduce_axis and all(n in parts for n in names) else None


def schedule_nan_split(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                       config) -> None:
    """Each channel's plane at a time (channels in parallel): the plane's NaN count, the
    single pass only if it counts any, the two passes (as :func:`schedule_separable`), then
    the output picks one of them:

        for (n.c: parallel)
          has_nan.rf[16]  = isnan counts, a vector of partial counts   (then summed)
          padded[Hp, Wp]
          if (has_nan > 0)  exact[H, OW] = the single pass   (as schedule_window's blocks)
          rows[H, OW] = max over kx;  rows_padded[Hp, OW]
          fast[OH, OW] = max over ky of rows_padded            (as schedule_separable's)
          for (y)  for (x: vectorized)  out = has_nan > 0 ? exact : fast
    """
    parts = nan_split_parts(anchor)
    lanes = target.vector_lanes(out.dtype)
    stage = sch[out]
    n, c, *rows, x = stage.op_axis
    width = out.shape[-1]
    if width > lanes:
        _, x = stage.split(x, lanes, shift_tail=width % lanes != 0)
    stage.vectorize(x)
    work = int(np.prod(out.shape)) if config["parallel"] else 0
    plane = parallel_outer(stage, [n, c], work)

    has_nan = parts["pool_has_nan"]
    counts = sch.rfactor(has_nan, lanes)
    sch[counts].compute_at(stage, plane)
    sch[counts].reorder(*sch[counts].reduce_axis, sch[counts].op_axis[-1])
    sch[counts].vectorize(sch[counts].op_axis[-1])
    sch[has_nan].compute_at(stage, plane)

    # each path's stages computed inside its plane loop (one iteration), its padded input too
    exact = parts["max_pool_exact"]
    rows_per_block = default_rows(target, exact, exact, "plane")
    exact_stage, exact_plane, _ = window_blocks(
        target, sch, exact, exact, config["registers"], False, "plane",
        rows_per_block=rows_per_block,
        unroll_taps=default_unroll(target, exact, exact, rows_per_block))
    sch[exact].compute_at(stage, plane)
    sch[exact].compute_if(has_nan)
    padded = padded_input_of(exact)
    if padded is not None:
        buffer_at(target, sch[padded], exact_stage, exact_plane)

    fast = parts["max_pool_fast"]
    fast_stage, fast_plane, across = window_blocks(
        target, sch, fast, fast, config["registers"], False, "plane", config["across_rows"])
    sch[fast].compute_at(stage, plane)
    plane_producers_at(target, sch, across, fast_stage, fast_plane, config["registers"])

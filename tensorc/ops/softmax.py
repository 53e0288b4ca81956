"""softmax, log_softmax and hardmax along one axis (ONNX opset-13 semantics); attr axis
(non-negative).

The frontend expresses opset < 13 versions (which flatten to 2-D at ``axis``) with reshapes.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.arg_reduce import arg_index
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import PARALLEL_MIN_ELEMENTS, reduce_in_row
from tensorc.ops.space import EMPTY, Knob, SearchSpace
from tensorc.ops.shape_rules import expect_arity, expect_axis, expect_float
from tensorc.target import Target

softmax = define("softmax", Pattern.REDUCTION)
log_softmax = define("log_softmax", Pattern.REDUCTION)
hardmax = define("hardmax", Pattern.REDUCTION)


def _infer(name: str):
    def infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
        expect_arity(name, input_types, 1)
        (x,) = input_types
        expect_float(name, x)
        expect_axis(name, attrs["axis"], x.ndim)
        return [x]
    return infer


for _op in (softmax, log_softmax, hardmax):
    _op.infer(_infer(_op.name))


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    # Subtracting the max keeps exp from overflowing; the result is unchanged.
    return x - np.max(x, axis=axis, keepdims=True)


@softmax.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    shifted = np.exp(_shifted(x, attrs["axis"]))
    return [(shifted / np.sum(shifted, axis=attrs["axis"], keepdims=True)).astype(x.dtype)]


@log_softmax.reference
def _log_softmax_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    shifted = _shifted(x, attrs["axis"])
    total = np.sum(np.exp(shifted), axis=attrs["axis"], keepdims=True)
    return [(shifted - np.log(total)).astype(x.dtype)]


@hardmax.reference
def _hardmax_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axis = attrs["axis"]
    first = np.expand_dims(np.argmax(x, axis=axis), axis)
    positions = np.arange(x.shape[axis]).reshape([-1 if d == axis else 1
                                                  for d in range(x.ndim)])
    return [(positions == first).astype(x.dtype)]


# ---------------------------------------------------------------------------------------------
# kernels: max, exp, sum along one axis, then an elementwise finish

def _along(axis: int, ndim: int):
    def index(o, k):
        return tuple(k if d == axis else o[d] for d in range(ndim))
    return index


def _max_and_sum(x: te.Tensor, axis: int, name: str, keep_exp: bool = False):
    """The row maxima and the sums of exp(x - max), each with the axis kept (extent 1); with
    ``keep_exp`` also exp(x - max) as a stage of its own that the sums read (else None)."""
    shape = x.shape
    reduced = shape[:axis] + (1,) + shape[axis + 1:]
    along = _along(axis, len(shape))
    rmax = te.reduce_axis(shape[axis], "k")
    peak = te.compute(reduced, lambda *o: te.max_(x[along(o, rmax.var)], axis=rmax),
                      name=f"{name}_max", tag=f"anchor:{name}_max")
    zero = E.const(0)
    exps = None
    if keep_exp:
        exps = te.compute(shape, lambda *o: _shifted_exp(x[o], peak[along(o, zero)]),
                          name=f"{name}_exp", tag=f"anchor:{name}_exp")
    rsum = te.reduce_axis(shape[axis], "k")

    def term(o):
        k = along(o, rsum.var)
        return exps[k] if exps is not None else _shifted_exp(x[k], peak[along(o, zero)])
    total = te.compute(reduced, lambda *o: te.sum_(term(o), axis=rsum),
                       name=f"{name}_sum", tag=f"anchor:{name}_sum")
    return peak, exps, total


def _shifted_exp(value: E.Expr, peak: E.Expr) -> E.Expr:
    """exp(value - peak), in the accumulator dtype (float32 for half-precision inputs)."""
    acc = te.accumulator_dtype(value.dtype)
    return E.call("exp", E.cast(acc, value) - E.cast(acc, peak))


CACHED_ROW = 16384    # longest row whose exp values are kept (a local buffer per row)


@softmax.compute
def _softmax_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    """max, then e = exp(x - max) and its sum, then e * (1 / sum). Rows along the last axis
    up to CACHED_ROW long keep e in a stage of its own, which the row schedule computes
    inside the row (one exp per element, not two: the exp is most of the work); longer rows
    and other axes compute it twice rather than hold it."""
    axis = attrs["axis"]
    along, zero = _along(axis, x.ndim), E.const(0)
    # a row of symbolic length is kept in a block malloc'd once per thread
    # (passes/loop/allocations.py)
    keep = axis == x.ndim - 1 and (not isinstance(x.shape[axis], int) or
                                   x.shape[axis] <= CACHED_ROW)
    peak, exps, total = _max_and_sum(x, axis, "softmax", keep_exp=keep)
    if exps is None and isinstance(x.shape[axis], int):
        return te.compute(x.shape, lambda *o: E.cast(x.dtype, _shifted_exp(
            x[o], peak[along(o, zero)]) / total[along(o, zero)]), name="softmax")
    if exps is None:
        # a row of symbolic length: one division per row, a multiply per element
        one = E.Const(1, total.dtype)
        return te.compute(x.shape, lambda *o: E.cast(x.dtype, _shifted_exp(
            x[o], peak[along(o, zero)]) * (one / total[along(o, zero)])), name="softmax")
    one = E.Const(1, exps.dtype)
    return te.compute(x.shape, lambda *o: E.cast(x.dtype, exps[o] * (
        one / total[along(o, zero)])), name="softmax")


@log_softmax.compute
def _log_softmax_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    axis = attrs["axis"]
    peak, _, total = _max_and_sum(x, axis, "log_softmax")
    along, zero = _along(axis, x.ndim), E.const(0)
    acc = te.accumulator_dtype(x.dtype)
    return te.compute(x.shape, lambda *o: E.cast(x.dtype, E.cast(
        acc, x[o] - peak[along(o, zero)]) - E.call("log", total[along(o, zero)])),
        name="log_softmax")


@hardmax.compute
def _hardmax_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    axis = attrs["axis"]
    first = arg_index(x, axis, largest=True, last=False, name="hardmax_index",
                      tag="anchor:hardmax_index")
    along, zero = _along(axis, x.ndim), E.const(0)
    one, nil = E.Const(1, x.dtype), E.Const(0, x.dtype)
    return te.compute(x.shape, lambda *o: E.select(E.eq(first[along(o, zero)], o[axis]),
                                                    one, nil), name="hardmax")


# Rows of at most GROUP_ELEMENTS take several per step of the row loop, their reductions
# interleaved: a row's max, then its sum, is a chain of dependent vector operations, and a
# short row's chains are too short to hide their latency. The pass that computes exp (bound
# by the arithmetic units) asks for the next group's rows, which the passes bound by the
# cache then find in L1 (46c6433).
GROUP_ELEMENTS = 512
ROW_GROUPS = (1, 2, 4)


def _row_space(target: Target, out: te.Tensor, anchor: te.Tensor, attrs: dict
               ) -> SearchSpace:
    """rfactor: each row's reductions in a vector of partial results; vectorize: the
    finishing pass in vectors; parallel: rows on threads (when large enough); row_group:
    rows per step of the row loop; prefetch: the exp pass asks for the next rows of x."""
    if attrs["axis"] != len(out.shape) - 1 or len(out.shape) < 2:
        return EMPTY
    # only the knobs that change this schedule: a row shorter than a vector is neither
    # vectorized nor reduced in vectors, and a small tensor never runs on threads
    knobs = []
    lanes = target.vector_lanes(out.dtype)
    shape = te.hint_shape(out.shape)        # symbolic dims at their hints
    rows, width = math.prod(shape[:-1]), shape[-1]
    if width >= lanes:
        knobs += [Knob("rfactor", (True, False), True, "row reductions in vector partial "
                       "results"),
                  Knob("vectorize", (True, False), True, "the finishing pass in vectors")]
    if math.prod(shape) >= PARALLEL_MIN_ELEMENTS:
        knobs.append(Knob("parallel", (True, False), True, "rows on threads"))
    groups = tuple(g for g in ROW_GROUPS if isinstance(out.shape[-2], int) and
                   out.shape[-2] % g == 0) or (1,)
    if len(groups) > 1:
        default = max(g for g in groups if g == 1 or g * width <= GROUP_ELEMENTS)
        knobs.append(Knob("row_group", groups, default, "rows per step of the row loop, "
                          "their reductions interleaved"))
    if rows > 1 and width >= lanes and anchor.op.name != "hardmax_index" and \
            isinstance(out.shape[-1], int):     # (a prefetch a fixed number of rows ahead)
        knobs.append(Knob("prefetch", (True, False), True, "the pass that computes exp "
                          "asks for the next rows of the input"))
    return SearchSpace(knobs, name="softmax rows") if knobs else EMPTY


def _row_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                  attrs: dict, config) -> None:
    """Along the last axis: each row's reductions (max, sum, index) are computed inside the
    row loop (row_group rows at a time, their reductions interleaved), rows run in
    parallel, the finish is vectorized. The pass that computes exp(x - max), bound by the
    arithmetic units, asks for the next rows of x meanwhile (the other passes are bound by
    the cache). Other axes keep whole-tensor stages."""
    if attrs["axis"] != len(out.shape) - 1 or len(out.shape) < 2:
        return
    st = sch[out]
    *rows, col = st.op_axis
    lanes = target.vector_lanes(out.dtype)
    # (hardmax's first index of the maximum keeps one row at a time)
    across = _lane_axis(out, lanes) if anchor.op.name != "hardmax_index" else None
    if across is not None:
        _rows_in_lanes(sch, out, across)
        return
    config = {"rfactor": True, "vectorize": True, "parallel": True, "row_group": 1,
              "prefetch": False, **(config or _row_space(target, out, anchor, attrs).default())}
    group = config["row_group"]
    if group > 1:       # (the last row axis split: bounds inference narrows through fuse)
        rows[-1], _ = st.split(rows[-1], group)
    # a row axis of symbolic extent is not fused into the one outside it: the fused loop's
    # index would be split back by a run-time division in every row (two integer divisions
    # cost about what a 26-wide row's passes do); the leading axes up to it are fused and
    # run on threads, the others nested inside
    lead = next((d for d in range(1, len(rows)) if not isinstance(out.shape[d], int)),
                len(rows))
    row = st.fuse(*rows[:lead])
    if lead < len(rows):
        threads, row = row, rows[-1]
    else:
        threads = row
    shape = te.hint_shape(out.shape)        # symbolic dims at their hints
    if shape[-1] >= lanes and config["vectorize"]:
        st.vectorize(st.split(col, lanes)[1])
    if math.prod(shape) >= PARALLEL_MIN_ELEMENTS and config["parallel"]:
        st.parallel(threads)
    ahead = group * out.shape[-1] if config["prefetch"] else 0
    kept_exp = any(getattr(stage.op, "tag", "") == "anchor:softmax_exp" for stage in sch.stages)
    # producers before consumers, so that each is attached inside its reader's row
    for stage in list(sch.stages):
        if stage is st or stage.attach != "root":
            continue
        tag = getattr(stage.op, "tag", "")
        if getattr(stage.op, "reduce_axis", None):
            walk = reduce_in_row(target, sch, stage.tensor, st, row, config["rfactor"],
                                 interleave=group > 1)
            if ahead and walk is not None and tag.endswith("_sum") and not kept_exp:
                # log_softmax: the sum's partial results compute exp(x - max)
                _prefetch_ahead(sch, walk, walk.reduce_axis[0], out, ahead,
                                walk.tensor.shape[-1])
        elif tag == "anchor:softmax_exp":
            stage.compute_at(st, row)        # the row's exp values, once
            if shape[-1] >= lanes and config["vectorize"]:
                step, inner = stage.split(stage.op_axis[-1], lanes)
                stage.vectorize(inner)
                if ahead:
                    _prefetch_ahead(sch, stage, step, out, ahead, lanes)


def _lane_axis(out: te.Tensor, lanes: int) -> int | None:
    """For rows of run-time length shorter than a vector at the hints (the small-dims
    variant's), the row axis of constant extent, half a vector's lanes to a vector's, whose
    rows are to run in the lanes (the innermost such; attention's heads); else None (fewer
    rows per vector than that lost to one masked vector per row)."""
    if len(out.shape) < 3 or isinstance(out.shape[-1], int) or te.hint(out.shape[-1]) >= lanes:
        return None
    return next((a for a in reversed(range(len(out.shape) - 1))
                 if isinstance(out.shape[a], int) and lanes // 2 <= out.shape[a] <= lanes),
                None)


def _rows_in_lanes(sch: Schedule, out: te.Tensor, axis: int) -> None:
    """Rows of run-time length shorter than a vector: the rows along ``axis`` (a constant
    count) in the lanes of a vector, each lane walking its own row, so that the reductions
    and exp run on every lane at once, unmasked: the lanes read with a stride (gathers), but
    one masked vector per row spent its time in the chain through the horizontal max and
    sum (8x the static kernel at 126 x 4 rows of 3, 4.5x in lanes; a static build's short
    rows are vectorized across rows by LLVM). The exp values keep their buffer (computing
    them twice instead was no faster).

        for (rows outside the lanes)
          max[a] = -inf; for k: for (a: vectorized) max[a] = max(max[a], x[.., a, .., k])
          e[a, k] = exp(x[.., a, .., k] - max[a]); sum[a] = sum over k of e[a, k]
          for c: for (a: vectorized) out[.., a, .., c] = e[a, c] * (1 / sum[a])
    """
    st = sch[out]
    *rows, col = st.op_axis
    lane = rows.pop(axis)
    st.reorder(*rows, col, lane)
    st.vectorize(lane)
    for stage in list(sch.stages):
        if stage is st or stage.attach != "root" or not (
                getattr(stage.op, "reduce_axis", None) or
                getattr(stage.op, "tag", "") == "anchor:softmax_exp"):
            continue
        stage.compute_at(st, rows[-1])
        axes = list(stage.op_axis)
        own = axes.pop(axis)
        stage.reorder(*axes, *stage.reduce_axis, own)
        stage.vectorize(own)


def _prefetch_ahead(sch: Schedule, stage, step, out: te.Tensor, elements: int,
                    per_step: int) -> None:
    """``stage`` asks, at each iteration of its loop ``step`` along a row (``per_step``
    elements of it), for what it reads of x (its input of ``out``'s shape) ``elements``
    further on: the same columns of the rows one group below. Only where the row is whole
    steps (a partial last step would not read x at affine offsets)."""
    source = _read_in_memory(sch, stage.op.input_tensors(), out.shape)
    if source is not None and out.shape[-1] % per_step == 0:
        stage.prefetch(source, step, elements // per_step)


def _read_in_memory(sch: Schedule, tensors, shape) -> te.Tensor | None:
    """The first of ``tensors`` of ``shape`` that is read from memory: an elementwise
    producer inlined into the reader (a Relu before the softmax) is looked through to the
    tensor it reads."""
    frontier = [t for t in tensors if t.shape == shape]
    while frontier:
        t = frontier.pop(0)
        try:
            inlined = sch.stage_of(t).attach == "inline"
        except KeyError:            # a placeholder: the kernel's input
            inlined = False
        if not inlined:
            return t
        frontier += [u for u in t.op.input_tensors() if u.shape == shape]
    return None


for _op in (softmax, log_softmax, hardmax):
    _op.schedule(_row_schedule, space=_row_space, symbolic=True)

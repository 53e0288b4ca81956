"""Reductions that return positions: argmax, argmin, topk.

argmax / argmin attrs: axis (non-negative), keepdims, select_last_index; int64 output.
topk attrs: axis, k, largest, output ("values" or "indices"). The frontend emits one topk per
ONNX output; both share the rule below, so the two agree on every tie.

The kernels use plain sum / max / min reductions: an argmax is the first position whose value
equals the maximum, and a top-k entry is the element whose rank is its output position (the
rank of x[i] counts the elements ordered before it, ties broken by position: ONNX's order).
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import reduction_space, schedule_reduction
from tensorc.ops.shape_rules import expect_arity, expect_axis

argmax = define("argmax", Pattern.REDUCTION)
argmin = define("argmin", Pattern.REDUCTION)
topk = define("topk", Pattern.REDUCTION)


def _infer_arg(name: str, attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity(name, input_types, 1)
    (x,) = input_types
    axis = attrs["axis"]
    expect_axis(name, axis, x.ndim)
    if x.shape[axis] == 0:
        raise ShapeError(f"{name}: cannot reduce the empty axis {axis} of {x}")
    shape = list(x.shape)
    if attrs["keepdims"]:
        shape[axis] = 1
    else:
        del shape[axis]
    return [TensorType(tuple(shape), "int64")]


def _reference_arg(largest: bool, attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axis = attrs["axis"]
    pick = np.argmax if largest else np.argmin
    if attrs["select_last_index"]:
        flipped = np.flip(x, axis=axis)
        index = x.shape[axis] - 1 - pick(flipped, axis=axis)
    else:
        index = pick(x, axis=axis)
    if attrs["keepdims"]:
        index = np.expand_dims(index, axis)
    return [np.asarray(index, dtype=np.int64)]


@argmax.infer
def _argmax_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    return _infer_arg("argmax", attrs, input_types)


@argmin.infer
def _argmin_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    return _infer_arg("argmin", attrs, input_types)


@argmax.reference
def _argmax_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return _reference_arg(True, attrs, x)


@argmin.reference
def _argmin_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return _reference_arg(False, attrs, x)


@topk.infer
def _topk_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("topk", input_types, 1)
    (x,) = input_types
    axis, k = attrs["axis"], attrs["k"]
    expect_axis("topk", axis, x.ndim)
    if not 0 <= k <= x.shape[axis]:
        raise ShapeError(f"topk: k={k} must be in [0, {x.shape[axis]}] (axis {axis} of {x})")
    if attrs["output"] not in ("values", "indices"):
        raise ShapeError(f"topk: output must be 'values' or 'indices', got {attrs['output']!r}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [TensorType(shape, x.dtype if attrs["output"] == "values" else "int64")]


@topk.reference
def _topk_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    axis, k, n = attrs["axis"], attrs["k"], x.shape[attrs["axis"]]
    if attrs["largest"]:
        # a stable ascending sort of the reversed axis, reversed back: descending, and
        # equal elements still in position order
        flipped = np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable")
        order = np.flip(n - 1 - flipped, axis=axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    if attrs["output"] == "indices":
        return [indices]
    return [np.take_along_axis(x, indices, axis=axis)]


# ---------------------------------------------------------------------------------------------
# kernels

def arg_index(x: te.Tensor, axis: int, largest: bool, last: bool, name: str, tag: str = ""
              ) -> te.Tensor:
    """The position of the maximum (or minimum) of ``x`` along ``axis`` as int64, with the
    axis kept (extent 1): the first such position, or the last with ``last``. A NaN counts
    as the extreme (numpy's argmax), so its first position is returned."""
    n = x.shape[axis]
    kept = x.shape[:axis] + (1,) + x.shape[axis + 1:]

    def along(o, k):
        return tuple(k if d == axis else o[d] for d in range(x.ndim))
    rk = te.reduce_axis(n, "k")
    extreme = te.max_ if largest else te.min_
    peak = te.compute(kept, lambda *o: extreme(x[along(o, rk.var)], axis=rk),
                      name=f"{name}_peak", tag=f"anchor:{name}_peak")
    rj = te.reduce_axis(n, "j")

    def position(*o):
        value = x[along(o, rj.var)]
        hit = E.Compare("eq", value, peak[o])
        if E.is_float(x.dtype):
            hit = E.Logical("or", hit, E.Compare("ne", value, value))
        j = rj.var
        if last:
            return te.max_(E.select(hit, j, E.const(-1)), axis=rj)
        return te.min_(E.select(hit, j, E.const(n)), axis=rj)
    return te.compute(kept, position, name=name, tag=tag)


def _arg_compute(largest: bool, name: str):
    def compute(attrs: dict, x: te.Tensor) -> te.Tensor:
        axis = attrs["axis"]
        index = arg_index(x, axis, largest, bool(attrs["select_last_index"]), name)
        if attrs["keepdims"]:
            return index
        shape = x.shape[:axis] + x.shape[axis + 1:]
        return te.compute(shape, lambda *o: index[(*o[:axis], E.const(0), *o[axis:])],
                          name=f"{name}_squeeze")
    return compute


argmax.compute(_arg_compute(True, "argmax"))
argmin.compute(_arg_compute(False, "argmin"))


def _arg_schedule(target, sch, out: te.Tensor, anchor: te.Tensor, attrs: dict, config) -> None:
    if not anchor.op.reduce_axis:  # the squeeze: schedule the index reduction under it
        anchor = anchor.op.input_tensors()[0]
    schedule_reduction(target, sch, out, anchor, attrs, config)


argmax.schedule(_arg_schedule, space=reduction_space)
argmin.schedule(_arg_schedule, space=reduction_space)


@topk.compute
def _topk_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    axis, k, largest = attrs["axis"], attrs["k"], bool(attrs["largest"])
    n = x.shape[axis]

    def along(o, i):
        return tuple(i if d == axis else o[d] for d in range(x.ndim))
    rj = te.reduce_axis(n, "j")

    def rank(*o):
        i, j = o[axis], rj.var
        mine, other = x[o], x[along(o, j)]
        ahead = E.Compare("gt" if largest else "lt", other, mine)
        tie = E.Logical("and", E.Compare("eq", other, mine), E.Compare("lt", j, i))
        return te.sum_(E.select(E.Logical("or", ahead, tie), E.const(1), E.const(0)),
                       axis=rj)
    ranks = te.compute(x.shape, rank, name="topk_rank", tag="anchor:topk_rank")
    ri = te.reduce_axis(n, "i")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]

    def pick(*o):
        hit = E.Compare("eq", ranks[along(o, ri.var)], o[axis])
        if attrs["output"] == "indices":
            return te.sum_(E.select(hit, ri.var, E.const(0)), axis=ri)
        return te.max_(E.select(hit, x[along(o, ri.var)], te.min_value(x.dtype)), axis=ri)
    return te.compute(shape, pick, name=f"topk_{attrs['output']}")


def _topk_schedule(target, sch, out: te.Tensor, anchor: te.Tensor, attrs: dict, config
                   ) -> None:
    """The ranks (each element against every other: n^2 comparisons) in vectors of
    consecutive elements, each compared with one broadcast element per step, the vectors
    on threads; then the pick under the reduction schedule. Serial and scalar, the ranks of
    8400 detections (a YOLO head's top 100) took 15 ms."""
    ranks = next((t for t in te.post_order([out]) if t.op.name == "topk_rank"), None)
    if ranks is not None:
        sch[ranks].compute_root()
        schedule_reduction(target, sch, ranks, ranks, attrs, {"rfactor": False,
                                                               "parallel": True})
    schedule_reduction(target, sch, out, anchor, attrs, config)


topk.schedule(_topk_schedule, space=reduction_space)

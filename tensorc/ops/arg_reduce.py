"""Reductions that return positions: argmax, argmin, topk.

argmax / argmin attrs: axis (non-negative), keepdims, select_last_index; int64 output.
topk attrs: axis, k, largest; its output is the k indices (int64). The frontend gathers the
values at them (gather_elements), so the selection runs once for both of ONNX's outputs. A k
given at run time is a data-dependent dim, and the topk then takes a second input, the
value_dim that writes it (ops/value_dim.py), which orders the two kernels (its value is not
read again).

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
from tensorc.ops.scan import blocked_scan, schedule_root_reduction
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
    if len(input_types) != 2 or isinstance(attrs["k"], int):
        expect_arity("topk", input_types, 1)
    x = input_types[0]
    axis, k = attrs["axis"], attrs["k"]
    expect_axis("topk", axis, x.ndim)
    if isinstance(k, int) and not 0 <= k <= x.shape[axis]:
        raise ShapeError(f"topk: k={k} must be in [0, {x.shape[axis]}] (axis {axis} of {x})")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [TensorType(shape, "int64")]


@topk.reference
def _topk_reference(attrs: dict, x: np.ndarray, k_value: np.ndarray | None = None
                    ) -> list[np.ndarray]:
    axis, k, n = attrs["axis"], attrs["k"], x.shape[attrs["axis"]]
    if k_value is not None:
        k = int(k_value.reshape(-1)[0])
    if attrs["largest"]:
        # a stable ascending sort of the reversed axis, reversed back: descending, and
        # equal elements still in position order
        flipped = np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable")
        order = np.flip(n - 1 - flipped, axis=axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    return [np.take(order, np.arange(k), axis=axis).astype(np.int64)]


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
        end = E.const(n) if isinstance(n, int) else E.cast(j.dtype, n)   # (a run-time n)
        return te.min_(E.select(hit, j, end), axis=rj)
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
def _topk_compute(attrs: dict, x: te.Tensor, k_written: te.Tensor | None = None
                  ) -> te.Tensor:
    axis, k, largest = attrs["axis"], attrs["k"], bool(attrs["largest"])
    n = x.shape[axis]
    if isinstance(k, int) and selects(x.dtype, n, k):
        return _topk_select(attrs, x)

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
        return te.sum_(E.select(hit, ri.var, E.const(0)), axis=ri)
    return te.compute(shape, pick, name="topk_indices")


def _topk_schedule(target, sch, out: te.Tensor, anchor: te.Tensor, attrs: dict, config
                   ) -> None:
    """The ranks (each element against every other: n^2 comparisons) in vectors of
    consecutive elements, each compared with one broadcast element per step, the vectors
    on threads; then the pick under the reduction schedule. Serial and scalar, the ranks of
    8400 detections (a YOLO head's top 100) took 15 ms. The selection path
    (``_topk_select``): each of its stages at the root, reductions under the reduction
    schedule (partial counts in vectors; its scans' within-block counts split at the
    blocks' bounds), the elementwise passes in vectors."""
    stages = [t for t in te.post_order([out]) if t.op.name.startswith(SELECT_PREFIX)]
    for t in stages:
        if t.op.reduce_axis:
            schedule_root_reduction(target, sch, t)
        else:
            sch[t].compute_root()
            _schedule_pass(target, sch, t)
    ranks = next((t for t in te.post_order([out]) if t.op.name == "topk_rank"), None)
    if ranks is not None:
        sch[ranks].compute_root()
        schedule_reduction(target, sch, ranks, ranks, attrs, {"rfactor": False,
                                                               "parallel": True})
    if out.op.reduce_axis:
        schedule_reduction(target, sch, out, anchor, attrs, config)
    else:
        _schedule_pass(target, sch, out)


def _schedule_pass(target, sch, t: te.Tensor) -> None:
    """An elementwise pass of the selection: its innermost axis in vectors. (The injective
    schedule's search for a transposed axis walks each stage's whole expression: over the
    selection's 40 passes it took 14 s of a 15 s compile.)"""
    st = sch[t]
    lanes = target.vector_lanes(t.dtype)
    if t.shape[-1] > 1:
        _, inner = st.split(st.op_axis[-1], min(lanes, t.shape[-1]))
        st.vectorize(inner)


# ---------------------------------------------------------------------------------------------
# top-k by selection: O(n) passes, not n^2 comparisons

# Axes at least this long (and k at most SELECT_MAX_K) select instead of ranking every
# element, which is quadratic in the axis (2f81e58)
SELECT_MIN = 512
SELECT_MAX_K = 4096
SELECT_PREFIX = "topk_select"
KEY_BITS = 32


def selects(dtype: str, n: int, k: int) -> bool:
    """Whether a top-k of ``k`` along an axis of ``n`` ``dtype`` elements runs as a
    selection (``_topk_select``): float32 and int32, whose order fits 32-bit keys."""
    # (an axis of run-time length ranks: the selection's passes are built for a known one)
    return dtype in ("float32", "int32") and isinstance(n, int) and n >= SELECT_MIN and \
        1 <= k <= SELECT_MAX_K


def _order_key(x: E.Expr, largest: bool) -> E.Expr:
    """An int32 whose signed order is the order the top-k takes (larger first), for a float32
    or int32 ``x``: a float's bits, the magnitude bits flipped where the sign is set (the
    bits of negative floats grow as the value falls); -0.0 as +0.0 (equal values tie, by
    position); for the smallest, every key flipped (~key); a NaN where numpy's sort places
    it, last ascending and first descending: the least key or the greatest."""
    i32 = "int32"
    if x.dtype == i32:
        key = x
    else:
        zero = E.Const(0.0, x.dtype)
        bits = E.Call("bitcast", [E.select(E.Compare("eq", x, zero), zero, x)], i32)
        flipped = (E.Const(-2 ** 31, i32) - bits) - E.Const(1, i32)
        key = E.select(E.Compare("lt", bits, E.Const(0, i32)), flipped, bits)
    if not largest:
        key = E.Const(-1, i32) - key
    if x.dtype != i32:
        nan = E.Const(2 ** 31 - 1 if largest else -2 ** 31, i32)
        key = E.select(E.Compare("ne", x, x), nan, key)
    return key


def _topk_select(attrs: dict, x: te.Tensor) -> te.Tensor:
    """The top k along the axis in O(n) passes over it, ranked among the k chosen only:

    1. each element's order key (``_order_key``, int32: larger first);
    2. the k-th largest key T, bit by bit from the top (32 passes, each a count): from the
       least int32, a bit is kept where at least k keys are at least the value with it;
    3. the elements before T (key > T: G of them, fewer than k) and the first k - G of
       those equal to T, by position (ONNX breaks ties by position): their places among the
       chosen from exclusive prefix counts (blocked scans, ``scan.blocked_scan``);
    4. the chosen gathered in position order: slot s holds the element whose place is s
       (n * k terms);
    5. their ranks among the k (k^2), and the output in rank order (k^2).

    n = 8400, k = 100: 32 n + 2 n^1.5 + n k + 2 k^2 terms instead of n^2 + n k."""
    axis, k, largest = attrs["axis"], attrs["k"], bool(attrs["largest"])
    n = x.shape[axis]
    i32 = "int32"
    kept = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    chosen_shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]

    def along(o, i):
        return tuple(i if d == axis else o[d] for d in range(x.ndim))

    def row(o):
        return along(o, E.const(0))

    keys = te.compute(x.shape, lambda *o: _order_key(x[o], largest),
                      name=f"{SELECT_PREFIX}_key")
    one, zero = E.Const(1, i32), E.Const(0, i32)

    def count(name: str, test) -> te.Tensor:
        """Per row, how many keys pass ``test(key, o)``."""
        rj = te.reduce_axis(n, "j")
        return te.compute(kept, lambda *o: te.sum_(
            E.select(test(keys[along(o, rj.var)], o), one, zero), axis=rj), name=name)

    # 2. T, bit by bit: the least value v with at least k keys >= v + 2^b keeps bit b
    threshold = None
    for b in reversed(range(KEY_BITS)):
        def trial(o, b=b, below=threshold):
            if below is None:                       # bit 31 over the least int32: 0
                return E.Const(0, i32)
            return below[row(o)] + E.Const(1 << b, i32)
        passing = count(f"{SELECT_PREFIX}_count{b}",
                        lambda key, o, trial=trial: E.Compare("ge", key, trial(o)))

        def keep(*o, trial=trial, passing=passing, below=threshold):
            floor = below[row(o)] if below is not None else E.Const(-2 ** 31, i32)
            return E.select(E.Compare("ge", passing[row(o)], E.Const(k, i32)), trial(o), floor)
        threshold = te.compute(kept, keep, name=f"{SELECT_PREFIX}_bit{b}")

    # 3. places among the chosen
    before = count(f"{SELECT_PREFIX}_above",
                   lambda key, o: E.Compare("gt", key, threshold[row(o)]))

    def flags(name: str, op: str) -> te.Tensor:
        return te.compute(x.shape, lambda *o: E.select(
            E.Compare(op, keys[o], threshold[row(o)]), one, zero), name=name)
    scan_attrs = {"axis": axis, "reverse": 0, "exclusive": 1}
    above = blocked_scan("cumsum", scan_attrs, flags(f"{SELECT_PREFIX}_gt", "gt"),
                         prefix=SELECT_PREFIX + "_gt")
    equal = blocked_scan("cumsum", scan_attrs, flags(f"{SELECT_PREFIX}_eq", "eq"),
                         prefix=SELECT_PREFIX + "_eq")

    def place(*o):
        # -1: not chosen
        ties = E.Const(k, i32) - before[row(o)]
        key, t = keys[o], threshold[row(o)]
        chosen = E.any_of(E.Compare("gt", key, t), E.all_of(
            E.Compare("eq", key, t), E.Compare("lt", equal[o], ties)))
        return E.select(chosen, above[o] + E.minimum(equal[o], ties), E.Const(-1, i32))
    places = te.compute(x.shape, place, name=f"{SELECT_PREFIX}_place")

    # 4. slot s: the element placed at s
    ri = te.reduce_axis(n, "i")
    gathered = te.compute(chosen_shape, lambda *o: te.sum_(E.select(
        E.Compare("eq", places[along(o, ri.var)], E.cast(i32, o[axis])),
        E.cast(i32, ri.var), zero), axis=ri), name=f"{SELECT_PREFIX}_gather")
    chosen_keys = te.compute(chosen_shape, lambda *o: keys[along(o, E.cast(E.INDEX, gathered[o]))],
                             name=f"{SELECT_PREFIX}_chosen")

    # 5. ranks among the chosen (in position order: a tie goes to the earlier slot)
    rs = te.reduce_axis(k, "s")

    def rank(*o):
        other, mine = chosen_keys[along(o, rs.var)], chosen_keys[o]
        ahead = E.any_of(E.Compare("gt", other, mine), E.all_of(
            E.Compare("eq", other, mine), E.Compare("lt", rs.var, o[axis])))
        return te.sum_(E.select(ahead, one, zero), axis=rs)
    ranks = te.compute(chosen_shape, rank, name=f"{SELECT_PREFIX}_rank")
    rr = te.reduce_axis(k, "r")
    order = te.compute(chosen_shape, lambda *o: te.sum_(E.select(
        E.Compare("eq", ranks[along(o, rr.var)], E.cast(i32, o[axis])),
        gathered[along(o, rr.var)], zero), axis=rr), name=f"{SELECT_PREFIX}_order")
    return te.compute(chosen_shape, lambda *o: E.cast("int64", order[o]), name="topk_indices")


topk.schedule(_topk_schedule, space=reduction_space)

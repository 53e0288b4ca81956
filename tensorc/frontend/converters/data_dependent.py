"""Converters of ONNX ops whose output size depends on the values of a tensor: NonZero,
Compress. Each output size is a data-dependent dim (ir/dim_table.py ``declare_data``) in
[0, bound], named after the node; the kernel computes it at run time and the dims downstream
follow. Where the input is a constant, the result is folded (a constant of static shape).
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.context import ImportContext
from tensorc.frontend.converters.common import normalize_axis
from tensorc.frontend.registry import converter
from tensorc.ir.dims import DimLike, dim_min
from tensorc.ir.graph import Value
from tensorc.ops.interpret import evaluate


def data_dim(ctx: ImportContext, stem: str, bound: DimLike):
    """A fresh data-dependent dim in [0, bound] for the node being converted."""
    return ctx.graph.dims.declare_data(stem, bound, ctx.node_name or stem)


def emit_data_dependent(ctx: ImportContext, op: str, inputs: list[Value], stem: str,
                        bound: DimLike, **attrs) -> Value:
    """``op(inputs)`` sized by a fresh data-dependent dim, or its folded value where every
    input is a constant."""
    arrays = [ctx.constant(v) for v in inputs]
    if all(a is not None for a in arrays):
        (result,) = evaluate(op, {**attrs, "count": None, "writes": ()}, arrays)
        return ctx.const(result)
    count = data_dim(ctx, stem, bound)
    return ctx.emit(op, inputs, count=count, writes=(count.expr.name,), **attrs)


@converter("NonZero", since=9)
def nonzero(ctx: ImportContext, inputs: list[Value]) -> Value:
    (x,) = inputs
    if x.type.ndim == 0:
        raise ShapeError("NonZero of a scalar input is not supported; give it one axis")
    return emit_data_dependent(ctx, "nonzero", [x], "nonzero", x.type.size)


@converter("Compress", since=9)
def compress(ctx: ImportContext, inputs: list[Value], *, axis: int | None = None) -> Value:
    x, condition = inputs
    if condition.type.ndim != 1:
        raise ShapeError(f"Compress: the condition must be 1-D, got {condition.type}")
    if axis is None:
        x = ctx.emit("reshape", [x], shape=(x.type.size,))
        axis = 0
    axis = normalize_axis(axis, x.type.ndim)
    if condition.type.dtype != "bool":
        condition = ctx.emit("cast", [condition], dtype="bool")
    keep = ctx.constant(condition)
    if keep is not None and ctx.constant(x) is None:
        # a constant condition: a gather of the kept positions (a static shape)
        kept = np.flatnonzero(keep.reshape(-1)[:_static(x.type.shape[axis])])
        return ctx.emit("gather", [x, ctx.const(kept.astype(np.int64))], axis=axis)
    bound = dim_min(x.type.shape[axis], condition.type.shape[0])
    return emit_data_dependent(ctx, "compress", [x, condition], "compress", bound, axis=axis)


def _static(d: DimLike) -> int | None:
    return d if isinstance(d, int) else None


@converter("NonMaxSuppression", since=10)
def non_max_suppression(ctx: ImportContext, inputs: list[Value], *, center_point_box: int = 0
                        ) -> Value:
    if center_point_box not in (0, 1):
        raise ShapeError(f"NonMaxSuppression: center_point_box must be 0 or 1, got "
                         f"{center_point_box}")
    boxes, scores = inputs[0], inputs[1]
    rest = list(inputs[2:]) + [None] * (5 - len(inputs))
    max_out, iou, score = rest[:3]
    # absent inputs: no box kept (ONNX's default of 0), no IoU threshold, no score threshold
    max_out = ctx.const(np.zeros(1, np.int64)) if max_out is None else max_out
    iou = ctx.const(np.zeros(1, np.float32)) if iou is None else iou
    has_score = score is not None
    score = ctx.const(np.zeros(1, np.float32)) if score is None else score
    inputs = [boxes, scores, ctx.emit("reshape", [max_out], shape=(1,)),
              ctx.emit("reshape", [iou], shape=(1,)), ctx.emit("reshape", [score], shape=(1,))]
    batches, count, classes = boxes.type.shape[0], boxes.type.shape[1], scores.type.shape[1]
    per_class = count
    limit = ctx.constant(inputs[2])
    if limit is not None:
        per_class = dim_min(count, max(int(limit.reshape(-1)[0]), 0))
    return emit_data_dependent(ctx, "non_max_suppression", inputs, "nms",
                               batches * classes * per_class,
                               center_point_box=center_point_box,
                               has_score_threshold=has_score)


@converter("Unique", since=11)
def unique(ctx: ImportContext, inputs: list[Value], *, axis: int | None = None,
           sorted: int = 1) -> tuple[Value, Value, Value, Value]:
    (x,) = inputs
    if axis is None:
        x = ctx.emit("reshape", [x], shape=(x.type.size,))
        axis = 0
    axis = normalize_axis(axis, x.type.ndim)
    attrs = dict(axis=axis, sorted=bool(sorted))
    if ctx.constant(x) is not None:
        return tuple(ctx.const(evaluate("unique", {**attrs, "output": output}, [ctx.constant(x)])
                               [0]) for output in ("y", "indices", "inverse", "counts"))
    # one node per output, each writing the count (they agree: one kernel's rule)
    count = data_dim(ctx, "unique", x.type.shape[axis])
    return tuple(ctx.emit("unique", [x], output=output, count=count,
                          writes=(count.expr.name,), **attrs)
                 for output in ("y", "indices", "inverse", "counts"))


def runtime_dim(ctx: ImportContext, value: Value, payload: Value, stem: str,
                bound: DimLike | None = None) -> tuple[Value, object]:
    """A data-dependent dim set from ``value`` (one integer, computed at run time) by a
    value_dim kernel that checks it against ``bound`` (None: a capacity the runtime grows):
    (``payload`` as the kernel passes it on, which the ops sized by the dim must compute
    from: the data edge runs them after it, the dim)."""
    count = data_dim(ctx, stem, bound)
    bound = ctx.graph.dims.data[count.expr.name][0]
    value = ctx.emit("reshape", [value], shape=(1,))
    if value.type.dtype not in ("int32", "int64"):
        value = ctx.emit("cast", [value], dtype="int64")
    passed = ctx.emit("value_dim", [value, payload], count=count, writes=(count.expr.name,),
                      bound=bound)
    return passed, count


def runtime_range(ctx: ImportContext, inputs: list[Value]) -> Value:
    """Range over values computed at run time: its length max(ceil((limit - start) /
    delta), 0) is a data-dependent dim with a capacity (nothing bounds it); the values are
    start + i * delta, as onnxruntime computes them. A delta of 0 is a length of -1, which
    the size check refuses."""
    start, limit, delta = (ctx.emit("reshape", [v], shape=()) for v in inputs)
    dtype = start.type.dtype
    wide = [ctx.emit("cast", [v], dtype="float64") for v in (start, limit, delta)]
    span = ctx.emit("div", [ctx.emit("sub", [wide[1], wide[0]]), wide[2]])
    length = ctx.emit("maximum", [ctx.emit("ceil", [span]),
                                  ctx.const(np.zeros((), np.float64))])
    zero_step = ctx.emit("equal", [wide[2], ctx.const(np.zeros((), np.float64))])
    length = ctx.emit("where", [zero_step, ctx.const(np.array(-1.0)), length])
    step, n = runtime_dim(ctx, ctx.emit("cast", [length], dtype="int64"),
                          ctx.emit("reshape", [delta], shape=(1,)), "range")
    ones = ctx.emit("broadcast_to", [ctx.const(np.ones(1, np.int64))], shape=(n,))
    index = ctx.emit("cumsum", [ones], axis=0, exclusive=True, reverse=False)
    steps = ctx.emit("mul", [ctx.emit("cast", [index], dtype=dtype), step])
    return ctx.emit("add", [steps, start])


def runtime_constant_of_shape(ctx: ImportContext, shape: Value, fill: np.ndarray) -> Value:
    """ConstantOfShape of a shape computed at run time: each of its (statically many)
    elements a data-dependent dim with a capacity; the fill broadcast to them."""
    if shape.type.ndim != 1 or not isinstance(shape.type.shape[0], int):
        raise ShapeError(f"ConstantOfShape: the shape input must be 1-D of a known length, "
                         f"got {shape.type}")
    dims = []
    value = ctx.const(fill[:1].reshape(()))
    for k in range(shape.type.shape[0]):     # the fill passes each dim's kernel in turn
        element = ctx.emit("slice", [shape], starts=(k,), steps=(1,), shape=(1,))
        value, dim = runtime_dim(ctx, element, value, "constant_of_shape")
        dims.append(dim)
    return ctx.emit("broadcast_to", [value], shape=tuple(dims))

"""Converters of ONNX loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both decompose into core ops. The picked log-probability ``x[n, target[n, d...], d...]`` is a
``gather_elements`` along the class axis, the per-element weight a ``gather`` from the class
weights, and ``ignore_index`` a ``where`` that zeroes the ignored elements' weights (their
targets are replaced by class 0 first, so that an ignore_index outside [0, C) never indexes).
"""
from __future__ import annotations

from tensorc.errors import ShapeError
from tensorc.frontend.converters.common import reshape, scalar
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value

REDUCTIONS = ("none", "sum", "mean")


def _check(op: str, x: Value, target: Value, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ShapeError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    shape = x.type.shape
    if len(shape) < 2:
        raise ShapeError(f"{op}: the input must be (N, C, d1, ...), got {x.type}")
    if target.type.shape != shape[:1] + shape[2:]:
        raise ShapeError(f"{op}: the target must be (N, d1, ...) = {shape[:1] + shape[2:]}, "
                         f"got {target.type}")


def nll_loss(ctx: ImportContext, log_prob: Value, target: Value, weight: Value | None,
             reduction: str, ignore_index: int | None) -> Value:
    """The negative log-likelihood of ``target`` under ``log_prob`` (N, C, d1, ...)."""
    shape = log_prob.type.shape
    if target.type.dtype not in ("int32", "int64"):
        target = ctx.emit("cast", [target], dtype="int64")
    ignored = None
    if ignore_index is not None:
        ignored = ctx.emit("equal", [target, scalar(ctx, ignore_index, target)])
        target = ctx.emit("where", [ignored, scalar(ctx, 0, target), target])
    picked = ctx.emit("gather_elements",
                      [log_prob, reshape(ctx, target, (shape[0], 1, *shape[2:]))], axis=1)
    loss = ctx.emit("neg", [reshape(ctx, picked, target.type.shape)])
    # the per-element weight; None stands for all ones
    element_weight = None
    if weight is not None:
        element_weight = ctx.emit("gather", [weight, target], axis=0)
    if ignored is not None:
        kept = element_weight if element_weight is not None else scalar(ctx, 1, log_prob)
        element_weight = ctx.emit("where", [ignored, scalar(ctx, 0, log_prob), kept])
    if element_weight is not None:
        loss = ctx.emit("mul", [loss, element_weight])
    if reduction == "none":
        return loss
    axes = tuple(range(loss.type.ndim))
    total = ctx.emit("reduce_sum", [loss], axes=axes, keepdims=False)
    if reduction == "sum":
        return total
    if element_weight is None:
        return ctx.emit("div", [total, scalar(ctx, loss.type.size, loss)])
    # a weighted mean divides by the weights' sum (ONNX), not by the element count
    weights = ctx.emit("reduce_sum", [element_weight], axes=axes, keepdims=False)
    return ctx.emit("div", [total, weights])


@converter("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(ctx: ImportContext, inputs: list[Value], *,
                                 ignore_index: int | None = None, reduction: str = "mean"
                                 ) -> Value:
    x, target = inputs[:2]
    weight = inputs[2] if len(inputs) > 2 else None
    _check("NegativeLogLikelihoodLoss", x, target, reduction)
    return nll_loss(ctx, x, target, weight, reduction, ignore_index)


@converter("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(ctx: ImportContext, inputs: list[Value], *,
                               ignore_index: int | None = None, reduction: str = "mean"
                               ) -> tuple[Value, Value]:
    scores, target = inputs[:2]
    weight = inputs[2] if len(inputs) > 2 else None
    _check("SoftmaxCrossEntropyLoss", scores, target, reduction)
    log_prob = ctx.emit("log_softmax", [scores], axis=1)
    return nll_loss(ctx, log_prob, target, weight, reduction, ignore_index), log_prob

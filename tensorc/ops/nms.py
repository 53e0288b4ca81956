"""non_max_suppression{center_point_box, has_score_threshold, count, writes}: ONNX's
NonMaxSuppression. boxes[B, S, 4], scores[B, C, S], max_output_boxes_per_class (int64, one
value), iou_threshold and score_threshold (float32, one value each) -> int64[count, 3], the
(batch, class, box) of each kept box: per batch and class, the boxes scoring above the score
threshold, taken by decreasing score (ties by position), each kept unless its IoU with a box
already kept in its class exceeds the IoU threshold, at most max_output_boxes_per_class of
them. Boxes are [y1, x1, y2, x2] with corners in either order (center_point_box 0) or
[x_center, y_center, width, height] (1). The IoU is onnxruntime's: 0 where the boxes do not
overlap or either has no area.

The kernel is loop IR, serial (ops/loop_kernels.py): per batch and class, the boxes above the
score threshold are collected and merge-sorted by score (bottom-up, stable), then each in
turn is tested against the boxes kept so far: O(c log c + c * kept) for c candidates.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.loop import Allocate, Buffer, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.loop_kernels import (
    allocate, extent, get, local, loop, merge_sort, put, read, seq, when, write,
)
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity

non_max_suppression = define("non_max_suppression", Pattern.OPAQUE)

@non_max_suppression.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("non_max_suppression", input_types, 5)
    boxes, scores, max_out, iou, score = input_types
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise ShapeError(f"NonMaxSuppression: boxes must be [batches, boxes, 4], got {boxes}")
    if scores.ndim != 3:
        raise ShapeError(f"NonMaxSuppression: scores must be [batches, classes, boxes], got "
                         f"{scores}")
    for what, t in (("max_output_boxes_per_class", max_out), ("iou_threshold", iou),
                    ("score_threshold", score)):
        if t.size != 1:
            raise ShapeError(f"NonMaxSuppression: {what} must hold one value, got {t}")
    return [TensorType((attrs["count"], 3), "int64")]


def iou_exceeds(a: np.ndarray, b: np.ndarray, center: bool, threshold: float) -> bool:
    """onnxruntime's suppression test of two boxes (numpy, float32 arithmetic)."""
    f = np.float32
    (ax0, ax1, ay0, ay1), (bx0, bx1, by0, by1) = (_corners(box, center) for box in (a, b))
    ix0, ix1 = max(ax0, bx0), min(ax1, bx1)
    iy0, iy1 = max(ay0, by0), min(ay1, by1)
    if ix1 <= ix0 or iy1 <= iy0:
        return False
    inter = f(f(ix1 - ix0) * f(iy1 - iy0))
    area_a, area_b = f(f(ax1 - ax0) * f(ay1 - ay0)), f(f(bx1 - bx0) * f(by1 - by0))
    union = f(area_a + area_b - inter)
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return bool(f(inter / union) > f(threshold))


def _corners(box, center: bool):
    """(x_min, x_max, y_min, y_max) of a box."""
    f = np.float32
    if center:
        half_w, half_h = f(box[2] / f(2)), f(box[3] / f(2))
        return f(box[0] - half_w), f(box[0] + half_w), f(box[1] - half_h), f(box[1] + half_h)
    return min(box[1], box[3]), max(box[1], box[3]), min(box[0], box[2]), max(box[0], box[2])


@non_max_suppression.reference
def _reference(attrs: dict, boxes, scores, max_out, iou, score) -> list[np.ndarray]:
    center = bool(attrs["center_point_box"])
    limit = int(np.asarray(max_out).reshape(-1)[0])
    iou_threshold = np.float32(np.asarray(iou).reshape(-1)[0])
    score_threshold = np.float32(np.asarray(score).reshape(-1)[0])
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [i for i in np.argsort(-s, kind="stable")
                     if not attrs["has_score_threshold"] or s[i] > score_threshold]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not any(iou_exceeds(boxes[b, i], boxes[b, j], center, iou_threshold)
                           for j in kept):
                    kept.append(i)
            rows += [(b, c, i) for i in kept]
    return [np.array(rows, dtype=np.int64).reshape(-1, 3)]


def _box_corners(boxes: Buffer, at: E.Expr, center: bool):
    """(x_min, x_max, y_min, y_max) of the box whose first coordinate is ``boxes[at]``."""
    c = [read(boxes, at + k) for k in range(4)]
    if center:
        two = E.Const(2.0, boxes.dtype)
        half_w, half_h = c[2] / two, c[3] / two
        return c[0] - half_w, c[0] + half_w, c[1] - half_h, c[1] + half_h
    return (E.minimum(c[1], c[3]), E.maximum(c[1], c[3]), E.minimum(c[0], c[2]),
            E.maximum(c[0], c[2]))


def _suppresses(boxes: Buffer, a: E.Expr, b: E.Expr, center: bool, threshold: E.Expr
                ) -> E.Expr:
    """Whether the boxes at flat offsets ``a`` and ``b`` overlap by more than ``threshold``
    (as :func:`iou_exceeds`)."""
    ax0, ax1, ay0, ay1 = _box_corners(boxes, a, center)
    bx0, bx1, by0, by1 = _box_corners(boxes, b, center)
    ix0, ix1 = E.maximum(ax0, bx0), E.minimum(ax1, bx1)
    iy0, iy1 = E.maximum(ay0, by0), E.minimum(ay1, by1)
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    zero = E.Const(0.0, boxes.dtype)
    return E.all_of(E.Compare("gt", ix1, ix0), E.Compare("gt", iy1, iy0),
                    E.Compare("gt", inter, zero), E.Compare("gt", area_a, zero),
                    E.Compare("gt", area_b, zero), E.Compare("gt", union, zero),
                    E.Compare("gt", inter / union, threshold))


@non_max_suppression.kernel
def _kernel(attrs: dict, operands: list, out: Buffer, writes: list[Buffer]) -> Stmt:
    boxes, scores, max_out, iou, score = operands
    center = bool(attrs["center_point_box"])
    batches, count, classes = (extent(d) for d in (boxes.shape[0], boxes.shape[1],
                                                   scores.shape[1]))
    limit = E.cast("int64", read(max_out, 0))
    iou_threshold = E.cast(boxes.dtype, read(iou, 0))
    score_threshold = E.cast(scores.dtype, read(score, 0))
    # the candidates' box numbers, sorted in place through a second buffer
    cand = Buffer("candidates", (boxes.shape[1],), "int64")
    spare = Buffer("spare", (boxes.shape[1],), "int64")
    total, kept, found = local("int64", "total"), local("int64", "kept"), local("int64", "found")
    first, keep = local("int64", "first"), local("int8", "keep")

    def class_body(b, c):
        row = (b * classes + c) * count

        def collect(s):
            value = read(scores, row + s)
            eligible = E.Compare("gt", value, score_threshold) \
                if attrs["has_score_threshold"] else E.Compare("eq", value, value)
            return when(eligible, seq(write(cand, get(found), s), put(found, get(found) + 1)))

        def higher(i, j):       # decreasing score; ties keep the earlier box first
            return None, E.Compare("ge", read(scores, row + i), read(scores, row + j))

        def select(q):
            box = E.Load(cand, (q,))

            def against(t):
                other = E.Load(out, ((get(first) + t) * 3 + 2,))
                hit = _suppresses(boxes, (b * count + box) * 4, (b * count + other) * 4,
                                  center, iou_threshold)
                return when(hit, put(keep, E.Const(0, "int8")))
            return when(E.Compare("lt", get(kept), limit), seq(
                put(keep, E.Const(1, "int8")),
                loop(get(kept), against, "t"),
                when(E.Compare("ne", E.cast("int64", get(keep)), E.const(0)), seq(
                    write(out, get(total) * 3, b), write(out, get(total) * 3 + 1, c),
                    write(out, get(total) * 3 + 2, box),
                    put(total, get(total) + 1), put(kept, get(kept) + 1)))))
        return seq(put(found, 0), loop(count, collect, "s"),
                   merge_sort(cand, spare, get(found), higher),
                   put(kept, 0), put(first, get(total)), loop(get(found), select, "q"))

    body = seq(put(total, 0),
               loop(batches, lambda b: loop(classes, lambda c: class_body(b, c), "c"), "b"),
               put(writes[0], get(total)))
    return Allocate(cand, Allocate(spare, allocate([total, kept, found, first, keep], body)))

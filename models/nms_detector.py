"""A YOLO-style detector with its post-processing in the graph, as end-to-end exports write
it: a small conv backbone (stride 8) and a head of 4 box values and ``classes`` scores per
cell; the cells' best scores' top ``min(cells, candidates)`` (TopK over a count computed from
the shape), NonMaxSuppression over those candidates per class, gathers of the kept boxes,
classes and scores, and a final TopK over ``min(kept, max_detections)`` (a run-time count) that
orders the detections by score.

``images`` [1, 3, height, width] (symbolic height and width, multiples of 8) ->
``det_boxes`` [n, 4] (x_center, y_center, width, height in pixels), ``det_scores`` [n],
``det_classes`` [n] (int64), n known only at run time. Random weights; the thresholds are
set where random heads keep a few boxes per class.

    python -m models.nms_detector     # writes models/nms_detector.onnx
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from models._builder import GraphBuilder
from models.symbolic import _conv, _dim, _ints, _shape_of


def build(seed: int = 0, classes: int = 3, candidates: int = 64, per_class: int = 8,
          max_detections: int = 20, iou_threshold: float = 0.45,
          score_threshold: float = 0.3, symbolic: bool = True) -> onnx.ModelProto:
    b = GraphBuilder(seed)
    x = _conv(b, "images", 3, 8, stride=2)
    x = _conv(b, x, 8, 16, stride=2)
    x = _conv(b, x, 16, 16, stride=2)
    w = b.constant("head", b.he_normal((4 + classes, 16, 1, 1), 16))
    head = b.node("Conv", [x, w], kernel_shape=[1, 1])
    feats = b.node("Reshape", [head, _shape_of(b, [[1, 4 + classes], [-1]])])  # [1, 4+C, cells]

    def channels(start: int, end: int) -> str:
        return b.node("Slice", [feats, _ints(b, "start", [start]), _ints(b, "end", [end]),
                                _ints(b, "axes", [1])])
    # boxes in pixels: centers over the image, sizes up to a quarter of 64 pixels
    scale = b.constant("box_scale", np.array([[[64.0], [64.0], [16.0], [16.0]]], np.float32))
    boxes = b.node("Mul", [b.node("Sigmoid", [channels(0, 4)]), scale])
    boxes = b.node("Transpose", [boxes], perm=[0, 2, 1])                   # [1, cells, 4]
    scores = b.node("Sigmoid", [channels(4, 4 + classes)])                 # [1, C, cells]

    # the candidates: the top min(cells, candidates) cells by their best class score
    best = b.node("ReduceMax", [scores], axes=[1], keepdims=0)             # [1, cells]
    k = b.node("Min", [_dim(b, best, 1), _ints(b, "candidates", [candidates])])
    _, top = _topk(b, best, k)                                             # [1, k]
    index = b.node("Squeeze", [top, _ints(b, "axis0", [0])])               # [k]
    cand_boxes = b.node("Gather", [boxes, index], axis=1)                  # [1, k, 4]
    cand_scores = b.node("Gather", [scores, index], axis=2)                # [1, C, k]

    selected = b.node("NonMaxSuppression", [
        cand_boxes, cand_scores, _ints(b, "per_class", [per_class]),
        b.constant("iou", np.array([iou_threshold], np.float32)),
        b.constant("score", np.array([score_threshold], np.float32))],
        center_point_box=1)                                                # [n, 3]

    def column(c: int) -> str:
        return b.node("Gather", [selected, b.constant("col", np.array(c, np.int64))], axis=1)
    cls, box = column(1), column(2)                                        # [n]
    kept_boxes = b.node("Gather", [b.node("Squeeze", [cand_boxes, _ints(b, "axis0", [0])]),
                                   box], axis=0)                           # [n, 4]
    kept_scores = b.node("GatherND", [cand_scores, selected])              # [n]

    # the detections by score, at most max_detections of them: a TopK over a run-time count
    m = b.node("Min", [_dim(b, kept_scores, 0), _ints(b, "max_det", [max_detections])])
    det_scores, order = _topk(b, kept_scores, m, output="det_scores")
    b.node("Gather", [kept_boxes, order], axis=0, output="det_boxes")
    b.node("Gather", [cls, order], axis=0, output="det_classes")
    h, w_ = ("height", "width") if symbolic else (64, 96)
    inputs = [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, h, w_])]
    outputs = [helper.make_tensor_value_info("det_boxes", TensorProto.FLOAT, ["n", 4]),
               helper.make_tensor_value_info("det_scores", TensorProto.FLOAT, ["n"]),
               helper.make_tensor_value_info("det_classes", TensorProto.INT64, ["n"])]
    return b.model("nms_detector", inputs, outputs)


def _topk(b: GraphBuilder, x: str, k: str, output: str | None = None) -> tuple[str, str]:
    values = output or b.fresh("topk_values")
    indices = b.fresh("topk_indices")
    b.nodes.append(helper.make_node("TopK", [x, k], [values, indices], name=b.fresh("topk"),
                                    axis=-1, largest=1, sorted=1))
    return values, indices


if __name__ == "__main__":
    onnx.save(build(), "models/nms_detector.onnx")

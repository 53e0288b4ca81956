"""NonMaxSuppression: compiled models against onnxruntime and against the numpy reference,
every attribute and threshold as a run-time input, symbolic batches and boxes, and the empty
results (no box above the score threshold, max_output_boxes_per_class 0, no boxes)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import tensorc
from tensorc.errors import TensorcError
from tensorc.ops.interpret import evaluate
from tests.helpers import assert_close, make_model, ort_run, tensor_info


def _model(batches, count, classes, center=0, constant_limit=None):
    inputs = [tensor_info("boxes", "float32", (batches, count, 4)),
              tensor_info("scores", "float32", (batches, classes, count)),
              tensor_info("iou", "float32", (1,)), tensor_info("score", "float32", (1,))]
    initializers = {}
    if constant_limit is None:
        inputs.insert(2, tensor_info("limit", "int64", (1,)))
    else:
        initializers["limit"] = np.array([constant_limit], np.int64)
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "score"],
                              ["selected"], center_point_box=center)]
    return make_model(nodes, inputs, [tensor_info("selected", "int64", None)], opset=11,
                      initializers=initializers)


def _boxes(rng, batches, count, center):
    # clustered boxes, so that many overlap; some with corners swapped or no area
    xy = rng.uniform(0, 10, (batches, count, 2)).astype(np.float32)
    wh = rng.uniform(0, 4, (batches, count, 2)).astype(np.float32)
    if center:
        return np.concatenate([xy, wh], axis=2)
    boxes = np.concatenate([xy, xy + wh], axis=2)
    boxes[:, ::3] = boxes[:, ::3][..., [2, 3, 0, 1]]      # corners in the other order
    return boxes


@pytest.mark.parametrize("center", [0, 1])
def test_matches_onnxruntime_with_run_time_thresholds(center):
    model = _model(2, 40, 3, center)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(center)
    for limit, iou, score in ((5, 0.5, 0.2), (100, 0.3, 0.0), (0, 0.5, 0.0), (3, 0.9, 0.99),
                              (40, 0.0, -1.0)):
        feeds = {"boxes": _boxes(rng, 2, 40, center),
                 "scores": rng.random((2, 3, 40)).astype(np.float32),
                 "limit": np.array([limit], np.int64), "iou": np.array([iou], np.float32),
                 "score": np.array([score], np.float32)}
        want = ort_run(model, feeds)
        assert_close(module.run(feeds), want)
        (reference,) = evaluate("non_max_suppression", {"center_point_box": center,
                                                        "has_score_threshold": True},
                                [feeds[k] for k in ("boxes", "scores", "limit", "iou", "score")])
        np.testing.assert_array_equal(reference, want["selected"])


def test_symbolic_batches_and_boxes_with_a_constant_limit():
    model = _model("batch", "boxes", 2, constant_limit=4)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(5)
    for batches, count in ((1, 1), (3, 17), (2, 64), (1, 5)):
        feeds = {"boxes": _boxes(rng, batches, count, 0),
                 "scores": rng.random((batches, 2, count)).astype(np.float32),
                 "iou": np.array([0.4], np.float32), "score": np.array([0.1], np.float32)}
        assert_close(module.run(feeds), ort_run(model, feeds))


def test_no_box_kept_is_an_empty_result():
    model = _model(1, 6, 1)
    module = tensorc.compile(model, cache=False)
    feeds = {"boxes": _boxes(np.random.default_rng(0), 1, 6, 0),
             "scores": np.full((1, 1, 6), 0.1, np.float32), "limit": np.array([3], np.int64),
             "iou": np.array([0.5], np.float32), "score": np.array([0.5], np.float32)}
    got = module.run(feeds)["selected"]
    assert got.shape == (0, 3)
    assert_close(module.run(feeds), ort_run(model, feeds))


def test_optional_inputs_take_onnx_defaults():
    # no max_output_boxes_per_class: ONNX's default of 0 keeps nothing
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"])]
    model = make_model(nodes, [tensor_info("boxes", "float32", (1, 3, 4)),
                               tensor_info("scores", "float32", (1, 1, 3))],
                       [tensor_info("selected", "int64", None)], opset=11)
    feeds = {"boxes": _boxes(np.random.default_rng(1), 1, 3, 0),
             "scores": np.ones((1, 1, 3), np.float32)}
    assert_close(tensorc.compile(model, cache=False).run(feeds), ort_run(model, feeds))


def test_bad_boxes_shape_is_refused():
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"])]
    model = make_model(nodes, [tensor_info("boxes", "float32", (1, 3, 5)),
                               tensor_info("scores", "float32", (1, 1, 3))],
                       [tensor_info("selected", "int64", None)], opset=11)
    with pytest.raises(TensorcError, match=r"boxes must be \[batches, boxes, 4\]"):
        tensorc.compile(model, cache=False)

"""The shape suggested for an input whose dims the model leaves open: from the model's
metadata where it says (an image size), else 1 with a plain word that it is a placeholder;
written in the syntax of where it is read (input_shapes= for Python, --input-shape for the
command line)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import make_model, paddle_like_model, tensor_info
from onnx import helper

import tensorc
from tensorc.errors import ShapeError
from tensorc.frontend.check import check_model
from tensorc.frontend.shape_hint import metadata_image_size, shape_hint


def detector_model(imgsz: str | None = "[320, 320]") -> onnx.ModelProto:
    """A detector as ultralytics exports it: dynamic batch and image size, and the size it
    was trained at in metadata_props."""
    nodes = [helper.make_node("Conv", ["images", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[32, 32],
                              strides=[32, 32]),
             helper.make_node("Flatten", ["p"], ["y"])]
    model = make_model(nodes, [tensor_info("images", "float32", ["batch", 3, "h", "w"])],
                       ["y"], initializers={"w": np.ones((2, 3, 3, 3), np.float32)})
    if imgsz is not None:
        helper.set_model_props(model, {"imgsz": imgsz, "task": "detect"})
    return model


@pytest.mark.parametrize("text,size", [("[320, 320]", [320, 320]), ("640", [640, 640]),
                                       ("(480, 640)", [480, 640]), ("big", None)])
def test_image_size_from_metadata(text: str, size: list[int] | None) -> None:
    found = metadata_image_size(detector_model(text))
    assert (found and found[1]) == size


def test_hint_from_metadata() -> None:
    hint = shape_hint("images", ["batch", 3, "h", "w"], detector_model())
    assert hint.dims == [1, 3, 320, 320] and hint.placeholders == []
    assert hint.cli == "--input-shape images=1x3x320x320"
    assert hint.python == "input_shapes={'images': (1, 3, 320, 320)}"
    assert "from the model's metadata (imgsz: [320, 320])" in hint.note


def test_hint_without_metadata_says_placeholder() -> None:
    hint = shape_hint("x", [None, 3, None, None], paddle_like_model())
    assert hint.dims == [1, 3, 1, 1] and hint.placeholders == [2, 3]
    assert "dims 2, 3 of 'x' are placeholders" in hint.note
    assert shape_hint("x", None, paddle_like_model()).placeholders == [0]
    assert shape_hint("x", ["batch", 4], paddle_like_model()).note is None  # batch 1 only


def test_compile_error_suggests_the_metadata_shape() -> None:
    with pytest.raises(ShapeError) as info:
        tensorc.compile(detector_model(), target="cuda")     # CUDA binds every dim
    message = str(info.value)
    assert "input_shapes={'images': (1, 3, 320, 320)}" in message
    assert "--input-shape images=1x3x320x320" in message
    assert "imgsz" in message
    module = tensorc.compile(detector_model(), input_shapes={"images": (1, 3, 320, 320)})
    assert module.outputs == [("y", (1, 200), "float32")]


def test_compile_error_says_the_1s_are_placeholders() -> None:
    with pytest.raises(ShapeError) as info:
        tensorc.compile(detector_model(imgsz=None), target="cuda")
    message = str(info.value)
    assert "--input-shape images=1x3x1x1" in message
    assert "dims 2, 3 of 'images' are placeholders" in message


def test_check_suggests_and_tries_the_metadata_shape() -> None:
    report = check_model(detector_model())
    text = str(report)
    assert "--input-shape images=1x3x320x320" in text and "imgsz" in text
    assert not any(issue for op in report.ops for issue in op.issues)  # 320 pools by 32
    assert report.to_dict()["inputs"][0]["hint"] == {
        "shape": [1, 3, 320, 320], "placeholder_dims": [], "source": "imgsz: [320, 320]"}
    text = str(check_model(detector_model(imgsz=None)))
    assert "--input-shape images=1x3x1x1" in text and "are placeholders" in text

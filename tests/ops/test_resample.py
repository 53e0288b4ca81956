"""Resize over symbolic heights and widths (ops/resample.py): each output computes its taps
and weights from the run-time lengths. Compiled once with H and W symbolic, run at sizes from
1x1 up, odd and even, against onnxruntime: by scales (linear, cubic and nearest, growing and
shrinking, each coordinate mode) and by sizes read from another input's shape (an FPN's
upsampling to its lateral map)."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tensorc

SHAPES = [(1, 1), (2, 3), (5, 7), (8, 8), (13, 4), (31, 17)]


def _by_scales(mode, coordinates, scales, **attrs):
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode,
                            coordinate_transformation_mode=coordinates, **attrs)
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(scales, np.float32), "s")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _by_sizes(mode, coordinates):
    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)
    nodes = [helper.make_node("Shape", ["x"], ["sx"]), helper.make_node("Shape", ["z"], ["sz"]),
             helper.make_node("Slice", ["sx", "i0", "i2"], ["lead"]),
             helper.make_node("Slice", ["sz", "i2", "i4"], ["map"]),
             helper.make_node("Concat", ["lead", "map"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["up"], mode=mode,
                              coordinate_transformation_mode=coordinates),
             helper.make_node("Add", ["up", "z"], ["y"])]
    graph = helper.make_graph(
        nodes, "fpn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"]),
                       helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [ints("i0", [0]), ints("i2", [2]), ints("i4", [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


CASES = {
    "linear x2, half_pixel": _by_scales("linear", "half_pixel", [1, 1, 2, 2]),
    "linear x2, align_corners": _by_scales("linear", "align_corners", [1, 1, 2, 2]),
    "linear 1.5 x 2, pytorch_half_pixel": _by_scales("linear", "pytorch_half_pixel",
                                                     [1, 1, 1.5, 2]),
    "linear shrinking, half_pixel": _by_scales("linear", "half_pixel", [1, 1, 0.25, 0.5]),
    "cubic x2, half_pixel": _by_scales("cubic", "half_pixel", [1, 1, 2, 2]),
    "cubic x3, asymmetric, excluding outside": _by_scales("cubic", "asymmetric", [1, 1, 3, 1],
                                                          exclude_outside=1,
                                                          cubic_coeff_a=-0.5),
    "nearest shrinking, half_pixel": _by_scales("nearest", "half_pixel", [1, 1, 0.5, 0.5]),
    "nearest x1.5, round_prefer_ceil": _by_scales("nearest", "asymmetric", [1, 1, 1.5, 1.5],
                                                  nearest_mode="round_prefer_ceil"),
    "sizes of another map, linear": _by_sizes("linear", "half_pixel"),
    "sizes of another map, nearest": _by_sizes("nearest", "asymmetric"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_symbolic_resize_matches_onnxruntime(case):
    model = CASES[case]
    assert "resample_axis" in tensorc.inspect(model, stage="graph")
    module = tensorc.compile(model, cache=False)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    for k, (height, width) in enumerate(SHAPES):
        rng = np.random.default_rng(k)
        feeds = {"x": rng.standard_normal((1 + k % 2, 3, height, width)).astype(np.float32)}
        if "z" in names:
            feeds["z"] = rng.standard_normal((1 + k % 2, 3, 2 * height + 1, width + 3)
                                             ).astype(np.float32)
        module.num_threads = 1 + k % 2
        (got,) = module.run(feeds).values()
        (expected,) = session.run(None, feeds)
        assert got.shape == expected.shape, (case, height, width)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{case} at {height}x{width}")


def test_nearest_where_coordinates_land_on_input_positions_matches_the_onnx_reference():
    """half_pixel_symmetric at 1.5 puts source coordinates exactly on input positions, where
    the floor rule picks one neighbour or the other by an ulp: the kernel sums them in the
    ONNX reference's order (as the static build's tables do). onnxruntime's float32 math
    lands elsewhere at 31x17, so the reference here is ONNX's own implementation."""
    model = _by_scales("nearest", "half_pixel_symmetric", [1, 1, 1.5, 1.25],
                       nearest_mode="floor")
    module = tensorc.compile(model, cache=False)
    reference = ReferenceEvaluator(model)
    for k, (height, width) in enumerate(SHAPES):
        x = np.random.default_rng(k).standard_normal((1, 3, height, width)).astype(np.float32)
        (got,) = module.run({"x": x}).values()
        (expected,) = reference.run(None, {"x": x})
        np.testing.assert_array_equal(got, expected, err_msg=f"{height}x{width}")


def test_rows_read_their_taps_once_and_match_onnxruntime_at_narrow_rows():
    """Along an axis before the last, each output row's taps are copied to registers at the
    row's loop (as a static resize's are), and narrow rows under a large batch match."""
    model = _by_scales("linear", "half_pixel", [1, 1, 2, 2])
    loops = tensorc.inspect(model, stage="loops")
    assert "allocate resample_weights.local: float32[2, 1] (local)" in loops, loops
    assert "allocate resample_positions.local: int32[2, 1] (local)" in loops, loops
    module = tensorc.compile(model, cache=False)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    for k, (batch, height, width) in enumerate([(73, 7, 19), (1, 1, 1), (37, 3, 5),
                                                (2, 13, 4), (5, 2, 31)]):
        x = np.random.default_rng(k).standard_normal((batch, 3, height, width)).astype(
            np.float32)
        (expected,) = session.run(None, {"x": x})
        for threads in (1, 2):
            module.num_threads = threads
            (got,) = module.run({"x": x}).values()
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{batch}x{height}x{width}, {threads} threads")

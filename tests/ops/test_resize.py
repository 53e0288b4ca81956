"""Resize by large factors to odd sizes (ops/resize.py: one resize_axis kernel per axis, the
last axis first where it grows, [taps, out] tables of 32-bit positions): bilinear, nearest and
cubic, half-pixel, align-corners and asymmetric coordinates, against a separable numpy
reference, at one and two threads."""
from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper, numpy_helper

import tensorc


def _source(coordinates: str, out: int, size: int) -> np.ndarray:
    j = np.arange(out, dtype=np.float64)
    scale = out / size
    if coordinates == "half_pixel":
        return (j + 0.5) / scale - 0.5
    if coordinates == "align_corners":
        return j * (size - 1) / (out - 1) if out > 1 else np.zeros(out)
    return j / scale        # asymmetric


def _cubic(d: np.ndarray, a: float = -0.75) -> np.ndarray:
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def resize_axis_ref(x: np.ndarray, axis: int, out: int, mode: str, coordinates: str
                    ) -> np.ndarray:
    """One axis of ONNX Resize (edge values past the borders, as exclude_outside=0)."""
    size = x.shape[axis]
    c = _source(coordinates, out, size)
    if mode == "nearest":           # nearest_mode floor
        return np.take(x, np.clip(np.floor(c).astype(int), 0, size - 1), axis=axis)
    base = np.floor(c).astype(int)
    frac = c - base
    offsets = [0, 1] if mode == "linear" else [-1, 0, 1, 2]
    result = 0.0
    for k in offsets:
        weight = 1 - np.abs(frac - k) if mode == "linear" else _cubic(frac - k)
        taken = np.take(x.astype(np.float64), np.clip(base + k, 0, size - 1), axis=axis)
        shape = [1] * x.ndim
        shape[axis] = out
        result = result + taken * weight.reshape(shape)
    return result


def resize_ref(x: np.ndarray, out_hw: tuple[int, int], mode: str, coordinates: str
               ) -> np.ndarray:
    y = resize_axis_ref(x, 2, out_hw[0], mode, coordinates)
    return resize_axis_ref(y, 3, out_hw[1], mode, coordinates).astype(x.dtype)


def resize_model(shape, out_hw, mode: str, coordinates: str):
    sizes = np.array([*shape[:2], *out_hw], np.int64)
    extra = {"nearest_mode": "floor"} if mode == "nearest" else {}
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                            coordinate_transformation_mode=coordinates, **extra)
    model = make_model([node], [tensor_info("x", "float32", list(shape))], ["y"])
    model.graph.initializer.append(numpy_helper.from_array(sizes, "sizes"))
    return model


MODES = [("linear", "half_pixel"), ("linear", "align_corners"), ("nearest", "asymmetric"),
         ("nearest", "half_pixel"), ("cubic", "half_pixel"), ("cubic", "align_corners")]
# (input shape, output height x width): factors 2-16 to odd sizes, and a shrinking axis
SHAPES = [((1, 3, 7, 9), (15, 143)), ((1, 21, 16, 16), (257, 255)), ((2, 4, 13, 6), (27, 3))]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, out_hw", SHAPES)
@pytest.mark.parametrize("mode, coordinates", MODES)
def test_resize_matches_numpy(threads, shape, out_hw, mode, coordinates):
    rng = np.random.default_rng(math.prod(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    module = tensorc.compile(resize_model(shape, out_hw, mode, coordinates),
                             num_threads=threads)
    check_result(module.run({"x": x})["y"], resize_ref(x, out_hw, mode, coordinates),
                 rtol=1e-5, atol=1e-5)


def test_an_upsampled_axis_is_a_kernel_of_its_own_the_last_one_first():
    # 21 x 16 x 16 -> 257 x 257: the row's gathers on the 16-row tensor, then the output's
    # rows from two whole input rows each, with 32-bit position tables along the output
    loops = tensorc.inspect(resize_model((1, 21, 16, 16), (257, 257), "linear", "half_pixel"),
                            stage="loops")
    assert loops.count("func k") == 2, loops
    assert "resize_axis: float32[1, 21, 16, 257]" in loops, loops
    assert "in1: int32[2, 257]" in loops, loops
    # each output row's positions and weights read once, at the row, not at every vector
    assert "allocate in1.local: int32[2, 1]" in loops, loops

"""Data that is only moved is not copied: an output that is a reshape is computed in the
caller's array, a channel concat's inputs are computed in their slabs of its output, and a
transposing kernel is vectorized along the axis its input is contiguous in. Each against
onnxruntime, with the kernels that remain counted."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_close, make_model, ort_run, random_feeds, tensor_info
from onnx import helper

import tensorc

RNG = np.random.default_rng(5)


def _kernels(model) -> list[str]:
    return [line.split("(")[0].split()[-1] for line in
            tensorc.inspect(model, stage="loops").splitlines() if line.startswith("func k")]


def _conv(name: str, x: str, c_in: int, c_out: int, out: str) -> tuple:
    w = (RNG.standard_normal((c_out, c_in, 3, 3)) * 0.2).astype(np.float32)
    return helper.make_node("Conv", [x, name], [out], pads=[1, 1, 1, 1]), {name: w}


def test_an_output_reshape_is_computed_in_the_callers_array():
    conv, weights = _conv("w", "x", 4, 6, "c")
    nodes = [conv, helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Reshape", ["s", "shape"], ["y"])]
    weights["shape"] = np.array([1, 6, -1], np.int64)
    model = make_model(nodes, [tensor_info("x", "float32", [1, 4, 9, 11])], ["y"],
                       initializers=weights)
    assert len(_kernels(model)) == 1         # no copy of the result into the output
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-4, 1e-4)


def test_an_output_returned_twice_and_as_a_view_is_still_copied_once():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["y"]),
             helper.make_node("Reshape", ["r", "shape"], ["z"])]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 6])], ["y", "z", "r"],
                       initializers={"shape": np.array([3, 4], np.int64)})
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds))


@pytest.mark.parametrize("reshaped", [False, True])
def test_a_channel_concat_of_conv_outputs_is_no_kernel(reshaped):
    """Fire-module style: two convs (with their ReLUs) on one input, concatenated along the
    channels, then a conv; the first two write their slabs and the concat moves no data."""
    a, wa = _conv("wa", "x", 5, 3, "a")
    b, wb = _conv("wb", "x", 5, 7, "b")
    nodes = [a, b, helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Relu", ["b"], ["rb"])]
    inputs = ["ra", "rb"]
    weights = {**wa, **wb}
    if reshaped:       # flattened first, as a detector's heads are
        weights["flat"] = np.array([1, -1], np.int64)
        nodes += [helper.make_node("Reshape", ["ra", "flat"], ["fa"]),
                  helper.make_node("Reshape", ["rb", "flat"], ["fb"])]
        inputs = ["fa", "fb"]
    c, wc = _conv("wc", "cat4", 10, 2, "y")
    weights.update(wc)
    weights["shape4"] = np.array([1, 10, 13, 13], np.int64)
    nodes += [helper.make_node("Concat", inputs, ["cat"], axis=1),
              helper.make_node("Reshape", ["cat", "shape4"], ["cat4"]), c]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 5, 13, 13])], ["y"],
                       initializers=weights)
    kernels = _kernels(model)
    assert not any("concat" in k for k in kernels), kernels
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-4, 1e-4)


def test_a_concat_that_is_an_output_receives_its_inputs_in_place():
    a, wa = _conv("wa", "x", 2, 4, "a")
    b, wb = _conv("wb", "x", 2, 3, "b")
    nodes = [a, b, helper.make_node("Concat", ["a", "b"], ["y"], axis=1)]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 2, 7, 5])], ["y"],
                       initializers={**wa, **wb})
    assert not any("concat" in k for k in _kernels(model))
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-4, 1e-4)


def test_concats_that_cannot_be_views_still_copy():
    """An input read by another op too, a concat along a later axis (slabs not contiguous),
    a graph input, and one value concatenated twice."""
    a, wa = _conv("wa", "x", 3, 3, "a")
    nodes = [a, helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Concat", ["r", "r"], ["twice"], axis=1),
             helper.make_node("Concat", ["r", "x"], ["with_input"], axis=1),
             helper.make_node("Concat", ["r", "a"], ["rows"], axis=2),
             helper.make_node("Add", ["r", "a"], ["also"])]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 3, 6, 6])],
                       ["twice", "with_input", "rows", "also"], initializers=wa)
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-4, 1e-4)


def test_a_transposing_kernel_is_vectorized_along_its_inputs_contiguous_axis():
    """A YOLO head's decode: [1, 3, 85, 52, 52] -> transpose to channels last -> sigmoid.
    Vectorized along the output's channel axis, every vector would gather 85 elements
    apart; along the width axis its loads are contiguous."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 4, 2]),
             helper.make_node("Sigmoid", ["t"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 3, 85, 20, 20])], ["y"])
    loops = tensorc.inspect(model, stage="loops")
    vector_loops = [line.strip() for line in loops.splitlines() if "vectorized" in line]
    assert vector_loops and all("i3" in line for line in vector_loops), vector_loops
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-5, 1e-6)


def test_a_transposing_kernel_with_no_vector_divisor_runs_whole_registers():
    """Width 52 (13 x 4): 4-lane vectors would do the sigmoid at half width; whole registers
    instead, the last one overlapping the one before it (a min() in the index, no guard)."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 4, 2]),
             helper.make_node("Sigmoid", ["t"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 2, 85, 3, 52])], ["y"])
    loops = tensorc.inspect(model, stage="loops")
    lanes = tensorc.Target.host().vector_lanes("float32")
    assert f"vectorized, 0, {lanes})" in loops and "min(" in loops and "if (" not in loops
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-5, 1e-6)


@pytest.mark.parametrize("shape,perm,dtype", [
    ((1, 2, 85, 12, 20), [0, 1, 3, 4, 2], "float32"),   # a detector head: odd both ways
    ((1, 64, 9, 19), [0, 2, 3, 1], "float32"),          # NCHW -> NHWC
    ((1, 24, 40, 17), [0, 3, 1, 2], "float32"),         # NHWC -> NCHW
    ((37, 300), [1, 0], "float32"),                     # 2-D: the tiles' rows in parallel
    ((2, 16, 24, 40), [0, 2, 3, 1], "int32"),
    ((1, 16, 10, 12), [0, 2, 3, 1], "int64"),           # not 4-byte: stores scattered
    ((1, 40, 6, 36), [0, 2, 3, 1], "float16"),
])
def test_a_transposing_kernel_stores_whole_tiles(shape, perm, dtype):
    """Transposes whose two axes are each a vector long run in square tiles: a vector along
    the input's contiguous axis per element of the output's innermost one, transposed in
    registers and stored as whole vectors; each against numpy, for every thread count."""
    nodes = [helper.make_node("Transpose", ["x"], ["y"], perm=perm)]
    model = make_model(nodes, [tensor_info("x", dtype, list(shape))], ["y"])
    lanes = tensorc.Target.host().vector_lanes(dtype)
    loops = tensorc.inspect(model, stage="loops")
    assert f"unrolled, 0, {lanes})" in loops and f"vectorized, 0, {lanes})" in loops, loops
    x = (RNG.standard_normal(shape) * 100).astype(dtype)
    module = tensorc.compile(model)
    for threads in (1, 2):
        module.num_threads = threads
        np.testing.assert_array_equal(module.run({"x": x})["y"], np.transpose(x, perm))


def test_a_transposed_tile_is_stored_from_registers():
    """Both axes whole vectors (NCHW -> NHWC, 16 channels, width 40): no element is stored
    on its own; the tiles are transposed with shuffles and stored as vectors."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("Sigmoid", ["t"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 16, 24, 40])], ["y"])
    ir_text = tensorc.inspect(model, stage="llvm")
    assert "shufflevector" in ir_text
    assert not re.search(r"store float ", ir_text), "elements stored one by one"
    assert re.search(r"store <\d+ x float>", ir_text)
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-5, 1e-6)


def test_an_elementwise_kernel_with_no_vector_divisor_runs_whole_registers():
    """Rows of 150 (25 x 6): whole registers, the last one overlapping the one before it,
    rather than 6-lane vectors (a conv's epilogue on a 150-wide map ran 2x slower so)."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 5, 150])], ["y"])
    loops = tensorc.inspect(model, stage="loops")
    lanes = tensorc.Target.host().vector_lanes("float32")
    assert f"vectorized, 0, {lanes})" in loops and "min(" in loops and "if (" not in loops
    feeds = random_feeds(model)
    assert_close(tensorc.compile(model).run(feeds), ort_run(model, feeds), 1e-5, 1e-6)

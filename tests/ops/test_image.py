"""col2im over a run-time image (ops/image.py), as a transposed conv over symbolic H and W
lowers to it: its own schedule (rows of constant vectors, the taps inside each vector), and
the range tests that the dims' arithmetic proves hold left out of the kernel. Compiled once
with the dims symbolic and run against onnxruntime at 1 and odd sizes."""
from __future__ import annotations

import re

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorc


def _transposed_conv(kernel: int, **attrs):
    rng = np.random.default_rng(kernel)
    w = numpy_helper.from_array(
        rng.standard_normal((16, 8, kernel, kernel)).astype(np.float32) / 4, "w")
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], **attrs),
         helper.make_node("Relu", ["c"], ["y"])], "up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _col2im_kernel(model) -> str:
    loops = tensorc.inspect(model, stage="loops")
    start = loops.index("func k1_fused_col2im_relu(")
    end = loops.find("\nfunc ", start + 1)
    return loops[start:end if end >= 0 else None]


def test_a_two_by_two_upsampling_reads_its_blocks_without_tests():
    """Kernel 2 at stride 2: every output pixel reads one block, always in range (the
    image is twice the input): no select and no clamp in the kernel, its rows in vectors
    (the generic schedule ran each pixel alone, tests and all: 1.9x the static kernel)."""
    kernel = _col2im_kernel(_transposed_conv(2))
    reads = re.findall(r"in0\[[^\]]*\]", kernel)
    assert reads and not any("min(" in r or "max(" in r for r in reads), kernel
    assert "select(" not in kernel, kernel
    assert "for (i3: vectorized, 0, 8)" in kernel, kernel


@pytest.mark.parametrize("kernel,attrs", [(2, {}), (3, {"pads": [1, 1, 1, 1],
                                                        "output_padding": [1, 1]}),
                                          (4, {"pads": [1, 1, 1, 1]})])
def test_symbolic_transposed_conv_matches_onnxruntime(kernel, attrs):
    model = _transposed_conv(kernel, **attrs)
    mod = tensorc.compile(model)
    session = onnxruntime.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(2)
    for n, h, w in [(1, 1, 1), (2, 1, 4), (1, 3, 5), (3, 4, 7), (2, 9, 2), (1, 6, 13)]:
        x = rng.standard_normal((n, 16, h, w)).astype(np.float32)
        for threads in (1, 2):
            mod.num_threads = threads
            np.testing.assert_allclose(mod.run({"x": x})["y"], session.run(None, {"x": x})[0],
                                       rtol=1e-4, atol=1e-5,
                                       err_msg=f"{n, h, w} on {threads} threads")


def test_col2im_over_a_symbolic_batch_keeps_its_range_tests():
    """ONNX Col2Im of a constant image (5 x 7, blocks 2 x 3, stride 1 x 2, pads) over a
    symbolic batch: the symbolic schedule, with the pads' range tests kept."""
    image = numpy_helper.from_array(np.array([5, 7], np.int64), "image")
    block = numpy_helper.from_array(np.array([2, 3], np.int64), "block")
    columns = (5 + 2 - 2 + 1) * ((7 + 1 - 3) // 2 + 1)
    graph = helper.make_graph(
        [helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=[1, 2],
                          pads=[1, 0, 1, 1])], "col2im",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 18, columns])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [image, block])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    mod = tensorc.compile(model)
    session = onnxruntime.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(4)
    for n in (1, 2, 5, 9):
        x = rng.standard_normal((n, 18, columns)).astype(np.float32)
        np.testing.assert_allclose(mod.run({"x": x})["y"], session.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-5, err_msg=f"batch {n}")

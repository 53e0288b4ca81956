"""TopK with k given at run time: k is a data-dependent dim written by a value_dim kernel,
checked against the axis' length; compiled models against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import tensorc
from tensorc.errors import KernelRuntimeError
from tests.helpers import assert_close, make_model, ort_run, tensor_info


def _topk_model(shape, largest=1, axis=-1):
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest),
             helper.make_node("Relu", ["v"], ["r"])]
    return make_model(nodes, [tensor_info("x", "float32", shape),
                              tensor_info("k", "int64", (1,))],
                      [tensor_info("v", "float32", None), tensor_info("i", "int64", None),
                       tensor_info("r", "float32", None)], opset=13)


@pytest.mark.parametrize("largest,axis", [(1, -1), (0, 0)])
def test_runtime_k_matches_onnxruntime(largest, axis):
    model = _topk_model((6, 9), largest, axis)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    length = x.shape[axis]
    for k in (3, 0, length, 1):
        feeds = {"x": x, "k": np.array([k], np.int64)}
        assert_close(module.run(feeds), ort_run(model, feeds))


def test_runtime_k_over_a_symbolic_axis():
    model = _topk_model((2, "n"))
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(1)
    for n, k in ((5, 2), (17, 17), (1, 1), (30, 4)):
        feeds = {"x": rng.standard_normal((2, n)).astype(np.float32),
                 "k": np.array([k], np.int64)}
        assert_close(module.run(feeds), ort_run(model, feeds))


@pytest.mark.parametrize("k", [10, -1])
def test_k_outside_the_axis_is_refused(k):
    module = tensorc.compile(_topk_model((3, 9)), cache=False)
    x = np.zeros((3, 9), np.float32)
    with pytest.raises(KernelRuntimeError, match=rf"given the size {k}, outside \[0, 9\]"):
        module.run({"x": x, "k": np.array([k], np.int64)})
    # the module still runs a good k afterwards
    assert module.run({"x": x, "k": np.array([2], np.int64)})["v"].shape == (3, 2)

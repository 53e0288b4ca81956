"""Whole models at several thread counts: the parallel loops' dynamic chunks give the same
answer at 1, 2, 3 and 8 threads (bit for bit: each element is computed by one thread, the
same way), and it agrees with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, make_model, ort_run, tensor_info
from onnx import helper

import models
import tensorc
from tensorc.reference import random_inputs

THREAD_COUNTS = (1, 2, 3, 8)


def conv_block_model():
    """Conv 3x3 (16 -> 32) + Relu, MaxPool, then a Gemm-like MatMul + Add + Tanh: big enough
    that every kernel's parallel loop is split into chunks."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1,
        "bias": rng.standard_normal(32).astype(np.float32),
        "shape": np.array([1, 32 * 28 * 28 // 56, 56], np.int64),
        "m": rng.standard_normal((56, 96)).astype(np.float32) * 0.1,
        "madd": rng.standard_normal(96).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "bias"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "m"], ["mm"]),
        helper.make_node("Add", ["mm", "madd"], ["a"]),
        helper.make_node("Tanh", ["a"], ["y"]),
    ]
    return make_model(nodes, [tensor_info("x", "float32", [1, 16, 56, 56])], ["y"],
                      initializers=weights)


def _runs_at_every_count(module, feeds):
    results = []
    for threads in THREAD_COUNTS:
        module.num_threads = threads
        results.append(module.run(feeds))
    for got in results[1:]:
        for name, value in got.items():
            np.testing.assert_array_equal(value, results[0][name], err_msg=name)
    return results[0]


def test_conv_block_at_every_thread_count():
    model = conv_block_model()
    module = tensorc.compile(model)
    x = np.random.default_rng(1).standard_normal((1, 16, 56, 56)).astype(np.float32)
    got = _runs_at_every_count(module, {"x": x})
    assert_close(got, ort_run(model, {"x": x}), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["bert", "lenet5"])
def test_model_at_every_thread_count(name):
    model = models.load(name)
    module = tensorc.compile(model, input_shapes=models.input_shapes(name))
    feeds = models.example_inputs(name) or random_inputs(module.inputs, seed=0)
    got = _runs_at_every_count(module, feeds)
    assert_close(got, ort_run(model, feeds), rtol=1e-3, atol=1e-3)

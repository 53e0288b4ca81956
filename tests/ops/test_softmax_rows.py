"""The softmax row schedule's knobs: several rows per step of the row loop (their
reductions interleaved) and the exp pass's prefetch of the next rows. Every config matches
numpy, including rows of more than two dims and rows that are not whole vectors; the default
groups short rows."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorc
from tensorc.autotune.task import extract_tasks
from tensorc.runtime.kernel import build_kernel


def _model(op: str, shape: tuple[int, ...]):
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], axis=-1)], "rows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _numpy(op: str, x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    log_sum = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return shifted - log_sum if op == "LogSoftmax" else np.exp(shifted - log_sum)


def _task(op: str, shape: tuple[int, ...]):
    (task,) = extract_tasks(_model(op, shape), measure=False)
    return task


@pytest.mark.parametrize("op,shape", [
    ("Softmax", (8, 64)),
    ("LogSoftmax", (8, 64)),
    ("Softmax", (2, 3, 4, 48)),     # attention-shaped: the group splits the last row axis
    ("LogSoftmax", (6, 1000)),      # rows that are not whole steps: no prefetch
    ("Softmax", (6, 1000)),
])
def test_every_row_config_matches_numpy(op, shape):
    task = _task(op, shape)
    space = task.space()
    x = np.random.default_rng(5).uniform(-6, 6, shape).astype(np.float32)
    x.reshape(-1, shape[-1])[1, 3] = -1e4       # an exp that underflows to zero
    want = _numpy(op, x)
    configs = list(space.configs())
    groups = {c["row_group"] for c in configs}
    assert groups == {g for g in (1, 2, 4) if shape[-2] % g == 0}
    for config in configs:
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # no stage recomputed per group of rows
            func = task.schedule(config)
        out = np.full(shape, np.nan, np.float32)
        build_kernel(func)(x, out, num_threads=1)
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=1e-6, err_msg=str(config))


def test_short_rows_take_groups_and_prefetch_the_next_ones():
    default = _task("Softmax", (64, 128)).space().default()
    assert default["row_group"] == 4 and default["prefetch"]
    assert _task("Softmax", (64, 1024)).space().default()["row_group"] == 1
    func = _task("LogSoftmax", (64, 128)).schedule(None)
    text = str(func)
    # the partial maxima of the group's rows are updated in turn at each step along them
    assert "for (rf.k: serial, 0, 8)\n      for (i0: unrolled, 0, 4)" in text
    # the exp pass (the sum's partial results) asks for the next group's rows: 4 x 128 on
    assert "prefetch in0[" in text and "+ 512]" in text


@pytest.mark.parametrize("op,shape", [("Softmax", (2, 8, 16)), ("LogSoftmax", (2, 8, 16)),
                                      ("Softmax", (3, 40)), ("LogSoftmax", (5, 24))])
def test_a_producer_fused_before_the_rows_is_looked_through_for_the_prefetch(op, shape):
    # Relu -> Softmax: the Relu is inlined into the exp pass, which reads x; the prefetch of
    # the next rows asked for the Relu's tensor, and lowering refused the kernel
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r"], ["y"], axis=-1)],
        "relu_rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=8)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    module = tensorc.compile(model, cache=False)
    for threads in (1, 2):
        module.num_threads = threads
        np.testing.assert_allclose(module.run({"x": x})["y"], _numpy(op, np.maximum(x, 0)),
                                   rtol=1e-5, atol=1e-6)

"""Half-precision sums accumulate in float32 and round once (as numpy and onnxruntime do):
a long float16 sum accumulated in float16 would drift far beyond one rounding."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import tensorc


def run(node, inputs: dict[str, np.ndarray], opset: int = 18) -> np.ndarray:
    infos = [tensor_info(n, str(a.dtype), list(a.shape)) for n, a in inputs.items()]
    return tensorc.compile(make_model([node], infos, ["y"], opset=opset)).run(inputs)["y"]


def assert_one_rounding(got: np.ndarray, exact: np.ndarray) -> None:
    """``got`` is ``exact`` (float64) rounded once to float16: within half an ulp, +1 ulp
    slack for float32 accumulation."""
    want = exact.astype(np.float16)
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    assert got.dtype == np.float16
    assert np.all(np.abs(got.astype(np.float64) - exact) <= 1.5 * ulp + 1e-12)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_matmul(rng) -> None:
    a = rng.random((4, 2048)).astype(np.float16)
    b = rng.random((2048, 8)).astype(np.float16)
    got = run(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a, "b": b})
    assert_one_rounding(got, a.astype(np.float64) @ b.astype(np.float64))


def test_reduce_sum(rng) -> None:
    # over the leading axis each output is one long sequential sum
    x = rng.random((4096, 3)).astype(np.float16)
    axes = helper.make_tensor("axes", 7, [1], [0])
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    model = make_model([node], [tensor_info("x", "float16", [4096, 3])], ["y"], opset=18)
    model.graph.initializer.append(axes)
    got = tensorc.compile(model).run({"x": x})["y"]
    assert_one_rounding(got, x.astype(np.float64).sum(axis=0))


def test_softmax(rng) -> None:
    x = (rng.standard_normal((2, 3000)) * 3).astype(np.float16)
    got = run(helper.make_node("Softmax", ["x"], ["y"], axis=-1), {"x": x})
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    assert_one_rounding(got, e / e.sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("stride", [1, 2])    # the flattened and the row-wise conv
def test_conv(rng, stride: int) -> None:
    x = rng.random((1, 256, 6, 6)).astype(np.float16)
    w = rng.random((16, 256, 3, 3)).astype(np.float16)
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3],
                            strides=[stride, stride])
    got = run(node, {"x": x, "w": w})
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    out = (6 - 3) // stride + 1
    exact = np.zeros((1, 16, out, out))
    for i in range(3):
        for j in range(3):
            span = stride * (out - 1) + 1
            patch = xd[:, :, i:i + span:stride, j:j + span:stride]
            exact += np.einsum("nchw,fc->nfhw", patch, wd[:, :, i, j])
    assert_one_rounding(got, exact)

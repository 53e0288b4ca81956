"""Small models and tasks for the autotuner's tests."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.helpers import make_model, tensor_info


def conv_model() -> "onnx.ModelProto":  # noqa: F821
    """x -> conv 3x3 -> relu -> conv 3x3 (same shapes: one task of weight 2) -> softmax."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 8, 3, 3)).astype("float32") * 0.2
    w2 = rng.standard_normal((8, 8, 3, 3)).astype("float32") * 0.2
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Softmax", ["r2"], ["y"], axis=-1),
    ]
    return make_model(nodes, [tensor_info("x", "float32", (1, 8, 12, 12))],
                      [tensor_info("y", "float32", (1, 8, 12, 12))],
                      initializers={"w1": w1, "w2": w2}, name="tiny_conv")


def single_conv_model(channels: int = 5, filters: int = 8,
                      size: int = 9) -> "onnx.ModelProto":  # noqa: F821
    """x -> conv 3x3 -> relu: one conv, alone in its chain (never blocked)."""
    w = np.random.default_rng(2).standard_normal((filters, channels, 3, 3)).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, [tensor_info("x", "float32", (1, channels, size, size))],
                      [tensor_info("y", "float32", (1, filters, size, size))],
                      initializers={"w": w * 0.2}, name="single_conv")


def matmul_model(m: int = 8, k: int = 32, n: int = 24) -> "onnx.ModelProto":  # noqa: F821
    rng = np.random.default_rng(1)
    b = rng.standard_normal((k, n)).astype("float32")
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    return make_model(nodes, [tensor_info("a", "float32", (m, k))],
                      [tensor_info("y", "float32", (m, n))], initializers={"b": b},
                      name="tiny_matmul")


def softmax_model(rows: int = 4, columns: int = 64) -> "onnx.ModelProto":  # noqa: F821
    """Softmax over rows longer than any vector (so its row knobs change the schedule)."""
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    return make_model(nodes, [tensor_info("x", "float32", (rows, columns))],
                      [tensor_info("y", "float32", (rows, columns))], name="tiny_softmax")


@pytest.fixture(scope="session")
def tiny_conv(tmp_path_factory):
    import onnx
    path = tmp_path_factory.mktemp("models") / "tiny_conv.onnx"
    onnx.save(conv_model(), str(path))
    return path


@pytest.fixture(scope="session")
def tiny_matmul(tmp_path_factory):
    import onnx
    path = tmp_path_factory.mktemp("models") / "tiny_matmul.onnx"
    onnx.save(matmul_model(), str(path))
    return path


@pytest.fixture(scope="session")
def tiny_softmax(tmp_path_factory):
    import onnx
    path = tmp_path_factory.mktemp("models") / "tiny_softmax.onnx"
    onnx.save(softmax_model(), str(path))
    return path

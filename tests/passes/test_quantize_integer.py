"""MatMulInteger on the int8 kernel (passes/graph/quantize_integer.py): DynamicQuantizeLinear
-> MatMulInteger by constant int8 weights runs as ``qmatmul`` less a run-time zero-point
correction, and its int32 result is the exact integer product (no byte pair saturates:
uint8 activations are read as int8 on AVX2). onnxruntime's MatMulInteger is not exact on this
machine: with full-range weights its u8 x s8 pairs saturate (its int32 output then differs
from the exact product by up to ~2e4), so the exact product is the reference."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model, ort_run, tensor_info
from onnx import helper

import tensorc


@pytest.mark.parametrize("shape, n, bound", [((3, 64), 24, 127), ((3, 37), 24, 127),
                                             ((1, 32, 256), 64, 63), ((2, 8), 5, 127)])
def test_matmul_integer_is_the_exact_integer_product(shape, n, bound):
    rng = np.random.default_rng(0)
    w = rng.integers(-bound, bound + 1, (shape[-1], n)).astype(np.int8)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", list(shape))], ["y"],
                       initializers={"w": w})
    assert "= qmatmul(" in tensorc.inspect(model, "graph")
    x = rng.standard_normal(shape).astype(np.float32)
    got = tensorc.compile(model).run({"x": x})["y"]
    quantized = ort_run(make_model(nodes[:1], [tensor_info("x", "float32", list(shape))],
                                   ["xq", "xz"]), {"x": x})
    exact = (quantized["xq"].astype(np.int64) - int(quantized["xz"])) @ w.astype(np.int64)
    np.testing.assert_array_equal(got, exact)

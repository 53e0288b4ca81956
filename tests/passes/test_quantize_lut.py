"""The lookup-table pass (passes/graph/quantize_lut.py): DequantizeLinear -> Sigmoid / Tanh /
Clip ... -> QuantizeLinear over 8-bit tensors becomes a gather from a 256-entry table that
equals the float chain on every input value; chains whose pieces are read elsewhere stay."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import tensorc
from tensorc.frontend.model import import_model
from tensorc.passes.graph import quantize_lut


def _unary_model(dtype: str, ops: list[str], extra_output: bool = False):
    zero = np.array(3 if dtype == "int8" else 120, dtype)
    out_zero = np.array(-100 if dtype == "int8" else 30, dtype)
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["f0"])]
    for k, op in enumerate(ops):
        nodes.append(helper.make_node(op, [f"f{k}"], [f"f{k + 1}"]))
    nodes.append(helper.make_node("QuantizeLinear", [f"f{len(ops)}", "ys", "yz"], ["y"]))
    outputs = ["y"] + (["f1"] if extra_output else [])
    return make_model(nodes, [tensor_info("x", dtype, [2, 300])], outputs, initializers={
        "s": np.float32(0.05), "z": zero, "ys": np.float32(1 / 200), "yz": out_zero})


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("ops", [["Sigmoid"], ["Tanh", "Relu"]])
def test_unary_chain_becomes_a_table_equal_to_the_float_chain(dtype, ops):
    model = _unary_model(dtype, ops)
    _, graph = import_model(model, None)
    after = quantize_lut(graph)
    assert [n.op for n in after.nodes if n.op not in ("cast", "add")] == ["gather"]
    x = np.arange(600).reshape(2, 300).astype(np.int64)
    x = ((x % 256) - (128 if dtype == "int8" else 0)).astype(dtype)     # every value
    got = tensorc.compile(model).run({"x": x})["y"]
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"]
                                        ).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)


def test_a_chain_read_in_the_middle_stays():
    _, graph = import_model(_unary_model("uint8", ["Sigmoid"], extra_output=True), None)
    assert quantize_lut(graph) is graph

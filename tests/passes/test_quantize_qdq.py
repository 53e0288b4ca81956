"""The QDQ pass (passes/graph/quantize_qdq.py): which DequantizeLinear -> Conv / MatMul / Gemm
-> QuantizeLinear chains become int8 kernels, what they become, and what stays on the float
path (depthwise and grouped convs, a product read twice), with every DequantizeLinear of a
constant folded back to float where the pass does not use it."""

from __future__ import annotations

import numpy as np
import onnxruntime
from helpers import make_model, tensor_info
from helpers_int8 import QdqCase
from onnx import helper

import tensorc
from tensorc.frontend.model import import_model
from tensorc.passes.graph import quantize_qdq
from tensorc.passes.graph.fuse import fuse
from tensorc.target import Target

HOST = Target.host()


def _ops(graph) -> list[str]:
    return [node.op for node in graph.nodes]


def _optimized(model):
    from tensorc.compiler.pipeline import optimize_graph
    _, graph = import_model(model, None)
    with graph.dims.active():
        return optimize_graph(graph, HOST)


def test_a_conv_chain_becomes_patches_an_int8_gemm_and_its_requantization():
    """Before: cast/sub/mul (DQ of x), dequantize (w, bias), conv, add, div/round/add/clip/cast
    (Q). After: qconv_patches, qconv, then the requantization as elementwise ops, which fusion
    makes qconv's epilogue: one kernel from the int32 accumulator to the uint8 output."""
    _, graph = import_model(QdqCase("conv", "uint8").model(), None)
    assert "dequantize" in _ops(graph) and "conv" in _ops(graph)
    after = quantize_qdq(graph, HOST)
    assert _ops(after) == ["qconv_patches", "reshape", "qconv", "add", "cast", "mul", "round",
                           "add", "clip", "cast", "reshape"]
    groups = [g for g in fuse(after) if not g.view]
    assert [[n.op for n in g.nodes] for g in groups] == [
        ["qconv_patches"], ["qconv", "add", "cast", "mul", "round", "add", "clip", "cast"]]


def test_a_float_graph_is_left_as_it_is():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", [2, 3])], ["y"])
    _, graph = import_model(model, None)
    assert quantize_qdq(graph, HOST) is graph


def test_depthwise_and_grouped_convs_stay_float_and_their_weights_fold():
    """Only dense convs (one group) run in integers so far: a depthwise conv keeps its float
    conv, its weights' DequantizeLinear folded into a float constant."""
    case = QdqCase("conv", "uint8", x_shape=(1, 8, 6, 6), channels=8)
    model = case.model()
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    conv.attribute.append(helper.make_attribute("group", 8))
    weights = next(t for t in model.graph.initializer if t.name == "wq")
    weights.dims[1] = 1
    del weights.int32_data[:]
    weights.raw_data = case.arrays["wq"][:, :1].tobytes()
    ops = _ops(_optimized(model))
    assert "conv" in ops and "qconv" not in ops and "dequantize" not in ops
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    want = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"]
                                        ).run(None, {"x": case.x})[0]
    got = tensorc.compile(model).run({"x": case.x})["y"]
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_a_product_read_twice_stays_float():
    """The float conv's output is also a graph output: the chain is not the product's only
    reader, so the conv stays float (and its output is still computed)."""
    model = QdqCase("conv", "uint8").model()
    model.graph.output.append(helper.make_empty_tensor_value_info("yf"))
    ops = _ops(_optimized(model))
    assert "qconv" not in ops and "dequantize" not in ops


def test_uint8_weights_with_zero_point_128_run_as_int8():
    """uint8 weights whose zero point is 128 fit int8 once it is subtracted."""
    case = QdqCase("matmul", "uint8", x_shape=(4, 24), channels=8, weight_bound=63)
    model = case.model()
    for tensor in model.graph.initializer:
        if tensor.name == "wq":
            tensor.data_type = 2    # uint8
            tensor.raw_data = (case.arrays["wq"].astype(np.int16) + 128).astype(
                np.uint8).tobytes()
        if tensor.name == "wz":
            tensor.data_type = 2
            tensor.raw_data = np.full(8, 128, np.uint8).tobytes()
    assert "qmatmul" in _ops(_optimized(model))
    np.testing.assert_array_equal(tensorc.compile(model).run({"x": case.x})["y"],
                                  case.reference(saturate=False))


def test_cuda_targets_keep_the_float_path():
    """The int8 kernels are CPU kernels: for CUDA the pass only folds the weights back."""
    graph = tensorc.inspect(QdqCase("conv", "uint8").model(), "graph", target="cuda")
    assert "= conv(" in graph and "qconv" not in graph and "dequantize" not in graph

"""int8 models as onnxruntime's quantizer writes them (models/quantized.py), compiled by tensorc
and checked against onnxruntime.

- Every dense conv and the Gemm of the QDQ CNN run as int8 kernels.
- Each model's error against its fp32 model is at most onnxruntime int8's error + 1e-2 of the
  output's range (the issue's accuracy bar).
- The QDQ CNNs agree with onnxruntime within one step of the output's scale (measured: equal
  to 1e-7), each against the session whose integer arithmetic is tensorc's on this machine
  (AVX2, no VNNI). uint8 activations: onnxruntime's optimized session, whose QLinearConv
  saturates the same u8 x s8 byte pairs to int16 (tensorc orders a conv's k channels
  innermost as it does). int8 activations: tensorc's s8 x s8 sums are exact, as onnxruntime's
  QDQ is with its graph optimizations off (dequantize, float op, quantize, which
  requantizes as tensorc does: float32 multiplier, round half to even); its optimized
  session differs from that by up to 0.15 (25 output steps) here, so it is held to the
  accuracy bar only.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

import tensorc
from models import quantized

SIZE = 48


def _session(model: onnx.ModelProto, optimized: bool = True):
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    if not optimized:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


CASES = {
    "cnn static s8": (lambda: quantized.cnn(SIZE), {"input": (1, 3, SIZE, SIZE)},
                      dict(activations="int8")),
    "cnn static u8": (lambda: quantized.cnn(SIZE), {"input": (1, 3, SIZE, SIZE)},
                      dict(activations="uint8")),
    "transformer static s8": (lambda: quantized.transformer(32, 64, 2),
                              {"tokens": (1, 32, 64)}, dict(activations="int8")),
    "transformer dynamic": (lambda: quantized.transformer(32, 64, 2),
                            {"tokens": (1, 32, 64)}, None),
}


def _build(name: str):
    build, shapes, static = CASES[name]
    fp32 = build()
    int8 = quantized.quantize_static(fp32, shapes, **static) if static is not None else \
        quantized.quantize_dynamic(fp32)
    return fp32, int8, quantized.random_inputs(shapes, 5)


@pytest.mark.parametrize("name", list(CASES))
def test_int8_error_within_onnxruntime_int8_error(name):
    fp32, int8, feeds = _build(name)
    reference = _session(fp32).run(None, feeds)[0]
    span = float(reference.max() - reference.min())
    got = next(iter(tensorc.compile(int8).run(feeds).values()))
    ort = _session(int8).run(None, feeds)[0]
    tc_error = float(np.abs(got - reference).max())
    ort_error = float(np.abs(ort - reference).max())
    assert tc_error <= ort_error + 1e-2 * span, (tc_error, ort_error, span)


@pytest.mark.parametrize("name", ["cnn static s8", "cnn static u8"])
def test_qdq_cnn_runs_its_convs_in_integers_within_one_step(name):
    fp32, int8, feeds = _build(name)
    graph = tensorc.inspect(int8, "graph")
    dense_convs = sum(1 for n in int8.graph.node if n.op_type == "Conv")
    assert graph.count("= qconv(") == dense_convs
    assert graph.count("= qmatmul(") == 1 and "= conv(" not in graph
    got = next(iter(tensorc.compile(int8).run(feeds).values()))
    want = _session(int8, optimized=name.endswith("u8")).run(None, feeds)[0]
    last = int8.graph.node[-1]
    assert last.op_type == "DequantizeLinear"
    step = float(next(numpy_helper.to_array(t) for t in int8.graph.initializer
                      if t.name == last.input[1]))
    assert np.abs(got - want).max() <= step * 1.001


def _symbolic_rows(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its inputs' and outputs' first two dims named batch and seq."""
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        for k, name in enumerate(("batch", "seq")):
            dims[k].ClearField("dim_value")
            dims[k].dim_param = name
    return model


@pytest.mark.parametrize("quantizer", ["dynamic", "static s8"])
def test_an_int8_transformer_over_symbolic_batch_and_sequence_runs_in_integers(quantizer):
    # compiled once with [batch, seq] symbolic: its MatMulIntegers (quantize_dynamic) or its
    # QDQ weight matmuls (quantize_static) on the int8 GEMM, and at every shape within the
    # accuracy bar of onnxruntime int8's error against fp32
    fp32 = quantized.transformer(16, 64, 2)
    if quantizer == "dynamic":
        int8 = quantized.quantize_dynamic(_symbolic_rows(fp32))
        integer_matmuls = sum(1 for n in int8.graph.node if n.op_type == "MatMulInteger")
    else:
        int8 = _symbolic_rows(quantized.quantize_static(fp32, {"tokens": (1, 16, 64)}))
        fp32 = _symbolic_rows(fp32)
        # the weight matmuls (a DequantizeLinear of a constant as the second operand)
        weights = {t.name for t in int8.graph.initializer}
        dequantized = {n.output[0] for n in int8.graph.node
                       if n.op_type == "DequantizeLinear" and n.input[0] in weights}
        integer_matmuls = sum(1 for n in int8.graph.node
                              if n.op_type == "MatMul" and n.input[1] in dequantized)
    graph = tensorc.inspect(int8, "graph")
    assert graph.count("= qmatmul(") == integer_matmuls > 0
    module = tensorc.compile(int8)
    fp32_session, int8_session = _session(fp32), _session(int8)
    for k, (batch, seq) in enumerate([(1, 1), (2, 7), (1, 33), (3, 5)]):
        feeds = quantized.random_inputs({"tokens": (batch, seq, 64)}, k)
        module.num_threads = 1 + k % 2
        reference = fp32_session.run(None, feeds)[0]
        span = float(reference.max() - reference.min())
        got = next(iter(module.run(feeds).values()))
        ort_error = float(np.abs(int8_session.run(None, feeds)[0] - reference).max())
        tc_error = float(np.abs(got - reference).max())
        assert got.shape == reference.shape
        assert tc_error <= ort_error + 1e-2 * span, (batch, seq, tc_error, ort_error, span)

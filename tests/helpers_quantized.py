"""Small int8 models for the quantized-model tolerance: one built by hand (QDQ around convs)
and LeNet-5 quantized by onnxruntime's own tool, as users make them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import models


def qdq_conv_model(seed: int = 0, layers: int = 2, channels: int = 8,
                   size: int = 12) -> onnx.ModelProto:
    """x -> QDQ -> [Conv (int8 weights, int32 bias) -> Relu -> QDQ] x layers ->
    GlobalAveragePool -> Flatten -> QDQ (scale 0.02, node 'out_dequantize') -> Identity
    -> scores [4, channels]."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array) -> str:
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def dequantize(q: str, scale: float, zero, out: str, name: str = "") -> None:
        nodes.append(helper.make_node("DequantizeLinear", [q, const(f"{out}_s", np.float32(
            scale)), const(f"{out}_z", zero)], [out], name=name or None))

    def qdq(x: str, scale: float, tag: str) -> str:
        s, z = const(f"{tag}_qs", np.float32(scale)), const(f"{tag}_qz", np.int8(0))
        nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [f"{tag}_q"]))
        dequantize(f"{tag}_q", scale, np.int8(0), f"{tag}_dq", f"{tag}_dequantize")
        return f"{tag}_dq"

    x, in_scale, c = qdq("x", 4 / 127, "in"), 4 / 127, 3
    for i in range(layers):
        w = rng.standard_normal((channels, c, 3, 3)).astype(np.float32) * 0.3
        w_scale = float(np.abs(w).max() / 127)
        dequantize(const(f"w{i}_q", np.clip(np.round(w / w_scale), -127, 127).astype(np.int8)),
                   w_scale, np.int8(0), f"w{i}")
        b_scale = in_scale * w_scale
        dequantize(const(f"b{i}_q", np.round(rng.standard_normal(channels) * 0.1 / b_scale)
                         .astype(np.int32)), b_scale, np.int32(0), f"b{i}")
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"conv{i}"],
                                      pads=[1] * 4))
        nodes.append(helper.make_node("Relu", [f"conv{i}"], [f"relu{i}"]))
        in_scale = 0.05 * (i + 1)
        x, c = qdq(f"relu{i}", in_scale, f"a{i}"), channels
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"]))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"]))
    nodes.append(helper.make_node("Identity", [qdq("flat", 0.02, "out")], ["scores"]))
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [4, 3, size, size])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [4, channels])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def quantized_lenet(path: Path) -> Path:
    """LeNet-5 quantized to int8 QDQ by onnxruntime.quantization.quantize_static (calibrated
    on 8 seeded random batches), written to ``path``: onnxruntime runs its convs and matmuls
    in integer arithmetic and rounds its logits one step away from tensorc's."""
    from onnxruntime.quantization import (   # optional dependency: onnxruntime's quantizer
        CalibrationDataReader, QuantFormat, QuantType, quantize_static,
    )

    class Batches(CalibrationDataReader):
        def __init__(self) -> None:
            self.count = 0

        def get_next(self) -> dict | None:
            if self.count == 8:
                return None
            self.count += 1
            rng = np.random.default_rng(self.count)
            return {"x": rng.standard_normal((1, 1, 28, 28)).astype(np.float32)}

    quantize_static(str(models.path("lenet5")), str(path), Batches(),
                    quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    return path

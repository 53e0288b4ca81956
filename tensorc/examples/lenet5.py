"""LeNet-5 for 28x28 digits: two Conv+Relu+Pool stages, then three Gemm layers.

Input "x" [1, 1, 28, 28], output "logits" [1, 10], opset 17.
"""

from __future__ import annotations


import numpy as np
import onnx

from tensorc.examples.builder import GraphBuilder, float_input

NAME = "lenet5"
INPUT_SHAPES: dict[str, tuple[int, ...]] | None = None


def _conv(b: GraphBuilder, x: str, in_ch: int, out_ch: int, pad: int) -> str:
    weight = b.he_normal((out_ch, in_ch, 5, 5), fan_in=in_ch * 25)
    bias = (b.rng.standard_normal(out_ch) * 0.01).astype(np.float32)
    return b.node(
        "Conv",
        [x, b.constant("conv_weight", weight), b.constant("conv_bias", bias)],
        kernel_shape=[5, 5],
        pads=[pad] * 4,
    )


def build() -> onnx.ModelProto:
    """Build LeNet-5 with seeded random weights.

    >>> [n.op_type for n in build().graph.node][:3]
    ['Conv', 'Relu', 'MaxPool']
    """
    b = GraphBuilder(seed=5)
    h = b.node("Relu", [_conv(b, "x", 1, 6, pad=2)])  # 6x28x28
    h = b.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 6x14x14
    h = b.node("Relu", [_conv(b, h, 6, 16, pad=0)])  # 16x10x10
    h = b.node("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 16x5x5
    h = b.node("Flatten", [h], axis=1)  # 400
    h = b.node("Relu", [b.gemm(h, 400, 120)])
    h = b.node("Relu", [b.gemm(h, 120, 84)])
    b.gemm(h, 84, 10, gain=1.0, output="logits")
    return b.model(NAME, [float_input("x", [1, 1, 28, 28])], [float_input("logits", [1, 10])])

"""A MobileNetV2-style CNN at 224x224: inverted residual blocks with depthwise convolutions.

Stem Conv 3x3/2 (32) + BatchNormalization + ReLU6 (Clip 0..6 with min/max inputs, as opset
11+ exports write it); then inverted residual blocks: 1x1 expansion (x6) + BN + ReLU6,
depthwise 3x3 (group = channels, stride 1 or 2) + BN + ReLU6, 1x1 projection + BN, and a
residual Add when the block keeps its shape; a 1x1 Conv to 1280 + BN + ReLU6,
GlobalAveragePool, Flatten, Gemm 1000. A shortened stage list keeps compile time small.
Input "input" [1, 3, 224, 224], output "logits" [1, 1000]. Opset 17, random weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, float_input

NAME = "mobilenetv2"
INPUT_SHAPES = {"input": (1, 3, 224, 224)}
# (expansion, output channels, blocks, first stride), as MobileNetV2's table, shortened
STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2), (6, 96, 1, 1),
          (6, 160, 2, 2), (6, 320, 1, 1))


class _MobileNetBuilder(GraphBuilder):
    def conv_bn(self, x: str, in_ch: int, out_ch: int, kernel: int, stride: int = 1,
                group: int = 1, relu6: bool = True) -> str:
        fan_in = in_ch // group * kernel * kernel
        w = self.constant("conv_weight", self.he_normal((out_ch, in_ch // group, kernel,
                                                         kernel), fan_in))
        pad = kernel // 2
        y = self.node("Conv", [x, w], kernel_shape=[kernel, kernel], strides=[stride, stride],
                      pads=[pad] * 4, group=group)
        scale = (1 + 0.1 * self.rng.standard_normal(out_ch)).astype(np.float32)
        bias = (0.1 * self.rng.standard_normal(out_ch)).astype(np.float32)
        mean = (0.1 * self.rng.standard_normal(out_ch)).astype(np.float32)
        var = (1 + 0.1 * np.abs(self.rng.standard_normal(out_ch))).astype(np.float32)
        y = self.node("BatchNormalization", [y] + [self.constant(n, a) for n, a in (
            ("bn_scale", scale), ("bn_bias", bias), ("bn_mean", mean), ("bn_var", var))])
        if not relu6:
            return y
        low = self.constant("relu6_min", np.array(0, np.float32))
        high = self.constant("relu6_max", np.array(6, np.float32))
        return self.node("Clip", [y, low, high])


def build(seed: int = 0) -> onnx.ModelProto:
    b = _MobileNetBuilder(seed)
    x = b.conv_bn("input", 3, 32, 3, stride=2)
    channels = 32
    for expansion, out_ch, blocks, first_stride in STAGES:
        for k in range(blocks):
            stride = first_stride if k == 0 else 1
            hidden = channels * expansion
            y = b.conv_bn(x, channels, hidden, 1) if expansion != 1 else x
            y = b.conv_bn(y, hidden, hidden, 3, stride=stride, group=hidden)
            y = b.conv_bn(y, hidden, out_ch, 1, relu6=False)
            x = b.node("Add", [x, y]) if stride == 1 and channels == out_ch else y
            channels = out_ch
    x = b.conv_bn(x, channels, 1280, 1)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.gemm(x, 1280, 1000, gain=1.0, output="logits")
    return b.model(NAME, [float_input("input", [1, 3, 224, 224])],
                   [float_input("logits", [1, 1000])])


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

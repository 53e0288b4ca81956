"""An EfficientNet-B0-style CNN at 224x224: MBConv blocks with SiLU, depthwise 3x3 and 5x5
convs and squeeze-and-excite, shortened to the stages up to 112 channels.

Written as torchvision's efficientnet_b0 exports: SiLU as x * Sigmoid(x), every conv without
bias + BatchNormalization. Stem Conv 3x3/2 (3 -> 32) + BN + SiLU (224 -> 112). An MBConv
block: 1x1 expansion (x6, none in the first stage) + BN + SiLU; depthwise kxk (k = 3 or 5,
stride 1 or 2, padding k // 2) + BN + SiLU; squeeze-and-excite (GlobalAveragePool, 1x1 Conv
with bias to a quarter of the block's input channels + SiLU, 1x1 Conv with bias back,
Sigmoid, Mul with the depthwise output); 1x1 projection + BN; a residual Add when the block
keeps its shape. Stages (expansion, kernel, stride, channels, blocks): (1, 3, 1, 16, 1),
(6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 2), (6, 5, 1, 112, 2): maps 112, 56, 28,
14, 14. Head: 1x1 Conv to 1280 + BN + SiLU, GlobalAveragePool, Flatten, Gemm 1000.
Input "input" [1, 3, 224, 224], output "logits" [1, 1000]. Opset 17, random weights,
BatchNormalization statistics measured on an example input (calibrate_batch_norms).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, calibrate_batch_norms, float_input

NAME = "efficientnet"
INPUT_SHAPES = {"input": (1, 3, 224, 224)}
CLASSES = 1000
# (expansion, kernel, first stride, output channels, blocks), B0's table shortened
STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 2),
          (6, 5, 1, 112, 2))


class _EfficientNetBuilder(GraphBuilder):
    def silu(self, x: str) -> str:
        return self.node("Mul", [x, self.node("Sigmoid", [x])])

    def conv_bn(self, x: str, in_ch: int, out_ch: int, kernel: int, stride: int = 1,
                group: int = 1, silu: bool = True) -> str:
        fan_in = in_ch // group * kernel * kernel
        w = self.he_normal((out_ch, in_ch // group, kernel, kernel), fan_in)
        y = self.node("Conv", [x, self.constant("conv_weight", w)],
                      kernel_shape=[kernel, kernel], strides=[stride, stride],
                      pads=[kernel // 2] * 4, group=group)
        y = self.batch_norm(y, out_ch)
        return self.silu(y) if silu else y

    def conv_1x1_bias(self, x: str, in_ch: int, out_ch: int, gain: float) -> str:
        w = self.he_normal((out_ch, in_ch, 1, 1), in_ch) * np.float32(np.sqrt(gain / 2))
        bias = (0.1 * self.rng.standard_normal(out_ch)).astype(np.float32)
        return self.node("Conv", [x, self.constant("se_weight", w),
                                  self.constant("se_bias", bias)], kernel_shape=[1, 1])

    def squeeze_excite(self, x: str, channels: int, squeeze: int) -> str:
        s = self.node("GlobalAveragePool", [x])
        s = self.silu(self.conv_1x1_bias(s, channels, squeeze, gain=2.0))
        # gain 1 keeps the gate's logits O(1): most of the Sigmoid's range is used
        s = self.node("Sigmoid", [self.conv_1x1_bias(s, squeeze, channels, gain=1.0)])
        return self.node("Mul", [s, x])

    def mbconv(self, x: str, in_ch: int, out_ch: int, expansion: int, kernel: int,
               stride: int) -> str:
        hidden = in_ch * expansion
        y = self.conv_bn(x, in_ch, hidden, 1) if expansion != 1 else x
        y = self.conv_bn(y, hidden, hidden, kernel, stride=stride, group=hidden)
        y = self.squeeze_excite(y, hidden, max(1, in_ch // 4))
        y = self.conv_bn(y, hidden, out_ch, 1, silu=False)
        return self.node("Add", [y, x]) if stride == 1 and in_ch == out_ch else y


def build(seed: int = 0) -> onnx.ModelProto:
    b = _EfficientNetBuilder(seed)
    x = b.conv_bn("input", 3, 32, 3, stride=2)
    channels = 32
    for expansion, kernel, first_stride, out_ch, blocks in STAGES:
        for k in range(blocks):
            x = b.mbconv(x, channels, out_ch, expansion, kernel, first_stride if k == 0 else 1)
            channels = out_ch
    x = b.conv_bn(x, channels, 1280, 1)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.gemm(x, 1280, CLASSES, gain=1.0, output="logits")
    model = b.model(NAME, [float_input("input", [1, 3, 224, 224])],
                    [float_input("logits", [1, CLASSES])])
    # measured on another input than the example the tests feed
    return calibrate_batch_norms(model, example_inputs(seed + 1))


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

"""A SqueezeNet-1.1-style CNN at 224x224: fire modules, ceil-mode max pools, 13x13 maps.

Conv 3x3/2 (3 -> 64, no padding: 224 -> 111) + ReLU; MaxPool 3x3/2 with ceil_mode=1
(111 -> 55); two fire modules; MaxPool (55 -> 27); two fire modules; MaxPool (27 -> 13);
four fire modules. A fire module is a 1x1 squeeze conv + ReLU feeding two expand convs, 1x1
and 3x3 with padding 1, each + ReLU, concatenated on channels; squeeze/expand widths are
SqueezeNet 1.1's (16/64/64, 32/128/128, 48/192/192, 64/256/256). The classifier is a 1x1
Conv to 1000 classes + ReLU, GlobalAveragePool and Flatten, as torchvision's squeezenet1_1
exports (its Dropout vanishes at inference). Every conv has a bias and no BatchNormalization.
Input "input" [1, 3, 224, 224], output "logits" [1, 1000]. Opset 17, random weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, float_input

NAME = "squeezenet"
INPUT_SHAPES = {"input": (1, 3, 224, 224)}
CLASSES = 1000
# (squeeze, expand) widths of the fire modules; "pool" is a 3x3/2 ceil-mode MaxPool
LAYERS = ("pool", (16, 64), (16, 64), "pool", (32, 128), (32, 128), "pool",
          (48, 192), (48, 192), (64, 256), (64, 256))


class _SqueezeNetBuilder(GraphBuilder):
    def conv_relu(self, x: str, in_ch: int, out_ch: int, kernel: int, stride: int = 1,
                  pad: int = 0, gain: float = 1.0) -> str:
        """Conv with bias + ReLU; ``gain`` scales the He-initialized weights."""
        w = self.he_normal((out_ch, in_ch, kernel, kernel), in_ch * kernel * kernel) * gain
        bias = (0.05 * self.rng.standard_normal(out_ch)).astype(np.float32)
        y = self.node("Conv", [x, self.constant("conv_weight", w),
                               self.constant("conv_bias", bias)],
                      kernel_shape=[kernel, kernel], strides=[stride, stride],
                      pads=[pad] * 4)
        return self.node("Relu", [y])

    def fire(self, x: str, in_ch: int, squeeze: int, expand: int) -> str:
        s = self.conv_relu(x, in_ch, squeeze, 1)
        return self.node("Concat", [self.conv_relu(s, squeeze, expand, 1),
                                    self.conv_relu(s, squeeze, expand, 3, pad=1)], axis=1)


def build(seed: int = 0) -> onnx.ModelProto:
    b = _SqueezeNetBuilder(seed)
    x = b.conv_relu("input", 3, 64, 3, stride=2)                   # 111x111
    channels = 64
    for layer in LAYERS:
        if layer == "pool":                                         # 55, 27, 13
            x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[0] * 4,
                       ceil_mode=1)
            continue
        squeeze, expand = layer
        x = b.fire(x, channels, squeeze, expand)
        channels = 2 * expand
    # the classifier's ReLU keeps about half the class scores; halving the weights keeps
    # the averaged logits near 1
    x = b.conv_relu(x, channels, CLASSES, 1, gain=0.5)
    x = b.node("GlobalAveragePool", [x])
    b.node("Flatten", [x], output="logits", axis=1)
    return b.model(NAME, [float_input("input", [1, 3, 224, 224])],
                   [float_input("logits", [1, CLASSES])])


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

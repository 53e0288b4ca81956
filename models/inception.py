"""An Inception-v3-style CNN at 299x299, shortened: the stem, two 35x35 blocks of parallel
branches, the 35 -> 17 reduction and two 17x17 blocks with factorized 7x7 convs.

As torchvision's inception_v3 with pretrained weights: the input transform first (each
channel taken with Gather + Unsqueeze, scaled and shifted, concatenated back). Every conv is
a BasicConv2d: Conv without bias + BatchNormalization (epsilon 0.001) + ReLU. Stem: 3x3/2
(32, valid: 299 -> 149), 3x3 (32, valid: 147), 3x3 pad 1 (64), MaxPool 3x3/2 (73), 1x1 (80),
3x3 (192, valid: 71), MaxPool 3x3/2 (35). Then:

- Mixed_5b, Mixed_5c (InceptionA, 192 -> 256 -> 288 channels at 35x35): branches 1x1 (64);
  1x1 (48) -> 5x5 pad 2 (64); 1x1 (64) -> 3x3 (96) -> 3x3 (96); AveragePool 3x3 stride 1
  pads 1 -> 1x1 (32, then 64); concatenated on channels.
- Mixed_6a (InceptionB, 288 -> 768, 35 -> 17): 3x3/2 valid (384); 1x1 (64) -> 3x3 (96) ->
  3x3/2 valid (96); MaxPool 3x3/2; concatenated.
- Mixed_6b, Mixed_6c (InceptionC, 768 channels at 17x17, c7 = 128, 160): 1x1 (192);
  1x1 (c7) -> 1x7 -> 7x1 (192); 1x1 (c7) -> 7x1 -> 1x7 -> 7x1 -> 1x7 (192); AveragePool
  3x3/1 pads 1 -> 1x1 (192); concatenated.

GlobalAveragePool, Flatten, Gemm 768 -> 1000.

The stride-1 average pools are written both ways real files have them: the 35x35 blocks'
with count_include_pad=1 (torchvision calls F.avg_pool2d with its default, and the PyTorch
exporter copies the flag), the 17x17 blocks' with count_include_pad=0 (Keras' 'same'
average pooling, as tf2onnx writes it; the border windows divide by fewer taps).
Input "input" [1, 3, 299, 299], output "logits" [1, 1000]. Opset 17, random weights,
BatchNormalization statistics measured on an example input (calibrate_batch_norms).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, calibrate_batch_norms, float_input

NAME = "inception"
INPUT_SHAPES = {"input": (1, 3, 299, 299)}
CLASSES = 1000
# torchvision's transform_input: ImageNet normalization re-expressed for inputs in [-1, 1]
_MEAN, _STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class _InceptionBuilder(GraphBuilder):
    def conv(self, x: str, in_ch: int, out_ch: int, kernel: int | tuple[int, int],
             stride: int = 1, pad: int | tuple[int, int] = 0) -> str:
        """BasicConv2d: Conv (no bias) + BatchNormalization + ReLU."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        w = self.he_normal((out_ch, in_ch, kh, kw), in_ch * kh * kw)
        y = self.node("Conv", [x, self.constant("conv_weight", w)], kernel_shape=[kh, kw],
                      strides=[stride, stride], pads=[ph, pw, ph, pw])
        return self.node("Relu", [self.batch_norm(y, out_ch, epsilon=0.001)])

    def transform_input(self, x: str) -> str:
        channels = []
        for c, (mean, std) in enumerate(zip(_MEAN, _STD)):
            index = self.constant("channel", np.array(c, np.int64))
            xc = self.node("Unsqueeze", [self.node("Gather", [x, index], axis=1),
                                         self.constant("axes", np.array([1], np.int64))])
            xc = self.node("Mul", [xc, self.constant("scale", np.array(std / 0.5, np.float32))])
            shift = np.array((mean - 0.5) / 0.5, np.float32)
            channels.append(self.node("Add", [xc, self.constant("shift", shift)]))
        return self.node("Concat", channels, axis=1)

    def avg_pool(self, x: str, count_include_pad: int) -> str:
        return self.node("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1],
                         pads=[1, 1, 1, 1], count_include_pad=count_include_pad)

    def max_pool(self, x: str) -> str:
        return self.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])

    def inception_a(self, x: str, in_ch: int, pool_features: int) -> tuple[str, int]:
        b1 = self.conv(x, in_ch, 64, 1)
        b5 = self.conv(self.conv(x, in_ch, 48, 1), 48, 64, 5, pad=2)
        b3 = self.conv(x, in_ch, 64, 1)
        b3 = self.conv(self.conv(b3, 64, 96, 3, pad=1), 96, 96, 3, pad=1)
        bp = self.conv(self.avg_pool(x, count_include_pad=1), in_ch, pool_features, 1)
        return self.node("Concat", [b1, b5, b3, bp], axis=1), 64 + 64 + 96 + pool_features

    def inception_b(self, x: str, in_ch: int) -> tuple[str, int]:
        b3 = self.conv(x, in_ch, 384, 3, stride=2)
        bd = self.conv(self.conv(x, in_ch, 64, 1), 64, 96, 3, pad=1)
        bd = self.conv(bd, 96, 96, 3, stride=2)
        return self.node("Concat", [b3, bd, self.max_pool(x)], axis=1), 384 + 96 + in_ch

    def inception_c(self, x: str, in_ch: int, c7: int) -> tuple[str, int]:
        row = {"kernel": (1, 7), "pad": (0, 3)}
        col = {"kernel": (7, 1), "pad": (3, 0)}
        b1 = self.conv(x, in_ch, 192, 1)
        b7 = self.conv(x, in_ch, c7, 1)
        b7 = self.conv(self.conv(b7, c7, c7, **row), c7, 192, **col)
        bd = self.conv(x, in_ch, c7, 1)
        for factor in (col, row, col):
            bd = self.conv(bd, c7, c7, **factor)
        bd = self.conv(bd, c7, 192, **row)
        bp = self.conv(self.avg_pool(x, count_include_pad=0), in_ch, 192, 1)
        return self.node("Concat", [b1, b7, bd, bp], axis=1), 4 * 192


def build(seed: int = 0) -> onnx.ModelProto:
    b = _InceptionBuilder(seed)
    x = b.transform_input("input")
    x = b.conv(x, 3, 32, 3, stride=2)                       # 149
    x = b.conv(x, 32, 32, 3)                                # 147
    x = b.conv(x, 32, 64, 3, pad=1)                         # 147
    x = b.max_pool(x)                                       # 73
    x = b.conv(x, 64, 80, 1)
    x = b.conv(x, 80, 192, 3)                               # 71
    x = b.max_pool(x)                                       # 35
    x, channels = b.inception_a(x, 192, 32)                 # 256
    x, channels = b.inception_a(x, channels, 64)            # 288
    x, channels = b.inception_b(x, channels)                # 768 at 17x17
    for c7 in (128, 160):
        x, channels = b.inception_c(x, channels, c7)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.gemm(x, channels, CLASSES, gain=1.0, output="logits")
    model = b.model(NAME, [float_input("input", [1, 3, 299, 299])],
                    [float_input("logits", [1, CLASSES])])
    # measured on another input than the example the tests feed
    return calibrate_batch_norms(model, example_inputs(seed + 1))


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, 299, 299)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

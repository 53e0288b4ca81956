"""A YOLOv5n-style detector at 416x416 (width 0.25, depth 0.33): C3 blocks, an SPP block
with parallel 5/9/13 max pools, an upsampling feature pyramid and decoded boxes at three
scales.

Written as YOLOv5's export writes it. Conv block = Conv without bias + BatchNormalization
(epsilon 0.001) + SiLU as x * Sigmoid(x). Backbone: Conv 6x6/2 pad 2 (16; 416 -> 208),
Conv 3x3/2 (32; 104), C3 (1 bottleneck), Conv 3x3/2 (64; 52), C3 (2) = P3, Conv 3x3/2
(128; 26), C3 (3) = P4, Conv 3x3/2 (256; 13), C3 (1), SPP. C3: two 1x1 branches, one through
bottlenecks (1x1 + 3x3, residual Add in the backbone), concatenated, then a 1x1. SPP: a 1x1
halving the channels, MaxPool 5x5, 9x9 and 13x13 with stride 1 and pads 2/4/6 in parallel,
concatenated with their input, a 1x1. Neck: Resize (nearest, scales [1, 1, 2, 2], empty roi,
asymmetric / floor, as nn.Upsample exports) to 26 and 52, Concat with P4 and P3, C3 blocks
without shortcut, then 3x3/2 convs back down with Concat. Head per scale (52, 26, 13):
1x1 Conv with bias to 3 * (5 + 80) = 255 channels, Reshape [1, 3, 85, h, w], Transpose to
[1, 3, h, w, 85], Sigmoid, Split (2, 2, 81), xy = (2 * s + grid) * stride,
wh = (2 * s) ** 2 * anchor, Concat, Reshape [1, 3hw, 85]. The boxes are divided by the
image size (folded into the constants), as YOLOv5's TF exports normalize them, so every
output is O(1).
Input "images" [1, 3, 416, 416] in [0, 1] (standard normal pixels are far outside what the
statistics were measured on: activations grow several hundredfold), output "output0"
[1, 10647, 85]. Opset 17, random weights, BatchNormalization statistics measured on an
example input (calibrate_batch_norms).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, calibrate_batch_norms, float_input

NAME = "yolo"
SIZE = 416
INPUT_SHAPES = {"images": (1, 3, SIZE, SIZE)}
CLASSES, ANCHORS = 80, 3
OUTPUTS = 5 + CLASSES
# YOLOv5's anchors (width, height in pixels) for strides 8, 16, 32
ANCHOR_SIZES = {8: ((10, 13), (16, 30), (33, 23)), 16: ((30, 61), (62, 45), (59, 119)),
                32: ((116, 90), (156, 198), (373, 326))}
BOXES = ANCHORS * sum((SIZE // stride) ** 2 for stride in ANCHOR_SIZES)


class _YoloBuilder(GraphBuilder):
    def conv(self, x: str, in_ch: int, out_ch: int, kernel: int = 1, stride: int = 1,
             pad: int | None = None) -> str:
        """Conv (no bias) + BatchNormalization + SiLU."""
        pad = kernel // 2 if pad is None else pad
        w = self.he_normal((out_ch, in_ch, kernel, kernel), in_ch * kernel * kernel)
        y = self.node("Conv", [x, self.constant("conv_weight", w)],
                      kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4)
        y = self.batch_norm(y, out_ch, epsilon=0.001)
        return self.node("Mul", [y, self.node("Sigmoid", [y])])

    def c3(self, x: str, in_ch: int, out_ch: int, bottlenecks: int, shortcut: bool) -> str:
        hidden = out_ch // 2
        y = self.conv(x, in_ch, hidden)
        for _ in range(bottlenecks):
            z = self.conv(self.conv(y, hidden, hidden), hidden, hidden, 3)
            y = self.node("Add", [y, z]) if shortcut else z
        y = self.node("Concat", [y, self.conv(x, in_ch, hidden)], axis=1)
        return self.conv(y, 2 * hidden, out_ch)

    def spp(self, x: str, channels: int) -> str:
        hidden = channels // 2
        y = self.conv(x, channels, hidden)
        pools = [self.node("MaxPool", [y], kernel_shape=[k, k], strides=[1, 1],
                           pads=[k // 2] * 4) for k in (5, 9, 13)]
        return self.conv(self.node("Concat", [y, *pools], axis=1), 4 * hidden, channels)

    def upsample(self, x: str) -> str:
        roi = self.constant("roi", np.zeros(0, np.float32))
        scales = self.constant("scales", np.array([1, 1, 2, 2], np.float32))
        return self.node("Resize", [x, roi, scales], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor",
                         cubic_coeff_a=-0.75)

    def detect(self, x: str, in_ch: int, stride: int) -> str:
        """One scale's boxes: [1, 3 * h * w, 85], coordinates relative to the image."""
        grid = SIZE // stride
        # a quarter of the He scale keeps the logits about 1 (the features are 2 to 3): the
        # sigmoids do not saturate, and the boxes do not magnify the float32 rounding
        # gathered over 60 layers beyond what rtol 1e-4 can compare
        w = self.he_normal((ANCHORS * OUTPUTS, in_ch, 1, 1), in_ch) * np.float32(0.25)
        bias = (0.1 * self.rng.standard_normal(ANCHORS * OUTPUTS)).astype(np.float32)
        y = self.node("Conv", [x, self.constant("head_weight", w),
                               self.constant("head_bias", bias)], kernel_shape=[1, 1])
        shape = np.array([1, ANCHORS, OUTPUTS, grid, grid], np.int64)
        y = self.node("Reshape", [y, self.constant("head_shape", shape)])
        y = self.node("Sigmoid", [self.node("Transpose", [y], perm=[0, 1, 3, 4, 2])])
        name = self.fresh("split")
        xy, wh, conf = f"{name}_xy", f"{name}_wh", f"{name}_conf"
        sizes = self.constant("split_sizes", np.array([2, 2, 1 + CLASSES], np.int64))
        self.nodes.append(onnx.helper.make_node("Split", [y, sizes], [xy, wh, conf], axis=4,
                                                name=name))
        two = self.constant("two", np.array(2, np.float32))
        # grid [1, 1, h, w, 2] holds (column, row) - 0.5 of every cell
        rows, cols = np.meshgrid(np.arange(grid), np.arange(grid), indexing="ij")
        cells = np.stack([cols, rows], axis=-1)[None, None].astype(np.float32) - 0.5
        xy = self.node("Add", [self.node("Mul", [xy, two]), self.constant("grid", cells)])
        xy = self.node("Mul", [xy, self.constant("stride", np.array(stride / SIZE,
                                                                    np.float32))])
        anchors = np.array(ANCHOR_SIZES[stride], np.float32).reshape(1, ANCHORS, 1, 1, 2) / SIZE
        wh = self.node("Mul", [self.node("Pow", [self.node("Mul", [wh, two]), two]),
                               self.constant("anchor_grid", anchors)])
        y = self.node("Concat", [xy, wh, conf], axis=4)
        flat = self.constant("boxes_shape", np.array([1, -1, OUTPUTS], np.int64))
        return self.node("Reshape", [y, flat])


def build(seed: int = 0) -> onnx.ModelProto:
    b = _YoloBuilder(seed)
    x = b.conv("images", 3, 16, 6, stride=2, pad=2)         # 208
    x = b.conv(x, 16, 32, 3, stride=2)                      # 104
    x = b.c3(x, 32, 32, 1, shortcut=True)
    x = b.conv(x, 32, 64, 3, stride=2)                      # 52
    p3 = b.c3(x, 64, 64, 2, shortcut=True)
    x = b.conv(p3, 64, 128, 3, stride=2)                    # 26
    p4 = b.c3(x, 128, 128, 3, shortcut=True)
    x = b.conv(p4, 128, 256, 3, stride=2)                   # 13
    x = b.spp(b.c3(x, 256, 256, 1, shortcut=True), 256)

    h10 = b.conv(x, 256, 128)
    x = b.node("Concat", [b.upsample(h10), p4], axis=1)     # 26
    h14 = b.conv(b.c3(x, 256, 128, 1, shortcut=False), 128, 64)
    x = b.node("Concat", [b.upsample(h14), p3], axis=1)     # 52
    out3 = b.c3(x, 128, 64, 1, shortcut=False)
    x = b.node("Concat", [b.conv(out3, 64, 64, 3, stride=2), h14], axis=1)        # 26
    out4 = b.c3(x, 128, 128, 1, shortcut=False)
    x = b.node("Concat", [b.conv(out4, 128, 128, 3, stride=2), h10], axis=1)      # 13
    out5 = b.c3(x, 256, 256, 1, shortcut=False)

    boxes = [b.detect(out3, 64, 8), b.detect(out4, 128, 16), b.detect(out5, 256, 32)]
    b.node("Concat", boxes, axis=1, output="output0")
    model = b.model(NAME, [float_input("images", [1, 3, SIZE, SIZE])],
                    [float_input("output0", [1, BOXES, OUTPUTS])])
    # measured on another input than the example the tests feed
    return calibrate_batch_norms(model, example_inputs(seed + 1))


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """An image in [0, 1], as YOLOv5's preprocessing gives."""
    rng = np.random.default_rng(seed)
    return {"images": rng.random((1, 3, SIZE, SIZE)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

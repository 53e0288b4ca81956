"""A detector-style CNN (YOLO-like) at 256x256: a strided SiLU backbone, a feature pyramid
with Resize upsampling and Concat, and a head whose raw maps are reshaped, transposed,
split into box / objectness / class parts, passed through Sigmoid and concatenated.

Input "images" [1, 3, 256, 256]; output "detections" [1, N, 4 + 1 + 8] over the anchors of
two scales (N = 3 * (16*16 + 8*8)). Opset 17, random weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, float_input

NAME = "detector"
INPUT_SHAPES = {"images": (1, 3, 256, 256)}
CLASSES, ANCHORS = 8, 3
OUTPUTS = 4 + 1 + CLASSES


class _DetectorBuilder(GraphBuilder):
    def conv_silu(self, x: str, in_ch: int, out_ch: int, kernel: int = 3, stride: int = 1
                  ) -> str:
        w = self.constant("conv_weight", self.he_normal((out_ch, in_ch, kernel, kernel),
                                                        in_ch * kernel * kernel))
        bias = self.constant("conv_bias", (0.1 * self.rng.standard_normal(out_ch))
                             .astype(np.float32))
        pad = kernel // 2
        y = self.node("Conv", [x, w, bias], kernel_shape=[kernel, kernel],
                      strides=[stride, stride], pads=[pad] * 4)
        return self.node("Mul", [y, self.node("Sigmoid", [y])])     # SiLU

    def head(self, x: str, in_ch: int, grid: int) -> str:
        """Raw map [1, A*O, g, g] -> [1, A*g*g, O] with sigmoids on objectness and classes."""
        w = self.constant("head_weight", self.he_normal((ANCHORS * OUTPUTS, in_ch, 1, 1),
                                                        in_ch) * 0.5)
        y = self.node("Conv", [x, w], kernel_shape=[1, 1])
        shape = self.constant("head_shape", np.array([1, ANCHORS, OUTPUTS, grid * grid],
                                                     np.int64))
        y = self.node("Transpose", [self.node("Reshape", [y, shape])], perm=[0, 1, 3, 2])
        flat = self.constant("flat_shape", np.array([1, -1, OUTPUTS], np.int64))
        y = self.node("Reshape", [y, flat])
        name = self.fresh("split")
        parts = [f"{name}_box", f"{name}_obj", f"{name}_cls"]
        split = self.constant("split_sizes", np.array([4, 1, CLASSES], np.int64))
        self.nodes.append(onnx.helper.make_node("Split", [y, split], parts, axis=2, name=name))
        box, obj, cls = parts
        return self.node("Concat", [box, self.node("Sigmoid", [obj]),
                                    self.node("Sigmoid", [cls])], axis=2)


def build(seed: int = 0) -> onnx.ModelProto:
    b = _DetectorBuilder(seed)
    x = b.conv_silu("images", 3, 16, stride=2)          # 128
    x = b.conv_silu(x, 16, 32, stride=2)                # 64
    x = b.conv_silu(x, 32, 48, stride=2)                # 32
    c4 = b.conv_silu(x, 48, 64, stride=2)               # 16
    c5 = b.conv_silu(c4, 64, 96, stride=2)              # 8
    scales = b.constant("scales", np.array([1, 1, 2, 2], np.float32))
    up = b.node("Resize", [c5, "", scales], mode="nearest")
    p4 = b.conv_silu(b.node("Concat", [up, c4], axis=1), 96 + 64, 64, kernel=1)
    b.node("Concat", [b.head(p4, 64, 16), b.head(c5, 96, 8)], axis=1, output="detections")
    n = ANCHORS * (16 * 16 + 8 * 8)
    return b.model(NAME, [float_input("images", [1, 3, 256, 256])],
                   [float_input("detections", [1, n, OUTPUTS])])


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"images": rng.random((1, 3, 256, 256)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

"""A ResNet-50-shaped CNN at 224x224: torchvision's resnet50 (v1.5) layer for layer.

Stem: Conv 7x7/2 (64) + BatchNormalization + Relu + MaxPool 3x3/2. Then four stages of
bottleneck blocks (3, 4, 6 and 3 of them; widths 64, 128, 256, 512, each block's output
4x its width): 1x1 reduce, 3x3 (carrying the stage's stride, as torchvision's v1.5 does),
1x1 expand, each Conv + BatchNormalization, a 1x1 projection shortcut on each stage's first
block, Add, Relu. GlobalAveragePool, Flatten, Gemm 1000. 25.6 M weights (102 MB), 4.1 G
multiply-adds.

Input "input" [N, 3, 224, 224] with a symbolic batch dim "N", output "logits" [N, 1000],
opset 17. Generated, not checked in: ``python -m models.resnet50`` writes
models/resnet50.onnx. Weights and BatchNormalization statistics are scaled as in
models/resnet.py, so activations stay O(1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import float_input
from models.resnet import _ResNetBuilder

NAME = "resnet50"
INPUT_SHAPES: dict[str, tuple[int, ...]] | None = {"input": (1, 3, 224, 224)}
WIDTHS = (64, 128, 256, 512)
BLOCKS = (3, 4, 6, 3)
DEPENDS = ("resnet.py",)     # the builder it shares: a change there rebuilds the file


def build(batch: int | None = None) -> onnx.ModelProto:
    """Build the network with seeded random weights (``batch`` None: a symbolic batch dim).

    >>> sum(n.op_type == "Conv" for n in build(batch=1).graph.node)
    53
    """
    b = _ResNetBuilder(seed=50)
    h = b.node("Relu", [b.conv_bn("input", 1.0, 3, 64, kernel=7, stride=2)])  # 64x112x112
    h = b.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # 56x56
    in_ch = 64
    for stage, (width, blocks) in enumerate(zip(WIDTHS, BLOCKS)):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            h = b.bottleneck_block(h, in_ch, width, stride)
            in_ch = 4 * width
    h = b.node("GlobalAveragePool", [h])
    h = b.node("Flatten", [h], axis=1)
    b.gemm(h, in_ch, 1000, gain=1.0, output="logits")
    dim: int | str = "N" if batch is None else batch
    return b.model(NAME, [float_input("input", [dim, 3, 224, 224])],
                   [float_input("logits", [dim, 1000])])


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """A normalized image, as torchvision's transforms give one."""
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}


if __name__ == "__main__":
    path = Path(__file__).with_name(f"{NAME}.onnx")
    onnx.save(build(), path)
    print(f"wrote {path}")

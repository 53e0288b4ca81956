"""A ResNet-style CNN at 224x224 (ResNet-10 by default, ResNet-18 with two blocks per stage).

Stem: Conv 7x7/2 (64) + BatchNormalization + Relu + MaxPool 3x3/2. Then four stages of
residual basic blocks (64, 128, 256, 512 channels; the first block of stages 2-4 halves the
resolution and uses a 1x1/2 projection shortcut), GlobalAveragePool, Flatten, Gemm 1000.

Input "input" [N, 3, 224, 224] with a symbolic batch dim "N" (``build(batch=1)`` fixes it),
output "logits" [N, 1000], opset 17. The file is generated, not checked in: run
``python -m models.resnet`` to write models/resnet.onnx.

Weights are He-scaled and the BatchNormalization statistics match the variance each
convolution is expected to produce, so activations stay O(1) from the input to the logits,
as in a trained network; relative-error checks against onnxruntime then mean something.
"""

from __future__ import annotations


import numpy as np
import onnx

from tensorc.examples.builder import GraphBuilder, float_input

NAME = "resnet"
INPUT_SHAPES: dict[str, tuple[int, ...]] | None = {"input": (1, 3, 224, 224)}
STAGE_CHANNELS = (64, 128, 256, 512)


class _ResNetBuilder(GraphBuilder):
    """Tracks E[x^2] of the activation in flight, to give each BatchNormalization the
    running variance its convolution would really show."""

    def conv_bn(
        self,
        x: str,
        second_moment: float,
        in_ch: int,
        out_ch: int,
        kernel: int,
        stride: int,
        gamma_scale: float = 1.0,
    ) -> str:
        """Conv (no bias, as exporters emit before BN) followed by BatchNormalization."""
        fan_in = in_ch * kernel * kernel
        weight = self.he_normal((out_ch, in_ch, kernel, kernel), fan_in)
        pad = kernel // 2
        y = self.node(
            "Conv",
            [x, self.constant("conv_weight", weight)],
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
        )
        # He weights: Var[conv(x)] = fan_in * (2 / fan_in) * E[x^2] = 2 E[x^2].
        expected_var = 2.0 * second_moment
        rng = self.rng
        var = expected_var * rng.uniform(0.8, 1.25, out_ch)
        mean = rng.normal(0.0, 0.1, out_ch) * np.sqrt(expected_var)
        gamma = rng.uniform(0.8, 1.2, out_ch) * gamma_scale
        beta = rng.normal(0.0, 0.1, out_ch)
        params = [
            self.constant(name, value.astype(np.float32))
            for name, value in (
                ("bn_scale", gamma),
                ("bn_bias", beta),
                ("bn_mean", mean),
                ("bn_var", var),
            )
        ]
        return self.node("BatchNormalization", [y, *params], epsilon=1e-5)

    def basic_block(
        self, x: str, second_moment: float, in_ch: int, out_ch: int, stride: int
    ) -> str:
        """Two 3x3 Conv+BN with a Relu between, a shortcut, Add, Relu."""
        h = self.node("Relu", [self.conv_bn(x, second_moment, in_ch, out_ch, 3, stride)])
        # A Relu of a unit-variance BN output has E[x^2] of about 1/2.
        h = self.conv_bn(h, 0.5, out_ch, out_ch, 3, 1, gamma_scale=0.5)
        if stride == 1 and in_ch == out_ch:
            shortcut = x
        else:
            shortcut = self.conv_bn(x, second_moment, in_ch, out_ch, 1, stride)
        return self.node("Relu", [self.node("Add", [h, shortcut])])

    def bottleneck_block(self, x: str, in_ch: int, width: int, stride: int) -> str:
        """1x1 Conv+BN (width), 3x3 Conv+BN (width, the stride, as torchvision's v1.5), 1x1
        Conv+BN (4 x width), each but the last followed by a Relu; a shortcut, Add, Relu."""
        out_ch = 4 * width
        h = self.node("Relu", [self.conv_bn(x, 1.0, in_ch, width, 1, 1)])
        h = self.node("Relu", [self.conv_bn(h, 0.5, width, width, 3, stride)])
        h = self.conv_bn(h, 0.5, width, out_ch, 1, 1, gamma_scale=0.5)
        if stride == 1 and in_ch == out_ch:
            shortcut = x
        else:
            shortcut = self.conv_bn(x, 1.0, in_ch, out_ch, 1, stride)
        return self.node("Relu", [self.node("Add", [h, shortcut])])


def build(batch: int | None = None, blocks_per_stage: int = 1) -> onnx.ModelProto:
    """Build the network with seeded random weights.

    ``batch`` None keeps the batch dim symbolic ("N"); an int fixes it.

    >>> build(batch=1).graph.input[0].type.tensor_type.shape.dim[0].dim_value
    1
    """
    b = _ResNetBuilder(seed=224)
    h = b.node("Relu", [b.conv_bn("input", 1.0, 3, 64, kernel=7, stride=2)])  # 64x112x112
    h = b.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # 56x56
    # After the max pool of a Relu, and after each block's Add + Relu, E[x^2] is about 1.
    in_ch = 64
    for stage, out_ch in enumerate(STAGE_CHANNELS):
        for block in range(blocks_per_stage):
            stride = 2 if stage > 0 and block == 0 else 1
            h = b.basic_block(h, 1.0, in_ch, out_ch, stride)
            in_ch = out_ch
    h = b.node("GlobalAveragePool", [h])
    h = b.node("Flatten", [h], axis=1)
    b.gemm(h, in_ch, 1000, gain=1.0, output="logits")
    dim: int | str = "N" if batch is None else batch
    return b.model(
        NAME,
        [float_input("input", [dim, 3, 224, 224])],
        [float_input("logits", [dim, 1000])],
    )

"""MLP 784-256-128-10 (Gemm + Relu, Softmax at the end), input "x" [1, 784], opset 17."""

from __future__ import annotations


import onnx

from tensorc.examples.builder import GraphBuilder, float_input

NAME = "mlp"
# Concrete input shapes for compiling and benchmarking; None: the model's shapes are fixed.
INPUT_SHAPES: dict[str, tuple[int, ...]] | None = None


def build() -> onnx.ModelProto:
    """Build the MLP with seeded random weights.

    >>> build().graph.input[0].name
    'x'
    """
    b = GraphBuilder(seed=784)
    h = b.node("Relu", [b.gemm("x", 784, 256)])
    h = b.node("Relu", [b.gemm(h, 256, 128)])
    logits = b.gemm(h, 128, 10, gain=1.0)
    b.node("Softmax", [logits], output="y", axis=-1)
    return b.model(NAME, [float_input("x", [1, 784])], [float_input("y", [1, 10])])

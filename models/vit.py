"""A ViT-B/16-sized image classifier: the large-weights model (86 M weights, 346 MB).

Its sizes are ViT-B/16's (Dosovitskiy et al.): 16 x 16 patches of a 224 x 224 image (196
tokens and a class token), hidden 768, 12 heads, MLP 3072, 12 layers, a 1000-class head; its
nodes are spelled as PyTorch's exporter spells them (a Conv for the patch embedding,
LayerNormalization, MatMul + Add, GELU as its Erf formula). It stands in for the real network
where the weights' size is what matters: compiling and loading a model of some 350 MB
(benchmarks/compile_time.py). Input "pixel_values" [1, 3, 224, 224], output "logits"
[1, 1000]. Opset 17, random weights, generated on first use (not checked in).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import float_input
from models.transformer import TransformerBuilder

NAME = "vit"
INPUT_SHAPES = {"pixel_values": (1, 3, 224, 224)}
IMAGE, PATCH, HIDDEN, HEADS, LAYERS, MLP, CLASSES = 224, 16, 768, 12, 12, 3072, 1000
DEPENDS = ("transformer.py",)


def build(seed: int = 0) -> onnx.ModelProto:
    b = TransformerBuilder(seed, HIDDEN, HEADS)
    tokens = (IMAGE // PATCH) ** 2
    fan_in = 3 * PATCH * PATCH
    patches = b.node("Conv", ["pixel_values", b.weight("patch_weight",
                                                         (HIDDEN, 3, PATCH, PATCH),
                                                         1.0 / np.sqrt(fan_in)),
                              b.weight("patch_bias", (HIDDEN,), 0.02)],
                     kernel_shape=[PATCH, PATCH], strides=[PATCH, PATCH])
    flat = b.node("Reshape", [patches, b.constant("flat_shape",
                                                  np.array([1, HIDDEN, tokens], np.int64))])
    x = b.node("Transpose", [flat], perm=[0, 2, 1])
    x = b.node("Concat", [b.weight("class_token", (1, 1, HIDDEN), 0.02), x], axis=1)
    x = b.node("Add", [x, b.weight("position_embedding", (1, tokens + 1, HIDDEN), 0.02)])
    for _ in range(LAYERS):
        # pre-norm blocks; the branches scaled down so that 12 residual adds keep x O(1)
        attended = b.attention(b.layer_norm(x))
        x = b.node("Add", [x, b.node("Mul", [attended, b.constant(
            "branch_scale", np.array(0.3, np.float32))])])
        hidden = b.gelu_erf(b.linear(b.layer_norm(x), HIDDEN, MLP))
        mlp = b.linear(hidden, MLP, HIDDEN)
        x = b.node("Add", [x, b.node("Mul", [mlp, b.constant(
            "branch_scale", np.array(0.3, np.float32))])])
    x = b.layer_norm(x)
    cls = b.node("Gather", [x, b.constant("class_index", np.array(0, np.int64))], axis=1)
    b.gemm(cls, HIDDEN, CLASSES, gain=1.0, output="logits")
    return b.model(NAME, [float_input("pixel_values", list(INPUT_SHAPES["pixel_values"]))],
                   [float_input("logits", [1, CLASSES])])


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """An image in [0, 1]."""
    rng = np.random.default_rng(seed)
    return {"pixel_values": rng.random(INPUT_SHAPES["pixel_values"], np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

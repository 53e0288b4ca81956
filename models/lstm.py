"""A small LSTM sequence classifier: one LSTM layer over a 16-step sequence, then a linear
layer on the last hidden state.

Input "sequence" [16, 1, 32] (time, batch, features: ONNX's default layout), output "scores"
[1, 10]. The LSTM has 64 hidden units, biases and the default activations. Opset 17, random
weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, float_input

NAME = "lstm"
INPUT_SHAPES = {"sequence": (16, 1, 32)}
STEPS, FEATURES, HIDDEN, CLASSES = 16, 32, 64, 10


def build(seed: int = 0) -> onnx.ModelProto:
    b = GraphBuilder(seed)
    scale = 1 / np.sqrt(HIDDEN)
    w = b.constant("lstm_w", (b.rng.uniform(-scale, scale, (1, 4 * HIDDEN, FEATURES)))
                   .astype(np.float32))
    r = b.constant("lstm_r", (b.rng.uniform(-scale, scale, (1, 4 * HIDDEN, HIDDEN)))
                   .astype(np.float32))
    bias = b.constant("lstm_b", (b.rng.uniform(-scale, scale, (1, 8 * HIDDEN)))
                      .astype(np.float32))
    name = b.fresh("lstm")
    b.nodes.append(onnx.helper.make_node("LSTM", ["sequence", w, r, bias],
                                         [f"{name}_y", f"{name}_h"], name=name,
                                         hidden_size=HIDDEN))
    last = b.node("Squeeze", [f"{name}_h", b.constant("axes", np.array([0], np.int64))])
    b.gemm(last, HIDDEN, CLASSES, gain=1.0, output="scores")
    return b.model(NAME, [float_input("sequence", [STEPS, 1, FEATURES])],
                   [float_input("scores", [1, CLASSES])])


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"sequence": rng.standard_normal((STEPS, 1, FEATURES)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

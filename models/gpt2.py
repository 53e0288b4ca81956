"""A GPT-2-style decoder: token and position embeddings, two pre-LayerNorm blocks with causal
self-attention, a final LayerNorm and a language-model head tied to the token embeddings.

Input "input_ids" int64 [batch, sequence] (symbolic; ``INPUT_SHAPES`` binds 1 x 32), output
"logits" [batch, sequence, 1000]. The causal mask is a constant lower-triangular [1, 1, 64, 64]
bool matrix sliced to the sequence length and applied with Where, as GPT-2 exports do; GELU
is the Tanh approximation. Opset 17, random weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from models.transformer import TransformerBuilder

NAME = "gpt2"
INPUT_SHAPES = {"input_ids": (1, 32)}
VOCAB, MAX_POSITIONS, HIDDEN, HEADS, LAYERS = 1000, 64, 128, 4, 2


def build(seed: int = 0) -> onnx.ModelProto:
    b = TransformerBuilder(seed, HIDDEN, HEADS)
    table = (b.rng.standard_normal((VOCAB, HIDDEN)) * 0.5).astype(np.float32)
    words = b.constant("wte", table)
    positions = b.weight("wpe", (MAX_POSITIONS, HIDDEN), 0.5)
    seq_len = b.node("Gather", [b.node("Shape", ["input_ids"]),
                                b.constant("one_index", np.array(1, np.int64))], axis=0)
    zero = b.constant("zero", np.array(0, np.int64))
    position_ids = b.node("Range", [zero, seq_len, b.constant("step", np.array(1, np.int64))])
    x = b.node("Add", [b.node("Gather", [words, "input_ids"], axis=0),
                       b.node("Gather", [positions, position_ids], axis=0)])

    causal = np.tril(np.ones((MAX_POSITIONS, MAX_POSITIONS), bool))[None, None]
    end = b.node("Unsqueeze", [seq_len, b.constant("axis0", np.array([0], np.int64))])
    keep = b.constant("causal", causal)
    for axis in (2, 3):
        keep = b.node("Slice", [keep, b.constant("starts", np.array([0], np.int64)), end,
                                b.constant("axes", np.array([axis], np.int64))])
    for _ in range(LAYERS):
        x = b.node("Add", [x, b.attention(b.layer_norm(x), keep=keep)])
        hidden = b.gelu_tanh(b.linear(b.layer_norm(x), HIDDEN, 4 * HIDDEN))
        x = b.node("Add", [x, b.linear(hidden, 4 * HIDDEN, HIDDEN)])
    head = b.constant("lm_head", np.ascontiguousarray(table.T))
    b.node("MatMul", [b.layer_norm(x), head], output="logits")
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                           ["batch", "sequence", VOCAB])
    return b.model(NAME, [ids], [logits])


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input_ids": rng.integers(0, VOCAB, INPUT_SHAPES["input_ids"]).astype(np.int64)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

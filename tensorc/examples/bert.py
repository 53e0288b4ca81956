"""A BERT-style encoder: embeddings, two post-LayerNorm encoder layers, a pooled output.

Inputs "input_ids" and "attention_mask", both int64 [batch, sequence] with symbolic dims
"batch" and "sequence" (``INPUT_SHAPES`` binds them to 1 x 32). The padding mask becomes an
additive bias ``(1 - mask) * -10000`` broadcast over heads and query positions, as BERT
exports do. Outputs "last_hidden_state" [batch, sequence, 128] and "pooled" [batch, 128]
(Tanh of a linear layer on the first token). Opset 17, random weights.
"""

from __future__ import annotations


import numpy as np
import onnx
from onnx import TensorProto, helper

from tensorc.examples.transformer import TransformerBuilder

NAME = "bert"
INPUT_SHAPES = {"input_ids": (1, 32), "attention_mask": (1, 32)}
VOCAB, MAX_POSITIONS, HIDDEN, HEADS, LAYERS, FFN = 1000, 64, 128, 4, 2, 512


def build(seed: int = 0, hidden: int = HIDDEN, heads: int = HEADS, layers: int = LAYERS,
          ffn: int = FFN, max_positions: int = MAX_POSITIONS, name: str = NAME
          ) -> onnx.ModelProto:
    """The encoder at these sizes (models/bert_base.py builds BERT-base's)."""
    b = TransformerBuilder(seed, hidden, heads)
    words = b.weight("word_embeddings", (VOCAB, hidden), 0.5)
    positions = b.weight("position_embeddings", (max_positions, hidden), 0.5)
    # position ids 0..S-1 from the input's shape, the way exporters compute them
    seq_len = b.node("Gather", [b.node("Shape", ["input_ids"]),
                                b.constant("one_index", np.array(1, np.int64))], axis=0)
    position_ids = b.node("Range", [b.constant("zero", np.array(0, np.int64)), seq_len,
                                    b.constant("step", np.array(1, np.int64))])
    x = b.node("Add", [b.node("Gather", [words, "input_ids"], axis=0),
                       b.node("Gather", [positions, position_ids], axis=0)])
    x = b.layer_norm(x)

    # [B, S] int64 mask -> [B, 1, 1, S] float bias
    mask = b.node("Cast", [b.node("Unsqueeze", ["attention_mask", b.constant(
        "mask_axes", np.array([1, 2], np.int64))])], to=TensorProto.FLOAT)
    bias = b.node("Mul", [b.node("Sub", [b.constant("one", np.array(1, np.float32)), mask]),
                          b.constant("neg", np.array(-10000, np.float32))])
    for _ in range(layers):
        x = b.layer_norm(b.node("Add", [x, b.attention(x, bias)]))
        inner = b.linear(b.gelu_erf(b.linear(x, hidden, ffn)), ffn, hidden)
        x = b.layer_norm(b.node("Add", [x, inner]))
    b.node("Identity", [x], output="last_hidden_state")
    first = b.node("Gather", [x, b.constant("first", np.array(0, np.int64))], axis=1)
    b.node("Tanh", [b.linear(first, hidden, hidden)], output="pooled")
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
           for n in ("input_ids", "attention_mask")]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch", "sequence", hidden]),
               helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])]
    return b.model(name, ids, outputs)


def example_inputs(seed: int = 0, shape: tuple[int, int] = INPUT_SHAPES["input_ids"]
                   ) -> dict[str, np.ndarray]:
    """Token ids and a padding mask whose last quarter is padding."""
    rng = np.random.default_rng(seed)
    batch, seq = shape
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq * 3 // 4:] = 0
    return {"input_ids": rng.integers(0, VOCAB, (batch, seq)).astype(np.int64),
            "attention_mask": mask}

"""A BERT-base-shaped encoder: models/bert.py at BERT-base's sizes (hidden 768, 12 heads,
FFN 3072) with four layers (DistilBERT has six), on 128 tokens.

The bundled bert is a 128-wide toy whose kernels take a few microseconds each; this one
has the matmuls (128 x 768 x 768, 128 x 768 x 3072) and the attention (12 heads of 128 x 128)
of the real network, so its timings and its threads mean what they mean for BERT.
Inputs "input_ids" and "attention_mask", int64 [batch, sequence] (``INPUT_SHAPES``: 1 x 128),
outputs "last_hidden_state" [batch, sequence, 768] and "pooled" [batch, 768]. Opset 17,
random weights (a 1000-word vocabulary; 29 M weights, 115 MB), generated on first use.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models import bert

NAME = "bert_base"
INPUT_SHAPES = {"input_ids": (1, 128), "attention_mask": (1, 128)}
HIDDEN, HEADS, LAYERS, FFN, MAX_POSITIONS = 768, 12, 4, 3072, 512
DEPENDS = ("bert.py",)


def build(seed: int = 0) -> onnx.ModelProto:
    return bert.build(seed, HIDDEN, HEADS, LAYERS, FFN, MAX_POSITIONS, NAME)


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids and a padding mask whose last quarter is padding."""
    return bert.example_inputs(seed, INPUT_SHAPES["input_ids"])


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

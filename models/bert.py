"""A BERT-style encoder: the example tensorc ships, built in tensorc/examples/bert.py (``python -m
tensorc.examples`` writes it anywhere); run as a script, this writes models/bert.onnx."""

from __future__ import annotations

from pathlib import Path

import onnx

from tensorc.examples.bert import (  # noqa: F401
    FFN, HEADS, HIDDEN, INPUT_SHAPES, LAYERS, MAX_POSITIONS, NAME, VOCAB, build, example_inputs,
)

if __name__ == "__main__":
    path = Path(__file__).with_name(f"{NAME}.onnx")
    onnx.save(build(), path)
    print(f"wrote {path}")

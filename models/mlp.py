"""MLP 784-256-128-10: the example tensorc ships, built in tensorc/examples/mlp.py (``python -m
tensorc.examples`` writes it anywhere); run as a script, this writes models/mlp.onnx."""

from __future__ import annotations

from pathlib import Path

import onnx

from tensorc.examples.mlp import INPUT_SHAPES, NAME, build  # noqa: F401

if __name__ == "__main__":
    path = Path(__file__).with_name(f"{NAME}.onnx")
    onnx.save(build(), path)
    print(f"wrote {path}")

"""A ResNet-style CNN at 224x224: the example tensorc ships, built in tensorc/examples/resnet.py
(``python -m tensorc.examples`` writes it anywhere); run as a script, this writes
models/resnet.onnx."""

from __future__ import annotations

from pathlib import Path

import onnx

from tensorc.examples.resnet import INPUT_SHAPES, NAME, STAGE_CHANNELS, _ResNetBuilder, build  # noqa: F401

if __name__ == "__main__":
    path = Path(__file__).with_name(f"{NAME}.onnx")
    onnx.save(build(), path)
    print(f"wrote {path}")

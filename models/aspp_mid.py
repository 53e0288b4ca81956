"""The ASPP head of ``models/aspp.py`` at its moderate configuration: dilations 6, 12 and 18 on
a 32x32 map, upsampled 8x (a 512x512 image at output stride 16)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models import aspp

NAME = "aspp_mid"
CONFIG = "moderate"
DEPENDS = ("aspp.py",)
CHANNELS, SIZE, DILATIONS, UPSAMPLE = aspp.CONFIGS[CONFIG]
INPUT_SHAPES = {"features": (1, CHANNELS, SIZE, SIZE)}


def build(seed: int = 0) -> onnx.ModelProto:
    return aspp.build(seed, CONFIG)


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    return aspp.example_inputs(seed, CONFIG)


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

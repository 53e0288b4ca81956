"""A DeepLabV3-style segmentation head: atrous spatial pyramid pooling (ASPP) over a backbone's
feature map, then a bilinear upsample to the image's size.

Five branches over the map, each 256 -> 256 with a bias and a ReLU: a 1x1 conv, three 3x3
convs at the dilations of the configuration (padding = dilation, so the map keeps its size),
and a global average pool with a 1x1 conv, resized back to the map (bilinear). The branches
are concatenated (5 x 256 channels), projected by a 1x1 conv + ReLU, classified by a 1x1 conv
to 21 classes, and resized bilinearly (half-pixel, as torchvision's interpolate with
align_corners=False exports it) to the image, ``UPSAMPLE`` times the map.

Two configurations (``CONFIGS``): "large" (this model, ``aspp``): dilations 12, 24 and 36 on
a 16x16 map (DeepLabV3 at output stride 16 on a 256x256 image: the dilations reach past the
map, most taps read only padding); "moderate" (``aspp_mid``): dilations 6, 12 and 18 on a
32x32 map (a 512x512 image at output stride 16), upsampled 8x. Input "features" [1, 256, H,
W], output "logits" [1, 21, 8H or 16H, ...]. Opset 17, random weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, float_input

NAME = "aspp"
CLASSES = 21
# name -> (channels, map size, dilations, upsampling factor)
CONFIGS = {"large": (256, 16, (12, 24, 36), 16), "moderate": (256, 32, (6, 12, 18), 8)}
CONFIG = "large"
CHANNELS, SIZE, DILATIONS, UPSAMPLE = CONFIGS[CONFIG]
INPUT_SHAPES = {"features": (1, CHANNELS, SIZE, SIZE)}


class _AsppBuilder(GraphBuilder):
    def conv_relu(self, x: str, in_ch: int, out_ch: int, kernel: int = 1, dilation: int = 1,
                  relu: bool = True) -> str:
        w = self.he_normal((out_ch, in_ch, kernel, kernel), in_ch * kernel * kernel)
        bias = (0.05 * self.rng.standard_normal(out_ch)).astype(np.float32)
        pad = dilation * (kernel // 2)
        y = self.node("Conv", [x, self.constant("conv_weight", w),
                               self.constant("conv_bias", bias)],
                      kernel_shape=[kernel, kernel], pads=[pad] * 4,
                      dilations=[dilation, dilation])
        return self.node("Relu", [y]) if relu else y

    def resize(self, x: str, size: tuple[int, int], channels: int, output: str | None = None
               ) -> str:
        sizes = self.constant("sizes", np.array([1, channels, *size], np.int64))
        return self.node("Resize", [x, "", "", sizes], output, mode="linear",
                         coordinate_transformation_mode="half_pixel")


def build(seed: int = 0, config: str = CONFIG) -> onnx.ModelProto:
    channels, size, dilations, upsample = CONFIGS[config]
    b = _AsppBuilder(seed)
    x = "features"
    branches = [b.conv_relu(x, channels, 256)]
    branches += [b.conv_relu(x, channels, 256, 3, d) for d in dilations]
    pooled = b.conv_relu(b.node("GlobalAveragePool", [x]), channels, 256)
    branches.append(b.resize(pooled, (size, size), 256))
    y = b.node("Concat", branches, axis=1)
    y = b.conv_relu(y, 256 * len(branches), 256)
    y = b.conv_relu(y, 256, CLASSES, relu=False)
    image = size * upsample
    b.resize(y, (image, image), CLASSES, output="logits")
    return b.model(NAME if config == CONFIG else f"{NAME}_{config}",
                    [float_input("features", [1, channels, size, size])],
                    [float_input("logits", [1, CLASSES, image, image])])


def example_inputs(seed: int = 0, config: str = CONFIG) -> dict[str, np.ndarray]:
    """A backbone's features: ReLU outputs, about half of them zero."""
    channels, size, _, _ = CONFIGS[config]
    rng = np.random.default_rng(seed)
    features = np.maximum(rng.standard_normal((1, channels, size, size)), 0)
    return {"features": features.astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

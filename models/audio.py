"""A keyword-spotting classifier on one second of raw 16 kHz audio: a learned filterbank
(a 1-D conv with a long kernel and a large stride), two 1-D convs with GELU, a GRU over the
frames and a linear layer on its last hidden state.

Front end: Conv1d 1 -> 64, kernel 400 (25 ms), stride 160 (10 ms), no padding: 16000
samples -> 98 frames, + BatchNormalization + ReLU. Then two Conv1d kernel 3 pad 1
(64 -> 96 -> 128) + BatchNormalization + GELU, spelled as PyTorch exports nn.GELU:
Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5). Transpose [1, 128, 98] -> [98, 1, 128]
(time, batch, features). GRU, one layer, hidden 128, linear_before_reset=1 as PyTorch's
nn.GRU exports; its last hidden state Y_h [1, 1, 128] taken with Gather index -1 (h_n[-1]),
then Gemm to 12 classes.
Input "waveform" [1, 1, 16000], output "logits" [1, 12]. Opset 17, random weights,
BatchNormalization statistics measured on an example input (calibrate_batch_norms).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, calibrate_batch_norms, float_input

NAME = "audio"
SAMPLES, KERNEL, HOP = 16000, 400, 160
INPUT_SHAPES = {"waveform": (1, 1, SAMPLES)}
HIDDEN, CLASSES = 128, 12


class _AudioBuilder(GraphBuilder):
    def conv_bn(self, x: str, in_ch: int, out_ch: int, kernel: int, stride: int = 1,
                pad: int = 0) -> str:
        w = self.he_normal((out_ch, in_ch, kernel), in_ch * kernel)
        y = self.node("Conv", [x, self.constant("conv_weight", w)], kernel_shape=[kernel],
                      strides=[stride], pads=[pad, pad])
        return self.batch_norm(y, out_ch)

    def gelu(self, x: str) -> str:
        erf = self.node("Erf", [self.node("Div", [x, self.constant(
            "sqrt2", np.array(np.sqrt(2), np.float32))])])
        erf_plus_one = self.node("Add", [erf, self.constant("one", np.array(1, np.float32))])
        return self.node("Mul", [self.node("Mul", [x, erf_plus_one]),
                                 self.constant("half", np.array(0.5, np.float32))])

    def gru(self, x: str, features: int) -> str:
        """nn.GRU's export: gates z, r, h stacked in W [1, 3H, I], R [1, 3H, H], B [1, 6H];
        returns Y_h [1, 1, H]."""
        bound = 1 / np.sqrt(HIDDEN)

        def uniform(shape: tuple[int, ...]) -> str:
            return self.constant("gru_param", self.rng.uniform(-bound, bound, shape)
                                 .astype(np.float32))

        w = uniform((1, 3 * HIDDEN, features))
        r = uniform((1, 3 * HIDDEN, HIDDEN))
        bias = uniform((1, 6 * HIDDEN))
        name = self.fresh("gru")
        self.nodes.append(onnx.helper.make_node(
            "GRU", [x, w, r, bias], [f"{name}_y", f"{name}_h"], name=name,
            hidden_size=HIDDEN, linear_before_reset=1))
        return f"{name}_h"


def build(seed: int = 0) -> onnx.ModelProto:
    b = _AudioBuilder(seed)
    x = b.node("Relu", [b.conv_bn("waveform", 1, 64, KERNEL, stride=HOP)])    # 98 frames
    x = b.gelu(b.conv_bn(x, 64, 96, 3, pad=1))
    x = b.gelu(b.conv_bn(x, 96, 128, 3, pad=1))
    x = b.node("Transpose", [x], perm=[2, 0, 1])                               # [T, 1, 128]
    last = b.node("Gather", [b.gru(x, 128), b.constant("last", np.array(-1, np.int64))],
                  axis=0)
    b.gemm(last, HIDDEN, CLASSES, gain=1.0, output="logits")
    model = b.model(NAME, [float_input("waveform", [1, 1, SAMPLES])],
                    [float_input("logits", [1, CLASSES])])
    # measured on another input than the example the tests feed
    return calibrate_batch_norms(model, example_inputs(seed + 1))


def example_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Noise-like audio in [-1, 1]."""
    rng = np.random.default_rng(seed)
    return {"waveform": rng.uniform(-1, 1, (1, 1, SAMPLES)).astype(np.float32)}


if __name__ == "__main__":
    onnx.save(build(), Path(__file__).with_name(f"{NAME}.onnx"))

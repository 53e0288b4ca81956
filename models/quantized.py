"""int8 models as users make them: small float models quantized with onnxruntime's own tool
at test time (``quantize_static``: QDQ, per-channel weights, int8 activations by default;
``quantize_dynamic``: MatMulInteger / DynamicQuantizeLinear), calibrated on random inputs
with a fixed seed.

- :func:`cnn`: conv 3x3/2 + ReLU, conv 3x3 + SiLU (x * Sigmoid(x)), squeeze-and-excite
  (GlobalAveragePool, 1x1 conv + ReLU, 1x1 conv, Sigmoid, Mul), conv 3x3/2 + ReLU, MaxPool,
  1x1 conv + ReLU, conv 3x3 + ReLU, GlobalAveragePool, Flatten, Gemm: input "input"
  [1, 3, size, size], output "logits" [1, 10].
- :func:`transformer`: one encoder block (LayerNorm, multi-head self-attention with MatMul +
  Add projections, residual, LayerNorm, MLP with GELU, residual): input "tokens" [1, seq,
  hidden], output "hidden".

Not in ``models.MODELS`` (they need onnxruntime's quantizer to build): the tests and
``benchmarks/int8.py`` build them here.

>>> q = quantize_static(cnn(32), {"input": (1, 3, 32, 32)})   # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx

from models._builder import GraphBuilder, float_input
from models.transformer import TransformerBuilder

CALIBRATION_SEED = 1234
CALIBRATION_BATCHES = 4


class _CnnBuilder(GraphBuilder):
    def conv(self, x: str, in_ch: int, out_ch: int, kernel: int, stride: int = 1) -> str:
        w = self.he_normal((out_ch, in_ch, kernel, kernel), in_ch * kernel * kernel)
        b = (0.1 * self.rng.standard_normal(out_ch)).astype(np.float32)
        return self.node("Conv", [x, self.constant("conv_weight", w),
                                  self.constant("conv_bias", b)],
                         kernel_shape=[kernel, kernel], strides=[stride, stride],
                         pads=[kernel // 2] * 4)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def silu(self, x: str) -> str:
        return self.node("Mul", [x, self.node("Sigmoid", [x])])

    def squeeze_excite(self, x: str, channels: int, squeeze: int) -> str:
        s = self.node("GlobalAveragePool", [x])
        s = self.relu(self.conv(s, channels, squeeze, 1))
        s = self.node("Sigmoid", [self.conv(s, squeeze, channels, 1)])
        return self.node("Mul", [x, s])


def cnn(size: int = 64, width: int = 32, seed: int = 0) -> onnx.ModelProto:
    """The float CNN above at ``size`` x ``size``, ``width`` channels after the stem."""
    b = _CnnBuilder(seed)
    x = b.relu(b.conv("input", 3, width, 3, 2))
    x = b.silu(b.conv(x, width, width, 3))
    x = b.squeeze_excite(x, width, width // 4)
    x = b.relu(b.conv(x, width, 2 * width, 3, 2))
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.relu(b.conv(x, 2 * width, 2 * width, 1))
    x = b.relu(b.conv(x, 2 * width, 2 * width, 3))
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    w = b.he_normal((10, 2 * width), 2 * width)
    b.node("Gemm", [x, b.constant("fc_weight", w),
                    b.constant("fc_bias", np.zeros(10, np.float32))], output="logits",
           transB=1)
    return b.model("int8_cnn", [float_input("input", [1, 3, size, size])],
                   [float_input("logits", [1, 10])])


def transformer(seq: int = 64, hidden: int = 128, heads: int = 4,
                seed: int = 0) -> onnx.ModelProto:
    """The float encoder block above."""
    b = TransformerBuilder(seed, hidden, heads)
    x = b.node("Add", ["tokens", b.attention(b.layer_norm("tokens"))])
    h = b.linear(b.gelu_erf(b.linear(b.layer_norm(x), hidden, 4 * hidden)), 4 * hidden,
                 hidden)
    b.node("Add", [x, h], output="hidden")
    return b.model("int8_transformer", [float_input("tokens", [1, seq, hidden])],
                   [float_input("hidden", [1, seq, hidden])])


def random_inputs(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32)
            for name, shape in shapes.items()}


def quantize_static(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]],
                    activations: str = "int8", per_channel: bool = True,
                    reduce_range: bool = False) -> onnx.ModelProto:
    """``model`` quantized by onnxruntime's ``quantize_static``: QDQ format, int8 weights,
    ``activations`` int8 (the tool's default) or uint8, calibrated (MinMax) on
    CALIBRATION_BATCHES random inputs drawn with CALIBRATION_SEED."""
    from onnxruntime import quantization as q   # a test dependency, to build the models

    class Reader(q.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([random_inputs(shapes, CALIBRATION_SEED + k)
                                 for k in range(CALIBRATION_BATCHES)])

        def get_next(self):
            return next(self.batches, None)
    act = q.QuantType.QInt8 if activations == "int8" else q.QuantType.QUInt8
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, src)
        q.quantize_static(str(src), str(dst), Reader(), quant_format=q.QuantFormat.QDQ,
                          per_channel=per_channel, reduce_range=reduce_range,
                          activation_type=act, weight_type=q.QuantType.QInt8)
        return onnx.load(dst)


def quantize_dynamic(model: onnx.ModelProto, per_channel: bool = False) -> onnx.ModelProto:
    """``model`` quantized by onnxruntime's ``quantize_dynamic`` (int8 weights; MatMuls become
    DynamicQuantizeLinear + MatMulInteger)."""
    from onnxruntime import quantization as q   # a test dependency, to build the models
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, src)
        q.quantize_dynamic(str(src), str(dst), per_channel=per_channel,
                           weight_type=q.QuantType.QInt8)
        return onnx.load(dst)

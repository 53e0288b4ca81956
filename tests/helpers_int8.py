"""One QDQ node as onnxruntime's quantizer writes it (DequantizeLinear -> Conv | MatMul | Gemm
[-> Relu | Clip] -> QuantizeLinear, int8 weights per channel, an int32 bias), and the integer
arithmetic it stands for, written out in numpy: the reference the int8 kernels must equal."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from helpers import make_model, tensor_info
from onnx import helper

RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


@dataclass
class QdqCase:
    """The parameters of one QDQ node; ``kind``: conv, matmul or gemm (Gemm, transB=1)."""

    kind: str = "conv"
    act: str = "uint8"              # activations' dtype (input and output)
    x_shape: tuple = (1, 8, 10, 10)
    channels: int = 16
    kernel: int = 3
    stride: int = 1
    pad: int = 1
    weight_bound: int = 127         # weights drawn from [-bound, bound]
    activation: str = ""            # "", "relu" or "clip"
    seed: int = 0
    arrays: dict = field(default_factory=dict)

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        inner = self.x_shape[1] if self.kind == "conv" else self.x_shape[-1]
        if self.kind == "conv":
            w_shape = (self.channels, inner, self.kernel, self.kernel)
        elif self.kind == "matmul":
            w_shape = (inner, self.channels)
        else:
            w_shape = (self.channels, inner)
        low, high = RANGES[self.act]
        self.arrays = {
            "wq": rng.integers(-self.weight_bound, self.weight_bound + 1, w_shape)
                     .astype(np.int8),
            "ws": (rng.random(self.channels) * 0.01 + 0.002).astype(np.float32),
            "bq": rng.integers(-3000, 3000, self.channels).astype(np.int32),
            "xs": np.float32(0.02), "xz": np.array(low + 130 if self.act == "uint8" else 3,
                                                   self.act),
            "ys": np.float32(0.4), "yz": np.array(high - 135 if self.act == "uint8" else -5,
                                                  self.act),
        }
        self.x = rng.integers(low, high + 1, self.x_shape).astype(self.act)

    def model(self) -> onnx.ModelProto:
        a = self.arrays
        inits = dict(a, wz=np.zeros(self.channels, np.int8), bs=a["xs"] * a["ws"],
                     bz=np.zeros(self.channels, np.int32))
        axis = 1 if self.kind == "matmul" else 0
        nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
                 helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], axis=axis),
                 helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bf"], axis=0)]
        if self.kind == "conv":
            nodes.append(helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"],
                                          pads=[self.pad] * 4,
                                          strides=[self.stride] * 2))
        elif self.kind == "matmul":
            nodes += [helper.make_node("MatMul", ["xf", "wf"], ["mm"]),
                      helper.make_node("Add", ["mm", "bf"], ["yf"])]
        else:
            nodes.append(helper.make_node("Gemm", ["xf", "wf", "bf"], ["yf"], transB=1))
        y = "yf"
        if self.activation == "relu":
            nodes.append(helper.make_node("Relu", [y], ["act"]))
            y = "act"
        elif self.activation == "clip":
            inits.update(lo=np.float32(-2.0), hi=np.float32(6.0))
            nodes.append(helper.make_node("Clip", [y, "lo", "hi"], ["act"]))
            y = "act"
        nodes.append(helper.make_node("QuantizeLinear", [y, "ys", "yz"], ["y"]))
        return make_model(nodes, [tensor_info("x", self.act, list(self.x_shape))], ["y"],
                          initializers=inits)

    def reference(self, saturate: bool) -> np.ndarray:
        """The output in integers: sum((x - zx) * w) + bias, the products of each two
        consecutive k (channels innermost in a conv, as onnxruntime's channels-last
        im2col orders them) summed and clamped to int16 first where ``saturate`` (AVX2's
        u8 x s8 product), then round(acc * sx * sw / sy) + zy, clipped."""
        a = self.arrays
        x = self.x.astype(np.int64)
        w = a["wq"].astype(np.int64)
        if self.kind == "conv":
            rows, columns = _patches(x, self.kernel, self.stride, self.pad, int(a["xz"]))
            weights = w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)     # [CO, K]
        else:
            rows = x.reshape(-1, x.shape[-1])                                # [M, K]
            weights = w.T if self.kind == "gemm" else w                      # [K, N]
            weights = weights.T                                              # [N, K]
        # u8 bytes as the kernels read them (int8 activations signed, exact)
        products = rows[:, None, :] * weights[None, :, :]                    # [M, N, K]
        if products.shape[-1] % 2:
            products = np.concatenate([products, np.zeros_like(products[..., :1])], -1)
        pairs = products[..., 0::2] + products[..., 1::2]
        if saturate:
            pairs = np.clip(pairs, -32768, 32767)
        acc = pairs.sum(-1) - int(a["xz"]) * weights.sum(-1)[None, :] + a["bq"][None, :]
        multiplier = (np.float32(a["xs"]) * a["ws"]) / np.float32(a["ys"])
        y = np.round((acc.astype(np.float32) * multiplier[None, :]).astype(np.float32))
        y = y + int(a["yz"])
        low, high = RANGES[self.act]
        if self.activation == "relu":
            low = max(low, int(a["yz"]))
        elif self.activation == "clip":
            low = max(low, int(np.round(np.float32(-2.0) / a["ys"])) + int(a["yz"]))
            high = min(high, int(np.round(np.float32(6.0) / a["ys"])) + int(a["yz"]))
        y = np.clip(y, low, high).astype(self.act)
        if self.kind == "conv":
            return y.reshape(columns + (self.channels,)).transpose(0, 3, 1, 2)
        return y.reshape(self.x_shape[:-1] + (self.channels,))


def _patches(x: np.ndarray, kernel: int, stride: int, pad: int, fill: int):
    """x [N, C, H, W] -> rows [N*OH*OW, KH*KW*C] (channels innermost) and (N, OH, OW)."""
    n, c, h, w = x.shape
    padded = np.full((n, c, h + 2 * pad, w + 2 * pad), fill, np.int64)
    padded[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    taps = [padded[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            for i in range(kernel) for j in range(kernel)]                  # each [N, C, OH, OW]
    stacked = np.stack(taps, axis=1)                                         # [N, T, C, OH, OW]
    rows = stacked.transpose(0, 3, 4, 1, 2).reshape(n * oh * ow, -1)
    return rows, (n, oh, ow)

"""A sweep that finds performance cliffs: single-op models (and op + epilogue models) over the
shapes real models use, tensorc beside onnxruntime, side by side in one run.

Each case is one small ONNX model. tensorc compiles it, its output is checked against
onnxruntime's, then both are timed alternating (medians after a warm-up). The table gives
both whole-run times (a ``run()`` call from Python, which for tensorc includes about 4 us of
fixed call overhead, and onnxruntime's ``session.run``), the ratio tensorc / onnxruntime
(above 1: tensorc is slower), tensorc's kernel time (the median time of its kernels measured
inside the native entry function, ``Module.profile``: no Python call overhead) and the
kernels' percent of their roofline bound (the least time the kernels' FLOPs and bytes can
take on this machine, divided by the kernel time, as ``tensorc profile`` reports it); then
the ten worst cases and a summary.

    python -m benchmarks.kernels                     # every family, 1 thread
    python -m benchmarks.kernels --family pool softmax --threads 1
    python -m benchmarks.kernels --family dilated resize --threads 2   # the floor sweep
    python -m benchmarks.kernels --match "13x13" --json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorc  # noqa: E402
from benchmarks.common import format_table  # noqa: E402
from tensorc.benchmark import time_alternating  # noqa: E402
from tensorc.reference import compare_outputs, onnxruntime_session, run_session  # noqa: E402
from tensorc.ops.nn.conv.regions import live_work  # noqa: E402
from tensorc.runtime.machine import machine_roofline  # noqa: E402

OPSET = 17
RNG = np.random.default_rng(0)


@dataclass
class Case:
    """One single-op (or op + epilogue) model."""

    family: str
    name: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    # the least FLOPs and bytes of the case's work: a dilated conv's live taps (not the taps
    # that read only padding), a resize's input and output; None: the kernels' own counts
    least: tuple[float, float] | None = None


@dataclass
class Row:
    family: str
    name: str
    tensorc_ms: float | None = None
    onnxruntime_ms: float | None = None
    kernel_ms: float | None = None         # tensorc's kernels, timed inside the entry
    roofline: float | None = None          # the kernels' bound time / kernel_ms
    least_roofline: float | None = None    # the bound of the case's least work / kernel_ms
    kernels: int = 0
    error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """tensorc / onnxruntime: above 1, tensorc is slower."""
        if self.tensorc_ms and self.onnxruntime_ms:
            return self.tensorc_ms / self.onnxruntime_ms
        return None


# --- building the models ----------------------------------------------------------------------

def _model(nodes, x_shape, inits=None, extra_inputs=()) -> tuple[onnx.ModelProto, dict]:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    feeds = {"x": RNG.standard_normal(x_shape).astype(np.float32)}
    for name, shape in extra_inputs:
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        feeds[name] = RNG.standard_normal(shape).astype(np.float32)
    graph = helper.make_graph(
        nodes, "case", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=8)
    return model, feeds


def _node(op: str, inputs: list[str], output: str = "y", **attrs):
    return helper.make_node(op, inputs, [output], **attrs)


def _scalar(v: float) -> np.ndarray:
    return np.array(v, np.float32)


def _shape(*dims) -> str:
    return "x".join(str(d) for d in dims)


# (channels, size) pairs as real networks have them
FEATURE_MAPS = [(64, 112), (64, 111), (96, 55), (64, 56), (128, 52), (128, 56), (192, 28),
                (256, 27), (192, 27), (320, 28), (576, 14), (512, 14), (256, 13), (1000, 13),
                (48, 104), (32, 208), (24, 224), (16, 224), (1000, 7), (144, 7)]


def pool_cases() -> list[Case]:
    cases = []
    windows = [  # (label, attrs)
        ("2s2", dict(kernel_shape=[2, 2], strides=[2, 2])),
        ("3s2", dict(kernel_shape=[3, 3], strides=[2, 2])),
        ("3s2p1", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
        ("3s2ceil", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
        ("3s1same", dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
        ("3s1same_upper", dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER")),
        ("5s1same", dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
        ("9s1same", dict(kernel_shape=[9, 9], pads=[4, 4, 4, 4])),
        ("13s1same", dict(kernel_shape=[13, 13], pads=[6, 6, 6, 6])),
        ("2s1", dict(kernel_shape=[2, 2], strides=[1, 1])),
    ]
    shapes = [(64, 112), (64, 111), (96, 55), (64, 56), (128, 52), (192, 28), (256, 27),
              (576, 14), (256, 13), (192, 13), (512, 7)]
    for c, s in shapes:
        for label, attrs in windows:
            big = label.startswith(("5", "9", "13"))
            if big and s > 28:
                continue       # SPP-style windows live on small maps
            for op in ("MaxPool", "AveragePool"):
                if op == "AveragePool" and (big or label == "2s1"):
                    continue
                model, feeds = _model([_node(op, ["x"], **attrs)], (1, c, s, s))
                cases.append(Case("pool", f"{op} {label} {_shape(1, c, s, s)}", model, feeds))
    for c, s in [(1000, 13), (1280, 7), (576, 14), (144, 56)]:
        model, feeds = _model([_node("GlobalAveragePool", ["x"])], (1, c, s, s))
        cases.append(Case("pool", f"GlobalAveragePool {_shape(1, c, s, s)}", model, feeds))
    return cases


def _reduce(op: str, axes: list[int], shape) -> tuple:
    if op == "ReduceSum":      # axes is an input since opset 13
        return _model([_node(op, ["x", "axes"], keepdims=1)], shape,
                      {"axes": np.array(axes, np.int64)})
    return _model([_node(op, ["x"], axes=axes, keepdims=1)], shape)


def reduce_cases() -> list[Case]:
    cases = []
    for c, s in [(1000, 13), (256, 27), (64, 56), (96, 55), (1280, 7), (24, 112)]:
        for op in ("ReduceMean", "ReduceMax", "ReduceSum"):
            model, feeds = _reduce(op, [2, 3], (1, c, s, s))
            cases.append(Case("reduce", f"{op} HW {_shape(1, c, s, s)}", model, feeds))
    for shape, axes in [((1, 64, 56, 56), [1]), ((8, 128, 768), [-1]), ((8, 128, 768), [1]),
                        ((1, 1000, 13, 13), [1]), ((32, 4096), [0])]:
        for op in ("ReduceMean", "ReduceSum", "ReduceMax"):
            model, feeds = _reduce(op, axes, shape)
            cases.append(Case("reduce", f"{op} axes={axes} {_shape(*shape)}", model, feeds))
    # detection post-processing: a YOLO head's top 100 of 8400, DETR's 300 of 100 x 91
    for shape, k in [((1, 8400), 100), ((1, 9100), 300), ((8, 4096), 64)]:
        node = helper.make_node("TopK", ["x", "k"], ["y", "indices"], axis=-1)
        model, feeds = _model([node], shape, {"k": np.array([k], np.int64)})
        cases.append(Case("reduce", f"TopK k={k} {_shape(*shape)}", model, feeds))
    for shape in [(1, 8400), (64, 512)]:
        model, feeds = _model([_node("CumSum", ["x", "axis"])], shape,
                              {"axis": np.array(-1, np.int64)})
        cases.append(Case("reduce", f"CumSum {_shape(*shape)}", model, feeds))
    return cases


def row_cases() -> list[Case]:
    cases = []
    for width in (64, 128, 256, 384, 512, 768, 1000, 1024, 2048, 4096):
        rows = max(8, (1 << 18) // width)
        for op in ("Softmax", "LogSoftmax"):
            model, feeds = _model([_node(op, ["x"], axis=-1)], (rows, width))
            cases.append(Case("softmax", f"{op} {_shape(rows, width)}", model, feeds))
        g = RNG.standard_normal(width).astype(np.float32)
        b = RNG.standard_normal(width).astype(np.float32)
        model, feeds = _model([_node("LayerNormalization", ["x", "g", "b"], axis=-1)],
                              (rows, width), {"g": g, "b": b})
        cases.append(Case("layernorm", f"LayerNormalization {_shape(rows, width)}", model,
                          feeds))
    model, feeds = _model([_node("Softmax", ["x"], axis=-1)], (1, 12, 128, 128))
    cases.append(Case("softmax", f"Softmax attention {_shape(1, 12, 128, 128)}", model, feeds))
    # half the keys masked with -1e4 (BERT's attention mask): their exps underflow to 0
    model, feeds = _model([_node("Softmax", ["x"], axis=-1)], (1, 12, 128, 128))
    feeds["x"][..., 64:] = -1e4
    cases.append(Case("softmax", f"Softmax masked attention {_shape(1, 12, 128, 128)}", model,
                      feeds))
    return cases


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Abs", "Neg", "Softplus",
         "HardSigmoid", "HardSwish", "Elu", "Selu", "LeakyRelu", "Softsign", "Floor", "Ceil",
         "Round", "Sin", "Cos", "Reciprocal", "Sign", "Celu"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"]


def elementwise_cases() -> list[Case]:
    cases = []
    shape = (1, 144, 56, 56)
    for op in UNARY:
        nodes = [_node(op, ["x"])]
        if op in ("Log", "Sqrt"):       # positive inputs
            nodes = [_node("Abs", ["x"], "a"), _node(op, ["a"])]
        model, feeds = _model(nodes, shape)
        cases.append(Case("elementwise", f"{op} {_shape(*shape)}", model, feeds))
    model, feeds = _model([_node("Gelu", ["x"])] if OPSET >= 20 else
                          _gelu_nodes("x", "y"), (1, 128, 3072), CONSTANTS)
    cases.append(Case("elementwise", f"GELU(erf) {_shape(1, 128, 3072)}", model, feeds))
    model, feeds = _model(_gelu_tanh_nodes("x", "y"), (1, 128, 1024), CONSTANTS)
    cases.append(Case("elementwise", f"GELU(tanh, pow 3) {_shape(1, 128, 1024)}", model, feeds))
    model, feeds = _model([_node("Sigmoid", ["x"], "s"), _node("Mul", ["x", "s"])], shape)
    cases.append(Case("elementwise", f"SiLU {_shape(*shape)}", model, feeds))
    for se_shape in ((1, 672, 14, 14), (1, 1152, 7, 7)):     # squeeze-and-excite scales
        model, feeds = _model([_node("Mul", ["x", "z"])], se_shape,
                              extra_inputs=[("z", se_shape[:2] + (1, 1))])
        cases.append(Case("elementwise", f"Mul per-channel {_shape(*se_shape)}", model, feeds))
    for op in BINARY:
        for other, label in (((1, 144, 56, 56), "same"), ((1, 144, 1, 1), "per-channel"),
                             ((56,), "last axis")):
            if op == "Pow":
                model, feeds = _model([_node("Abs", ["x"], "a"), _node("Pow", ["a", "e"])],
                                      shape, {"e": _scalar(1.7)})
                cases.append(Case("elementwise", f"Pow x^1.7 {_shape(*shape)}", model, feeds))
                for e in (2.0, 3.0, 0.5):
                    model, feeds = _model([_node("Abs", ["x"], "a"),
                                           _node("Pow", ["a", "e"])], shape, {"e": _scalar(e)})
                    cases.append(Case("elementwise", f"Pow x^{e:g} {_shape(*shape)}", model,
                                      feeds))
                break
            model, feeds = _model([_node(op, ["x", "z"])], shape, extra_inputs=[("z", other)])
            cases.append(Case("elementwise", f"{op} {label} {_shape(*shape)}", model, feeds))
    return cases


CONSTANTS = {"sqrt2": _scalar(math.sqrt(2)), "one": _scalar(1.0), "half": _scalar(0.5),
             "three": _scalar(3.0), "k": _scalar(0.044715),
             "r2pi": _scalar(math.sqrt(2 / math.pi))}


def _gelu_nodes(x: str, y: str) -> list:
    return [_node("Div", [x, "sqrt2"], "g_d"), _node("Erf", ["g_d"], "g_e"),
            _node("Add", ["g_e", "one"], "g_e1"), _node("Mul", [x, "g_e1"], "g_m"),
            _node("Mul", ["g_m", "half"], y)]


def _gelu_tanh_nodes(x: str, y: str) -> list:
    return [_node("Pow", [x, "three"], "t_p"), _node("Mul", ["t_p", "k"], "t_pk"),
            _node("Add", [x, "t_pk"], "t_in"), _node("Mul", ["t_in", "r2pi"], "t_a"),
            _node("Tanh", ["t_a"], "t_t"), _node("Add", ["t_t", "one"], "t_t1"),
            _node("Mul", [x, "t_t1"], "t_m"), _node("Mul", ["t_m", "half"], y)]


def _conv(x_shape, filters, kernel, stride=1, pads=None, group=1, tail=(), dilation=1
          ) -> tuple:
    c = x_shape[1]
    spatial = len(x_shape) - 2
    k = [kernel] * spatial if isinstance(kernel, int) else list(kernel)
    w = (RNG.standard_normal((filters, c // group, *k)) / math.sqrt(c // group * math.prod(k))
         ).astype(np.float32)
    b = RNG.standard_normal(filters).astype(np.float32) * 0.1
    pads = pads if pads is not None else [kk // 2 * dilation for kk in k] * 2
    out = "c" if tail else "y"
    nodes = [_node("Conv", ["x", "w", "b"], out, kernel_shape=k, strides=[stride] * spatial,
                   pads=pads, group=group, dilations=[dilation] * spatial), *tail]
    return _model(nodes, x_shape, {"w": w, "b": b, **CONSTANTS})


def _conv_transpose(x_shape, filters, kernel, stride, pads, output_padding=0) -> tuple:
    c, spatial = x_shape[1], len(x_shape) - 2
    w = (RNG.standard_normal((c, filters, *[kernel] * spatial)) /
         math.sqrt(c * kernel ** spatial)).astype(np.float32)
    b = RNG.standard_normal(filters).astype(np.float32) * 0.1
    node = _node("ConvTranspose", ["x", "w", "b"], "c", kernel_shape=[kernel] * spatial,
                 strides=[stride] * spatial, pads=[pads] * 2 * spatial,
                 output_padding=[output_padding] * spatial)
    return _model([node, _node("Relu", ["c"])], x_shape, {"w": w, "b": b})


def conv_cases() -> list[Case]:
    cases = []
    # 1-D front ends: long kernels, large strides
    for c, length, filters, kernel, stride in [(1, 16000, 64, 400, 160), (1, 16000, 512, 10, 5),
                                               (1, 640, 258, 256, 128), (64, 100, 128, 3, 1),
                                               (80, 3000, 384, 3, 1), (1, 32000, 32, 80, 4)]:
        model, feeds = _conv((1, c, length), filters, kernel, stride, pads=[0, 0])
        cases.append(Case("conv1d", f"Conv1d {c}->{filters} k{kernel} s{stride} L{length}",
                          model, feeds))
    # stems and few-channel convs
    for c, size, filters, kernel, stride in [(3, 224, 64, 3, 2), (3, 224, 32, 3, 2),
                                             (3, 224, 64, 7, 2), (3, 416, 16, 3, 2),
                                             (1, 112, 32, 3, 2), (4, 224, 32, 3, 4),
                                             (3, 299, 32, 3, 2), (2, 128, 16, 5, 2),
                                             (3, 224, 96, 4, 4)]:
        model, feeds = _conv((1, c, size, size), filters, kernel, stride)
        cases.append(Case("small_c", f"Conv {c}->{filters} {kernel}x{kernel} s{stride} "
                          f"{size}x{size}", model, feeds))
    # depthwise convs (MobileNet / EfficientNet shapes)
    for c, size, kernel, stride in [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1),
                                    (144, 56, 5, 2), (240, 28, 5, 1), (480, 14, 3, 1),
                                    (672, 14, 5, 2), (1152, 7, 5, 1), (192, 27, 3, 1),
                                    (128, 28, 3, 1)]:
        model, feeds = _conv((1, c, size, size), c, kernel, stride, group=c)
        cases.append(Case("depthwise", f"DWConv {c} {kernel}x{kernel} s{stride} "
                          f"{size}x{size}", model, feeds))
    # dense convs on odd maps (Inception, SqueezeNet, YOLO shapes) and ResNet's
    for c, size, filters, kernel, stride, pads in [
            (80, 73, 192, 3, 1, [0, 0, 0, 0]), (288, 35, 384, 3, 2, [0, 0, 0, 0]),
            (32, 147, 64, 3, 1, None), (64, 35, 96, 3, 1, None),
            (160, 17, 192, (1, 7), 1, [0, 3, 0, 3]), (160, 17, 192, (7, 1), 1, [3, 0, 3, 0]),
            (64, 56, 64, 3, 1, None), (128, 56, 128, 3, 2, None), (256, 14, 256, 3, 1, None),
            (512, 7, 512, 3, 1, None), (48, 27, 128, 3, 1, None), (256, 13, 512, 3, 1, None),
            (16, 208, 32, 3, 2, None), (32, 104, 64, 3, 2, None)]:     # YOLO's downsamplers
        model, feeds = _conv((1, c, size, size), filters, kernel, stride, pads=pads)
        k = "x".join(map(str, kernel)) if isinstance(kernel, tuple) else f"{kernel}x{kernel}"
        cases.append(Case("dense", f"Conv {c}->{filters} {k} s{stride} {size}x{size}",
                          model, feeds))
    # segmentation / generator decoders: U-Net's 2x2 s2, DCGAN's 4x4 s2 p1, 3x3 s2 p1 op1
    for c, size, filters, kernel, stride, pads, extra in [
            (256, 28, 128, 2, 2, 0, 0), (128, 56, 64, 2, 2, 0, 0), (64, 32, 32, 4, 2, 1, 0),
            (256, 8, 128, 4, 2, 1, 0), (64, 40, 32, 3, 2, 1, 1)]:
        model, feeds = _conv_transpose((1, c, size, size), filters, kernel, stride, pads, extra)
        cases.append(Case("transposed", f"ConvTranspose {c}->{filters} {kernel}x{kernel} "
                          f"s{stride} p{pads} {size}x{size}", model, feeds))
    # dilated (DeepLab's atrous convs) and grouped convs (ResNeXt, ShuffleNet)
    for c, size, filters, kernel, dilation, group in [
            (256, 33, 256, 3, 2, 1), (256, 33, 256, 3, 6, 1), (128, 56, 128, 3, 1, 32),
            (256, 28, 256, 3, 1, 32), (240, 28, 240, 1, 1, 3)]:
        model, feeds = _conv((1, c, size, size), filters, kernel, group=group,
                             dilation=dilation)
        label = f"d{dilation}" if dilation > 1 else f"g{group}"
        cases.append(Case("dilated" if dilation > 1 else "grouped",
                          f"Conv {c}->{filters} {kernel}x{kernel} {label} {size}x{size}",
                          model, feeds))
    # video: 3-D convs (I3D, R3D shapes)
    for c, depth, size, filters, stride in [(64, 8, 28, 64, 1), (3, 16, 112, 64, 2)]:
        model, feeds = _conv((1, c, depth, size, size), filters, 3, stride)
        cases.append(Case("conv3d", f"Conv3d {c}->{filters} 3x3x3 s{stride} "
                          f"{depth}x{size}x{size}", model, feeds))
    # conv + activation epilogues (op + epilogue models)
    silu = [_node("Sigmoid", ["c"], "s"), _node("Mul", ["c", "s"])]
    hardswish = [_node("HardSigmoid", ["c"], "h", alpha=1 / 6, beta=0.5),
                 _node("Mul", ["c", "h"])]
    for label, tail in (("SiLU", silu), ("GELU", _gelu_nodes("c", "y")),
                        ("HardSwish", hardswish), ("ReLU", [_node("Relu", ["c"])])):
        for c, size, filters in [(144, 56, 24), (32, 112, 16), (96, 27, 96)]:
            model, feeds = _conv((1, c, size, size), filters, 1, tail=tail)
            cases.append(Case("epilogue", f"Conv1x1 {c}->{filters} {size}x{size} + {label}",
                              model, feeds))
    return cases


def transpose_cases() -> list[Case]:
    """Data movement that transposes: layout changes, a detector head's decode, a channel
    shuffle, attention heads, a plain matrix."""
    cases = []
    for shape, perm, label in [((1, 64, 56, 56), [0, 2, 3, 1], "NCHW->NHWC"),
                               ((1, 56, 56, 64), [0, 3, 1, 2], "NHWC->NCHW"),
                               ((1, 24, 112, 112), [0, 2, 3, 1], "NCHW->NHWC"),
                               ((1, 3, 85, 52, 52), [0, 1, 3, 4, 2], "detector head"),
                               ((1, 2, 116, 28, 28), [0, 2, 1, 3, 4], "channel shuffle"),
                               ((1, 128, 12, 64), [0, 2, 1, 3], "attention heads"),
                               ((1000, 300), [1, 0], "matrix")]:
        model, feeds = _model([_node("Transpose", ["x"], perm=perm)], shape)
        cases.append(Case("transpose", f"Transpose {label} {_shape(*shape)}", model, feeds))
    model, feeds = _model([_node("Transpose", ["x"], "t", perm=[0, 1, 3, 4, 2]),
                           _node("Sigmoid", ["t"])], (1, 3, 85, 52, 52))
    cases.append(Case("transpose", f"Transpose + Sigmoid detector head "
                      f"{_shape(1, 3, 85, 52, 52)}", model, feeds))
    return cases


# --- the floor sweep (issue 37): dilated convs and resize by large factors -------------------

def dilated_cases() -> list[Case]:
    """3x3 convs at dilations 1-36 (padding = dilation) on maps 7-64, strides 1 and 2: DeepLab's
    atrous convs, whose taps read only padding where the dilation nears the map's size. The
    least work counts the live taps alone (ops/nn/conv/regions.py)."""
    cases = []
    sweep = [(256, 7, d, 1) for d in (1, 3, 6)] + \
        [(256, 16, d, 1) for d in (1, 2, 6, 12, 24, 36)] + [(256, 16, 12, 2)] + \
        [(128, 33, d, 1) for d in (2, 6, 12, 18, 36)] + [(128, 33, 6, 2), (128, 33, 18, 2)] + \
        [(64, 64, d, 1) for d in (2, 6, 12, 24, 36)] + [(64, 64, 12, 2), (64, 64, 36, 2)]
    for c, size, d, stride in sweep:
        model, feeds = _conv((1, c, size, size), c, 3, stride=stride, dilation=d)
        out = (size - 1) // stride + 1
        taps = live_work((size, size), (3, 3), (stride,) * 2, (d, d), (d,) * 4, (out, out))
        flops = 2.0 * c * c * taps
        nbytes = 4.0 * (c * size * size + c * c * 9 + c * out * out)
        cases.append(Case("dilated", f"Conv {c}->{c} 3x3 d{d} s{stride} {size}x{size} "
                          f"(live taps {taps / (9 * out * out):.0%})", model, feeds,
                          least=(flops, nbytes)))
    return cases


def _resize(x_shape, out_hw, mode: str, coordinates: str) -> tuple:
    sizes = np.array([*x_shape[:2], *out_hw], np.int64)
    extra = {"nearest_mode": "floor"} if mode == "nearest" else {}
    node = _node("Resize", ["x", "", "", "sizes"], mode=mode,
                 coordinate_transformation_mode=coordinates, **extra)
    return _model([node], x_shape, {"sizes": sizes})


def resize_cases() -> list[Case]:
    """Upsampling by factors 2-16 to odd sizes (a segmentation head's logits to the image,
    a detector's feature pyramid), every mode and the two usual coordinate modes. The least
    work is reading the input and writing the output once."""
    cases = []
    for c, size, factor, extra in [(21, 16, 16, 1), (21, 32, 8, 1), (19, 64, 4, 1),
                                   (256, 13, 2, 0), (64, 40, 4, 3), (21, 33, 16, -15)]:
        out = size * factor + extra
        for mode, coordinates in [("linear", "half_pixel"), ("linear", "align_corners"),
                                  ("nearest", "asymmetric"), ("cubic", "half_pixel")]:
            model, feeds = _resize((1, c, size, size), (out, out), mode, coordinates)
            nbytes = 4.0 * c * (size * size + out * out)
            cases.append(Case("resize", f"Resize {mode} {coordinates} {_shape(1, c, size, size)}"
                              f" -> {out}x{out}", model, feeds, least=(0.0, nbytes)))
    return cases


FAMILIES = {
    "dilated": dilated_cases,
    "resize": resize_cases,
    "pool": pool_cases,
    "reduce": reduce_cases,
    "softmax": row_cases,   # softmax, log-softmax and layernorm rows
    "elementwise": elementwise_cases,
    "conv": conv_cases,     # 1-D convs, few-channel convs, conv + epilogue
    "transpose": transpose_cases,
}


# --- measuring ------------------------------------------------------------------------------

def measure(case: Case, threads: int, seconds: float) -> Row:
    row = Row(case.family, case.name)
    try:
        module = tensorc.compile(case.model, num_threads=threads)
    except tensorc.TensorcError as error:
        row.error = f"compile: {error}"
        return row
    row.kernels = len(module.kernels)
    session = onnxruntime_session(case.model, threads)
    comparison = compare_outputs(module.run(case.feeds), run_session(session, case.feeds))
    if not comparison.passed:
        row.error = f"outputs disagree with onnxruntime (max abs err {comparison.max_abs:.3g})"
        return row
    feeds = case.feeds
    timings = time_alternating({"tensorc": lambda: module.run(feeds),
                                "onnxruntime": lambda: session.run(None, feeds)},
                               seconds=seconds, samples=7, warmup=2)
    row.tensorc_ms = timings["tensorc"].median_ms
    row.onnxruntime_ms = timings["onnxruntime"].median_ms
    roofline = machine_roofline(threads=threads)
    module.num_threads = threads
    profile = module.profile(feeds, seconds=seconds / 2, roofline=roofline)
    row.kernel_ms = profile.kernel_seconds * 1e3
    bound = sum(k.bound_seconds for k in profile.kernels)
    row.roofline = bound / profile.kernel_seconds if profile.kernel_seconds else None
    if case.least is not None and profile.kernel_seconds:
        row.least_roofline = roofline.bound_seconds(*case.least) / profile.kernel_seconds
    return row


def render(rows: list[Row], worst: int = 10) -> str:
    header = ["family", "case", "tensorc ms", "onnxruntime ms", "tc/ort", "kernel ms",
              "kernel roofline", "least-work roofline"]

    def line(r: Row) -> list[str]:
        return [r.family, r.name, f"{r.tensorc_ms:.4f}" if r.tensorc_ms else "-",
                f"{r.onnxruntime_ms:.4f}" if r.onnxruntime_ms else "-",
                f"{r.ratio:.2f}" if r.ratio else "-",
                f"{r.kernel_ms:.4f}" if r.kernel_ms else "-",
                f"{r.roofline:.0%}" if r.roofline is not None else "-",
                f"{r.least_roofline:.0%}" if r.least_roofline is not None else "-"]
    measured = [r for r in rows if r.ratio]
    parts = [format_table(header, [line(r) for r in rows])]
    ranked = sorted(measured, key=lambda r: -r.ratio)[:worst]
    parts.append(f"\nthe {len(ranked)} worst cases (tensorc / onnxruntime):")
    parts.append(format_table(header, [line(r) for r in ranked]))
    if measured:
        ratios = [r.ratio for r in measured]
        geomean = math.exp(statistics.fmean(math.log(x) for x in ratios))
        slow = sum(1 for x in ratios if x > 2)
        parts.append(f"\n{len(measured)} cases: geomean tensorc/onnxruntime {geomean:.2f}, "
                     f"median {statistics.median(ratios):.2f}, worst {max(ratios):.2f}, "
                     f"{slow} slower than 2x; tensorc's kernels under 30% of their "
                     f"roofline in {sum(1 for r in measured if (r.roofline or 0) < 0.3)} "
                     f"cases")
    errors = [r for r in rows if r.error]
    for r in errors:
        parts.append(f"ERROR {r.family} {r.name}: {r.error}")
    parts.append("tc/ort: whole-run times, above 1 tensorc is slower; kernel ms: tensorc's "
                 "kernels timed inside the native entry (no Python call overhead); kernel "
                 "roofline: their bound time / kernel ms (each kernel's memory bound at the "
                 "cache level its bytes fit in; above 100% a figure to doubt, not clipped); "
                 "least-work roofline: the bound of the case's least work (a dilated conv's "
                 "live taps, a resize's input read and output written once) / kernel ms")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", nargs="+", choices=sorted(FAMILIES),
                        default=sorted(FAMILIES), help="case families (default: all)")
    parser.add_argument("--match", help="only cases whose name contains this text")
    parser.add_argument("--threads", type=int, default=1, help="threads (default: 1)")
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="time per side per case (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    cases = [c for f in args.family for c in FAMILIES[f]()
             if not args.match or args.match in c.name]
    rows = []
    start = time.perf_counter()
    for k, case in enumerate(cases, 1):
        print(f"[{k}/{len(cases)}] {case.family}: {case.name}", file=sys.stderr, flush=True)
        rows.append(measure(case, args.threads, args.seconds))
    print(f"measured {len(cases)} cases in {time.perf_counter() - start:.0f} s",
          file=sys.stderr)
    if args.json:
        print(json.dumps([asdict(r) | {"ratio": r.ratio} for r in rows], indent=1))
    else:
        print(render(rows))
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

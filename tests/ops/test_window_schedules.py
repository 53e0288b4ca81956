"""Depthwise convs and pooling windows against numpy, in the forms their schedules take: the
flat phases of strided depthwise convs (ops/nn/conv/depthwise_flat.py) and the single pass's
blocks of rows (ops/nn/window_schedule.py, schedule_window), with every choice of their knobs."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper
from test_pool_separable import avg_pool_ref, check_max, max_pool_ref, with_nans

import tensorc
from tensorc.autotune.task import extract_tasks
from tensorc.runtime.kernel import build_kernel
from tensorc.ops.nn.conv import depthwise_flat
from tensorc.ops.nn.conv import strategy as conv_strategy
from tensorc.ops.nn.pool import strategy as pool_strategy
from tensorc.target import Target



@pytest.fixture(autouse=True)
def plain_layout(monkeypatch):
    """The schedules here are the plain layout's: a lone depthwise conv with short output rows
    would take the blocked layout instead (test_blocked_layout.py tests that)."""
    monkeypatch.setattr(conv_strategy, "narrow_depthwise", lambda attrs, x, out, b: False)


def depthwise_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pads,
                  dilation: int = 1) -> np.ndarray:
    """out[n, c, y, x] = b[c] + sum over (ky, kx) of padded[n, c, y*s + ky*d, x*s + kx*d] *
    w[c, 0, ky, kx], in float64."""
    k = w.shape[2:]
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]),
                                           (pads[1], pads[3])))
    out = [(padded.shape[2 + d] - (k[d] - 1) * dilation - 1) // stride + 1 for d in range(2)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for ky in range(k[0]):
        for kx in range(k[1]):
            tap = padded[:, :, ky * dilation::stride, kx * dilation::stride]
            y += tap[:, :, :out[0], :out[1]] * w[None, :, 0, ky, kx, None, None]
    return (y + b[None, :, None, None]).astype(np.float32)


def depthwise_model(shape, kernel: int, stride: int, pads, dilation: int = 1,
                    epilogue: str = "", seed: int = 0):
    channels = shape[1]
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((channels, 1, kernel, kernel)) / kernel).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if epilogue else "y"],
                              kernel_shape=[kernel, kernel], strides=[stride, stride],
                              pads=list(pads), dilations=[dilation, dilation],
                              group=channels)]
    if epilogue == "silu":
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]),
                  helper.make_node("Mul", ["c", "s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", shape)], ["y"],
                       initializers={"w": w, "b": b})
    return model, w, b


def loops(model) -> str:
    return tensorc.inspect(model, stage="loops")


# ---------------------------------------------------------------------------------------------
# depthwise convs

DEPTHWISE = [  # (channels, size, kernel, stride): MobileNet, EfficientNet and odd shapes
    (32, 112, 3, 1), (16, 112, 3, 2), (144, 56, 3, 1), (24, 56, 5, 2), (240, 28, 5, 1),
    (40, 28, 3, 2), (96, 27, 3, 1), (48, 27, 5, 2), (480, 14, 3, 1), (672, 14, 5, 2),
    (96, 14, 5, 1), (64, 13, 3, 2), (80, 13, 5, 1), (1152, 7, 5, 1), (160, 7, 3, 2),
    (960, 7, 3, 1), (16, 7, 5, 2),
]


@pytest.mark.parametrize("channels, size, kernel, stride", DEPTHWISE)
def test_depthwise_conv(channels, size, kernel, stride) -> None:
    pads = [kernel // 2] * 4
    model, w, b = depthwise_model((1, channels, size, size), kernel, stride, pads,
                                  seed=size + kernel)
    x = np.random.default_rng(channels).standard_normal((1, channels, size, size))
    x = x.astype(np.float32)
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, depthwise_ref(x, w, b, stride, pads), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, kernel, stride, pads, dilation", [
    ((2, 24, 15, 17), 3, 2, [0, 0, 0, 0], 1),     # no padding, odd sizes, two images
    ((1, 32, 16, 16), 5, 2, [1, 2, 2, 1], 1),     # uneven padding
    ((1, 16, 20, 20), 3, 2, [2, 2, 2, 2], 2),     # dilated: taps of one phase only
    ((1, 8, 30, 30), 3, 3, [1, 1, 1, 1], 1),      # stride 3
    ((1, 12, 9, 9), 7, 2, [3, 3, 3, 3], 1),       # a window larger than a phase's row
])
def test_strided_depthwise_conv_shapes(shape, kernel, stride, pads, dilation) -> None:
    model, w, b = depthwise_model(shape, kernel, stride, pads, dilation)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    assert "conv_window" in loops(model)
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, depthwise_ref(x, w, b, stride, pads, dilation), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels, size, kernel, stride", [
    (672, 14, 5, 2), (144, 56, 5, 2), (1152, 7, 5, 1), (32, 112, 3, 1)])
def test_depthwise_conv_with_silu(channels, size, kernel, stride) -> None:
    # the epilogue (bias, SiLU) runs on the output rows of the same kernel
    pads = [kernel // 2] * 4
    model, w, b = depthwise_model((1, channels, size, size), kernel, stride, pads, 1, "silu")
    compiled = tensorc.compile(model)
    assert len(compiled.kernels) == 1
    x = np.random.default_rng(5).standard_normal((1, channels, size, size))
    x = x.astype(np.float32)
    c = depthwise_ref(x, w, b, stride, pads).astype(np.float64)
    check_result(compiled.run({"x": x})["y"], (c / (1 + np.exp(-c))).astype(np.float32),
                 rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride, flat", [(1, False), (2, True)])
def test_strided_depthwise_convs_take_the_flat_phases(stride, flat) -> None:
    model, _, _ = depthwise_model((1, 64, 14, 14), 5, stride, [2, 2, 2, 2])
    text = loops(model)
    assert ("conv_window" in text) == flat
    if flat:        # the phases and the window are buffers of one channel's plane
        for name in ("flat_pad", "conv_window.local"):
            line = next(ln.strip() for ln in text.splitlines()
                        if ln.strip().startswith(f"allocate {name}:"))
            assert line.endswith("(local)") and "[1, 1, " in line, line


def test_flat_layout_of_a_strided_window() -> None:
    # 5x5 stride 2 on a 14x14 map padded by 2: phases of 9 columns, a 7x7 output is 61 flat
    # positions (7 rows 9 apart), rounded up to 64; each tap reads one phase at an offset
    attrs = {"strides": (2, 2), "pads": (2, 2, 2, 2)}
    layout = depthwise_flat.flat_layout(attrs, (1, 8, 14, 14), (5, 5), (7, 7), lanes=16)
    assert (layout.pitch, layout.positions, layout.phases) == (9, 64, (2, 2))
    assert layout.rows * layout.pitch >= 64 + 2 * 9 + 2      # room for the last tap
    assert layout.tap(3, 4) == (1, 0, 1 * 9 + 2)


# ---------------------------------------------------------------------------------------------
# pooling

def run_pool(kind: str, x: np.ndarray, opset: int = 17, **attrs) -> np.ndarray:
    model = make_model([helper.make_node(kind, ["x"], ["y"], **attrs)],
                       [tensor_info("x", "float32", x.shape)], ["y"], opset=opset)
    return tensorc.compile(model).run({"x": x})["y"]


POOLS = [  # (size, kernel, strides, pads, ceil_mode)
    (13, 3, 2, [0, 0, 0, 0], 0), (13, 3, 2, [0, 0, 0, 0], 1), (13, 3, 2, [1, 1, 1, 1], 0),
    (7, 3, 2, [0, 0, 0, 0], 0), (7, 3, 2, [0, 0, 0, 0], 1), (7, 3, 2, [1, 1, 1, 1], 0),
    (14, 3, 2, [1, 1, 1, 1], 1), (13, 5, 1, [2, 2, 2, 2], 0), (14, 5, 1, [2, 2, 2, 2], 0),
    (27, 5, 1, [2, 2, 2, 2], 0), (7, 5, 1, [2, 2, 2, 2], 0), (28, 3, 1, [1, 1, 1, 1], 0),
    (112, 3, 1, [1, 1, 1, 1], 0), (56, 3, 2, [1, 1, 1, 1], 1),
]


@pytest.mark.parametrize("size, kernel, stride, pads, ceil_mode", POOLS)
def test_max_pool(size, kernel, stride, pads, ceil_mode) -> None:
    x = with_nans((1, 6, size, size), size + kernel, 0.02)
    attrs = dict(kernel_shape=[kernel] * 2, strides=[stride] * 2, pads=pads,
                 ceil_mode=ceil_mode)
    check_max(run_pool("MaxPool", x, **attrs),
              max_pool_ref(x, [kernel] * 2, [stride] * 2, pads, None, bool(ceil_mode)))


@pytest.mark.parametrize("size, kernel, stride, pads, ceil_mode", POOLS)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(size, kernel, stride, pads, ceil_mode, count_include_pad) -> None:
    x = np.random.default_rng(size).standard_normal((1, 5, size, size)).astype(np.float32)
    attrs = dict(kernel_shape=[kernel] * 2, strides=[stride] * 2, pads=pads,
                 ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    want = avg_pool_ref(x, [kernel] * 2, [stride] * 2, pads, None, bool(ceil_mode),
                        bool(count_include_pad))
    check_result(run_pool("AveragePool", x, **attrs), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# every config of the schedules' spaces computes the same

def every_config(model, check, seed: int = 0) -> set[str]:
    """Build the model's one kernel with every config of its space and check each against
    the unscheduled program, and check that each knob changes the schedule; returns the
    space's name and the distinct traces."""
    (task,) = extract_tasks(model, measure=False)
    space = task.space()
    arrays = task.inputs(seed)
    if task.ops[0] == "max_pool":
        arrays = [with_nans(a.shape, seed, 0.03) for a in arrays]
    want = task.reference(arrays)[0]
    traces = {}
    for config in space.configs():
        func = task.schedule(config)
        traces[config] = repr(func.attrs["trace"])
        out = np.full(want.shape, 7.0, want.dtype)
        build_kernel(func)(*arrays, out, num_threads=1)
        check(out, want)
    # every knob with a choice changes the schedule somewhere: some config and another value
    # of the knob give different traces (a single-value knob is listed for the schedule to
    # read, where no choice arises)
    for knob in (k for k in space.knobs.values() if len(k.choices) > 1):
        assert any(traces[c] != traces[c.replace(**{knob.name: v})]
                   for c in traces for v in knob.choices
                   if space.is_valid(c.replace(**{knob.name: v}))), knob.name
    return {space.name} | set(traces.values())


def close(got, want) -> None:
    check_result(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind, size, kernel, stride", [
    ("MaxPool", 7, 5, 1), ("MaxPool", 13, 3, 1), ("AveragePool", 28, 3, 1),
    ("Conv", 14, 5, 1), ("Conv", 14, 5, 2), ("Conv", 27, 3, 2)])
def test_every_config_of_the_window_spaces(kind, size, kernel, stride) -> None:
    pads = [kernel // 2] * 4
    shape = (1, 3, size, size)
    if kind == "Conv":
        model, _, _ = depthwise_model(shape, kernel, stride, pads)
    else:
        model = make_model([helper.make_node(kind, ["x"], ["y"], kernel_shape=[kernel] * 2,
                                             strides=[stride] * 2, pads=pads)],
                           [tensor_info("x", "float32", shape)], ["y"])
    names = every_config(model, check_max if kind == "MaxPool" else close)
    assert ("window (flat)" in names) == (stride > 1)


@pytest.mark.parametrize("shape, kernel, kind, rows", [
    ((1, 1152, 7, 7), 5, "Conv", 7),       # rows of half a register: 7 chains
    ((1, 480, 14, 14), 3, "Conv", 7),      # multiply-adds: up to 8 accumulators
    ((1, 240, 28, 28), 3, "Conv", 4),      # two registers a row
    ((1, 240, 28, 28), 5, "Conv", 2),      # 5x5 on rows of two registers: 4 accumulators
    ((1, 256, 13, 13), 5, "MaxPool", 2),   # maxima: 4 accumulators, at most 1/8 twice
    ((1, 512, 7, 7), 5, "MaxPool", 7),
    ((1, 32, 112, 112), 3, "Conv", 8),     # bands of rows buffered: whole bands
])
def test_default_rows(monkeypatch, shape, kernel, kind, rows) -> None:
    if Target.host().vector_lanes("float32") != 16:
        pytest.skip("the figures are for 16-lane vectors")
    # (the single pass, which max pools of NaN planes take in the NaN-split form)
    monkeypatch.setattr(pool_strategy, "NAN_SPLIT_OVERHEAD", 10**6)
    pads = [kernel // 2] * 4
    if kind == "Conv":
        model, _, _ = depthwise_model(shape, kernel, 1, pads)
    else:
        model = make_model([helper.make_node(kind, ["x"], ["y"], kernel_shape=[kernel] * 2,
                                             pads=pads)],
                           [tensor_info("x", "float32", shape)], ["y"])
    (task,) = extract_tasks(model, measure=False)
    assert task.space().default()["rows"] == rows

"""Loss, sampling and signal ops compiled by tensorc against numpy references written here:
NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, GridSample, AffineGrid, Col2Im,
CenterCropPad, CumProd and the window functions."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import TensorProto, helper

import tensorc

RTOL, ATOL = 1e-4, 1e-5


def rand(shape, seed=0, low=-1.0, high=1.0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def run_node(node, feeds: dict[str, np.ndarray], initializers=None, opset: int = 17,
             outputs=("y",)) -> dict[str, np.ndarray]:
    inputs = [tensor_info(n, a.dtype.name, a.shape) for n, a in feeds.items()]
    model = make_model([node], inputs, list(outputs), opset=opset, initializers=initializers)
    return tensorc.compile(model).run(feeds)


check = check_result

# ---------------------------------------------------------------------------------------------
# losses

def nll_reference(log_prob: np.ndarray, target: np.ndarray, weight, reduction: str,
                  ignore_index) -> np.ndarray:
    n, c = log_prob.shape[:2]
    losses = np.zeros(target.shape, np.float64)
    weights = np.zeros(target.shape, np.float64)
    for pos in np.ndindex(*target.shape):
        cls = int(target[pos])
        if cls == ignore_index:
            continue
        w = 1.0 if weight is None else float(weight[cls])
        losses[pos] = -w * log_prob[(pos[0], cls) + pos[1:]]
        weights[pos] = w
    if reduction == "none":
        out = losses
    elif reduction == "sum":
        out = losses.sum()
    else:
        out = losses.sum() / weights.sum()
    return np.asarray(out, log_prob.dtype)


def log_softmax_reference(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _loss_node(op: str, reduction: str, weighted: bool, ignore_index, outputs=("y",)):
    attrs = {"reduction": reduction}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    inputs = ["x", "t", "w"] if weighted else ["x", "t"]
    return helper.make_node(op, inputs, list(outputs), **attrs)


def _loss_feeds(shape, weighted: bool, ignore_index, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    target = rng.integers(0, c, size=shape[:1] + shape[2:]).astype(np.int64)
    if ignore_index is not None:
        target.reshape(-1)[::3] = ignore_index   # every third element is ignored
    feeds = {"x": rand(shape, seed, -3, 0, dtype), "t": target}
    if weighted:
        feeds["w"] = rand((c,), seed + 1, 0.2, 2.0, dtype)
    return feeds


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 2, -100])
def test_negative_log_likelihood_loss(reduction, weighted, ignore_index):
    feeds = _loss_feeds((3, 5, 2, 4), weighted, ignore_index)
    node = _loss_node("NegativeLogLikelihoodLoss", reduction, weighted, ignore_index)
    got = run_node(node, feeds, opset=13)["y"]
    check(got, nll_reference(feeds["x"], feeds["t"], feeds.get("w"), reduction, ignore_index))


def test_negative_log_likelihood_loss_2d_input():
    feeds = _loss_feeds((6, 4), True, None)
    node = _loss_node("NegativeLogLikelihoodLoss", "mean", True, None)
    check(run_node(node, feeds, opset=22)["y"],
          nll_reference(feeds["x"], feeds["t"], feeds["w"], "mean", None))


@pytest.mark.parametrize("reduction, weighted, ignore_index, dtype", [
    ("mean", False, None, np.float32), ("sum", True, 1, np.float32),
    ("none", True, None, np.float64), ("mean", True, 0, np.float64),
])
def test_softmax_cross_entropy_loss(reduction, weighted, ignore_index, dtype):
    feeds = _loss_feeds((2, 4, 3, 5), weighted, ignore_index, dtype)
    feeds["x"] = rand((2, 4, 3, 5), 7, -4, 4, dtype)
    node = _loss_node("SoftmaxCrossEntropyLoss", reduction, weighted, ignore_index,
                      outputs=("y", "log_prob"))
    got = run_node(node, feeds, opset=13, outputs=("y", "log_prob"))
    log_prob = log_softmax_reference(feeds["x"].astype(np.float64)).astype(dtype)
    check(got["log_prob"], log_prob)
    check(got["y"], nll_reference(log_prob, feeds["t"], feeds.get("w"), reduction,
                                  ignore_index))


def test_loss_folds_when_constant():
    # every input constant: the converter's core ops fold through their numpy references
    feeds = _loss_feeds((2, 3, 4), True, 1)
    node = _loss_node("NegativeLogLikelihoodLoss", "mean", True, 1)
    model = make_model([helper.make_node("Identity", ["s"], ["s2"]), node],
                       [tensor_info("s", "float32", (1,))], ["y", "s2"], opset=13,
                       initializers=feeds)
    got = tensorc.compile(model).run({"s": np.zeros(1, np.float32)})["y"]
    check(got, nll_reference(feeds["x"], feeds["t"], feeds["w"], "mean", 1))


# ---------------------------------------------------------------------------------------------
# GridSample

def _reflect_bounce(v: float, lo: float, hi: float) -> float:
    """Reflect off the borders one bounce at a time, as the ONNX operator text describes."""
    span = hi - lo
    while v < lo or v > hi:
        v = 2 * lo - v if v < lo else 2 * hi - v
        if span == 0:
            return lo
    return v


def _keys_cubic(d: float, a: float = -0.75) -> float:
    d = abs(d)
    if d <= 1:
        return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    if d < 2:
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
    return 0.0


def grid_sample_reference(x, grid, mode, padding, align):
    n_batch, channels, *sizes = x.shape
    k = len(sizes)
    out = np.zeros((n_batch, channels) + grid.shape[1:-1], np.float64)
    for n in range(n_batch):
        for pos in np.ndindex(*grid.shape[1:-1]):
            per_dim = []
            for j, size in enumerate(sizes):
                g = np.float32(grid[(n, *pos, k - 1 - j)])
                v = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
                lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
                if mode == "nearest":
                    v = float(np.rint(v))
                if padding == "border" and not lo <= v <= hi:
                    v = min(max(v, 0.0), size - 1.0)
                elif padding == "reflection":
                    v = _reflect_bounce(float(v), lo, hi)
                if mode == "nearest":
                    per_dim.append([(int(v), 1.0)])
                    continue
                base = int(np.floor(v))
                t = v - base
                if mode == "linear":
                    per_dim.append([(base, 1 - t), (base + 1, t)])
                else:
                    per_dim.append([(base + d, _keys_cubic(t - d)) for d in (-1, 0, 1, 2)])
            for combo in itertools.product(*per_dim):
                index, weight, inside = [], 1.0, True
                for (i, w), size in zip(combo, sizes):
                    weight *= w
                    if padding == "zeros":
                        inside &= 0 <= i < size
                    elif padding == "border":
                        i = min(max(i, 0), size - 1)
                    else:
                        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
                        i = int(_reflect_bounce(float(i), lo, hi))
                    index.append(i)
                if inside:
                    out[(n, slice(None), *pos)] += weight * x[(n, slice(None), *index)]
    return out.astype(x.dtype)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode, padding, align):
    x = rand((2, 3, 5, 7), 1)
    grid = rand((2, 4, 6, 2), 2, -1.4, 1.4)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                            padding_mode=padding, align_corners=align)
    got = run_node(node, {"x": x, "grid": grid}, opset=20)["y"]
    check(got, grid_sample_reference(x, grid, mode, padding, align), atol=1e-5)


@pytest.mark.parametrize("mode, padding", [("linear", "zeros"), ("nearest", "reflection"),
                                           ("linear", "border"), ("cubic", "reflection")])
def test_grid_sample_3d(mode, padding):
    x = rand((1, 2, 3, 4, 5), 3)
    grid = rand((1, 2, 3, 4, 3), 4, -1.3, 1.3)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                            padding_mode=padding, align_corners=0)
    got = run_node(node, {"x": x, "grid": grid}, opset=20)["y"]
    check(got, grid_sample_reference(x, grid, mode, padding, 0))


def test_grid_sample_1d():
    x = rand((2, 3, 6), 12)
    grid = rand((2, 5, 1), 13, -1.2, 1.2)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="cubic",
                            padding_mode="border", align_corners=1)
    got = run_node(node, {"x": x, "grid": grid}, opset=20)["y"]
    check(got, grid_sample_reference(x, grid, "cubic", "border", 1))


def test_grid_sample_with_fused_epilogue():
    # the sampling kernel computed inside the epilogue's loop (relu fused after it)
    x = rand((1, 4, 6, 5), 14)
    grid = rand((1, 7, 3, 2), 15, -1.2, 1.2)
    nodes = [helper.make_node("GridSample", ["x", "grid"], ["z"], padding_mode="border"),
             helper.make_node("Relu", ["z"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", x.shape),
                               tensor_info("grid", "float32", grid.shape)], ["y"], opset=20)
    got = tensorc.compile(model).run({"x": x, "grid": grid})["y"]
    check(got, np.maximum(grid_sample_reference(x, grid, "linear", "border", 0), 0))


def test_grid_sample_opset16_names():
    x = rand((1, 2, 4, 4), 5)
    grid = rand((1, 3, 3, 2), 6, -1.1, 1.1)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="bicubic")
    got = run_node(node, {"x": x, "grid": grid}, opset=16)["y"]
    check(got, grid_sample_reference(x, grid, "cubic", "zeros", 0))


# ---------------------------------------------------------------------------------------------
# AffineGrid, Col2Im, CenterCropPad

@pytest.mark.parametrize("spatial", [(3, 5), (2, 3, 4)])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(spatial, align):
    k = len(spatial)
    theta = rand((2, k, k + 1), 8)
    size = np.array((2, 3, *spatial), np.int64)
    node = helper.make_node("AffineGrid", ["theta", "size"], ["y"], align_corners=align)
    got = run_node(node, {"theta": theta}, initializers={"size": size}, opset=20)["y"]
    want = np.zeros((2, *spatial, k), np.float32)
    for n in range(2):
        for pos in np.ndindex(*spatial):
            # (x, y[, z]): the innermost axis first, each normalized into [-1, 1]
            point = [(2 * p / (s - 1) - 1) if align else ((2 * p + 1) / s - 1)
                     for p, s in zip(pos, spatial)][::-1] + [1.0]
            want[(n, *pos)] = theta[n] @ np.array(point, np.float32)
    check(got, want)


def col2im_reference(x, image, block, strides, pads, dilations):
    k = len(image)
    n, ck, _ = x.shape
    kernel = int(np.prod(block))
    blocks = [(image[j] + pads[j] + pads[j + k] - dilations[j] * (block[j] - 1) - 1)
              // strides[j] + 1 for j in range(k)]
    out = np.zeros((n, ck // kernel, *image), x.dtype)
    for c in range(ck // kernel):
        for r, offset in enumerate(np.ndindex(*block)):
            for col, at in enumerate(np.ndindex(*blocks)):
                pixel = [at[j] * strides[j] - pads[j] + offset[j] * dilations[j]
                         for j in range(k)]
                if all(0 <= p < s for p, s in zip(pixel, image)):
                    out[(slice(None), c, *pixel)] += x[:, c * kernel + r, col]
    return out


@pytest.mark.parametrize("image, block, strides, pads, dilations", [
    ((5, 5), (2, 2), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((6, 7), (3, 2), (2, 1), (1, 0, 1, 1), (1, 2)),
    ((3, 4, 5), (2, 2, 3), (1, 2, 1), (0, 1, 1, 0, 0, 1), (1, 1, 1)),
    # no dilation, strides > 1: the offsets that cover a pixel, by its phase (blocks that do
    # not divide by the stride, pads on either side)
    ((9, 8), (3, 4), (2, 2), (1, 1, 1, 0), (1, 1)),
    ((11, 7), (5, 2), (3, 2), (2, 0, 1, 1), (1, 1)),
    ((10,), (4,), (3,), (1, 2), (1,)),
])
def test_col2im(image, block, strides, pads, dilations):
    k = len(image)
    blocks = [(image[j] + pads[j] + pads[j + k] - dilations[j] * (block[j] - 1) - 1)
              // strides[j] + 1 for j in range(k)]
    x = rand((2, 3 * int(np.prod(block)), int(np.prod(blocks))), 9)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=strides,
                            pads=pads, dilations=dilations)
    got = run_node(node, {"x": x}, initializers={"image": np.array(image, np.int64),
                                                  "block": np.array(block, np.int64)},
                   opset=18)["y"]
    check(got, col2im_reference(x, image, block, strides, pads, dilations))


@pytest.mark.parametrize("shape, target, axes", [
    ((7, 6, 3), (4, 9, 3), None),          # crop an odd amount, pad an odd amount
    ((3, 10, 8), (5, 5), (-2, -1)),
    ((4, 5), (4, 5), None),
])
def test_center_crop_pad(shape, target, axes):
    x = rand(shape, 10)
    attrs = {} if axes is None else {"axes": axes}
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], **attrs)
    got = run_node(node, {"x": x}, initializers={"shape": np.array(target, np.int64)},
                   opset=18)["y"]
    axes = range(len(shape)) if axes is None else [a % len(shape) for a in axes]
    want_shape = list(shape)
    for a, t in zip(axes, target):
        want_shape[a] = t
    want = np.zeros(want_shape, np.float32)
    src, dst = [], []
    for size, new in zip(shape, want_shape):
        keep = min(size, new)
        src.append(slice((size - keep) // 2, (size - keep) // 2 + keep))
        dst.append(slice((new - keep) // 2, (new - keep) // 2 + keep))
    want[tuple(dst)] = x[tuple(src)]
    check(got, want)


# ---------------------------------------------------------------------------------------------
# CumProd and windows

@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_cumprod(exclusive, reverse, dtype):
    x = (rand((3, 7, 4), 11, 0.5, 1.5, np.float64) if dtype == np.float64
         else np.random.default_rng(11).integers(-3, 4, size=(3, 7, 4)).astype(dtype))
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive,
                            reverse=reverse)
    got = run_node(node, {"x": x}, initializers={"axis": np.array(-2, np.int64)},
                   opset=26)["y"]
    want = np.empty_like(x)
    for i in range(3):
        for j in range(4):
            line = x[i, :, j][::-1] if reverse else x[i, :, j]
            acc, out = dtype(1), []
            for v in line:
                if not exclusive:
                    acc = acc * v
                out.append(acc)
                if exclusive:
                    acc = acc * v
            want[i, :, j] = out[::-1] if reverse else out
    check(got, want, rtol=1e-12)


@pytest.mark.parametrize("op, coefficients", [
    ("HannWindow", (0.5, -0.5)), ("HammingWindow", (25 / 46, -21 / 46)),
    ("BlackmanWindow", (0.42, -0.5, 0.08)),
])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, coefficients, periodic):
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic,
                            output_datatype=TensorProto.DOUBLE)
    model = make_model([node, helper.make_node("Identity", ["s"], ["s2"])],
                       [tensor_info("s", "float32", (1,))], ["y", "s2"], opset=17,
                       initializers={"size": np.array(10, np.int64)})
    got = tensorc.compile(model).run({"s": np.zeros(1, np.float32)})["y"]
    n = np.arange(10)
    period = 10 if periodic else 9
    want = sum(a * np.cos(2 * np.pi * k * n / period) for k, a in enumerate(coefficients))
    if op == "HannWindow":   # also the textbook sin^2 form
        np.testing.assert_allclose(want, np.sin(np.pi * n / period) ** 2, atol=1e-12)
    check(got, want.astype(np.float64), rtol=1e-12, atol=1e-12)

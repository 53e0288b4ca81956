"""Reductions, arg-reductions, TopK, softmax family, normalizations, LpPool, ConvTranspose and
Einsum, compiled by tensorc and run natively, against numpy references written here.

Shapes are odd (3, 7, 17: not multiples of the vector width); attribute edge cases follow the
ONNX spec (axes as attribute or input, keepdims, empty sets, ties, opset < 13 coercion).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper

import tensorc
from tensorc.compiler.llvm import compile_graph
from tensorc.errors import UnsupportedOpError
from tensorc.frontend.onnx import import_onnx
from tensorc.target import Target

RTOL, ATOL = 1e-4, 1e-5


def rand(shape, seed=0, low=-1.0, high=1.0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def build(nodes, feeds, initializers=None, opset=17, outputs=("y",)):
    nodes = nodes if isinstance(nodes, list) else [nodes]
    inputs = [tensor_info(n, a.dtype.name, a.shape) for n, a in feeds.items()]
    return make_model(nodes, inputs, list(outputs), opset=opset, initializers=initializers)


def run(nodes, feeds, initializers=None, opset=17, outputs=("y",)) -> dict[str, np.ndarray]:
    model = build(nodes, feeds, initializers, opset, outputs)
    return tensorc.compile(model).run(feeds)


check = check_result

def kernel_count(model) -> int:
    return len(compile_graph(import_onnx(model), Target.host()).kernels)


# ---------------------------------------------------------------------------------------------
# reductions

REDUCE_REFS = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: np.log(np.sum(np.exp(x), axis=a, keepdims=k)),
}


@pytest.mark.parametrize("op", sorted(REDUCE_REFS))
@pytest.mark.parametrize("axes,keepdims", [((1,), 1), ((0, 2), 0), ((-1,), 0), (None, 1)])
def test_reduce(op, axes, keepdims) -> None:
    # positive inputs near 1 keep the product and the logs well conditioned
    x = rand((3, 7, 17), 1, 0.5, 1.5)
    attrs = {"keepdims": keepdims} | ({"axes": list(axes)} if axes is not None else {})
    got = run(helper.make_node(op, ["x"], ["y"], **attrs), {"x": x}, opset=13
              if op != "ReduceSum" else 11)["y"]
    want = REDUCE_REFS[op](x.astype(np.float64), axes, bool(keepdims))
    check(got, want.astype(np.float32), rtol=1e-4)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceL2", "ReduceLogSumExp"])
def test_reduce_axes_input_opset18(op) -> None:
    x = rand((4, 5, 33), 2, 0.5, 1.5)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    got = run(node, {"x": x}, {"axes": np.array([-1, 0], np.int64)}, opset=18)["y"]
    check(got, REDUCE_REFS[op](x.astype(np.float64), (0, 2), False).astype(np.float32))


def test_reduce_empty_axes_noop_and_reduce_all() -> None:
    x = rand((3, 5), 3)
    noop = helper.make_node("ReduceSum", ["x", "axes"], ["y"], noop_with_empty_axes=1)
    check(run(noop, {"x": x}, {"axes": np.zeros(0, np.int64)}, opset=13)["y"], x)
    everything = helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)
    check(run(everything, {"x": x}, opset=18)["y"], np.float32(x.astype(np.float64).mean()))


@pytest.mark.parametrize("op,value", [("ReduceSum", 0.0), ("ReduceProd", 1.0),
                                      ("ReduceMax", -np.inf), ("ReduceMin", np.inf),
                                      ("ReduceLogSumExp", -np.inf)])
def test_reduce_empty_set(op, value) -> None:
    # the reduced axis has no elements: the result is the combiner's identity
    x = np.zeros((2, 0, 4), np.float32)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    got = run(node, {"x": x}, {"axes": np.array([1], np.int64)}, opset=18)["y"]
    check(got, np.full((2, 1, 4), value, np.float32))


def test_reduce_integers_and_bools() -> None:
    x = np.random.default_rng(4).integers(-9, 9, size=(5, 7)).astype(np.int32)
    got = run(helper.make_node("ReduceProd", ["x"], ["y"], axes=[0]), {"x": x}, opset=13)["y"]
    check(got, np.prod(x, axis=0, keepdims=True, dtype=np.int32))
    b = np.array([[True, False], [False, False], [True, True]])
    for op, fn in (("ReduceMax", np.any), ("ReduceMin", np.all)):
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
        got = run(node, {"x": b}, {"axes": np.array([1], np.int64)}, opset=20)["y"]
        check(got, fn(b, axis=1))


# ---------------------------------------------------------------------------------------------
# ArgMax / ArgMin / TopK

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (1, 0, 0), (-1, 1, 1), (1, 0, 1)])
def test_arg_reduce_with_ties(op, axis, keepdims, last) -> None:
    # few distinct values: many ties, which select_last_index decides
    x = np.random.default_rng(5).integers(0, 3, size=(4, 9, 17)).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims,
                            select_last_index=last)
    got = run(node, {"x": x}, opset=13)["y"]
    pick = np.argmax if op == "ArgMax" else np.argmin
    if last:
        want = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
    else:
        want = pick(x, axis=axis)
    if keepdims:
        want = np.expand_dims(want, axis)
    check(got, want.astype(np.int64))


def test_argmax_integers_and_nan() -> None:
    x = np.random.default_rng(6).integers(-100, 100, size=(3, 33)).astype(np.int64)
    check(run(helper.make_node("ArgMax", ["x"], ["y"], axis=1), {"x": x})["y"],
          np.argmax(x, axis=1)[:, None])
    f = rand((2, 7), 7)
    f[0, 3] = np.nan
    check(run(helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0), {"x": f})["y"],
          np.array([3, np.argmax(f[1])], np.int64))


def topk_ref(x: np.ndarray, k: int, axis: int, largest: bool):
    """Sorted top-k, equal values in index order, by brute force per row."""
    moved = np.moveaxis(x, axis, -1)
    values = np.empty(moved.shape[:-1] + (k,), x.dtype)
    indices = np.empty(moved.shape[:-1] + (k,), np.int64)
    for pos in np.ndindex(*moved.shape[:-1]):
        row = moved[pos].tolist()  # Python numbers: negating a uint8 must not wrap
        order = sorted(range(len(row)), key=lambda i: (-row[i] if largest else row[i], i))
        indices[pos] = order[:k]
        values[pos] = [row[i] for i in order[:k]]
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


@pytest.mark.parametrize("shape,axis,k,largest", [((3, 17), -1, 5, 1), ((6, 4, 5), 1, 4, 0),
                                                  ((9,), 0, 1, 1), ((5, 7), 0, 5, 0)])
def test_topk(shape, axis, k, largest) -> None:
    x = np.random.default_rng(8).integers(0, 6, size=shape).astype(np.float32)  # ties
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    got = run(node, {"x": x}, {"k": np.array([k], np.int64)}, opset=11, outputs=("v", "i"))
    want_v, want_i = topk_ref(x, k, axis, bool(largest))
    check(got["v"], want_v)
    check(got["i"], want_i)


@pytest.mark.parametrize("dtype, opset", [(np.float32, 1), (np.uint8, 11)])
def test_topk_opset1_attribute_and_unsigned(dtype, opset) -> None:
    # TopK-1 takes k as an attribute and float types only (unsigned ones from TopK-11)
    x = np.random.default_rng(9).integers(0, 200, size=(4, 11)).astype(dtype)
    if opset == 1:
        node, initializers = helper.make_node("TopK", ["x"], ["v", "i"], k=3), None
    else:
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
        initializers = {"k": np.array([3], np.int64)}
    got = run(node, {"x": x}, initializers, opset=opset, outputs=("v", "i"))
    want_v, want_i = topk_ref(x, 3, -1, True)
    check(got["v"], want_v)
    check(got["i"], want_i)


def argsort_topk(x: np.ndarray, k: int, axis: int, largest: bool):
    """Sorted top-k by numpy's stable sort (NaN last ascending, first descending; -0.0 and
    0.0 equal), equal values in index order."""
    n = x.shape[axis]
    if largest:
        order = np.flip(n - 1 - np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, indices, axis=axis), indices.astype(np.int64)


def _topk_select_module(x: np.ndarray, k: int, axis: int, largest: int):
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    model = build(node, {"x": x}, {"k": np.array([k], np.int64)}, opset=11, outputs=("v", "i"))
    # the selection path, not the n^2 ranks
    loops = tensorc.inspect(model, stage="loops")
    assert "topk_select_bit0" in loops and "topk_rank" not in loops
    return tensorc.compile(model, num_threads=2)


@pytest.mark.parametrize("shape,axis,k,largest", [
    ((1, 8400), -1, 100, 1),        # a YOLO head's detections
    ((2, 3, 1000), -1, 7, 0),
    ((3, 700, 5), 1, 300, 1),       # along a strided axis
    ((1, 600), -1, 600, 0),         # a whole sort
])
def test_topk_selection_long_axes(shape, axis, k, largest) -> None:
    rng = np.random.default_rng(11)
    floats = (rng.standard_normal(shape).astype(np.float32),
              rng.integers(-4, 4, size=shape).astype(np.float32))          # many ties
    ints = rng.integers(-2 ** 31, 2 ** 31 - 1, size=shape, dtype=np.int64).astype(np.int32)
    module = _topk_select_module(floats[0], k, axis, largest)
    for x in (*floats, ints):
        if x.dtype == np.int32:
            module = _topk_select_module(x, k, axis, largest)
        got = module.run({"x": x})
        want_v, want_i = topk_ref(x, k, axis, bool(largest))
        np.testing.assert_array_equal(got["i"], want_i)
        np.testing.assert_array_equal(got["v"], want_v)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_selection_special_values(largest) -> None:
    x = np.random.default_rng(12).standard_normal((2, 1500)).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7], flat[1::7] = 0.0, -0.0
    flat[2::11], flat[3::13] = np.inf, -np.inf
    flat[5::17] = np.nan
    flat[6::19], flat[8::23] = 1e-42, -1e-42      # subnormals
    flat[9::29] = np.finfo(np.float32).max
    for k in (40, 1500):
        got = _topk_select_module(x, k, -1, largest).run({"x": x})
        want_v, want_i = argsort_topk(x, k, -1, bool(largest))
        np.testing.assert_array_equal(got["i"], want_i)
        np.testing.assert_array_equal(got["v"], want_v)


# ---------------------------------------------------------------------------------------------
# Softmax / LogSoftmax / Hardmax

def softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def hardmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    axis %= x.ndim
    first = np.expand_dims(np.argmax(x, axis=axis), axis)
    idx = np.arange(x.shape[axis]).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    return (idx == first).astype(x.dtype)


FAMILY = {"Softmax": softmax_ref, "LogSoftmax": lambda x, a: np.log(softmax_ref(x, a)),
          "Hardmax": hardmax_ref}


@pytest.mark.parametrize("op", sorted(FAMILY))
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family(op, axis) -> None:
    x = rand((3, 7, 17), 10, -4, 4)
    if op == "Hardmax":
        x = np.round(x)  # ties: the first maximum wins
    got = run(helper.make_node(op, ["x"], ["y"], axis=axis), {"x": x}, opset=13)["y"]
    check(got, FAMILY[op](x.astype(np.float64), axis).astype(np.float32))


@pytest.mark.parametrize("op", sorted(FAMILY))
def test_softmax_family_opset11_flattens(op) -> None:
    # before opset 13 the op normalizes the flattened [3, 7 * 5] matrix
    x = rand((3, 7, 5), 11, -3, 3)
    got = run(helper.make_node(op, ["x"], ["y"], axis=1), {"x": x}, opset=11)["y"]
    want = FAMILY[op](x.astype(np.float64).reshape(3, 35), 1).reshape(3, 7, 5)
    check(got, want.astype(np.float32))


def test_log_softmax_large_values_are_stable() -> None:
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]], np.float32)
    got = run(helper.make_node("LogSoftmax", ["x"], ["y"]), {"x": x}, opset=13)["y"]
    shifted = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    check(got, (shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# normalizations

def norm_ref(x, axes, eps, center=True):
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True) if center else 0.0
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), mean, var


@pytest.mark.parametrize("shape,axis", [((3, 7, 17), -1), ((2, 3, 5, 7), 1), ((4, 33), 0)])
def test_layer_normalization(shape, axis) -> None:
    x = rand(shape, 12, -2, 2)
    normalized = shape[axis:] if axis >= 0 else shape[axis:]
    scale, bias = rand(normalized, 13), rand(normalized, 14)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"],
                            axis=axis, epsilon=1e-3)
    got = run(node, {"x": x}, {"s": scale, "b": bias}, opset=17, outputs=("y", "mean", "inv"))
    axes = tuple(range(axis % len(shape), len(shape)))
    y, mean, var = norm_ref(x, axes, 1e-3)
    check(got["y"], (y * scale + bias).astype(np.float32))
    check(got["mean"], mean.astype(np.float32))
    check(got["inv"], (1 / np.sqrt(var + 1e-3)).astype(np.float32))


def test_layer_normalization_fuses_scale_and_bias() -> None:
    x, scale, bias = rand((8, 64), 15), rand((64,), 16), rand((64,), 17)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"])
    model = build(node, {"x": x}, {"s": scale, "b": bias})
    assert kernel_count(model) == 1
    got = tensorc.compile(model).run({"x": x})["y"]
    check(got, (norm_ref(x, (1,), 1e-5)[0] * scale + bias).astype(np.float32))


def test_instance_normalization() -> None:
    x, scale, bias = rand((2, 3, 7, 5), 18), rand((3,), 19), rand((3,), 20)
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)
    got = run(node, {"x": x}, {"s": scale, "b": bias})["y"]
    y = norm_ref(x, (2, 3), 1e-4)[0] * scale.reshape(1, 3, 1, 1) + bias.reshape(1, 3, 1, 1)
    check(got, y.astype(np.float32))


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(opset) -> None:
    n, c, groups = 2, 6, 3
    x = rand((n, c, 5, 3), 21)
    per = groups if opset == 18 else c
    scale, bias = rand((per,), 22), rand((per,), 23)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups,
                            epsilon=1e-3)
    got = run(node, {"x": x}, {"s": scale, "b": bias}, opset=opset)["y"]
    y = norm_ref(x.reshape(n, groups, -1), (2,), 1e-3)[0].reshape(x.shape)
    if opset == 18:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    y = y * scale.reshape(1, c, 1, 1) + bias.reshape(1, c, 1, 1)
    check(got, y.astype(np.float32))


def test_rms_normalization() -> None:
    x, scale = rand((3, 5, 17), 24), rand((5, 17), 25)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=1, epsilon=1e-4)
    got = run(node, {"x": x}, {"s": scale}, opset=23)["y"]
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=(1, 2), keepdims=True) + 1e-4) * scale
    check(got, want.astype(np.float32))


def test_mean_variance_normalization() -> None:
    x = rand((2, 3, 4, 5), 26)
    got = run(helper.make_node("MeanVarianceNormalization", ["x"], ["y"]), {"x": x},
              opset=13)["y"]
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(0, 2, 3), keepdims=True)
    std = np.sqrt(((x64 - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True))
    check(got, ((x64 - mean) / (std + 1e-9)).astype(np.float32))


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_zero_rows(p) -> None:
    x = rand((4, 3, 9), 27)
    x[1, :, 2] = 0  # a zero norm gives zeros, not NaN
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=p)
    got = run(node, {"x": x}, opset=13)["y"]
    norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        check(got, np.where(norm == 0, 0, x / norm).astype(np.float32))


@pytest.mark.parametrize("size", [3, 4])
def test_lrn(size) -> None:
    x = rand((2, 7, 5, 3), 28)
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=2e-3, beta=0.6, bias=1.5)
    got = run(node, {"x": x})["y"]
    x64, want = x.astype(np.float64), np.empty(x.shape)
    for ch in range(7):
        lo, hi = max(0, ch - (size - 1) // 2), min(6, ch + size // 2)
        total = (x64[:, lo:hi + 1] ** 2).sum(axis=1)
        want[:, ch] = x64[:, ch] / (1.5 + 2e-3 / size * total) ** 0.6
    check(got, want.astype(np.float32))


def test_batch_normalization_training_mode_is_a_clear_error() -> None:
    x = rand((2, 3, 4), 29)
    stats = {n: rand((3,), k, 0.5, 1.5) for k, n in enumerate("sbmv")}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            training_mode=1)
    with pytest.raises(UnsupportedOpError, match="training mode"):
        run(node, {"x": x}, stats, opset=15)


# ---------------------------------------------------------------------------------------------
# LpPool, GlobalLpPool

def lp_pool_ref(x, kernel, strides, pads, p, dilations=None):
    spatial = len(kernel)
    dilations = dilations or [1] * spatial
    widths = [(0, 0), (0, 0)] + [(pads[d], pads[d + spatial]) for d in range(spatial)]
    padded = np.pad(np.abs(x.astype(np.float64)) ** p, widths)
    out = [(padded.shape[2 + d] - (kernel[d] - 1) * dilations[d] - 1) // strides[d] + 1
           for d in range(spatial)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in itertools.product(*(range(n) for n in out)):
        for k in itertools.product(*(range(n) for n in kernel)):
            pos = tuple(o[d] * strides[d] + k[d] * dilations[d] for d in range(spatial))
            y[(..., *o)] += padded[(..., *pos)]
    return y ** (1.0 / p)


@pytest.mark.parametrize("shape,kernel,strides,pads,p", [
    ((1, 3, 9, 7), [3, 2], [2, 1], [1, 0, 1, 1], 2),
    ((2, 2, 11), [3], [2], [0, 1], 1),
    ((1, 2, 5, 4, 3), [2, 2, 2], [1, 1, 1], [0, 0, 0, 0, 0, 0], 3),
])
def test_lp_pool(shape, kernel, strides, pads, p) -> None:
    x = rand(shape, 30)
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=kernel, strides=strides,
                            pads=pads, p=p)
    got = run(node, {"x": x}, opset=11)["y"]
    check(got, lp_pool_ref(x, kernel, strides, pads, p).astype(np.float32))


def test_lp_pool_dilations_and_global() -> None:
    x = rand((1, 2, 9, 8), 31)
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 3], dilations=[2, 1],
                            p=2)
    got = run(node, {"x": x}, opset=18)["y"]
    check(got, lp_pool_ref(x, [2, 3], [1, 1], [0] * 4, 2, [2, 1]).astype(np.float32))
    got = run(helper.make_node("GlobalLpPool", ["x"], ["y"], p=1), {"x": x})["y"]
    check(got, np.abs(x).sum(axis=(2, 3), keepdims=True))


# ---------------------------------------------------------------------------------------------
# ConvTranspose

def conv_transpose_ref(x, w, strides, pads, dilations, groups, output_padding):
    """Scatter every input element times the kernel into the full output, then crop."""
    n, c = x.shape[:2]
    spatial = x.ndim - 2
    per_group, kernel = w.shape[1], w.shape[2:]
    full = [strides[d] * (x.shape[2 + d] - 1) + output_padding[d]
            + (kernel[d] - 1) * dilations[d] + 1 for d in range(spatial)]
    y = np.zeros((n, per_group * groups, *full))
    cg = c // groups
    for b, ch in itertools.product(range(n), range(c)):
        g = ch // cg
        for i in itertools.product(*(range(s) for s in x.shape[2:])):
            for k in itertools.product(*(range(s) for s in kernel)):
                o = tuple(i[d] * strides[d] + k[d] * dilations[d] for d in range(spatial))
                y[(b, slice(g * per_group, (g + 1) * per_group), *o)] += (
                    x[(b, ch, *i)] * w[(ch, slice(None), *k)])
    crop = tuple(slice(pads[d], full[d] - pads[d + spatial]) for d in range(spatial))
    return y[(slice(None), slice(None), *crop)]


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 2, 5, 4), (2, 3, 3, 3), {}),
    ((2, 4, 3, 5), (4, 1, 2, 3), {"strides": [2, 3], "pads": [1, 0, 0, 2], "group": 2}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_padding": [1, 0],
                                  "dilations": [2, 1]}),
    ((1, 3, 7), (3, 2, 4), {"strides": [3], "pads": [2, 1]}),
    ((1, 2, 3, 2, 4), (2, 2, 2, 3, 2), {"strides": [2, 1, 2]}),
    # decoders' shapes: U-Net 2x2 s2, DCGAN 4x4 s2 p1, 3x3 s2 p1 with output_padding, batch 2
    ((1, 16, 8, 8), (16, 8, 2, 2), {"strides": [2, 2]}),
    ((1, 8, 6, 6), (8, 4, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 8, 5, 5), (8, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                  "output_padding": [1, 1]}),
])
def test_conv_transpose(x_shape, w_shape, attrs) -> None:
    x, w, bias = rand(x_shape, 32), rand(w_shape, 33), rand((w_shape[1] * attrs.get(
        "group", 1),), 34)
    spatial = len(x_shape) - 2
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    got = run(node, {"x": x}, {"w": w, "b": bias})["y"]
    want = conv_transpose_ref(x, w, attrs.get("strides", [1] * spatial),
                              attrs.get("pads", [0] * 2 * spatial),
                              attrs.get("dilations", [1] * spatial), attrs.get("group", 1),
                              attrs.get("output_padding", [0] * spatial))
    want = want + bias.reshape((1, -1) + (1,) * spatial)
    check(got, want.astype(np.float32))


@pytest.mark.parametrize("attrs,pads,output_padding", [
    ({"strides": [2, 2], "output_shape": [10, 8]}, [0, 0, 0, 0], [1, 1]),
    ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, [0, 0, 1, 1], [0, 0]),
    ({"strides": [2, 2], "auto_pad": "SAME_LOWER"}, [1, 1, 0, 0], [0, 0]),
])
def test_conv_transpose_output_shape_and_auto_pad(attrs, pads, output_padding) -> None:
    x, w = rand((1, 2, 4, 3), 35), rand((2, 3, 3, 3), 36)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
    got = run(node, {"x": x}, {"w": w})["y"]
    want = conv_transpose_ref(x, w, [2, 2], pads, [1, 1], 1, output_padding)
    check(got, want.astype(np.float32))


def test_conv_transpose_runtime_weights() -> None:
    x, w = rand((1, 3, 4, 5), 37), rand((3, 2, 2, 2), 38)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
    got = run(node, {"x": x, "w": w})["y"]
    check(got, conv_transpose_ref(x, w, [2, 2], [0] * 4, [1, 1], 1, [0, 0]).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Einsum

@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 7), (7, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(5, 5)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("i,i", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]),
    ("bii->bi", [(3, 4, 4)]),
    ("ijk,ikl,lm->jm", [(2, 3, 4), (2, 4, 5), (5, 3)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij,kj", [(3, 4), (5, 4)]),
])
def test_einsum(equation, shapes) -> None:
    feeds = {f"x{k}": rand(s, 40 + k) for k, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(feeds), ["y"], equation=equation)
    got = run(node, feeds, opset=12)["y"]
    want = np.einsum(equation, *[a.astype(np.float64) for a in feeds.values()])
    check(got, np.asarray(want).astype(np.float32))

"""Every supported ONNX op, compiled by tensorc and run natively, against numpy.

Each test builds a one-node ONNX model (or a short chain that exercises fusion), compiles it
with ``tensorc.compile`` and compares the outputs with a numpy reference written here, on odd
shapes (1, 3, 7, 17, 33: not multiples of the vector width) and on the ops' attribute edge
cases. The references are independent of tensorc's own ``reference`` functions.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper

import tensorc
from tensorc.ops.nn.conv import strategy

RTOL, ATOL = 1e-4, 1e-5


# ---------------------------------------------------------------------------------------------
# harness

def rand(shape, seed=0, low=-1.0, high=1.0, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(dtype)


def run_node(node, feeds: dict[str, np.ndarray], initializers=None, opset: int = 17,
             outputs=("y",)) -> dict[str, np.ndarray]:
    """Compile a one-node (or node-list) model with tensorc and run it on ``feeds``."""
    nodes = node if isinstance(node, list) else [node]
    inputs = [tensor_info(n, a.dtype.name, a.shape) for n, a in feeds.items()]
    model = make_model(nodes, inputs, list(outputs), opset=opset, initializers=initializers)
    mod = tensorc.compile(model)
    return mod.run(feeds)


check = check_result

# ---------------------------------------------------------------------------------------------
# numpy references

def same_pads(sizes, kernel, strides, dilations, mode: str) -> list[int]:
    """Explicit pads for auto_pad SAME_UPPER / SAME_LOWER (ONNX: extra pad at the end for
    UPPER, at the beginning for LOWER)."""
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        out = math.ceil(n / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        low, high = total // 2, total - total // 2
        begins.append(low if mode == "SAME_UPPER" else high)
        ends.append(high if mode == "SAME_UPPER" else low)
    return begins + ends


def conv_ref(x, w, b=None, strides=None, pads=None, dilations=None, group=1) -> np.ndarray:
    """Direct N-d grouped convolution in float64: a sum over kernel offsets of strided slices."""
    spatial = x.ndim - 2
    strides = strides or [1] * spatial
    dilations = dilations or [1] * spatial
    pads = pads or [0] * (2 * spatial)
    xp = np.pad(x.astype(np.float64),
                [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial]) for i in range(spatial)])
    n, f = x.shape[0], w.shape[0]
    cg, kernel = w.shape[1], w.shape[2:]
    fg = f // group
    out = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i in range(spatial)]
    y = np.zeros([n, f] + out)
    for g in range(group):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * fg:(g + 1) * fg].astype(np.float64)
        for offs in itertools.product(*[range(k) for k in kernel]):
            window = tuple(slice(o * d, o * d + s * (m - 1) + 1, s)
                           for o, d, s, m in zip(offs, dilations, strides, out))
            patch = xg[(slice(None), slice(None)) + window]
            y[:, g * fg:(g + 1) * fg] += np.einsum("nc...,fc->nf...", patch,
                                                   wg[(slice(None), slice(None)) + offs])
    if b is not None:
        y += b.reshape((1, f) + (1,) * spatial)
    return y.astype(np.float32)


def pool_ref(x, kind: str, kernel, strides=None, pads=None, ceil_mode=False,
             count_include_pad=False, dilations=None) -> np.ndarray:
    """Max / average pooling. With ceil_mode the last window may run past the padded input;
    those positions never count (as in onnxruntime), explicit pads count only with
    count_include_pad."""
    spatial = x.ndim - 2
    strides = strides or [1] * spatial
    pads = pads or [0] * (2 * spatial)
    dilations = dilations or [1] * spatial
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    sizes = x.shape[2:]
    rounding = math.ceil if ceil_mode else math.floor
    out = [int(rounding((sizes[i] + pads[i] + pads[i + spatial] - span[i]) / strides[i])) + 1
           for i in range(spatial)]
    if ceil_mode:   # the last window must start inside the input or its begin padding
        out = [o - 1 if (o - 1) * s >= n + p else o
               for o, s, n, p in zip(out, strides, sizes, pads)]
    # extent covered by the windows, beyond the explicit end pads
    extra = [max(0, (out[i] - 1) * strides[i] + span[i] - (sizes[i] + pads[i] + pads[i + spatial]))
             for i in range(spatial)]
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial] + extra[i]) for i in range(spatial)]
    data = np.pad(x.astype(np.float64), widths, constant_values=0.0)
    inside = np.pad(np.ones(sizes), widths[2:], constant_values=0.0)
    padded = np.pad(np.ones([sizes[i] + pads[i] + pads[i + spatial] for i in range(spatial)]),
                    [(0, e) for e in extra], constant_values=0.0)
    y = np.zeros(x.shape[:2] + tuple(out))
    for idx in itertools.product(*[range(m) for m in out]):
        window = tuple(slice(i * s, i * s + k, d)
                       for i, s, k, d in zip(idx, strides, span, dilations))
        region = data[(slice(None), slice(None)) + window]
        mask = inside[window]
        if kind == "max":
            region = np.where(mask > 0, region, -np.inf)
            y[(slice(None), slice(None)) + idx] = region.max(axis=tuple(range(2, 2 + spatial)))
        else:
            count = (padded if count_include_pad else inside)[window].sum()
            y[(slice(None), slice(None)) + idx] = \
                region.sum(axis=tuple(range(2, 2 + spatial))) / count
    return y.astype(x.dtype)


def softmax_ref(x: np.ndarray, axes) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axes, keepdims=True))
    return (e / e.sum(axis=axes, keepdims=True)).astype(x.dtype)


def trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero, computed on magnitudes."""
    q = np.abs(a) // np.abs(b)
    return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))


# ---------------------------------------------------------------------------------------------
# Conv

CONV_2D = [
    # x shape, w shape, attributes, bias
    ((1, 3, 7, 7), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    ((2, 4, 9, 11), (17, 4, 3, 3), {}, False),
    ((1, 3, 17, 17), (7, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    ((1, 2, 16, 17), (3, 2, 3, 3), {"strides": [3, 3]}, True),
    ((1, 3, 13, 13), (6, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, True),
    ((1, 5, 10, 12), (9, 5, 1, 1), {}, True),
    ((1, 8, 7, 9), (33, 8, 1, 1), {"strides": [2, 2]}, False),
    ((1, 3, 23, 23), (10, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, True),
    ((1, 6, 9, 9), (4, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, True),
    ((1, 6, 8, 8), (12, 2, 3, 3), {"group": 3, "strides": [2, 2]}, False),
    ((1, 7, 11, 11), (7, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}, True),   # depthwise
    ((2, 16, 9, 9), (16, 1, 3, 3), {"group": 16, "strides": [2, 2], "pads": [1, 1, 1, 1]},
     False),
    ((1, 4, 8, 8), (8, 1, 3, 3), {"group": 4}, True),    # depthwise, channel multiplier 2
    # depthwise rows of 28 and 27: blocks of two vectors, the last overlapping the one before
    ((1, 3, 56, 56), (3, 1, 5, 5), {"group": 3, "strides": [2, 2], "pads": [2, 2, 2, 2]},
     True),
    ((1, 2, 27, 27), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, False),
    ((1, 3, 9, 8), (5, 3, 3, 2), {"pads": [0, 1, 2, 0]}, True),   # asymmetric pads / kernel
    ((1, 3, 9, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1],
                                  "dilations": [1, 2]}, True),
    # filter counts that divide 16 or 8 use weights repacked into filter blocks
    ((1, 3, 19, 37), (16, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True),   # row tail
    ((2, 8, 12, 20), (24, 8, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    ((1, 8, 10, 18), (32, 4, 3, 3), {"group": 2}, True),
    ((1, 16, 7, 33), (48, 16, 1, 1), {}, False),
    ((1, 5, 17, 35), (8, 5, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, False),
]


@pytest.mark.parametrize("gemm_below_bits", [0, 4096], ids=["direct-forms", "gemm"])
@pytest.mark.parametrize("x_shape,w_shape,attrs,bias", CONV_2D)
def test_conv_2d(x_shape, w_shape, attrs, bias, gemm_below_bits, monkeypatch) -> None:
    """Each conv in the forms 512-bit targets pick (direct, flattened) and as a GEMM."""
    monkeypatch.setattr(strategy, "GEMM_BELOW_VECTOR_BITS", gemm_below_bits)
    x, w = rand(x_shape, 1), rand(w_shape, 2)
    b = rand((w_shape[0],), 3)
    inits = {"w": w, "b": b} if bias else {"w": w}
    node = helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"], **attrs)
    got = run_node(node, {"x": x}, inits)["y"]
    want = conv_ref(x, w, b if bias else None, attrs.get("strides"), attrs.get("pads"),
                    attrs.get("dilations"), attrs.get("group", 1))
    check(got, want)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("x_shape,kernel,strides", [
    ((1, 3, 8, 8), (2, 2), (1, 1)),      # even kernel: the odd pad goes to one side
    ((1, 3, 9, 10), (3, 3), (2, 2)),
    ((1, 2, 7, 7), (4, 3), (3, 2)),
])
def test_conv_auto_pad(auto_pad, x_shape, kernel, strides) -> None:
    x, w, b = rand(x_shape, 4), rand((5, x_shape[1]) + kernel, 5), rand((5,), 6)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad=auto_pad,
                            strides=list(strides))
    got = run_node(node, {"x": x}, {"w": w, "b": b})["y"]
    pads = ([0] * 4 if auto_pad == "VALID" else
            same_pads(x_shape[2:], kernel, strides, (1, 1), auto_pad))
    want = conv_ref(x, w, b, list(strides), pads)
    if auto_pad != "VALID":
        assert want.shape[2:] == tuple(math.ceil(n / s) for n, s in zip(x_shape[2:], strides))
    check(got, want)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 3, 17), (5, 3, 3), {"pads": [1, 1]}),
    ((2, 4, 33), (7, 4, 5), {"strides": [2], "dilations": [2], "pads": [2, 3]}),
    ((1, 6, 10), (6, 1, 3), {"group": 6, "strides": [3]}),
    ((1, 3, 9), (2, 3, 4), {"auto_pad": "SAME_UPPER"}),
    ((1, 3, 9), (2, 3, 4), {"auto_pad": "SAME_LOWER", "strides": [2]}),
])
def test_conv_1d(x_shape, w_shape, attrs) -> None:
    x, w, b = rand(x_shape, 7), rand(w_shape, 8), rand((w_shape[0],), 9)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    got = run_node(node, {"x": x}, {"w": w, "b": b})["y"]
    strides = attrs.get("strides", [1])
    pads = attrs.get("pads")
    if "auto_pad" in attrs:
        pads = same_pads(x_shape[2:], w_shape[2:], strides, [1], attrs["auto_pad"])
    want = conv_ref(x, w, b, strides, pads, attrs.get("dilations"), attrs.get("group", 1))
    check(got, want)


def test_conv_3d() -> None:
    x, w, b = rand((1, 2, 5, 6, 7), 12), rand((3, 2, 3, 3, 3), 13), rand((3,), 14)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 1, 1, 0, 1],
                            strides=[1, 2, 1])
    got = run_node(node, {"x": x}, {"w": w, "b": b})["y"]
    check(got, conv_ref(x, w, b, [1, 2, 1], [1, 0, 1, 1, 0, 1]))


def test_conv_weight_as_runtime_input() -> None:
    x, w = rand((1, 3, 7, 7), 10), rand((5, 3, 3, 3), 11)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    check(run_node(node, {"x": x, "w": w})["y"], conv_ref(x, w, pads=[1, 1, 1, 1]))


# ---------------------------------------------------------------------------------------------
# Gemm and MatMul

@pytest.mark.parametrize("m,k,n,attrs,c_shape", [
    (3, 5, 7, {}, (7,)),
    (1, 17, 33, {}, (1, 33)),
    (7, 3, 17, {"transA": 1}, (7, 1)),
    (5, 33, 9, {"transB": 1}, (5, 9)),
    (4, 7, 3, {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, (3,)),
    (6, 9, 10, {"alpha": -1.5}, ()),
    (6, 9, 10, {"beta": 0.25}, (1,)),
    (2, 16, 8, {"transB": 1}, None),
    (3, 4, 5, {"alpha": 2.0, "beta": 0.0}, (3, 5)),
])
@pytest.mark.parametrize("b_constant", [True, False])
def test_gemm(m, k, n, attrs, c_shape, b_constant) -> None:
    a = rand((k, m) if attrs.get("transA") else (m, k), 20)
    b = rand((n, k) if attrs.get("transB") else (k, n), 21)
    feeds, inits = {"a": a}, {}
    (inits if b_constant else feeds)["b"] = b
    names = ["a", "b"]
    if c_shape is not None:
        inits["c"] = rand(c_shape, 22)
        names.append("c")
    got = run_node(helper.make_node("Gemm", names, ["y"], **attrs), feeds, inits)["y"]
    a64 = a.astype(np.float64).T if attrs.get("transA") else a.astype(np.float64)
    b64 = b.astype(np.float64).T if attrs.get("transB") else b.astype(np.float64)
    want = attrs.get("alpha", 1.0) * (a64 @ b64)
    if c_shape is not None:
        want = want + attrs.get("beta", 1.0) * inits["c"].astype(np.float64)
    check(got, want.astype(np.float32))


@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 5), (5, 7)),
    ((1, 1), (1, 1)),
    ((17, 33), (33, 16)),
    ((2, 7, 9), (2, 9, 3)),
    ((3, 1, 4, 5), (2, 5, 6)),     # broadcast batch dims
    ((4, 5), (3, 5, 17)),          # 2-D against batched
    ((2, 3, 4, 5), (5, 7)),        # batched against 2-D
    ((7,), (7, 3)),                # 1-D left operand
    ((2, 5, 7), (7,)),             # 1-D right operand
    ((9,), (9,)),                  # vector dot product -> scalar
    ((5,), (2, 5, 3)),
    ((65, 130), (130, 70)),
    ((1, 257), (257, 33)),
])
def test_matmul(a_shape, b_shape) -> None:
    a, b = rand(a_shape, 30), rand(b_shape, 31)
    got = run_node(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a, "b": b})["y"]
    check(got, np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32))


def test_gemm_runtime_c() -> None:
    a, b, c = rand((3, 4), 23), rand((4, 5), 24), rand((3, 5), 25)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=0.5)
    got = run_node(node, {"a": a, "b": b, "c": c})["y"]
    check(got, (a.astype(np.float64) @ b + 0.5 * c.astype(np.float64)).astype(np.float32))


def test_matmul_constant_weight() -> None:
    a, w = rand((3, 33), 32), rand((33, 17), 33)
    got = run_node(helper.make_node("MatMul", ["a", "w"], ["y"]), {"a": a}, {"w": w})["y"]
    check(got, (a.astype(np.float64) @ w).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# binary elementwise with broadcasting

NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


@pytest.mark.parametrize("op", sorted(NUMPY_BINARY))
@pytest.mark.parametrize("a_shape,b_shape", [
    ((7,), (7,)),
    ((3, 17), (17,)),
    ((2, 3, 33), (2, 1, 33)),
    ((1, 5, 1), (4, 1, 3)),       # both operands broadcast
    ((1,), (3, 7)),
])
def test_binary_broadcast(op, a_shape, b_shape) -> None:
    a = rand(a_shape, 40)
    b = rand(b_shape, 41, 0.5, 2.0) * np.where(rand(b_shape, 42) < 0, -1, 1).astype(np.float32)
    got = run_node(helper.make_node(op, ["a", "b"], ["y"]), {"a": a, "b": b})["y"]
    check(got, NUMPY_BINARY[op](a, b))


@pytest.mark.parametrize("op", sorted(NUMPY_BINARY))
@pytest.mark.parametrize("scalar_shape", [(), (1,)])
def test_binary_scalar_initializer(op, scalar_shape) -> None:
    a = rand((3, 17), 43)
    s = np.full(scalar_shape, 1.75, dtype=np.float32)
    got = run_node(helper.make_node(op, ["a", "s"], ["y"]), {"a": a}, {"s": s})["y"]
    check(got, NUMPY_BINARY[op](a, s))
    # the scalar on the left
    got = run_node(helper.make_node(op, ["s", "a"], ["y"]), {"a": a}, {"s": s})["y"]
    check(got, NUMPY_BINARY[op](s, a))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_binary_integers(op, dtype) -> None:
    rng = np.random.default_rng(44)
    a = rng.integers(-100, 100, size=(3, 7)).astype(dtype)
    b = rng.integers(-100, 100, size=(7,)).astype(dtype)
    got = run_node(helper.make_node(op, ["a", "b"], ["y"]), {"a": a, "b": b})["y"]
    check(got, NUMPY_BINARY[op](a, b).astype(dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_div_truncates_toward_zero(dtype) -> None:
    a = np.array([7, -7, 7, -7, 6, -6, 0, 1, -1, 100, -101, 5, -5, 2, -3, 9, 17],
                 dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, 3, 5, 3, 3, 7, 7, -5, -5, 4, 2, -4, 17], dtype=dtype)
    got = run_node(helper.make_node("Div", ["a", "b"], ["y"]), {"a": a, "b": b})["y"]
    want = trunc_div(a, b)
    assert want[:4].tolist() == [3, -3, -3, 3]   # the reference itself truncates
    check(got, want)
    # a scalar dividend on the left
    d = np.array(-20, dtype=dtype)
    got = run_node(helper.make_node("Div", ["d", "b"], ["y"]), {"b": b}, {"d": d})["y"]
    check(got, trunc_div(d, b))
    # broadcast against a scalar initializer divisor
    d = np.array(-3, dtype=dtype)
    got = run_node(helper.make_node("Div", ["a", "d"], ["y"]), {"a": a}, {"d": d})["y"]
    check(got, trunc_div(a, d))


@pytest.mark.parametrize("exponent,negative_base", [
    (np.float32(2.0), True), (np.float32(3.0), True), (np.float32(0.5), False),
    (np.float32(-1.5), False),
])
def test_pow_scalar_exponent(exponent, negative_base) -> None:
    low = -2.0 if negative_base else 0.1
    x = rand((3, 17), 45, low, 2.0)
    got = run_node(helper.make_node("Pow", ["x", "e"], ["y"]), {"x": x},
                   {"e": np.array(exponent)})["y"]
    check(got, np.power(x.astype(np.float64), float(exponent)).astype(np.float32))


def test_pow_integers() -> None:
    x = np.arange(-4, 5, dtype=np.int32)
    got = run_node(helper.make_node("Pow", ["x", "e"], ["y"]), {"x": x},
                   {"e": np.array(3, np.int32)})["y"]
    check(got, x * x * x)
    # a float base with an integer exponent keeps the base's dtype
    f = rand((3, 7), 48, -2, 2)
    got = run_node(helper.make_node("Pow", ["x", "e"], ["y"]), {"x": f},
                   {"e": np.array(2, np.int64)})["y"]
    check(got, f * f)


def test_pow_broadcast_tensors() -> None:
    x = rand((2, 3, 7), 46, 0.1, 3.0)
    e = rand((3, 1), 47, -2.0, 2.0)
    got = run_node(helper.make_node("Pow", ["x", "e"], ["y"]), {"x": x, "e": e})["y"]
    check(got, np.power(x.astype(np.float64), e).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# unary elementwise

UNARY = {
    "Relu": (lambda x: np.maximum(x, 0), -3, 3),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -30, 30),
    "Tanh": (np.tanh, -20, 20),
    "Exp": (np.exp, -20, 20),
    "Log": (np.log, 1e-3, 100),
    "Sqrt": (np.sqrt, 0, 100),
    "Neg": (np.negative, -3, 3),
    "Abs": (np.abs, -3, 3),
}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 17), (2, 3, 33)])
def test_unary(op, shape) -> None:
    fn, low, high = UNARY[op]
    x = rand(shape, 50, low, high)
    got = run_node(helper.make_node(op, ["x"], ["y"]), {"x": x})["y"]
    check(got, fn(x.astype(np.float64)).astype(np.float32))


def test_unary_special_values() -> None:
    x = np.array([0.0, -0.0, 1e-30, -100.0, 100.0, 88.0, -88.0], dtype=np.float32)
    for op in ("Sigmoid", "Tanh", "Relu", "Abs"):
        got = run_node(helper.make_node(op, ["x"], ["y"]), {"x": x})["y"]
        with np.errstate(over="ignore"):
            check(got, UNARY[op][0](x.astype(np.float64)).astype(np.float32))
    assert np.isfinite(got).all()


@pytest.mark.parametrize("op,fn", [("Neg", np.negative), ("Abs", np.abs),
                                   ("Relu", lambda x: np.maximum(x, 0))])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_unary_integers(op, fn, dtype) -> None:
    x = np.arange(-8, 9, dtype=dtype).reshape(1, 17)
    got = run_node(helper.make_node(op, ["x"], ["y"]), {"x": x}, opset=17)["y"]
    check(got, fn(x).astype(dtype))


@pytest.mark.parametrize("alpha", [None, 0.2, -1.5])
def test_leaky_relu(alpha) -> None:
    x = rand((3, 33), 51, -4, 4)
    attrs = {} if alpha is None else {"alpha": alpha}
    got = run_node(helper.make_node("LeakyRelu", ["x"], ["y"], **attrs), {"x": x})["y"]
    a = 0.01 if alpha is None else alpha
    check(got, np.where(x >= 0, x, np.float32(a) * x))


# ---------------------------------------------------------------------------------------------
# Clip

@pytest.mark.parametrize("attrs,low,high", [
    ({"min": -0.5, "max": 0.5}, -0.5, 0.5),
    ({"min": 0.0}, 0.0, None),
    ({"max": 0.25}, None, 0.25),
    ({}, None, None),
])
def test_clip_opset6_attributes(attrs, low, high) -> None:
    x = rand((3, 17), 52, -2, 2)
    got = run_node(helper.make_node("Clip", ["x"], ["y"], **attrs), {"x": x}, opset=6)["y"]
    check(got, np.clip(x, low, high) if attrs else x)


@pytest.mark.parametrize("low,high", [(-0.5, 0.5), (0.0, None), (None, 0.25), (0.3, 0.3)])
def test_clip_opset13_inputs(low, high) -> None:
    x = rand((2, 7, 3), 53, -2, 2)
    names, inits = ["x", "", ""], {}
    if low is not None:
        names[1], inits["lo"] = "lo", np.array(low, dtype=np.float32)
    if high is not None:
        names[2], inits["hi"] = "hi", np.array(high, dtype=np.float32)
    while names[-1] == "":
        names.pop()
    got = run_node(helper.make_node("Clip", names, ["y"]), {"x": x}, inits, opset=13)["y"]
    check(got, np.clip(x, low, high))


def test_clip_opset13_runtime_bounds() -> None:
    x = rand((3, 17), 54, -2, 2)
    lo, hi = np.array(-0.75, np.float32), np.array(0.5, np.float32)
    got = run_node(helper.make_node("Clip", ["x", "lo", "hi"], ["y"]),
                   {"x": x, "lo": lo, "hi": hi}, opset=13)["y"]
    check(got, np.clip(x, lo, hi))


def test_clip_integers() -> None:
    x = np.arange(-10, 11, dtype=np.int64)
    got = run_node(helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), {"x": x},
                   {"lo": np.array(-3, np.int64), "hi": np.array(4, np.int64)}, opset=13)["y"]
    check(got, np.clip(x, -3, 4))


# ---------------------------------------------------------------------------------------------
# pooling

@pytest.mark.parametrize("x_shape,attrs", [
    ((1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 5, 17, 17), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 7, 9), {"kernel_shape": [3, 2]}),
    ((1, 2, 7, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [3, 3], "ceil_mode": 1,
                      "pads": [1, 0, 1, 0]}),
    ((1, 2, 11, 11), {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [0, 1, 2, 0]}),
    ((1, 17, 33), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),          # 1-D
    ((2, 3, 10), {"kernel_shape": [4], "strides": [3], "ceil_mode": 1}),          # 1-D
])
@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
def test_pool(kind, x_shape, attrs) -> None:
    x = rand(x_shape, 60, -3, 3)
    got = run_node(helper.make_node(kind, ["x"], ["y"], **attrs), {"x": x})["y"]
    want = pool_ref(x, "max" if kind == "MaxPool" else "avg", attrs["kernel_shape"],
                    attrs.get("strides"), attrs.get("pads"), bool(attrs.get("ceil_mode")))
    check(got, want)


# the shapes real models pool (SqueezeNet, YOLO's SPP, Inception, ResNet stems): odd sizes,
# long windows, 'same' padding, ceil mode
REAL_POOLS = [
    ((1, 5, 27, 27), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 3, 55, 55), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 111, 111), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 4, 13, 13), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    ((1, 4, 13, 13), {"kernel_shape": [9, 9], "pads": [4, 4, 4, 4]}),
    ((1, 4, 13, 13), {"kernel_shape": [13, 13], "pads": [6, 6, 6, 6]}),
    ((1, 3, 20, 20), {"kernel_shape": [13, 13], "pads": [6, 6, 6, 6]}),
    ((1, 6, 14, 14), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 3, 28, 28), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 56, 56), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 7, 7), {"kernel_shape": [7, 7]}),
    ((1, 2, 26, 26), {"kernel_shape": [1, 1], "strides": [2, 2]}),
    ((1, 2, 34, 34), {"kernel_shape": [3, 3], "strides": [4, 4], "pads": [1, 1, 1, 1],
                      "ceil_mode": 1}),
    # rows with no whole blocks of registers: the last block overlaps the one before it
    ((1, 2, 111, 111), {"kernel_shape": [2, 2]}),
    ((1, 3, 27, 27), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 60, 60), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    ((1, 2, 52, 52), {"kernel_shape": [3, 3], "strides": [2, 2]}),
]


@pytest.mark.parametrize("x_shape,attrs", REAL_POOLS)
@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
def test_pool_real_shapes(kind, x_shape, attrs) -> None:
    x = rand(x_shape, 63, -3, 3)
    got = run_node(helper.make_node(kind, ["x"], ["y"], **attrs), {"x": x})["y"]
    want = pool_ref(x, "max" if kind == "MaxPool" else "avg", attrs["kernel_shape"],
                    attrs.get("strides"), attrs.get("pads"), bool(attrs.get("ceil_mode")))
    check(got, want)


@pytest.mark.parametrize("x_shape,attrs", [
    ((1, 3, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 2]}),
    ((1, 4, 17), {"kernel_shape": [5], "strides": [2], "pads": [2, 2]}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [3, 3], "ceil_mode": 1,
                      "pads": [1, 0, 1, 0]}),
])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_count_include_pad(x_shape, attrs, count_include_pad) -> None:
    x = rand(x_shape, 61, -3, 3)
    node = helper.make_node("AveragePool", ["x"], ["y"], count_include_pad=count_include_pad,
                            **attrs)
    got = run_node(node, {"x": x})["y"]
    want = pool_ref(x, "avg", attrs["kernel_shape"], attrs.get("strides"), attrs.get("pads"),
                    bool(attrs.get("ceil_mode")), bool(count_include_pad))
    check(got, want)


@pytest.mark.parametrize("x_shape,attrs", [
    ((1, 2, 9, 9), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ((1, 3, 11, 10), {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [2, 1],
                      "pads": [1, 1, 2, 0]}),
    ((2, 3, 17), {"kernel_shape": [3], "dilations": [3], "strides": [2]}),
])
def test_max_pool_dilations(x_shape, attrs) -> None:
    x = rand(x_shape, 64, -3, 3)
    got = run_node(helper.make_node("MaxPool", ["x"], ["y"], **attrs), {"x": x})["y"]
    want = pool_ref(x, "max", attrs["kernel_shape"], attrs.get("strides"), attrs.get("pads"),
                    dilations=attrs["dilations"])
    check(got, want)


def test_pool_reference_edge() -> None:
    # the reference itself: a corner window of a padded average divides by what it covers
    x = np.ones((1, 1, 3, 3), np.float32)
    with_pad = pool_ref(x, "avg", [3, 3], pads=[1, 1, 1, 1], count_include_pad=True)
    without = pool_ref(x, "avg", [3, 3], pads=[1, 1, 1, 1], count_include_pad=False)
    assert with_pad[0, 0, 0, 0] == pytest.approx(4 / 9) and without[0, 0, 0, 0] == 1.0


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_pool_auto_pad(kind, auto_pad) -> None:
    x = rand((1, 3, 9, 10), 62, -3, 3)
    kernel, strides = [3, 2], [2, 2]
    node = helper.make_node(kind, ["x"], ["y"], kernel_shape=kernel, strides=strides,
                            auto_pad=auto_pad)
    got = run_node(node, {"x": x})["y"]
    pads = [0] * 4 if auto_pad == "VALID" else same_pads(x.shape[2:], kernel, strides, [1, 1],
                                                         auto_pad)
    check(got, pool_ref(x, "max" if kind == "MaxPool" else "avg", kernel, strides, pads))


@pytest.mark.parametrize("x_shape", [(1, 3, 7, 7), (2, 17, 5, 9), (1, 33, 1, 1), (2, 5, 13)])
def test_global_average_pool(x_shape) -> None:
    x = rand(x_shape, 63)
    got = run_node(helper.make_node("GlobalAveragePool", ["x"], ["y"]), {"x": x})["y"]
    axes = tuple(range(2, x.ndim))
    check(got, x.astype(np.float64).mean(axis=axes, keepdims=True).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# BatchNormalization

@pytest.mark.parametrize("x_shape", [(1, 3, 7, 7), (2, 17, 5, 3), (4, 7), (2, 5, 9)])
@pytest.mark.parametrize("epsilon", [None, 1e-3])
def test_batch_normalization(x_shape, epsilon) -> None:
    c = x_shape[1]
    x = rand(x_shape, 70, -2, 2)
    scale, bias, mean = rand((c,), 71, 0.5, 2), rand((c,), 72), rand((c,), 73)
    var = rand((c,), 74, 0.1, 3)
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], **attrs)
    got = run_node(node, {"x": x}, {"s": scale, "b": bias, "m": mean, "v": var})["y"]
    eps = 1e-5 if epsilon is None else epsilon
    shape = (1, c) + (1,) * (x.ndim - 2)
    r = lambda a: a.astype(np.float64).reshape(shape)  # noqa: E731
    want = (x - r(mean)) / np.sqrt(r(var) + eps) * r(scale) + r(bias)
    check(got, want.astype(np.float32))


def test_batch_normalization_runtime_statistics() -> None:
    x = rand((2, 3, 5, 5), 75)
    stats = {"s": rand((3,), 76, 0.5, 2), "b": rand((3,), 77), "m": rand((3,), 78),
             "v": rand((3,), 79, 0.1, 3)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    got = run_node(node, {"x": x, **stats})["y"]
    r = lambda a: a.astype(np.float64).reshape(1, 3, 1, 1)  # noqa: E731
    want = (x - r(stats["m"])) / np.sqrt(r(stats["v"]) + 1e-5) * r(stats["s"]) + r(stats["b"])
    check(got, want.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# shapes and data movement

@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis) -> None:
    x = rand((2, 3, 7), 80)
    got = run_node(helper.make_node("Flatten", ["x"], ["y"], axis=axis), {"x": x})["y"]
    a = axis % x.ndim
    check(got, x.reshape(math.prod(x.shape[:a]), -1))


def test_flatten_feeds_a_kernel() -> None:
    x = rand((2, 3, 7), 81)
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=2),
             helper.make_node("Relu", ["f"], ["y"])]
    check(run_node(nodes, {"x": x})["y"], np.maximum(x.reshape(6, 7), 0))


@pytest.mark.parametrize("target,want_shape", [
    ([0, -1], (2, 21)),
    ([-1], (42,)),
    ([0, 0, 7], (2, 3, 7)),
    ([7, 0, -1], (7, 3, 2)),
    ([1, -1, 3, 1], (1, 14, 3, 1)),
])
def test_reshape(target, want_shape) -> None:
    x = rand((2, 3, 7), 82)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Neg", ["r"], ["y"])]
    got = run_node(nodes, {"x": x}, {"shape": np.array(target, np.int64)})["y"]
    check(got, -x.reshape(want_shape))
    # and as the model's output directly
    got = run_node(helper.make_node("Reshape", ["x", "shape"], ["y"]), {"x": x},
                   {"shape": np.array(target, np.int64)})["y"]
    check(got, x.reshape(want_shape))


@pytest.mark.parametrize("shape,perm", [
    ((3, 17), None),
    ((2, 3, 7), None),
    ((2, 3, 7), [0, 2, 1]),
    ((2, 3, 5, 7), [0, 2, 3, 1]),
    ((2, 3, 5, 7), [3, 1, 0, 2]),
    ((1, 33, 17), [2, 0, 1]),
])
def test_transpose(shape, perm) -> None:
    x = rand(shape, 83)
    attrs = {} if perm is None else {"perm": perm}
    got = run_node(helper.make_node("Transpose", ["x"], ["y"], **attrs), {"x": x})["y"]
    check(got, np.transpose(x, perm))


@pytest.mark.parametrize("shapes,axis", [
    ([(2, 3), (5, 3)], 0),
    ([(2, 3, 7), (2, 1, 7)], 1),
    ([(2, 3, 7), (2, 3, 17)], -1),
    ([(1, 3), (4, 3), (2, 3)], 0),
    ([(2, 5, 3), (2, 1, 3), (2, 7, 3)], 1),
    ([(3, 1), (3, 16), (3, 17)], -1),
])
def test_concat(shapes, axis) -> None:
    arrays = {f"x{k}": rand(s, 84 + k) for k, s in enumerate(shapes)}
    got = run_node(helper.make_node("Concat", list(arrays), ["y"], axis=axis), arrays)["y"]
    check(got, np.concatenate(list(arrays.values()), axis=axis))


@pytest.mark.parametrize("inputs,rows", [(7, (14, 14)), (9, (7, 7)), (3, (3, 7))])
def test_a_concat_of_short_rows_copies_each_input_in_its_own_loop(inputs, rows) -> None:
    """Channel concats of maps whose rows are shorter than a vector (DenseNet's 14x14, 7x7):
    the channel loop is kept out of the vectorized rows and cut once per input, so that the
    kernel is plain copies, with no select; a ReLU after it (fused) too."""
    arrays = {f"x{k}": rand((1, 8 + 8 * (k % 2), *rows), 92 + k) for k in range(inputs)}
    nodes = [helper.make_node("Concat", list(arrays), ["c"], axis=1),
             helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, [tensor_info(n, "float32", a.shape) for n, a in arrays.items()],
                       ["y"])
    text = tensorc.inspect(model, stage="loops")
    assert "select" not in text.split("func tensorc_entry")[0], text
    got = tensorc.compile(model).run(arrays)["y"]
    check(got, np.maximum(np.concatenate(list(arrays.values()), axis=1), 0))


def test_concat_same_value_twice() -> None:
    x = rand((3, 7), 89)
    got = run_node(helper.make_node("Concat", ["x", "x"], ["y"], axis=0), {"x": x})["y"]
    check(got, np.concatenate([x, x], axis=0))


def test_concat_with_constant() -> None:
    x, c = rand((2, 3), 90), rand((2, 4), 91)
    got = run_node(helper.make_node("Concat", ["x", "c"], ["y"], axis=1), {"x": x},
                   {"c": c})["y"]
    check(got, np.concatenate([x, c], axis=1))


# ---------------------------------------------------------------------------------------------
# Softmax

@pytest.mark.parametrize("shape,axis,opset", [
    ((3, 17), -1, 13),
    ((1, 1000), -1, 13),
    ((2, 3, 7), -1, 13),
    ((2, 3, 7), 1, 13),     # opset 13: along axis 1 only
    ((2, 3, 33), 0, 13),
    ((2, 3, 7), 1, 11),     # opset 11: over the flattened dims 1 and 2
    ((2, 3, 7), 0, 11),
    ((2, 3, 7), 2, 11),
    ((2, 5), None, 11),     # default axis 1
    ((2, 3, 5), None, 13),  # default axis -1
])
def test_softmax(shape, axis, opset) -> None:
    x = rand(shape, 92, -5, 5)
    attrs = {} if axis is None else {"axis": axis}
    got = run_node(helper.make_node("Softmax", ["x"], ["y"], **attrs), {"x": x},
                   opset=opset)["y"]
    if opset >= 13:
        axes = (x.ndim - 1 if axis is None else axis % x.ndim,)
    else:
        start = 1 if axis is None else axis % x.ndim
        axes = tuple(range(start, x.ndim))
    want = softmax_ref(x, axes)
    check(got, want)


def test_softmax_large_values_are_stable() -> None:
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1000.0]], np.float32)
    got = run_node(helper.make_node("Softmax", ["x"], ["y"]), {"x": x})["y"]
    check(got, softmax_ref(x, (1,)))


# ---------------------------------------------------------------------------------------------
# Identity, Constant, Dropout

def test_identity() -> None:
    x = rand((3, 17), 93)
    check(run_node(helper.make_node("Identity", ["x"], ["y"]), {"x": x})["y"], x)
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Exp", ["i"], ["y"])]
    check(run_node(nodes, {"x": x})["y"], np.exp(x))


def test_identity_outputs_share_an_input() -> None:
    x = rand((3, 17), 99)
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["x"], ["z"])]
    out = run_node(nodes, {"x": x}, outputs=("y", "z"))
    check(out["y"], x)
    check(out["z"], x)


def test_constant() -> None:
    x = rand((2, 7), 94)
    value = rand((2, 7), 95)
    nodes = [helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
                 "c", 1, value.shape, value.reshape(-1).tolist())),
             helper.make_node("Add", ["x", "c"], ["y"])]
    check(run_node(nodes, {"x": x})["y"], x + value)
    nodes = [helper.make_node("Constant", [], ["c"], value_float=2.5),
             helper.make_node("Mul", ["x", "c"], ["y"])]
    check(run_node(nodes, {"x": x})["y"], x * np.float32(2.5))


def test_constant_as_output() -> None:
    x = rand((3,), 96)
    nodes = [helper.make_node("Constant", [], ["c"], value_ints=[4, -2, 9]),
             helper.make_node("Neg", ["x"], ["y"])]
    out = run_node(nodes, {"x": x}, outputs=("y", "c"))
    check(out["y"], -x)
    check(out["c"], np.array([4, -2, 9], np.int64))


@pytest.mark.parametrize("opset", [7, 12, 17])
def test_dropout_is_identity_at_inference(opset) -> None:
    x = rand((2, 3, 17), 97)
    node = helper.make_node("Dropout", ["x"], ["d", "mask"])
    nodes = [node, helper.make_node("Relu", ["d"], ["y"])]
    out = run_node(nodes, {"x": x}, opset=opset, outputs=("y", "mask"))
    check(out["y"], np.maximum(x, 0))
    mask_dtype = np.bool_ if opset >= 12 else np.float32
    check(out["mask"], np.ones(x.shape, mask_dtype))


def test_dropout_ratio_input_ignored() -> None:
    x = rand((3, 7), 98)
    node = helper.make_node("Dropout", ["x", "ratio"], ["y"])
    got = run_node(node, {"x": x}, {"ratio": np.array(0.7, np.float32)}, opset=13)["y"]
    check(got, x)


# ---------------------------------------------------------------------------------------------
# chains that fuse

def test_conv_bn_relu_add_residual() -> None:
    c = 6
    x = rand((1, c, 9, 9), 100)
    w1, w2 = rand((c, c, 3, 3), 101, -0.3, 0.3), rand((c, c, 1, 1), 102)
    bn = {"s": rand((c,), 103, 0.5, 2), "b": rand((c,), 104), "m": rand((c,), 105),
          "v": rand((c,), 106, 0.1, 3)}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "b", "m", "v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "cb"], ["c2"]),
        helper.make_node("Add", ["c2", "x"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    inits = {"w1": w1, "w2": w2, "cb": rand((c,), 107), **bn}
    got = run_node(nodes, {"x": x}, inits)["y"]
    r = lambda a: a.astype(np.float64).reshape(1, c, 1, 1)  # noqa: E731
    h = conv_ref(x, w1, pads=[1, 1, 1, 1]).astype(np.float64)
    h = np.maximum((h - r(bn["m"])) / np.sqrt(r(bn["v"]) + 1e-5) * r(bn["s"]) + r(bn["b"]), 0)
    h = conv_ref(h.astype(np.float32), w2, inits["cb"]).astype(np.float64)
    check(got, np.maximum(h + x, 0).astype(np.float32))


def test_matmul_add_relu() -> None:
    x, w, b = rand((3, 33), 110), rand((33, 17), 111), rand((17,), 112)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    got = run_node(nodes, {"x": x}, {"w": w, "b": b})["y"]
    check(got, np.maximum(x.astype(np.float64) @ w + b, 0).astype(np.float32))


def test_transpose_reshape_add() -> None:
    x, b = rand((2, 3, 7), 113), rand((21,), 114)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("Add", ["r", "b"], ["y"])]
    got = run_node(nodes, {"x": x}, {"b": b, "shape": np.array([2, -1], np.int64)})["y"]
    check(got, np.transpose(x, (0, 2, 1)).reshape(2, 21) + b)


def test_shared_producer_and_two_outputs() -> None:
    # a value read by two consumers and also returned: no fusion may swallow it
    x = rand((3, 17), 115)
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Neg", ["e"], ["n"]),
             helper.make_node("Add", ["e", "n"], ["z"]),
             helper.make_node("Mul", ["e", "e"], ["y"])]
    out = run_node(nodes, {"x": x}, outputs=("y", "e", "z"))
    e = np.exp(x)
    check(out["e"], e)
    check(out["y"], e * e)
    check(out["z"], np.zeros_like(x))

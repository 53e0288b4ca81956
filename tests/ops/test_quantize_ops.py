"""Low-precision dtypes and quantization ops, compiled by tensorc, against numpy / ml_dtypes.

Float8 / float4 casts are compared bit for bit with ml_dtypes (round to nearest even, no
saturation) and with a clip before it (ONNX's saturate=1); the quantization ops against
numpy references written here from the ONNX spec. Shapes are odd (7, 33, 65 elements), so
that vector loops and their tails both run.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorc
from tensorc.errors import TensorcError

FLOAT8 = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0,
          "float8_e5m2fnuz": 57344.0}
SMALL_INTS = ("int4", "uint4", "int2", "uint2")


# ---------------------------------------------------------------------------------------------
# harness

def _info(name: str, array: np.ndarray):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype),
                                         array.shape)


def run(nodes, feeds: dict[str, np.ndarray], initializers: dict[str, np.ndarray] | None = None,
        outputs=("y",), opset: int = 21) -> list[np.ndarray]:
    """Compile ``nodes`` (graph inputs: ``feeds``) with tensorc and run them."""
    nodes = nodes if isinstance(nodes, list) else [nodes]
    graph = helper.make_graph(
        nodes, "test", [_info(n, a) for n, a in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=[numpy_helper.from_array(np.asarray(a), n)
                     for n, a in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=10)
    result = tensorc.compile(model).run(feeds)
    return [result[o] for o in outputs]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8)


def assert_same_float8(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bits, where a NaN may have any NaN bits."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan])


def float_samples(n: int = 4097, seed: int = 0) -> np.ndarray:
    """Values over every float8 binade, ties, subnormals, overflow, infinities and NaN."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32) * 2.0 ** rng.integers(-24, 18, n)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 464.0, 480.0, -500.0, 240.0, 248.0,
                57344.0, 61440.0, 1e9, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 0.25, 0.75,
                1.0625, 1.1875, 6.0, 7.0, -5.0]
    return np.concatenate([x, np.array(specials, np.float32)]).astype(np.float32)


def cast_node(to: str, saturate: int = 1, **attrs):
    return helper.make_node("Cast", ["x"], ["y"], to=helper.np_dtype_to_tensor_dtype(
        np.dtype(to)), saturate=saturate, **attrs)


# ---------------------------------------------------------------------------------------------
# casts of float8 / float4 / float8e8m0 / int4 / int2

@pytest.mark.parametrize("dtype", [*FLOAT8, "float4_e2m1fn"])
@pytest.mark.parametrize("source", ["float32", "float16", "float64"])
def test_cast_to_minifloat_without_saturation(dtype, source):
    with np.errstate(all="ignore"):
        x = float_samples().astype(source)
        want = x.astype(np.dtype(dtype))
    (y,) = run(cast_node(dtype, saturate=0), {"x": x})
    assert_same_float8(y, want)


@pytest.mark.parametrize("dtype", list(FLOAT8))
def test_cast_to_float8_saturates(dtype):
    x = float_samples(seed=1)
    limit = FLOAT8[dtype]
    want = np.clip(x, -limit, limit).astype(np.dtype(dtype))
    (y,) = run(cast_node(dtype), {"x": x})
    assert_same_float8(y, want)
    assert float(y[x == np.inf][0]) == limit    # +inf becomes the largest finite value


@pytest.mark.parametrize("dtype", [*FLOAT8, "float4_e2m1fn"])
@pytest.mark.parametrize("target", ["float32", "float16"])
def test_cast_from_minifloat_decodes_every_code(dtype, target):
    codes = np.arange(16 if dtype == "float4_e2m1fn" else 256, dtype=np.uint8)
    x = codes.view(np.dtype(dtype))
    (y,) = run(cast_node(target), {"x": x})
    want = x.astype(target)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(y[~np.isnan(want)], want[~np.isnan(want)])


def test_float8_to_integer_and_back_through_castlike():
    x = np.array([-3.75, -1.0, 0.0, 0.5, 2.5, 13.0, 300.0], np.float32)
    f8 = x.astype(ml_dtypes.float8_e4m3fn)
    like = np.zeros(1, np.int32)
    (y,) = run(helper.make_node("CastLike", ["x", "like"], ["y"]), {"x": f8},
               initializers={"like": like})
    np.testing.assert_array_equal(y, f8.astype(np.float32).astype(np.int32))


def _e8m0_round_up(x: np.ndarray) -> np.ndarray:
    """ONNX's float -> float8e8m0 (round_mode up, saturate): the exponent of |x|, plus one
    when any mantissa bit is set (but not past 0xFE); infinity / NaN give 0xFF."""
    u = np.abs(x.astype(np.float32)).view(np.uint32)
    exponent = (u >> 23) & 0xFF
    up = ((u & 0x7FFFFF) != 0) & (exponent < 0xFE)
    return (exponent + up).astype(np.uint8)


def test_cast_float8e8m0_both_ways():
    x = np.concatenate([float_samples(seed=2)[:500],
                        np.array([3e38, 1e-40, 0.0, -4.0], np.float32)])
    (y,) = run(cast_node("float8_e8m0fnu"), {"x": x}, opset=24)
    want = _e8m0_round_up(x)
    want[x == 0] = 0       # 2^-127 is exact (ONNX's reference rounds its float32 up)
    np.testing.assert_array_equal(bits(y), want)
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    (back,) = run(cast_node("float32"), {"x": codes}, opset=24)
    with np.errstate(over="ignore"):
        want = np.ldexp(np.float32(1.0), np.arange(256) - 127).astype(np.float32)
    want[255] = np.nan
    np.testing.assert_array_equal(back[:255], want[:255])
    assert np.isnan(back[255])


def test_cast_float8e8m0_rejects_other_rounding():
    x = np.ones(3, np.float32)
    with pytest.raises(TensorcError, match="round_mode='up' with saturate=1"):
        run(cast_node("float8_e8m0fnu", round_mode="nearest"), {"x": x}, opset=24)


@pytest.mark.parametrize("dtype", SMALL_INTS)
def test_cast_float_to_small_int_wraps(dtype):
    x = np.linspace(-20.0, 20.0, 65).astype(np.float32)
    (y,) = run(cast_node(dtype), {"x": x})
    bits_n = 4 if dtype.endswith("4") else 2
    signed = not dtype.startswith("u")
    low = np.trunc(x).astype(np.int64) & ((1 << bits_n) - 1)  # the low bits of trunc(x)
    want = np.where(signed & (low >= 1 << (bits_n - 1)), low - (1 << bits_n), low)
    np.testing.assert_array_equal(y.astype(np.int64), want)
    np.testing.assert_array_equal(y, x.astype(np.dtype(dtype)))


@pytest.mark.parametrize("dtype", SMALL_INTS)
def test_cast_small_int_to_int8_and_float(dtype):
    info = ml_dtypes.iinfo(np.dtype(dtype))
    x = np.arange(int(info.min), int(info.max) + 1).repeat(5).astype(np.dtype(dtype))
    y8, yf = run([cast_node("int8"), helper.make_node("Cast", ["x"], ["f"],
                                                       to=TensorProto.FLOAT)],
                 {"x": x}, outputs=("y", "f"))
    np.testing.assert_array_equal(y8, np.arange(int(info.min), int(info.max) + 1).repeat(5))
    np.testing.assert_array_equal(yf, y8.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# QuantizeLinear / DequantizeLinear

RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
          "int16": (-32768, 32767), "int4": (-8, 7), "uint4": (0, 15)}


def quantize_ref(x, scale, zero_point, dtype):
    """rint(x / scale) + zero_point, clipped (scale / zero point already broadcastable)."""
    low, high = RANGES[dtype]
    q = np.rint(x / scale) + zero_point.astype(np.float64)
    return np.clip(q, low, high).astype(np.dtype(dtype))


def blocked(param: np.ndarray, axis: int, block: int, size: int) -> np.ndarray:
    return np.repeat(param, block, axis=axis).take(range(size), axis=axis)


def test_quantize_per_tensor_uint8_ties_to_even():
    x = np.concatenate([np.arange(-3.0, 3.0, 0.25), [1e6, -1e6]]).astype(np.float32)
    scale, zp = np.float32(0.5), np.uint8(128)
    (y,) = run(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]), {"x": x},
               {"s": scale, "z": zp})
    np.testing.assert_array_equal(y, quantize_ref(x, scale, zp, "uint8"))
    assert y[-2] == 255 and y[-1] == 0


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int16", "int4", "uint4"])
def test_quantize_per_axis(dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(-40, 40, (2, 5, 7)).astype(np.float32)
    scale = rng.uniform(0.05, 0.5, 5).astype(np.float32)
    zp = rng.integers(*RANGES[dtype], size=5).astype(np.dtype(dtype))
    (y,) = run(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1), {"x": x},
               {"s": scale, "z": zp})
    want = quantize_ref(x, scale.reshape(1, 5, 1), zp.reshape(1, 5, 1), dtype)
    np.testing.assert_array_equal(y, want)


def test_quantize_blocked_with_remainder_and_runtime_scale():
    rng = np.random.default_rng(4)
    x = rng.uniform(-10, 10, (3, 10)).astype(np.float32)
    scale = rng.uniform(0.05, 0.2, (3, 3)).astype(np.float32)   # blocks of 4 along axis 1
    zp = rng.integers(-20, 20, (3, 3)).astype(np.int8)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=4)
    (y,) = run(node, {"x": x, "s": scale}, {"z": zp})
    want = quantize_ref(x, blocked(scale, 1, 4, 10), blocked(zp, 1, 4, 10), "int8")
    np.testing.assert_array_equal(y, want)


def test_quantize_output_dtype_without_zero_point_and_float16_input():
    x = np.linspace(-300, 300, 33).astype(np.float16)
    scale = np.float16(2.5)
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"],
                            output_dtype=TensorProto.INT8)
    (y,) = run(node, {"x": x}, {"s": scale})
    np.testing.assert_array_equal(y, quantize_ref(x, scale, np.int8(0), "int8"))


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_quantize_to_float8(dtype, saturate):
    x = float_samples(seed=5)[:1000]
    scale = np.float32(0.75)
    zp = np.zeros((), np.dtype(dtype))
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], saturate=saturate)
    (y,) = run(node, {"x": x}, {"s": scale, "z": zp})
    scaled = x / scale
    if saturate:
        scaled = np.clip(scaled, -FLOAT8[dtype], FLOAT8[dtype])
    with np.errstate(all="ignore"):
        assert_same_float8(y, scaled.astype(np.dtype(dtype)))


def test_dequantize_per_axis_and_output_dtype():
    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (4, 3, 9)).astype(np.uint8)
    scale = rng.uniform(0.01, 1.0, 3).astype(np.float32)
    zp = rng.integers(0, 256, 3).astype(np.uint8)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-2,
                            output_dtype=TensorProto.FLOAT16)
    (y,) = run(node, {"x": x}, {"s": scale, "z": zp}, opset=23)
    want = ((x.astype(np.float32) - zp.reshape(3, 1)) * scale.reshape(3, 1)).astype(np.float16)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, want)


def test_dequantize_blocked_int4_and_float8():
    rng = np.random.default_rng(7)
    x = rng.integers(-8, 8, (5, 6)).astype(ml_dtypes.int4)
    scale = rng.uniform(0.1, 1.0, (2, 6)).astype(np.float32)     # blocks of 3 along axis 0
    zp = rng.integers(-8, 8, (2, 6)).astype(ml_dtypes.int4)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=0, block_size=3)
    (y,) = run(node, {"x": x}, {"s": scale, "z": zp})
    want = (x.astype(np.float32) - blocked(zp, 0, 3, 5).astype(np.float32)) * \
        blocked(scale, 0, 3, 5)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    f8 = float_samples(seed=8)[:65].astype(ml_dtypes.float8_e5m2)
    (y8,) = run(helper.make_node("DequantizeLinear", ["x", "s"], ["y"]), {"x": f8},
                {"s": np.float32(2.0)})
    np.testing.assert_array_equal(y8, f8.astype(np.float32) * 2)


def test_quantize_dequantize_chain_around_relu():
    """The QDQ pattern of quantized models (dequantize, float op, quantize again)."""
    x = np.random.default_rng(9).standard_normal((3, 33)).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("Relu", ["d"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["y"])]
    q = quantize_ref(x, np.float32(0.02), np.uint8(100), "uint8")
    (y,) = run(nodes, {"q": q}, {"s": np.float32(0.02), "z": np.uint8(100)})
    d = (q.astype(np.float32) - 100) * np.float32(0.02)
    np.testing.assert_array_equal(y, quantize_ref(np.maximum(d, 0), np.float32(0.02),
                                                  np.uint8(100), "uint8"))


def test_quantize_rejects_mismatched_output_dtype():
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"],
                            output_dtype=TensorProto.INT8)
    with pytest.raises(TensorcError, match="output_dtype int8 differs"):
        run(node, {"x": np.ones(3, np.float32)}, {"s": np.float32(1), "z": np.uint8(0)})


@pytest.mark.parametrize("values", [[0.0, 0.0, 0.0], [-1.0, 2.5, 0.3, 7.1, -0.02],
                                    [1.0, 2.0, 3.0], [-3.0, -2.0, -0.5]])
def test_dynamic_quantize_linear(values):
    x = np.array(values * 7, np.float32)
    y, scale, zp = run(helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"]),
                       {"x": x}, outputs=("y", "s", "z"))
    high, low = max(0.0, x.max()), min(0.0, x.min())
    want_scale = np.float32((high - low) if high != low else 1.0) / np.float32(255)
    want_zp = np.rint(np.clip(-np.float32(low) / want_scale, 0, 255))
    want = np.clip(np.rint(x / want_scale) + want_zp, 0, 255).astype(np.uint8)
    assert scale.shape == () and zp.shape == () and zp.dtype == np.uint8
    np.testing.assert_allclose(scale, want_scale, rtol=1e-7)
    assert zp == want_zp
    np.testing.assert_array_equal(y, want)


# ---------------------------------------------------------------------------------------------
# integer matmul / convolution and the QLinear ops

def conv2d_ref(x: np.ndarray, w: np.ndarray, pads, strides=(1, 1), group=1) -> np.ndarray:
    """A direct int64 NCHW convolution."""
    x = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    oh, ow = (h - kh) // strides[0] + 1, (wd - kw) // strides[1] + 1
    out = np.zeros((n, m, oh, ow), np.int64)
    per_group = m // group
    for f in range(m):
        g = f // per_group
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * strides[0]:i * strides[0] + kh,
                          j * strides[1]:j * strides[1] + kw]
                out[:, f, i, j] = (patch * w[f].astype(np.int64)).sum(axis=(1, 2, 3))
    return out


def test_matmul_integer_per_row_and_column_zero_points():
    rng = np.random.default_rng(10)
    a = rng.integers(0, 256, (2, 5, 7)).astype(np.uint8)
    b = rng.integers(-128, 128, (7, 9)).astype(np.int8)
    a_zp = rng.integers(0, 256, 5).astype(np.uint8)
    b_zp = rng.integers(-128, 128, 9).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    (y,) = run(node, {"a": a, "b": b}, {"az": a_zp, "bz": b_zp}, opset=10)
    want = (a.astype(np.int64) - a_zp.reshape(5, 1)) @ (b.astype(np.int64) - b_zp)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, want)


def test_conv_integer_padding_groups_and_channel_zero_points():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, (1, 4, 6, 7)).astype(np.uint8)
    w = rng.integers(0, 256, (6, 2, 3, 3)).astype(np.uint8)
    w_zp = rng.integers(0, 256, 6).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1],
                            group=2, strides=[1, 2])
    (y,) = run(node, {"x": x}, {"w": w, "xz": np.uint8(3), "wz": w_zp}, opset=10)
    want = conv2d_ref(x.astype(np.int64) - 3, w.astype(np.int64) - w_zp.reshape(6, 1, 1, 1),
                      pads=(1, 1, 1, 1), strides=(1, 2), group=2)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_matmul(dtype):
    rng = np.random.default_rng(12)
    low, high = RANGES[dtype]
    a = rng.integers(low, high + 1, (3, 17)).astype(dtype)
    b = rng.integers(low, high + 1, (17, 5)).astype(dtype)
    az, bz, yz = (np.array(v, dtype) for v in ((10, 200, 128) if dtype == "uint8" else
                                                (-5, 7, 3)))
    sa, sb, sy = np.float32(0.02), np.float32(0.05), np.float32(0.9)
    node = helper.make_node("QLinearMatMul", ["a", "sa", "az", "b", "sb", "bz", "sy", "yz"],
                            ["y"])
    (y,) = run(node, {"a": a, "b": b}, {"sa": sa, "az": az, "sb": sb, "bz": bz, "sy": sy,
                                        "yz": yz}, opset=10)
    acc = (a.astype(np.int64) - az) @ (b.astype(np.int64) - bz)
    want = np.clip(np.rint(acc * np.float64(sa * sb / sy) + yz), low, high).astype(dtype)
    np.testing.assert_array_equal(y, want)


def test_qlinear_conv_bias_and_per_channel_scale():
    rng = np.random.default_rng(13)
    x = rng.integers(0, 256, (2, 3, 5, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    bias = rng.integers(-500, 500, 4).astype(np.int32)
    w_scale = rng.uniform(0.001, 0.01, 4).astype(np.float32)
    sx, sy = np.float32(0.05), np.float32(0.2)
    node = helper.make_node("QLinearConv", ["x", "sx", "xz", "w", "sw", "wz", "sy", "yz", "b"],
                            ["y"], pads=[0, 1, 0, 1])
    init = {"sx": sx, "xz": np.uint8(120), "w": w, "sw": w_scale, "wz": np.int8(0), "sy": sy,
            "yz": np.uint8(60), "b": bias}
    (y,) = run(node, {"x": x}, init, opset=10)
    acc = conv2d_ref(x.astype(np.int64) - 120, w, pads=(0, 1, 0, 1)) + bias.reshape(1, 4, 1, 1)
    multiplier = (sx * w_scale / sy).astype(np.float32).reshape(1, 4, 1, 1)
    want = np.clip(np.rint(acc * multiplier.astype(np.float64) + 60), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(y, want)

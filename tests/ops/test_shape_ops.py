"""Shape and data-movement ops, compiled by tensorc and run natively, against numpy.

Each test builds a small ONNX model, compiles it with ``tensorc.compile`` and compares with a
numpy reference written here, on odd shapes (not multiples of the vector width). Inputs that
decide shapes (Slice bounds, pads, repeats, scales) are initializers; data and indices are
fed at run time, so gathers and scatters run as compiled kernels.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tensorc
from tensorc.errors import ShapeError
from tensorc.frontend.onnx import import_onnx

RTOL, ATOL = 1e-5, 1e-6


def rand(shape, seed=0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


def compile_node(node, feeds, initializers=None, opset=17, outputs=("y",)):
    nodes = node if isinstance(node, list) else [node]
    inputs = [tensor_info(n, a.dtype.name, a.shape) for n, a in feeds.items()]
    model = make_model(nodes, inputs, list(outputs), opset=opset, initializers=initializers)
    return model, tensorc.compile(model)


def run_node(node, feeds, initializers=None, opset=17, outputs=("y",)) -> dict:
    return compile_node(node, feeds, initializers, opset, outputs)[1].run(feeds)


# the shape ops move values: check them tighter than the default
check = functools.partial(check_result, rtol=RTOL, atol=ATOL)

# ---------------------------------------------------------------------------------------------
# gathers

@pytest.mark.parametrize("axis, index_shape, dtype", [
    (0, (5,), np.int64), (1, (3, 4), np.int32), (-1, (), np.int64), (2, (2, 1, 3), np.int64)])
def test_gather_runtime_indices(axis, index_shape, dtype):
    x = rand((7, 9, 17))
    n = x.shape[axis]
    idx = np.random.default_rng(1).integers(-n, n, size=index_shape).astype(dtype)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)
    got = run_node(node, {"x": x, "i": idx})["y"]
    check(got, np.take(x, np.where(idx < 0, idx + n, idx), axis=axis))


def test_gather_elements_negative_indices():
    x = rand((7, 33))
    idx = np.random.default_rng(2).integers(-7, 7, size=(5, 33))
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)
    got = run_node(node, {"x": x, "i": idx})["y"]
    check(got, np.take_along_axis(x, np.where(idx < 0, idx + 7, idx), axis=0))


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(batch_dims):
    x = rand((3, 5, 7, 4))
    rng = np.random.default_rng(3)
    idx = np.stack([rng.integers(0, 5, (3, 6)), rng.integers(-7, 7, (3, 6))], axis=-1)
    if batch_dims == 0:
        idx = np.stack([rng.integers(0, 3, (3, 6)), rng.integers(0, 5, (3, 6))], axis=-1)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    got = run_node(node, {"x": x, "i": idx}, opset=13)["y"]
    want = np.empty(idx.shape[:-1] + x.shape[batch_dims + 2:], np.float32)
    for pos in np.ndindex(*idx.shape[:-1]):
        lead = pos[:batch_dims]
        want[pos] = x[lead + tuple(int(v) for v in idx[pos])]
    check(got, want)


# ---------------------------------------------------------------------------------------------
# scatters

def scatter_elements_ref(data, idx, upd, axis, reduction):
    out = data.copy()
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[axis] = idx[pos] % data.shape[axis]
        target = tuple(target)
        old = out[target]
        out[target] = {"none": upd[pos], "add": old + upd[pos], "mul": old * upd[pos],
                       "max": max(old, upd[pos]), "min": min(old, upd[pos])}[reduction]
    return out


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(reduction):
    data = rand((9, 17), seed=4)
    # indices smaller than the data along the other axis, with duplicates and negatives
    idx = np.random.default_rng(5).integers(-9, 9, size=(6, 13))
    upd = rand((6, 13), seed=6)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0,
                            reduction=reduction)
    got = run_node(node, {"x": data, "i": idx, "u": upd}, opset=18)["y"]
    check(got, scatter_elements_ref(data, idx, upd, 0, reduction))


def test_scatter_elements_int_axis1():
    data = np.arange(5 * 7, dtype=np.int32).reshape(5, 7)
    idx = np.array([[1, -1, 1], [0, 0, 6]], np.int64)
    upd = np.array([[10, 20, 30], [40, 50, 60]], np.int32)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1,
                            reduction="add")
    got = run_node(node, {"x": data, "i": idx, "u": upd}, opset=18)["y"]
    check(got, scatter_elements_ref(data, idx, upd, 1, "add"))


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    data = rand((5, 6, 7), seed=7)
    idx = np.array([[[0, 1], [4, -1]], [[0, 1], [2, 3]], [[-5, 2], [3, 0]]], np.int64)
    upd = rand((3, 2, 7), seed=8)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    got = run_node(node, {"x": data, "i": idx, "u": upd}, opset=18)["y"]
    want = data.copy()
    for pos in np.ndindex(*idx.shape[:-1]):
        target = tuple(int(v) % n for v, n in zip(idx[pos], data.shape))
        old = want[target]
        want[target] = {"none": upd[pos], "add": old + upd[pos], "mul": old * upd[pos],
                        "max": np.maximum(old, upd[pos]),
                        "min": np.minimum(old, upd[pos])}[reduction]
    check(got, want)


def test_scatter_fuses_an_elementwise_epilogue():
    data, upd = rand((4, 9), seed=9), rand((2, 9), seed=10)
    idx = np.array([[3], [1]], np.int64)
    nodes = [helper.make_node("ScatterND", ["x", "i", "u"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    got = run_node(nodes, {"x": data, "i": idx, "u": upd})["y"]
    want = data.copy()
    want[[3, 1]] = upd
    check(got, np.maximum(want, 0))


# ---------------------------------------------------------------------------------------------
# slicing, splitting, padding

@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, -3], [100, -1], [0, 2], [1, 1]),
    ([-1, 8], [-100, 1], [1, -1], [-2, -3]),         # negative steps, clamped ends
    ([2], [30], [0], [3]),                           # an end past the axis clamps
    ([0, 0, 3], [7, 9, 4], None, None),
])
def test_slice_input_form(starts, ends, axes, steps):
    x = rand((7, 9, 11))
    inits = {"s": np.array(starts), "e": np.array(ends)}
    names = ["x", "s", "e"]
    if axes is not None:
        inits["a"], inits["p"] = np.array(axes), np.array(steps)
        names += ["a", "p"]
    node = helper.make_node("Slice", names, ["y"])
    got = run_node(node, {"x": x}, initializers=inits, opset=13)["y"]
    index = [slice(None)] * 3
    for k, (s, e) in enumerate(zip(starts, ends)):
        axis = k if axes is None else axes[k] % 3
        index[axis] = slice(s, e, 1 if steps is None else steps[k])
    check(got, x[tuple(index)])


def test_slice_attribute_form_opset9():
    x = rand((6, 10))
    node = helper.make_node("Slice", ["x"], ["y"], starts=[1, -4], ends=[5, 1000], axes=[0, 1])
    got = run_node(node, {"x": x}, opset=9)["y"]
    check(got, x[1:5, -4:])


@pytest.mark.parametrize("opset, sizes, extra", [
    (11, [2, 5, 4], {"split": [2, 5, 4]}), (13, [3, 3, 3, 2], {}), (18, [3, 3, 3, 2],
                                                                      {"num_outputs": 4})])
def test_split(opset, sizes, extra):
    x = rand((5, 11, 3))
    outs = [f"y{k}" for k in range(len(sizes))]
    inputs, inits = ["x"], None
    if opset == 13:  # sizes as an input; uneven equal split for the others
        inputs, inits = ["x", "sizes"], {"sizes": np.array(sizes)}
    node = helper.make_node("Split", inputs, outs, axis=1, **extra)
    got = run_node(node, {"x": x}, initializers=inits, opset=opset, outputs=outs)
    offsets = np.cumsum([0] + sizes)
    for k, name in enumerate(outs):
        check(got[name], x[:, offsets[k]:offsets[k + 1]])


def test_split_becomes_one_slice_per_output():
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=-1)
    model = make_model([node], [tensor_info("x", "float32", (2, 9))], ["a", "b", "c"])
    graph = import_onnx(model)
    assert [n.op for n in graph.nodes] == ["slice"] * 3
    assert [n.attrs["starts"] for n in graph.nodes] == [(0, 0), (0, 3), (0, 6)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode):
    x = rand((3, 5, 7))
    pads = [0, 2, 3, 1, 4, 6]  # reflect/wrap pads larger than the axis repeat the pattern
    inputs, inits = ["x", "p"], {"p": np.array(pads)}
    if mode == "constant":
        inputs, inits["v"] = inputs + ["v"], np.array(1.5, np.float32)
    node = helper.make_node("Pad", inputs, ["y"], mode=mode)
    got = run_node(node, {"x": x}, initializers=inits, opset=19)["y"]
    widths = [(pads[d], pads[d + 3]) for d in range(3)]
    kwargs = {"constant_values": 1.5} if mode == "constant" else {}
    check(got, np.pad(x, widths, mode=mode, **kwargs))


def test_pad_negative_pads_and_axes():
    x = rand((4, 9))
    node = helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode="edge")
    inits = {"p": np.array([-2, 3]), "a": np.array([-1])}
    got = run_node(node, {"x": x}, initializers=inits, opset=18)["y"]
    check(got, np.pad(x, [(0, 0), (0, 3)], mode="edge")[:, 2:])


# ---------------------------------------------------------------------------------------------
# expand, tile, block shuffles, masks

def test_expand_both_ways():
    x = rand((3, 1, 5))
    node = helper.make_node("Expand", ["x", "s"], ["y"])
    got = run_node(node, {"x": x}, initializers={"s": np.array([2, 1, 7, 1])})["y"]
    check(got, x * np.ones((2, 1, 7, 1), np.float32))


def test_tile():
    x = rand((3, 5))
    node = helper.make_node("Tile", ["x", "r"], ["y"])
    got = run_node(node, {"x": x}, initializers={"r": np.array([2, 3])})["y"]
    check(got, np.tile(x, (2, 3)))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    x = rand((2, 12, 3, 5))
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode)
    got = run_node(node, {"x": x})["y"]
    n, c, h, w = x.shape
    if mode == "DCR":
        want = x.reshape(n, 2, 2, 3, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        want = x.reshape(n, 3, 2, 2, h, w).transpose(0, 1, 4, 2, 5, 3)
    want = want.reshape(n, 3, h * 2, w * 2)
    check(got, want)
    back = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)
    if mode == "DCR":
        check(run_node(back, {"x": want})["y"], x)


@pytest.mark.parametrize("upper, k", [(1, 0), (0, -1), (1, 2), (0, 3)])
def test_trilu(upper, k):
    x = rand((2, 7, 9))
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    got = run_node(node, {"x": x}, initializers={"k": np.array(k)}, opset=14)["y"]
    check(got, np.triu(x, k) if upper else np.tril(x, k))


def test_one_hot_negative_and_out_of_range():
    idx = np.array([[0, -1, 3], [9, -11, 2]], np.int64)
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=1)
    inits = {"d": np.array(10), "v": np.array([-2.0, 5.0], np.float32)}
    got = run_node(node, {"i": idx}, initializers=inits)["y"]
    norm = np.where(idx < 0, idx + 10, idx)
    want = np.where(norm[:, None, :] == np.arange(10)[None, :, None], 5.0, -2.0)
    check(got, want.astype(np.float32))


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    x = rand((5, 19), seed=11)
    node = helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse)
    got = run_node(node, {"x": x}, initializers={"a": np.array(1)})["y"]
    src = x[:, ::-1] if reverse else x
    want = np.cumsum(src.astype(np.float64), axis=1)
    if exclusive:
        want = want - src
    check(got, (want[:, ::-1] if reverse else want).astype(np.float32), atol=1e-5)


@pytest.mark.parametrize("shape,axis", [((2, 1000), 1), ((257, 3), 0), ((3, 8400), 1)])
@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_a_long_cumsum_scans_in_blocks(shape, axis, exclusive, reverse):
    """Axes of BLOCKED_SCAN_MIN elements or more: totals of blocks of about sqrt(n), then
    each output within its block (a block that the axis does not fill included)."""
    x = rand(shape, seed=12)
    node = helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse)
    got = run_node(node, {"x": x}, initializers={"a": np.array(axis)})["y"]
    src = np.flip(x, axis) if reverse else x
    want = np.cumsum(src.astype(np.float64), axis=axis)
    if exclusive:
        want = want - src
    check(got, (np.flip(want, axis) if reverse else want).astype(np.float32), atol=1e-4)


def test_a_long_integer_cumsum_is_exact():
    x = np.arange(600, dtype=np.int64).reshape(2, 300) % 7 - 3
    node = helper.make_node("CumSum", ["x", "a"], ["y"])
    got = run_node(node, {"x": x}, initializers={"a": np.array(1)})["y"]
    check(got, np.cumsum(x, axis=1))


def test_cumsum_int32_axis0():
    x = np.arange(7 * 3, dtype=np.int32).reshape(7, 3) - 10
    node = helper.make_node("CumSum", ["x", "a"], ["y"])
    got = run_node(node, {"x": x}, initializers={"a": np.array([0], np.int32)})["y"]
    check(got, np.cumsum(x, axis=0).astype(np.int32))


def test_reverse_sequence():
    x = rand((6, 4, 3))  # time-major: [time, batch, ...]
    lens = np.array([6, 1, 0, 4], np.int64)
    node = helper.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=1, time_axis=0)
    got = run_node(node, {"x": x, "l": lens}, opset=10)["y"]
    want = x.copy()
    for b, n in enumerate(lens):
        want[:n, b] = x[:n, b][::-1]
    check(got, want)


# ---------------------------------------------------------------------------------------------
# resize

def bilinear_half_pixel(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Bilinear resize of the last two axes, half_pixel coordinates, edges clamped."""
    h, w = x.shape[-2:]

    def taps(out, n):
        src = np.clip((np.arange(out) + 0.5) * n / out - 0.5, 0, n - 1)
        low = np.floor(src).astype(int)
        high = np.minimum(low + 1, n - 1)
        return low, high, src - low

    y0, y1, fy = taps(out_h, h)
    x0, x1, fx = taps(out_w, w)
    top = x[..., y0, :][..., x0] * (1 - fx) + x[..., y0, :][..., x1] * fx
    bottom = x[..., y1, :][..., x0] * (1 - fx) + x[..., y1, :][..., x1] * fx
    return (top * (1 - fy[:, None]) + bottom * fy[:, None]).astype(x.dtype)


def test_resize_linear_half_pixel_matches_bilinear():
    x = rand((1, 3, 5, 7))
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")
    sizes = np.array([1, 3, 9, 4], np.int64)
    got = run_node(node, {"x": x}, initializers={"sizes": sizes}, opset=13)["y"]
    check(got, bilinear_half_pixel(x, 9, 4))


def test_resize_nearest_integer_scales_repeat():
    x = rand((2, 3, 4, 5))
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                            coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    scales = np.array([1, 1, 2, 3], np.float32)
    got = run_node(node, {"x": x}, initializers={"scales": scales}, opset=13)["y"]
    check(got, x.repeat(2, axis=2).repeat(3, axis=3))


RESIZE_CASES = [
    dict(mode="nearest", coordinate_transformation_mode="half_pixel",
         nearest_mode="round_prefer_ceil"),
    dict(mode="nearest", coordinate_transformation_mode="align_corners", nearest_mode="ceil"),
    dict(mode="linear", coordinate_transformation_mode="align_corners"),
    dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="asymmetric"),
    dict(mode="cubic", coordinate_transformation_mode="half_pixel"),
    dict(mode="cubic", coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.5,
         exclude_outside=1),
    dict(mode="linear", coordinate_transformation_mode="half_pixel", antialias=1),
    dict(mode="cubic", coordinate_transformation_mode="half_pixel", antialias=1),
]


@pytest.mark.parametrize("attrs", RESIZE_CASES)
@pytest.mark.parametrize("sizes", [(1, 2, 11, 3), (1, 2, 3, 13)])
def test_resize_against_onnx_reference(attrs, sizes):
    """ONNX's own reference evaluator (independent of tensorc) as the oracle."""
    x = rand((1, 2, 6, 7), seed=12)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    inits = {"sizes": np.array(sizes, np.int64)}
    model, mod = compile_node(node, {"x": x}, initializers=inits, opset=19)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    check(mod.run({"x": x})["y"], want, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_large_downsample(mode):
    """Wide antialias windows (8 and 16 taps), and coordinates a rounding error away from
    an input position, where ONNX's window placement must be followed exactly."""
    x = rand((1, 2, 67, 61), seed=14)
    attrs = {"antialias": 1} if mode != "nearest" else {}
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, **attrs)
    inits = {"sizes": np.array([1, 2, 20, 17], np.int64)}
    model, mod = compile_node(node, {"x": x}, initializers=inits, opset=19)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    check(mod.run({"x": x})["y"], want, atol=1e-5)


def test_resize_3d_tf_crop_and_resize_extrapolates():
    x = rand((1, 4, 5, 6), seed=13)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize",
                            extrapolation_value=7.0, axes=[1, 2, 3])
    inits = {"roi": np.array([0.2, -0.3, 0.1, 0.9, 1.2, 0.8], np.float32),
             "sizes": np.array([3, 7, 5], np.int64)}
    model, mod = compile_node(node, {"x": x}, initializers=inits, opset=19)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    got = mod.run({"x": x})["y"]
    assert (got == 7.0).any()
    check(got, want, atol=1e-5)


def test_upsample_nearest_opset9():
    x = rand((1, 2, 3, 4))
    node = helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")
    inits = {"s": np.array([1, 1, 2, 2], np.float32)}
    got = run_node(node, {"x": x}, initializers=inits, opset=9)["y"]
    check(got, x.repeat(2, axis=2).repeat(2, axis=3))


# ---------------------------------------------------------------------------------------------
# shape-only ops fold to constants

def test_shape_size_range_eyelike_constantofshape_fold():
    x = rand((3, 5, 7))
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
             helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Range", ["a", "b", "c"], ["r"]),
             helper.make_node("EyeLike", ["m"], ["e"], k=1, dtype=TensorProto.INT32),
             helper.make_node("ConstantOfShape", ["s"], ["z"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5]))]
    inits = {"a": np.array(10), "b": np.array(-3), "c": np.array(-4),
             "m": np.zeros((3, 4), np.float32)}
    got = run_node(nodes, {"x": x}, initializers=inits, outputs=("s", "n", "r", "e", "z"))
    check(got["s"], np.array([5], np.int64))
    check(got["n"], np.array(105, np.int64))
    check(got["r"], np.arange(10, -3, -4))
    check(got["e"], np.eye(3, 4, k=1, dtype=np.int32))
    check(got["z"], np.full((5,), 2.5, np.float32))


def test_reshape_flatten_squeeze_unsqueeze_transpose_chain():
    x = rand((2, 1, 3, 5))
    nodes = [helper.make_node("Squeeze", ["x", "ax"], ["a"]),
             helper.make_node("Unsqueeze", ["a", "ux"], ["b"]),
             helper.make_node("Transpose", ["b"], ["c"], perm=[3, 0, 2, 1, 4]),
             helper.make_node("Flatten", ["c"], ["d"], axis=-2),
             helper.make_node("Reshape", ["d", "shape"], ["y"])]
    inits = {"ax": np.array([-3]), "ux": np.array([-1, 0]), "shape": np.array([-1, 0, 3])}
    got = run_node(nodes, {"x": x}, initializers=inits, opset=13)["y"]
    want = x.reshape(1, 2, 3, 5, 1).transpose(3, 0, 2, 1, 4).reshape(15, 2)
    check(got, want.reshape(5, 2, 3))


def test_reshape_with_runtime_shape_names_node_and_input():
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="the_reshape")
    model = make_model([node], [tensor_info("x", "float32", (2, 6)),
                                tensor_info("shape", "int64", (2,))], ["y"])
    with pytest.raises(ShapeError, match=r"(?s)the_reshape.*shape input %shape"):
        tensorc.compile(model)

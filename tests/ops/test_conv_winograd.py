"""Winograd convs F(m x m, 3 x 3) (ops/nn/conv/winograd*.py): the transforms, the weight
transform at compile time and its inverse, and the kernel against a float64 numpy conv over
map sizes no tile divides, channel and filter counts no vector divides, batches, both
paddings and fused epilogues; which convs take the Winograd path and which stay direct."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper, numpy_helper

import tensorc
from tensorc.codegen.llvm.objects import emit_assembly
from tensorc.ir.types import TensorType
from tensorc.ops.nn.conv import winograd_cost, winograd_transforms
from tensorc.ops.nn.conv.shapes import unpack_weight
from tensorc.ops.catalog import get_op
from tensorc.target import Target, missing_cpu_features

ZEN4 = Target.from_string("llvm -mcpu=znver4")


@pytest.mark.parametrize("m", [2, 4, 6])
def test_transforms_compute_the_correlation(m):
    # y = A^T [(G g) . (B^T d)] is the 1-D correlation y[i] = sum_j g[j] d[i + j]
    at, g, bt = winograd_transforms.transforms(m)
    assert at.shape == (m, m + 2) and g.shape == (m + 2, 3) and bt.shape == (m + 2, m + 2)
    rng = np.random.default_rng(m)
    for _ in range(5):
        d, w = rng.standard_normal(m + 2), rng.standard_normal(3)
        want = np.array([d[i:i + 3] @ w for i in range(m)])
        np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), want, rtol=1e-12, atol=1e-12)


def test_the_input_transform_has_small_integer_coefficients():
    # the rows of B^T are scaled to integers (their factors moved into G): no rounding in
    # the input transform's coefficients
    for m in (2, 4, 6):
        bt = winograd_transforms.transforms(m)[2]
        np.testing.assert_array_equal(bt, np.round(bt))


def test_weight_transform_round_trips_and_pads_the_last_panel():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    u = winograd_transforms.transform_weight(w, 4, 2)
    assert u.shape == (36, 3, 3, 2)                      # 5 filters in 3 panels of 2
    assert (u[:, 2, :, 1] == 0).all()                    # the sixth filter: zeros
    np.testing.assert_allclose(winograd_transforms.untransform_weight(u, 4, 5), w, rtol=1e-5,
                               atol=1e-6)
    attrs = {"winograd": 4, "kernel_block": 2, "filters": 5}
    np.testing.assert_allclose(unpack_weight(attrs, u), w, rtol=1e-5, atol=1e-6)


def test_the_reference_of_a_transformed_conv_is_the_conv():
    # the op's numpy reference (constant folding, checks) reads transformed weights through
    # G's left inverse
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 6, 7)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    attrs = {"strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1), "groups": 1}
    conv = get_op("conv")
    (want,) = conv.reference_fn(attrs, x, w)
    packed = dict(attrs, winograd=4, kernel_block=4, filters=4)
    u = winograd_transforms.transform_weight(w, 4, 4)
    (got,) = conv.reference_fn(packed, x, u)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    (shape,) = conv.infer_fn(packed, [TensorType(x.shape, "float32"),
                                      TensorType(u.shape, "float32")])
    assert shape.shape == want.shape


def conv_model(x_shape, filters, pad=1, residual=False, kernel=3, stride=1, dilation=1,
               groups=1, seed=0):
    """Conv (He weights, a bias) + [residual Add] + Relu, and its float64 numpy result."""
    rng = np.random.default_rng(seed)
    n, channels, height, width = x_shape
    fan_in = channels // groups * kernel * kernel
    w = (rng.standard_normal((filters, channels // groups, kernel, kernel))
         * np.sqrt(2 / fan_in)).astype(np.float32)
    b = rng.standard_normal(filters).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[pad] * 4,
                              strides=[stride] * 2, dilations=[dilation] * 2, group=groups)]
    inputs = [tensor_info("x", "float32", list(x_shape))]
    span = (kernel - 1) * dilation + 1
    out_shape = (n, filters, (height + 2 * pad - span) // stride + 1,
                 (width + 2 * pad - span) // stride + 1)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    last = "c"
    if residual:
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        inputs.append(tensor_info("r", "float32", list(out_shape)))
        feeds["r"] = rng.standard_normal(out_shape).astype(np.float32)
        last = "s"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    model = make_model(nodes, inputs, ["y"])
    model.graph.initializer.extend([numpy_helper.from_array(w, "w"),
                                    numpy_helper.from_array(b, "b")])
    want = _conv64(feeds["x"], w, pad, stride, dilation, groups) + b[:, None, None]
    if residual:
        want = want + feeds["r"]
    return model, feeds, np.maximum(want, 0)


def _conv64(x, w, pad, stride, dilation, groups):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, channels, height, width = xp.shape
    filters, per_group, kh, kw = w.shape
    oh = (height - (kh - 1) * dilation - 1) // stride + 1
    ow = (width - (kw - 1) * dilation - 1) // stride + 1
    out = np.zeros((n, filters, oh, ow))
    fg = filters // groups
    for g in range(groups):
        xs = xp[:, g * per_group:(g + 1) * per_group]
        for i in range(kh):
            for j in range(kw):
                window = xs[:, :, i * dilation:i * dilation + (oh - 1) * stride + 1:stride,
                            j * dilation:j * dilation + (ow - 1) * stride + 1:stride]
                out[:, g * fg:(g + 1) * fg] += np.einsum(
                    "nchw,fc->nfhw", window, w[g * fg:(g + 1) * fg, :, i, j].astype(np.float64))
    return out


@pytest.mark.parametrize("x_shape, filters, pad, residual, m", [
    ((1, 16, 4, 4), 16, 1, False, 4),       # one tile per image
    ((1, 8, 7, 7), 24, 1, True, 4),         # 7x7: two tiles of 4, a garbage row and column
    ((1, 8, 7, 7), 24, 1, True, 2),         # four tiles of 2, the last one short
    ((2, 3, 13, 13), 40, 1, False, 4),      # three input channels, a batch of two
    ((1, 24, 27, 27), 40, 0, True, 4),      # no padding: 25x25 out
    ((1, 24, 27, 27), 40, 0, True, 2),
    ((2, 40, 9, 11), 3, 1, False, 4),       # a rectangle, three filters
    ((1, 5, 57, 57), 19, 1, False, 4),      # 57: fifteen tiles a row, the last one short
    ((1, 5, 57, 57), 19, 1, False, 2),
    ((1, 6, 20, 20), 12, 1, False, 6),      # F(6, 3): 8x8 patches
    ((1, 64, 56, 56), 64, 1, True, 4),      # a ResNet block's second conv
])
def test_winograd_conv_matches_numpy(force_tile, x_shape, filters, pad, residual, m):
    force_tile(m)
    model, feeds, want = conv_model(x_shape, filters, pad, residual,
                                    seed=sum(x_shape) + filters)
    assert f"winograd={m}" in tensorc.inspect(model, stage="graph")
    assert "winograd_gemm" in tensorc.inspect(model, stage="loops")
    module = tensorc.compile(model)
    assert len(module.kernels) == 1                      # bias, add and relu fused
    got = module.run(feeds)["y"]
    check_result(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_conv_with_two_threads_matches_one(force_tile, m):
    force_tile(m)
    model, feeds, want = conv_model((2, 32, 30, 30), 48, seed=7)
    assert f"winograd={m}" in tensorc.inspect(model, stage="graph")
    module = tensorc.compile(model)
    got = {}
    for threads in (1, 2):
        module.num_threads = threads
        got[threads] = module.run(feeds)["y"]
    np.testing.assert_array_equal(got[1], got[2])
    check_result(got[2], want.astype(np.float32), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(bool(missing_cpu_features("llvm -mcpu=znver3", "")),
                    reason="this CPU cannot run Zen 3 (AVX2) code")
def test_winograd_conv_with_256_bit_vectors(force_tile):
    # AVX2: 8-lane vectors, 6-row weight panels
    force_tile(4)
    model, feeds, want = conv_model((1, 24, 21, 21), 40, residual=True, seed=3)
    target = "llvm -mcpu=znver3"
    assert "winograd=4" in tensorc.inspect(model, stage="graph", target=target)
    asm = emit_assembly(tensorc.inspect(model, stage="llvm", target=target),
                        Target.from_string(target))
    assert "ymm" in asm and "zmm" not in asm
    got = tensorc.compile(model, target=target).run(feeds)["y"]
    check_result(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels", [64, 256, 512])
@pytest.mark.parametrize("m", [2, 4])
def test_accuracy_holds_on_deep_reductions(force_tile, channels, m):
    # He-scaled weights and unit inputs, as in a trained network: F(4, 3) loses a few bits
    # against the direct conv, but stays well inside the model tests' tolerance
    force_tile(m)
    model, feeds, want = conv_model((1, channels, 16, 16), 32, seed=channels)
    got = tensorc.compile(model).run(feeds)["y"]
    tolerance = 1e-4 + 1e-4 * np.abs(want)
    assert (np.abs(got - want) / tolerance).max() < 0.5


@pytest.mark.parametrize("what, kwargs", [
    ("stride 2", {"stride": 2}),
    ("dilation 2", {"dilation": 2}),
    ("two groups", {"groups": 2}),
    ("a 5x5 kernel", {"kernel": 5, "pad": 2}),
    ("a 1x1 kernel", {"kernel": 1, "pad": 0}),
])
def test_ineligible_convs_stay_direct(what, kwargs):
    model, feeds, want = conv_model((1, 16, 20, 20), 32, **kwargs)
    assert "winograd" not in tensorc.inspect(model, stage="graph"), what
    got = tensorc.compile(model).run(feeds)["y"]
    check_result(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_eligibility():
    attrs = {"strides": (1, 1), "dilations": (1, 1), "groups": 1, "pads": (1, 1, 1, 1)}
    assert winograd_transforms.eligible(attrs, (1, 8, 9, 9), (8, 8, 3, 3))
    assert not winograd_transforms.eligible(dict(attrs, strides=(1, 2)), (1, 8, 9, 9), (8, 8, 3, 3))
    assert not winograd_transforms.eligible(dict(attrs, groups=2), (1, 8, 9, 9), (8, 4, 3, 3))
    assert not winograd_transforms.eligible(attrs, (1, 8, 9), (8, 8, 3))               # 1-D
    assert not winograd_transforms.eligible(attrs, (1, 8, 9, 9), (8, 8, 3, 1))


def test_tile_size_heuristic():
    attrs = {"strides": (1, 1), "dilations": (1, 1), "groups": 1, "pads": (1, 1, 1, 1)}

    def tile(c, f, size, target=ZEN4, dtype="float32", model_bytes=0):
        return winograd_cost.tile_size(attrs, TensorType((1, c, size, size), dtype),
                                  TensorType((f, c, 3, 3), dtype), target, model_bytes)
    assert tile(64, 64, 56) == 4                          # ResNet's 3x3 convs
    assert tile(128, 128, 28) == 4
    # more than 4 MB of transformed weights, reused over few tiles: the weights' trip from
    # memory bounds the time, so fewer of them (F(2, 3): 4.2 MB, not 9.4) or the direct
    # conv's (9.4 MB, not 16.8)
    assert tile(256, 256, 14) == 2
    assert tile(512, 512, 7) == 0
    assert tile(64, 256, 13) == 4                         # 2.4 MB stay in the caches
    # ... as do all the weights of a small model (the conv alone: 4.7 MB, 18.9 MB by F(4, 3))
    assert tile(256, 512, 13) == 2 and tile(256, 512, 13, model_bytes=100 << 20) == 2
    assert tile(256, 512, 13, model_bytes=256 * 512 * 9 * 4) == 4
    assert tile(64, 64, 26) == 2                          # 7 tiles of 4 a row: half a vector
    assert tile(8, 64, 56) == 0 and tile(64, 8, 56) == 0  # too few channels or filters
    assert tile(32, 32, 149) == 0                         # V and M stream through memory
    assert tile(80, 192, 71) == 4                         # as large, but more work per byte
    assert tile(64, 64, 2) == 0                           # one tile
    assert tile(64, 64, 56, dtype="float16") == 0         # float32 only
    assert tile(64, 64, 56, target=None) == 0             # no target: weights stay OIHW
    assert tile(64, 64, 56, target=Target.from_string("llvm -mcpu=znver3")) == 4   # AVX2
    assert tile(64, 64, 56, target=Target.from_string("llvm -mcpu=x86-64")) == 0    # SSE2
    assert tile(64, 64, 56, target=Target.from_string("llvm -mcpu=znver4 -winograd=0")) == 0
    assert tile(64, 64, 56, target=Target.from_string("llvm -mcpu=znver4 -winograd=1")) == 4


def test_winograd_off_runs_the_direct_conv():
    """``llvm -winograd=0``: a conv that runs as Winograd by default runs direct, with the
    direct conv's answer (numpy's, to its accuracy)."""
    model, feeds, want = conv_model((1, 64, 28, 28), 64)
    assert "winograd" in tensorc.inspect(model, stage="graph")
    assert "winograd" not in tensorc.inspect(model, stage="graph", target="llvm -winograd=0")
    got = tensorc.compile(model, target="llvm -winograd=0").run(feeds)["y"]
    check_result(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m", [4, 2])
def test_tuning_task_of_a_winograd_conv_checks_against_its_reference(force_tile, m):
    """The autotuner's task inputs for transformed weights are a transform of weights (random
    numbers are none, and the kernel and the reference disagreed on them: every candidate of
    a Winograd conv was recorded as a wrong answer); each config of a few matches."""
    from tensorc.autotune.task import extract_tasks
    from tensorc.runtime.kernel import build_kernel
    force_tile(m)
    rng = np.random.default_rng(m)
    w = (rng.standard_normal((24, 16, 3, 3)) * 0.2).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)
    model = make_model([node], [tensor_info("x", "float32", [1, 16, 12, 12])], ["y"])
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    (task,) = extract_tasks(model, measure=False)
    assert any(n.attrs.get("winograd") == m for n in task.graph.nodes)
    arrays = task.inputs(0)
    want = task.reference(arrays)[0]
    space = task.space()
    # a few configs, and the direct conv's default (its weights repacked for it)
    configs = list(space.configs())[:5] + [c for c in space.neighbours(space.default())
                                           if c["algorithm"] != "winograd"]
    assert len({c["algorithm"] for c in configs}) == 2
    for config in configs:
        out = np.full(want.shape, 7.0, want.dtype)
        build_kernel(task.schedule(config))(*task.inputs_for(config, arrays), out,
                                            num_threads=1)
        check_result(out, want, rtol=1e-4, atol=1e-4)

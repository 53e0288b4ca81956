"""2-D convs with filters in vector lanes (conv.py, ``_conv_filter_lanes``): register tiles
of R outputs of a row x V vectors of filters, accumulated in [x, f] order and stored to
NCHW. Against numpy over strides, dilations, asymmetric pads, 1x7 and 7x1 kernels, filter
counts no vector divides, rows the tile does not divide, batches and fused epilogues. The
formulation is forced on for every dense conv here (on the host it is chosen for small maps
on AVX-512 targets), so the tests run it on any CPU."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper, numpy_helper
from test_conv_strided import conv_model, conv_ref

import tensorc

alter_layout_module = importlib.import_module("tensorc.passes.graph.alter_layout")


@pytest.fixture
def lanes_everywhere(monkeypatch):
    monkeypatch.setattr(alter_layout_module, "filter_lanes_wins",
                        lambda attrs, x_shape, w_shape, target: attrs["groups"] == 1)
    monkeypatch.setattr(alter_layout_module.winograd, "tile_size", lambda *args: 0)


@pytest.mark.parametrize("channels, hw, filters, kernel, strides, pads, dilations", [
    (64, (13, 13), 48, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),     # SqueezeNet's 13x13
    (24, (7, 7), 40, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),       # 40 = 2.5 vectors
    (16, (14, 14), 32, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),     # stride 2: 7x7 out
    (32, (22, 22), 32, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),     # 11 wide: pieces of 6
    (12, (27, 27), 16, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),     # 27 wide: shifted tile
    (8, (17, 17), 24, (1, 7), (1, 1), (0, 3, 0, 3), (1, 1)),      # Inception's 1x7
    (8, (17, 17), 24, (7, 1), (1, 1), (3, 0, 3, 0), (1, 1)),      # and 7x1
    (6, (19, 22), 20, (5, 3), (2, 3), (2, 0, 1, 2), (1, 1)),      # asymmetric everything
    (10, (21, 21), 17, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),     # dilated
    (5, (4, 3), 9, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),         # tiny
])
def test_filter_lanes_conv_matches_numpy(lanes_everywhere, channels, hw, filters, kernel,
                                         strides, pads, dilations):
    rng = np.random.default_rng(sum(hw) + filters + channels)
    x = rng.standard_normal((1, channels, *hw)).astype(np.float32)
    w = (rng.standard_normal((filters, channels, *kernel)) * 0.3).astype(np.float32)
    model = conv_model(x, w, strides, pads, dilations)
    assert "conv_lanes" in tensorc.inspect(model, stage="loops")
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, conv_ref(x, w, strides, pads, dilations), rtol=1e-4, atol=1e-4)


def test_strided_taps_take_short_rows_with_the_taps_inside_the_channels():
    """A 3x3 s2 conv onto 18x18 (not a square tile: K = 288, planes not 2 KB multiples):
    rows of 6 (even pieces of at most 7), each channel's taps innermost; numbers as numpy."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 32, 36, 36)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.2).astype(np.float32)
    model = conv_model(x, w, (2, 2), (1, 1, 1, 1), (1, 1))
    text = tensorc.inspect(model, stage="loops")
    assert "allocate conv_lanes.local: float32[1, 1, 6, 32]" in text
    assert "for (rc: serial, 0, 32)\n        for (ry: serial, 0, 3)" in text
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, conv_ref(x, w, (2, 2), (1, 1, 1, 1), (1, 1)), rtol=1e-4, atol=1e-4)


def test_a_batch_with_bias_residual_and_relu_is_one_kernel(lanes_everywhere):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 32, 9, 9)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 32, 9, 9])], ["y"])
    model.graph.initializer.extend([numpy_helper.from_array(w, "w"),
                                    numpy_helper.from_array(b, "b")])
    module = tensorc.compile(model)
    assert len(module.kernels) == 1
    want = conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1)) + b.reshape(1, -1, 1, 1) + x
    check_result(module.run({"x": x})["y"], np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_small_maps_take_filter_lanes_on_avx512_only():
    from tensorc.ops.nn.conv import filter_lanes_wins
    from tensorc.target import Target
    attrs = {"groups": 1, "strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1)}
    zen4, zen3 = (Target.from_string(f"llvm -mcpu={cpu}") for cpu in ("znver4", "znver3"))
    assert filter_lanes_wins(attrs, (1, 64, 13, 13), (256, 64, 3, 3), zen4)
    assert not filter_lanes_wins(attrs, (1, 64, 13, 13), (256, 64, 3, 3), zen3)
    assert not filter_lanes_wins(attrs, (1, 64, 56, 56), (64, 64, 3, 3), zen4)   # wide rows
    strided = dict(attrs, strides=(2, 2))
    assert filter_lanes_wins(strided, (1, 64, 56, 56), (64, 64, 3, 3), zen4)     # unless strided
    assert not filter_lanes_wins(attrs, (1, 3, 13, 13), (64, 3, 3, 3), zen4)     # K = 27
    # 1x1 convs take the matmul micro-kernel but onto maps of short rows (with filters in
    # whole pairs of vectors)
    pointwise = dict(attrs, pads=(0, 0, 0, 0))
    assert not filter_lanes_wins(pointwise, (1, 256, 28, 28), (512, 256, 1, 1), zen4)
    assert filter_lanes_wins(pointwise, (1, 960, 7, 7), (160, 960, 1, 1), zen4)
    assert not filter_lanes_wins(pointwise, (1, 512, 13, 13), (1000, 512, 1, 1), zen4)
    assert filter_lanes_wins(dict(pointwise, strides=(2, 2)), (1, 256, 14, 14),
                             (512, 256, 1, 1), zen4)
    assert not filter_lanes_wins(dict(pointwise, strides=(2, 2)), (1, 64, 56, 56),
                                 (128, 64, 1, 1), zen4)


@pytest.mark.parametrize("strided", [False, True])
def test_every_row_width_has_a_legal_default_tile(strided):
    """The default row tile is among the choices for every output width (a 3x3 s2 conv
    onto 11x11 once defaulted to 6 outputs, which were not a choice: the compile failed)."""
    from tensorc.ir import te
    from tensorc.ops.nn.conv import _filter_lanes_space
    from tensorc.target import Target
    target = Target.from_string("llvm -mcpu=znver4")
    for width in range(1, 64):
        for depth in (27, 288):
            out = te.placeholder((1, 48, width, width), "float32", "out")
            space = _filter_lanes_space(target, out, depth, 9, strided)
            assert space.violation(space.default()) is None

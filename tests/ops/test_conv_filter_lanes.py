"""2-D convs with filters in vector lanes (ops/nn/conv/filter_lanes.py): register tiles
of R outputs of a row x V vectors of filters, accumulated in [x, f] order and stored to
NCHW. Against numpy over strides, dilations, asymmetric pads, 1x7 and 7x1 kernels, filter
counts no vector divides, rows the tile does not divide, batches and fused epilogues. The
formulation is forced on for every dense conv here (on the host it is chosen for small maps
on AVX-512 targets), so the tests run it on any CPU."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper, numpy_helper
from test_conv_strided import conv_model, conv_ref

import tensorc
from tensorc.ir import te
from tensorc.ops.nn.conv import filter_lanes, strategy, winograd_cost
from tensorc.ops.nn.conv.filter_lanes import filter_lanes_tile_space
from tensorc.ops.nn.conv.strategy import filter_lanes_wins
from tensorc.target import Target


# the CPU whose form these tests are about; code for it is compiled, and run only on such a host
AVX512_CPU = "llvm -mcpu=znver4"


@pytest.fixture
def lanes_everywhere(monkeypatch):
    monkeypatch.setattr(strategy, "filter_lanes_wins",
                        lambda attrs, x_shape, w_shape, target: attrs["groups"] == 1)
    monkeypatch.setattr(winograd_cost, "tile_size", lambda *args, **kwargs: 0)


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
    # the filters-in-lanes form is AVX-512's: its loops as compiled for such a CPU (not run
    # there unless this host is one); the numbers of this host's own form below
    text = tensorc.inspect(model, stage="loops", target=AVX512_CPU)
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
    target = Target.from_string("llvm -mcpu=znver4")
    for width in range(1, 64):
        for depth in (27, 288):
            out = te.placeholder((1, 48, width, width), "float32", "out")
            space = filter_lanes_tile_space(target, out, depth, 9, strided)
            assert space.violation(space.default()) is None


@pytest.mark.parametrize("lines", [2, 3, 4])
@pytest.mark.parametrize("hw, strides, filters", [
    ((7, 7), (1, 1), 64),        # 7 lines: the last tile's lines past the map are guarded
    ((14, 14), (2, 2), 40),      # strided onto 7x7, filters no vector pair divides
    ((5, 6), (1, 1), 32),
])
def test_tiles_of_several_lines_match_numpy(monkeypatch, lanes_everywhere, lines, hw, strides,
                                            filters):
    """Register tiles of ``tile_lines`` lines of the map (a batch of two, bias and ReLU
    fused): where the lines do not divide the map's height, the last tile stores only the
    lines inside it."""
    space = filter_lanes.filter_lanes_tile_space

    def pinned(target, *args):
        # tiles of several 7-wide lines need AVX-512's 32 registers: an AVX2 host keeps its
        # default tile for the numbers, and the loops are checked as compiled for AVX-512
        if target.vector_registers < 32:
            return space(target, *args)
        return space(target, *args).pinned(tile_lines=lines, filter_vectors=4 // lines or 1)
    monkeypatch.setattr(filter_lanes, "filter_lanes_tile_space", pinned)
    rng = np.random.default_rng(lines + filters)
    x = rng.standard_normal((2, 48, *hw)).astype(np.float32)
    w = (rng.standard_normal((filters, 48, 1, 1)) * 0.2).astype(np.float32)
    b = rng.standard_normal(filters).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=list(strides)),
             helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", list(x.shape))], ["y"])
    model.graph.initializer.extend([numpy_helper.from_array(w, "w"),
                                    numpy_helper.from_array(b, "b")])
    text = tensorc.inspect(model, stage="loops", target=AVX512_CPU)
    assert re.search(rf"allocate conv_lanes\.local: float32\[1, {lines}, \d+, \d+\]", text)
    want = conv_ref(x, w, strides, (0, 0, 0, 0), (1, 1)) + b.reshape(1, -1, 1, 1)
    check_result(tensorc.compile(model).run({"x": x})["y"], np.maximum(want, 0),
                 rtol=1e-4, atol=1e-4)


def test_pointwise_convs_onto_short_rows_take_two_lines_per_tile():
    """1x1 convs onto 7x7 maps: tiles of two lines of 7 outputs x 2 vectors of filters (each
    weight vector loaded serves 14 outputs); 14-wide rows and 3x3 convs keep one line."""
    target = Target.from_string("llvm -mcpu=znver5")

    def default(shape, depth, taps, strided=False):
        out = te.placeholder(shape, "float32", "out")
        c = filter_lanes_tile_space(target, out, depth, taps, strided).default()
        return c["row_tile"], c["filter_vectors"], c["tile_lines"]
    assert default((1, 2048, 7, 7), 1024, 1, strided=True) == (7, 2, 2)
    assert default((1, 512, 7, 7), 2048, 1) == (7, 2, 2)
    assert default((1, 1024, 14, 14), 256, 1) == (14, 2, 1)
    assert default((1, 512, 7, 7), 4608, 9)[2] == 1

"""Strided 2-D convs on the GEMM formulation: the padded input is split into its stride x
stride phases once, so that each block's patches are contiguous loads (conv.py,
phase_split). Against a numpy reference over strides, dilations, asymmetric pads and odd
sizes."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper, numpy_helper

import tensorc


def conv_ref(x, w, strides, pads, dilations) -> np.ndarray:
    f, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    span = [(kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1]
    oh = (xp.shape[2] - span[0]) // strides[0] + 1
    ow = (xp.shape[3] - span[1]) // strides[1] + 1
    out = np.zeros((x.shape[0], f, oh, ow))
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilations[0], j * dilations[1]
            patch = xp[:, :, r0:r0 + (oh - 1) * strides[0] + 1:strides[0],
                       c0:c0 + (ow - 1) * strides[1] + 1:strides[1]]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out.astype(np.float32)


def conv_model(x: np.ndarray, w: np.ndarray, strides, pads, dilations):
    """A Conv of input x (shape of ``x``) with constant weights ``w``, output y."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=list(w.shape[2:]),
                            strides=list(strides), pads=list(pads), dilations=list(dilations))
    model = make_model([node], [tensor_info("x", "float32", list(x.shape))], ["y"])
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    return model


@pytest.mark.parametrize("channels, hw, filters, kernel, strides, pads, dilations", [
    (3, (29, 31), 16, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),      # a stem, odd sizes
    (3, (26, 26), 8, (6, 6), (2, 2), (2, 2, 2, 2), (1, 1)),       # YOLOv5's 6x6/2 stem
    (4, (23, 17), 12, (3, 3), (4, 4), (0, 0, 0, 0), (1, 1)),      # stride above the kernel
    (5, (19, 22), 7, (5, 3), (2, 3), (2, 0, 1, 2), (1, 1)),       # asymmetric everything
    (2, (21, 21), 16, (3, 3), (2, 2), (2, 2, 2, 2), (2, 2)),      # dilated and strided
    (16, (14, 14), 24, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),     # a 1x1 downsample
    (3, (16, 16), 8, (4, 4), (4, 4), (0, 0, 0, 0), (1, 1)),       # a patch embedding
    (6, (9, 12), 5, (3, 3), (2, 1), (1, 1, 1, 1), (1, 1)),        # stride in rows only
    # few channels and rows of two column blocks or more: the GEMM runs along output rows
    (3, (65, 75), 16, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),      # 38 wide: last block shifted
    (3, (40, 70), 8, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),       # a 7x7 stem, 35 wide
    (2, (20, 50), 7, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),       # dilated, stride 1
    (4, (17, 64), 12, (5, 3), (1, 2), (2, 0, 1, 2), (1, 1)),      # 32 wide, asymmetric
    (1, (9, 140), 5, (3, 3), (4, 4), (0, 0, 0, 0), (1, 1)),       # stride 4, one channel
])
def test_strided_conv_matches_numpy(channels, hw, filters, kernel, strides, pads, dilations):
    rng = np.random.default_rng(sum(hw) + filters)
    x = rng.standard_normal((1, channels, *hw)).astype(np.float32)
    w = (rng.standard_normal((filters, channels, *kernel)) * 0.3).astype(np.float32)
    got = tensorc.compile(conv_model(x, w, strides, pads, dilations)).run({"x": x})["y"]
    check_result(got, conv_ref(x, w, strides, pads, dilations), rtol=1e-4, atol=1e-4)


def test_a_stride_2_conv_reads_its_patches_from_phase_planes():
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    model = make_model([node], [tensor_info("x", "float32", [1, 3, 30, 30])], ["y"])
    model.graph.initializer.append(numpy_helper.from_array(
        np.ones((8, 3, 3, 3), np.float32), "w"))
    loops = tensorc.inspect(model, stage="loops")
    # the padded 32x32 input as 2 x 2 phases of 16 x 16 (plus the zero rows below)
    assert "allocate pad: float32[1, 3, 2, 2, " in loops, loops


def test_a_few_channel_stem_writes_its_epilogue_from_the_register_tile():
    # 3 -> 8, 3x3 stride 2 on 75 columns: the GEMM runs along the 38-column output rows (one
    # patch block of 32 columns at a time, K = 27 being deep enough for two vectors, the last
    # shifted back), so no GEMM buffer is allocated and the ReLU is applied to the register
    # tile as it is stored
    conv = helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    relu = helper.make_node("Relu", ["c"], ["y"])
    model = make_model([conv, relu], [tensor_info("x", "float32", [1, 3, 9, 75])], ["y"])
    w = np.random.default_rng(3).standard_normal((8, 3, 3, 3)).astype(np.float32)
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    loops = tensorc.inspect(model, stage="loops")
    assert "allocate im2col: float32[1, 27, 1, 32]" in loops, loops
    assert "allocate conv_gemm:" not in loops, loops
    x = np.random.default_rng(4).standard_normal((1, 3, 9, 75)).astype(np.float32)
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, np.maximum(conv_ref(x, w, (2, 2), (1, 1, 1, 1), (1, 1)), 0),
                 rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels, kernel, tile", [(1, 10, 16), (80, 3, 32), (8, 3, 32)])
def test_deep_gemm_convs_take_tiles_two_vectors_wide(channels, kernel, tile):
    """A conv GEMM at least WIDE_GEMM_DEPTH deep accumulates 32 output positions per tile
    (fewer loads per multiply-add), a shallower one 16; both against numpy on a length
    neither divides."""
    from tensorc.ops.nn.conv.conv_gemm import gemm_columns
    assert gemm_columns(channels * kernel) == tile
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((1, channels, 1, 77)).astype(np.float32)
    w = (rng.standard_normal((20, channels, 1, kernel)) * 0.3).astype(np.float32)
    pads = (0, kernel // 2, 0, kernel // 2)
    model = conv_model(x, w, (1, 1), pads, (1, 1))
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, conv_ref(x, w, (1, 1), pads, (1, 1)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels, kernel, filters, tile", [
    (3, 3, 64, 8), (3, 4, 96, 8), (3, 3, 6, 6)])
def test_shallow_gemm_convs_take_tiles_of_eight_filters(channels, kernel, filters, tile):
    """A conv GEMM at most SHALLOW_GEMM_DEPTH deep (a stem, a patch embedding) accumulates 8
    filters per register tile (which 16, 32, 64, 96 and 128 divide; 6 filters: one tile of
    6); against numpy. (Deeper ones keep the tallest tile: the audio model's loop IR is
    unchanged.)"""
    rng = np.random.default_rng(filters)
    x = rng.standard_normal((1, channels, 20, 24)).astype(np.float32)
    w = (rng.standard_normal((filters, channels, kernel, kernel)) * 0.3).astype(np.float32)
    stride, pads = (kernel, kernel) if kernel == 4 else (2, 2), (0, 0, 0, 0)
    model = conv_model(x, w, stride, pads, (1, 1))
    loops = tensorc.inspect(model, stage="loops")
    assert "conv_gemm" in loops and f"for (f: unrolled, 0, {tile})" in loops, loops
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, conv_ref(x, w, stride, pads, (1, 1)), rtol=1e-4, atol=1e-4)

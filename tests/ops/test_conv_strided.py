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


@pytest.mark.parametrize("channels, hw, filters, kernel, strides, pads, dilations", [
    (3, (29, 31), 16, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),      # a stem, odd sizes
    (3, (26, 26), 8, (6, 6), (2, 2), (2, 2, 2, 2), (1, 1)),       # YOLOv5's 6x6/2 stem
    (4, (23, 17), 12, (3, 3), (4, 4), (0, 0, 0, 0), (1, 1)),      # stride above the kernel
    (5, (19, 22), 7, (5, 3), (2, 3), (2, 0, 1, 2), (1, 1)),       # asymmetric everything
    (2, (21, 21), 16, (3, 3), (2, 2), (2, 2, 2, 2), (2, 2)),      # dilated and strided
    (16, (14, 14), 24, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),     # a 1x1 downsample
    (3, (16, 16), 8, (4, 4), (4, 4), (0, 0, 0, 0), (1, 1)),       # a patch embedding
    (6, (9, 12), 5, (3, 3), (2, 1), (1, 1, 1, 1), (1, 1)),        # stride in rows only
])
def test_strided_conv_matches_numpy(channels, hw, filters, kernel, strides, pads, dilations):
    rng = np.random.default_rng(sum(hw) + filters)
    x = rng.standard_normal((1, channels, *hw)).astype(np.float32)
    w = (rng.standard_normal((filters, channels, *kernel)) * 0.3).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=list(kernel),
                            strides=list(strides), pads=list(pads), dilations=list(dilations))
    model = make_model([node], [tensor_info("x", "float32", [1, channels, *hw])], ["y"])
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    got = tensorc.compile(model).run({"x": x})["y"]
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

"""The flattened formulation of stride-1 convs (ops/nn/conv/flattened.py) against numpy."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper, numpy_helper

import tensorc
from tensorc.autotune.task import extract_tasks
from tensorc.runtime.kernel import build_kernel
from tensorc.ops.nn.conv import flattened, strategy, winograd_cost


@pytest.fixture(autouse=True)
def direct_forms(monkeypatch):
    """The flattened form is what 512-bit targets pick for wide maps; on any host and map,
    test it by lowering the vector width below which dense convs become GEMMs and turning
    the filters-in-lanes form and Winograd off."""
    monkeypatch.setattr(strategy, "GEMM_BELOW_VECTOR_BITS", 0)
    monkeypatch.setattr(strategy, "filter_lanes_wins", lambda *args: False)
    monkeypatch.setattr(winograd_cost, "tile_size", lambda *args, **kwargs: 0)


def conv_ref(x: np.ndarray, w: np.ndarray, pads, dilations) -> np.ndarray:
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = h + pads[0] + pads[2] - (kh - 1) * dilations[0]
    ow = wd + pads[1] + pads[3] - (kw - 1) * dilations[1]
    out = np.zeros((n, f, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dilations[0]:i * dilations[0] + oh,
                       j * dilations[1]:j * dilations[1] + ow]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out.astype(np.float32)


@pytest.mark.parametrize("hw, kernel, pads, dilations, filters", [
    ((7, 7), 3, (1, 1, 1, 1), (1, 1), 16),
    ((5, 9), 3, (1, 1, 1, 1), (1, 1), 32),
    ((9, 11), 3, (2, 2, 2, 2), (2, 2), 16),
    ((6, 13), 5, (2, 1, 2, 3), (1, 1), 8),
    ((3, 3), 3, (0, 0, 0, 0), (1, 1), 16),
])
def test_narrow_conv_is_flattened_and_correct(hw, kernel, pads, dilations, filters) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, *hw)).astype(np.float32)
    w = (rng.standard_normal((filters, 8, kernel, kernel)) * 0.2).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=list(pads),
                            dilations=list(dilations), kernel_shape=[kernel, kernel])
    model = make_model([helper.make_node("Relu", ["y"], ["z"]), node][::-1],
                       [tensor_info("x", "float32", [1, 8, *hw])], ["z"])
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    assert "conv_flat" in tensorc.inspect(model, stage="loops")
    got = tensorc.compile(model).run({"x": x})["z"]
    check_result(got, np.maximum(conv_ref(x, w, pads, dilations), 0), rtol=1e-4, atol=1e-4)


def flat_conv_model(channels: int, filters: int, size: int):
    rng = np.random.default_rng(channels + filters)
    w = (rng.standard_normal((filters, channels, 3, 3)) * 0.2).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    model = make_model([node], [tensor_info("x", "float32", [1, channels, size, size])], ["y"])
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    return model


@pytest.mark.parametrize("filters", [64, 24, 8])
def test_default_register_tile_of_the_flattened_conv(filters) -> None:
    """8 filters (broadcast weights), each serving 3 vectors of outputs: 24 accumulators;
    q's extent is a whole number of such tiles."""
    (task,) = extract_tasks(flat_conv_model(8, filters, 20), measure=False)
    space = task.space()
    assert space.name == "conv (flat)"
    default = space.default()
    assert (default["filter_tile"], default["vectors"]) == (8, 3)
    steps = re.search(r"allocate conv_flat: float32\[1, \d+, (\d+)\]",
                      tensorc.inspect(flat_conv_model(8, filters, 20), stage="loops"))
    assert int(steps.group(1)) == 20 * 22 + 40      # 20 rows of 22, up to 10 tiles of 48


@pytest.mark.parametrize("filters, block, registers, tile", [
    (20, 16, 32, (4, 4)), (6, 16, 32, (2, 4)), (3, 16, 32, (1, 4)), (64, 16, 16, (8, 1)),
    (20, 16, 16, (4, 3))])
def test_register_tile_of_the_flattened_conv_fits(filters, block, registers, tile) -> None:
    """Fewer filters than 8 take more vectors (at most 4); 16 registers hold fewer."""
    assert flattened.flat_tile(filters, block, registers) == tile


def test_every_config_of_the_flattened_conv() -> None:
    (task,) = extract_tasks(flat_conv_model(5, 8, 9), measure=False)
    space = task.space()
    arrays = task.inputs(0)
    want = task.reference(arrays)[0]
    traces = set()
    for config in space.configs():
        func = task.schedule(config)
        traces.add(repr(func.attrs["trace"]))
        out = np.full(want.shape, 7.0, want.dtype)
        build_kernel(func)(*arrays, out, num_threads=1)
        check_result(out, want, rtol=1e-4, atol=1e-4)
    assert {c["vectors"] for c in space.configs()} == {1, 3}     # 9 rows of 11: 7 blocks of 48
    # every tile its own schedule (too small a conv for threads: parallel changes nothing)
    tiles = {(c["filter_tile"], c["vectors"]) for c in space.configs()}
    assert len(traces) == len(tiles) == 8

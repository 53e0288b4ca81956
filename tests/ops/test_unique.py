"""Unique: its four outputs against onnxruntime, sorted and in order of first occurrence,
flat and along an axis, over a symbolic dim, with every element equal and every one
distinct."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import tensorc
from tensorc.errors import TensorcError
from tests.helpers import assert_close, make_model, ort_run, tensor_info

OUTPUTS = ["y", "indices", "inverse", "counts"]


def _model(shape, dtype="float32", **attrs):
    nodes = [helper.make_node("Unique", ["x"], OUTPUTS, **attrs)]
    return make_model(nodes, [tensor_info("x", dtype, shape)],
                      [tensor_info("y", dtype, None)] +
                      [tensor_info(n, "int64", None) for n in OUTPUTS[1:]], opset=11)


@pytest.mark.parametrize("attrs", [{}, {"sorted": 0}, {"axis": 0}, {"axis": 1, "sorted": 0},
                                   {"axis": -1}])
def test_matches_onnxruntime(attrs):
    model = _model((5, 4), **attrs)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(0)
    for values in (rng.integers(0, 3, (5, 4)), np.zeros((5, 4)), np.arange(20).reshape(5, 4),
                   rng.integers(0, 2, (5, 4))):
        x = values.astype(np.float32)
        if "axis" in attrs:     # repeat some slices, so that they dedupe
            x[2] = x[0] if attrs["axis"] == 0 else x[2]
            x[:, 3] = x[:, 1] if attrs["axis"] != 0 else x[:, 3]
        assert_close(module.run({"x": x}), ort_run(model, {"x": x}))


def test_int_input_over_a_symbolic_dim():
    model = _model(("n",), "int64", sorted=1)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(1)
    for n in (1, 9, 30, 2):
        x = rng.integers(-4, 4, n).astype(np.int64)
        assert_close(module.run({"x": x}), ort_run(model, {"x": x}))


def test_a_scalar_axis_out_of_range_is_refused():
    with pytest.raises(TensorcError, match="axis 2 is out of range for rank 2"):
        tensorc.compile(_model((3, 3), axis=2), cache=False)

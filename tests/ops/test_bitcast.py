"""BitCast compiled by tensorc against numpy's ``view`` (the same bits, another dtype)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import tensorc

PAIRS = [("float32", "int32"), ("int32", "float32"), ("float64", "int64"), ("int64", "float64"),
         ("int8", "uint8"), ("uint8", "int8"), ("float16", "int16"), ("bool", "uint8"),
         ("uint32", "float32")]


@pytest.mark.parametrize("shape", [(7,), (3, 17)])
@pytest.mark.parametrize("src,dst", PAIRS)
def test_bitcast_matches_numpy_view(src: str, dst: str, shape) -> None:
    rng = np.random.default_rng(0)
    if src == "bool":
        x = rng.random(shape) < 0.5
    elif np.issubdtype(np.dtype(src), np.floating):
        x = (rng.standard_normal(shape) * 100).astype(src)
    else:
        info = np.iinfo(src)
        x = rng.integers(info.min, info.max, shape, dtype=src, endpoint=True)
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    x_info = helper.make_tensor_value_info(
        "x", helper.np_dtype_to_tensor_dtype(np.dtype(src)), list(shape))
    model = make_model([helper.make_node("BitCast", ["x"], ["y"], to=to)], [x_info], ["y"],
                       opset=26)
    got = tensorc.compile(model).run({"x": x})["y"]
    want = x.view(np.uint8 if src == "bool" else src).view(dst)
    assert got.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_bitcast_of_another_width_is_refused() -> None:
    model = make_model([helper.make_node("BitCast", ["x"], ["y"], to=11)],   # to float64
                       [tensor_info("x", "float32", [4])], ["y"], opset=26)
    with pytest.raises(tensorc.ShapeError, match="differ in width"):
        tensorc.compile(model)

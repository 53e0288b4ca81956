"""Reductions over an axis outside the contiguous one (ReduceX over the channels of NCHW,
over the rows of a matrix): the output row's block of vectors accumulates side by side in
the reduction loop. A block that is no whole number of vectors (56, 41) ends with an
overlapping vector for max and min (an element seen twice changes nothing) and a masked one
for sum, mean, product and the norms, where it would. Against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper

import tensorc

REDUCERS = {
    "ReduceMax": lambda x, axes: x.max(axis=axes, keepdims=True),
    "ReduceMin": lambda x, axes: x.min(axis=axes, keepdims=True),
    "ReduceSum": lambda x, axes: x.sum(axis=axes, keepdims=True),
    "ReduceMean": lambda x, axes: x.mean(axis=axes, keepdims=True),
    "ReduceProd": lambda x, axes: x.prod(axis=axes, keepdims=True),
    "ReduceL2": lambda x, axes: np.sqrt((x * x).sum(axis=axes, keepdims=True)),
}


@pytest.mark.parametrize("op", sorted(REDUCERS))
@pytest.mark.parametrize("shape, axes", [((1, 64, 9, 56), (1,)), ((2, 5, 3, 41), (1, 2)),
                                         ((7, 100), (0,))])
def test_a_column_reduction_matches_numpy(op, shape, axes):
    rng = np.random.default_rng(len(shape) + sum(axes))
    x = rng.uniform(0.5, 1.5, shape).astype(np.float32)     # products stay finite
    if op == "ReduceSum":       # axes an input since opset 13
        from onnx import numpy_helper
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
        model = make_model([node], [tensor_info("x", "float32", list(shape))], ["y"],
                           opset=17)
        model.graph.initializer.append(numpy_helper.from_array(np.array(axes, np.int64),
                                                               "axes"))
    else:
        node = helper.make_node(op, ["x"], ["y"], axes=list(axes), keepdims=1)
        model = make_model([node], [tensor_info("x", "float32", list(shape))], ["y"],
                           opset=17)
    got = tensorc.compile(model).run({"x": x})["y"]
    want = REDUCERS[op](x.astype(np.float64), axes).astype(np.float32)
    check_result(got, want, rtol=1e-4, atol=1e-5)

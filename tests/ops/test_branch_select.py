"""If with a run-time condition whose branches give outputs of different sizes: the picked
branch's sizes are data-dependent dims (ops/branch_select.py), against onnxruntime; branches
of different ranks still need the condition's value."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import tensorc
from tensorc.errors import TensorcError
from tests.helpers import assert_close, make_model, ort_run, tensor_info


def _if_model(x_shape):
    # then: the first 3 rows; else: the input stacked on itself (twice the rows)
    then = helper.make_graph(
        [helper.make_node("Slice", ["x", "s0", "e0"], ["t"])], "then", [],
        [tensor_info("t", "float32", None)],
        initializer=[helper.make_tensor("s0", 7, [1], [0]), helper.make_tensor("e0", 7, [1], [3])])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else",
                              [], [tensor_info("e", "float32", None)])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("ReduceSum", ["y", "axis0"], ["s"], keepdims=0),
             helper.make_node("Relu", ["y"], ["z"])]
    return make_model(nodes, [tensor_info("c", "bool", ()), tensor_info("x", "float32", x_shape)],
                      ["y", "s", "z"], opset=13, initializers={"axis0": np.array([0])})


@pytest.mark.parametrize("x_shape", [(5, 2), ("n", 3)])
def test_branches_of_different_sizes_match_onnxruntime(x_shape):
    model = _if_model(x_shape)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(0)
    for rows, c in ((5, True), (5, False), (4, False), (3, True)):
        shape = (rows, 2) if x_shape[0] == 5 else (rows, 3)
        if x_shape[0] == 5 and rows != 5:
            continue
        feeds = {"c": np.array(c), "x": rng.standard_normal(shape).astype(np.float32)}
        got = module.run(feeds)
        assert got["y"].shape[0] == (3 if c else 2 * rows)
        assert_close(got, ort_run(model, feeds))


def test_branches_of_different_ranks_need_the_condition():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [tensor_info("t", "float32", [2, 3])])
    other = helper.make_graph([helper.make_node("Reshape", ["x", "flat"], ["e"])], "else", [],
                              [tensor_info("e", "float32", [6])],
                              initializer=[helper.make_tensor("flat", 7, [1], [6])])
    model = make_model([helper.make_node("If", ["c"], ["y"], then_branch=then,
                                         else_branch=other)],
                       [tensor_info("c", "bool", ()), tensor_info("x", "float32", (2, 3))],
                       ["y"], opset=13)
    with pytest.raises(TensorcError, match="depends on the value of input 'c'"):
        tensorc.compile(model, cache=False)

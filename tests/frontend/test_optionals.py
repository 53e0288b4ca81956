"""ONNX optional ops (frontend/converters/optional.py) against onnxruntime: whether an optional
holds something is known when compiling, so the exporter's ``if bias is None`` folds."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_close, flat, make_model, ort_run, tensor_info
from onnx import TensorProto, helper

import tensorc
from tensorc.errors import InvalidModelError, ShapeError
from tensorc.frontend.onnx import import_onnx
from tensorc.ops.interpret import run_reference

RNG = np.random.default_rng(3)


def optional_tensor_info(name: str, shape: list) -> onnx.ValueInfoProto:
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, shape)
    return helper.make_value_info(name, helper.make_optional_type_proto(elem))


def bias_model() -> onnx.ModelProto:
    """``def forward(x, bias: Optional[Tensor] = None): return x * 2 + bias if bias is not
    None else x * 2``, as exporters write it."""
    then_branch = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["bias"], ["b"]),
         helper.make_node("Add", ["x2", "b"], ["with_bias"])],
        "then", [], [tensor_info("with_bias", "float32", [2, 3])])
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x2"], ["plain"])], "else", [],
        [tensor_info("plain", "float32", [2, 3])])
    nodes = [helper.make_node("Mul", ["x", "two"], ["x2"]),
             helper.make_node("OptionalHasElement", ["bias"], ["has"]),
             helper.make_node("If", ["has"], ["y"], then_branch=then_branch,
                              else_branch=else_branch)]
    return make_model(nodes, [tensor_info("x", "float32", [2, 3]),
                              optional_tensor_info("bias", [3])], ["y"], opset=18,
                      initializers={"two": np.array(2, np.float32)})


def test_an_optional_input_given():
    model = bias_model()
    module = tensorc.compile(model)
    assert [name for name, _, _ in module.inputs] == ["x", "bias"]
    feeds = {"x": RNG.standard_normal((2, 3), np.float32),
             "bias": RNG.standard_normal(3, np.float32)}
    assert_close(module.run(feeds), ort_run(model, feeds))


def test_an_optional_input_fixed_empty():
    """``input_values={"bias": None}``: the optional is empty, the If folds to its else
    branch and the module takes x only."""
    model = bias_model()
    module = tensorc.compile(model, input_values={"bias": None})
    assert [name for name, _, _ in module.inputs] == ["x"]
    x = RNG.standard_normal((2, 3), np.float32)
    assert_close(module.run({"x": x}), ort_run(model, {"x": x, "bias": None}))


def in_graph_model(empty: bool) -> onnx.ModelProto:
    """Optional built in the graph: from a tensor, or empty with its type."""
    optional = (helper.make_node("Optional", [], ["o"],
                                 type=helper.make_tensor_type_proto(TensorProto.FLOAT, [4]))
                if empty else helper.make_node("Optional", ["x"], ["o"]))
    then_branch = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["o"], ["e"]),
         helper.make_node("Relu", ["e"], ["t"])], "then", [],
        [tensor_info("t", "float32", [4])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "else", [],
                                    [tensor_info("n", "float32", [4])])
    nodes = [optional, helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("If", ["has"], ["y"], then_branch=then_branch,
                              else_branch=else_branch)]
    return make_model(nodes, [tensor_info("x", "float32", [4])], ["y", "has"], opset=18)


@pytest.mark.parametrize("empty", [False, True])
def test_optional_built_in_the_graph(empty):
    model = in_graph_model(empty)
    graph = import_onnx(model)
    assert [n.op for n in graph.nodes] == ["neg" if empty else "relu"]  # the If folded
    feeds = {"x": RNG.standard_normal(4, np.float32)}
    assert_close(run_reference(graph, feeds), flat(ort_run(model, feeds)))


def test_getting_the_element_of_an_empty_optional():
    nodes = [helper.make_node("Optional", [], ["o"],
                              type=helper.make_tensor_type_proto(TensorProto.FLOAT, [4])),
             helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")]
    model = make_model(nodes, [], ["y"], opset=18)
    with pytest.raises(ShapeError, match=r"node 'get' \(OptionalGetElement, opset 18\): its "
                                         r"input is an empty optional \(known when compiling"):
        import_onnx(model)


def test_an_empty_optional_needs_its_type():
    model = make_model([helper.make_node("Optional", [], ["o"], name="opt"),
                        helper.make_node("OptionalHasElement", ["o"], ["y"])], [], ["y"],
                       opset=18)
    with pytest.raises(InvalidModelError, match="neither an input nor the 'type' attribute"):
        import_onnx(model)


@pytest.mark.parametrize("inputs", [[], [""]])
def test_has_element_of_no_input(inputs):
    model = make_model([helper.make_node("OptionalHasElement", inputs, ["y"])], [], ["y"],
                       opset=18)
    assert run_reference(import_onnx(model), {})["y"].item() is False

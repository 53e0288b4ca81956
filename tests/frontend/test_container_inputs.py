"""Sequence and optional model inputs and outputs (frontend/container_inputs.py and the
importer's outputs): one tensor input or output per element, ``x[0]``, ``x[1]``, ..., the
length fixed at compile time; checked against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_close, flat, make_model, ort_run, seq_info, tensor_info
from onnx import TensorProto, helper

import tensorc
from tensorc.errors import ShapeError
from tensorc.frontend.container_inputs import flatten_container_inputs, numbered_nodes
from tensorc.frontend.onnx import import_onnx

RNG = np.random.default_rng(5)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def seq_model() -> onnx.ModelProto:
    """ys = [relu(x) for x in xs] + [xs[0] * w]: a sequence in, a sequence out."""
    body = helper.make_graph([helper.make_node("Relu", ["e"], ["r"])], "body",
                             [tensor_info("e", "float32", None)],
                             [tensor_info("r", "float32", None)])
    nodes = [helper.make_node("SequenceMap", ["xs"], ["relus"], body=body),
             helper.make_node("SequenceAt", ["xs", "zero"], ["first"]),
             helper.make_node("Mul", ["first", "w"], ["scaled"]),
             helper.make_node("SequenceInsert", ["relus", "scaled"], ["ys"])]
    return make_model(nodes, [seq_info("xs", "float32", None),
                              tensor_info("w", "float32", [])], [seq_info("ys", "float32", None)],
                      initializers={"zero": np.array(0, np.int64)})


def test_a_sequence_input_becomes_one_input_per_element():
    proto, shapes, values = flatten_container_inputs(
        seq_model(), {"xs": [(2, 3), None], "w": ()}, None, "model 'm'")
    assert [i.name for i in proto.graph.input] == ["xs[0]", "xs[1]", "w"]
    assert shapes == {"w": ()} and values == {}  # the sequence's entry is used up
    first = proto.graph.node[0]
    assert (first.op_type, list(first.input), list(first.output)) == (
        "SequenceConstruct", ["xs[0]", "xs[1]"], ["xs"])
    dims = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 3]
    assert not proto.graph.input[1].type.tensor_type.HasField("shape")  # as declared
    # nodes keep their numbers: the one made here is numbered below 0
    assert [k for k, _ in numbered_nodes(proto.graph)] == [-1, 0, 1, 2, 3]


def test_sequence_input_and_output_compiled():
    model = seq_model()
    xs = [rand(2, 3), rand(4), rand(1, 5)]   # elements of different shapes
    module = tensorc.compile(model, input_shapes={"xs": [x.shape for x in xs]})
    assert [name for name, _, _ in module.inputs] == ["xs[0]", "xs[1]", "xs[2]", "w"]
    assert [name for name, _, _ in module.outputs] == ["ys[0]", "ys[1]", "ys[2]", "ys[3]"]
    feeds = {"xs": xs, "w": np.array(3, np.float32)}
    assert_close(module.run(flat(feeds)), flat(ort_run(model, feeds)))


def test_an_empty_sequence_input():
    nodes = [helper.make_node("SequenceInsert", ["xs", "x"], ["s"]),
             helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    model = make_model(nodes, [seq_info("xs", "float32", [2]), tensor_info("x", "float32", [2])],
                       ["y", "n"])
    graph = import_onnx(model, input_shapes={"xs": []})
    assert [v.name for v in graph.inputs] == ["x"]
    assert graph.constants[graph.outputs[1]].item() == 1


def test_a_sequence_input_without_its_length():
    with pytest.raises(ShapeError) as info:
        tensorc.compile(seq_model())
    assert str(info.value) == (
        "model 'test': input 'xs' is a sequence of float32 tensors; tensorc resolves sequences "
        "while compiling and needs its length: give one shape per element with input_shapes, "
        "e.g. {'xs': [(2, 3), (4, 3)]} (None for an element of the declared type)")


def test_an_element_shape_that_contradicts_the_declared_one():
    model = make_model([helper.make_node("SequenceLength", ["xs"], ["n"])],
                       [seq_info("xs", "float32", [2, "k"])], ["n"])
    import_onnx(model, input_shapes={"xs": [(2, 7), (2, 1)]})
    with pytest.raises(ShapeError, match=r"input 'xs': element 1 has shape \(3, 1\) in "
                                         r"input_shapes, but the model declares its elements "
                                         r"float32\[2,k\]"):
        import_onnx(model, input_shapes={"xs": [(2, 7), (3, 1)]})


def optional_sequence_loop_model() -> onnx.ModelProto:
    """ONNX's test_loop16_seq_none: a Loop carries an optional sequence, starting it when
    empty, and appends x[:i+1] each step (ONNX's runner cannot compare its output, a sequence
    holding a 0-d tensor, so it is checked here)."""
    then_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["zero"], value=onnx.numpy_helper.from_array(
            np.array(0, np.float32))),
         helper.make_node("SequenceConstruct", ["zero"], ["init"])], "then", [],
        [seq_info("init", "float32", None)])
    else_branch = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["opt_in"], ["got"])], "else", [],
        [seq_info("got", "float32", None)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("OptionalHasElement", ["opt_in"], ["has"]),
         helper.make_node("Not", ["has"], ["none"]),
         helper.make_node("If", ["none"], ["seq"], then_branch=then_branch,
                          else_branch=else_branch),
         helper.make_node("Add", ["i", "one"], ["end"]),
         helper.make_node("Unsqueeze", ["end", "axes"], ["ends"]),
         helper.make_node("Slice", ["x", "starts", "ends"], ["part"]),
         helper.make_node("SequenceInsert", ["seq", "part"], ["seq_out"])],
        "body", [tensor_info("i", "int64", []), tensor_info("cond_in", "bool", []),
                 helper.make_value_info("opt_in", helper.make_optional_type_proto(
                     helper.make_sequence_type_proto(
                         helper.make_tensor_type_proto(TensorProto.FLOAT, None))))],
        [tensor_info("cond_out", "bool", []), seq_info("seq_out", "float32", None)])
    opt = helper.make_value_info("opt_seq", helper.make_optional_type_proto(
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT,
                                                                      None))))
    nodes = [helper.make_node("Loop", ["trips", "", "opt_seq"], ["out"], body=body)]
    return make_model(nodes, [opt], [seq_info("out", "float32", None)], opset=16,
                      initializers={"trips": np.array(3, np.int64),
                                    "x": np.arange(1, 6, dtype=np.float32),
                                    "one": np.array(1, np.int64),
                                    "axes": np.array([0], np.int64),
                                    "starts": np.array([0], np.int64)})


@pytest.mark.parametrize("given", [[np.array(0, np.float32)], None])
def test_an_optional_sequence_carried_by_a_loop(given):
    """Given, the optional is a sequence of one element (a module input); fixed empty, the
    loop starts it itself."""
    model = optional_sequence_loop_model()
    if given is None:
        module = tensorc.compile(model, input_values={"opt_seq": None})
        feeds = {"opt_seq": None}
    else:
        module = tensorc.compile(model, input_shapes={"opt_seq": [()]})
        feeds = {"opt_seq": given}
    want = flat(ort_run(model, feeds))
    assert [k for k in want] == ["out[0]", "out[1]", "out[2]", "out[3]"]
    assert_close(module.run(flat(feeds)), want)


def test_unnamed_nodes_keep_their_numbers_in_messages():
    """The node made for a sequence input goes first, yet node #1 is still #1."""
    nodes = [helper.make_node("SequenceAt", ["xs", "zero"], ["a"]),
             helper.make_node("Relu", ["xs"], ["y"])]
    model = make_model(nodes, [seq_info("xs", "float32", [2])], ["y"],
                       initializers={"zero": np.array(0, np.int64)})
    with pytest.raises(tensorc.TensorcError, match=r"node #1 \(unnamed\) \(Relu"):
        import_onnx(model, input_shapes={"xs": [(2,)]})


def test_outputs_that_hold_no_tensor():
    nodes = [helper.make_node("SequenceEmpty", [], ["s"])]
    model = make_model(nodes, [], [seq_info("s", "float32", None)])
    with pytest.raises(ShapeError, match="every output is an empty sequence or an empty "
                                         "optional, so the model computes no tensor"):
        import_onnx(model)


def test_a_map_input_is_refused():
    map_type = helper.make_map_type_proto(TensorProto.INT64,
                                          helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    model = make_model([helper.make_node("Identity", ["m"], ["y"])],
                       [helper.make_value_info("m", map_type)], ["y"])
    with pytest.raises(ShapeError, match="input 'm' is a map_type; tensorc takes tensors, "
                                         "sequences of tensors and optionals"):
        import_onnx(model)


def test_input_values_cannot_fix_a_sequence():
    with pytest.raises(ShapeError, match="input 'xs' is a sequence; input_values cannot fix "
                                         "it"):
        tensorc.compile(seq_model(), input_values={"xs": [np.zeros(2, np.float32)]})

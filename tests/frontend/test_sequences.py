"""ONNX sequence ops (frontend/converters/sequence.py) against onnxruntime: the list code that
exporters write (split into a list, map over it, stack or concat it back), resolved at import;
and the errors where a sequence cannot be known when compiling."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_close, flat, make_model, ort_run, seq_info, tensor_info
from onnx import TensorProto, helper

import tensorc
from tensorc.errors import (
    ConstantRequiredError, InvalidModelError, ShapeError, SymbolicDimError,
)
from tensorc.frontend.onnx import import_onnx
from tensorc.ir.graph import verify
from tensorc.ops.interpret import check_types, run_reference

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def i64(value) -> np.ndarray:
    return np.array(value, np.int64)


def check(model: onnx.ModelProto, feeds: dict, shapes: dict | None = None) -> None:
    """Import ``model`` and compare the graph's numbers (the reference interpreter) with
    onnxruntime's; a sequence output is compared element by element."""
    graph = import_onnx(model, input_shapes=shapes)
    verify(graph)
    check_types(graph)
    for node in graph.nodes:  # no sequence reaches the graph IR: core ops only
        assert not node.op.startswith(("sequence", "optional"))
    assert_close(run_reference(graph, flat(feeds)), flat(ort_run(model, feeds)))


def split_map_concat_model(split: np.ndarray | None, keepdims: int = 1,
                           new_axis: int = 0) -> onnx.ModelProto:
    """``torch.cat([relu(p) * 2 for p in x.split(...)])`` as an exporter writes it: a Loop
    unrolled by hand is SequenceAt / op / SequenceInsert per element."""
    nodes = [helper.make_node("SplitToSequence", ["x"] + (["split"] if split is not None
                                                          else []), ["parts"], axis=1,
                              keepdims=keepdims),
             helper.make_node("SequenceLength", ["parts"], ["n"]),
             helper.make_node("SequenceEmpty", [], ["acc0"], dtype=TensorProto.FLOAT)]
    if split is None:
        parts = 6                   # one per index of axis 1
    elif split.ndim == 0:
        parts = -(-6 // int(split))  # parts of that size, the last one smaller
    else:
        parts = len(split)
    for k in range(parts):
        nodes += [helper.make_node("SequenceAt", ["parts", f"k{k}"], [f"p{k}"]),
                  helper.make_node("Relu", [f"p{k}"], [f"r{k}"]),
                  helper.make_node("Mul", [f"r{k}", "two"], [f"m{k}"]),
                  helper.make_node("SequenceInsert", [f"acc{k}", f"m{k}"], [f"acc{k + 1}"])]
    nodes.append(helper.make_node("ConcatFromSequence", [f"acc{parts}"], ["y"], axis=1,
                                  new_axis=new_axis))
    inits = {f"k{k}": i64(k - parts if k % 2 else k) for k in range(parts)}  # -ve ones too
    inits["two"] = np.array(2, np.float32)
    if split is not None:
        inits["split"] = split
    return make_model(nodes, [tensor_info("x", "float32", [2, 6, 3])], ["y", "n"],
                      initializers=inits)


@pytest.mark.parametrize("split, keepdims, new_axis", [
    (i64([1, 2, 3]), 1, 0),     # sizes
    (i64(2), 1, 0),             # a size: 3 equal parts
    (i64(4), 1, 1),             # a size leaving a smaller last part (4, 2): stacked
    (None, 0, 1),               # one part per index, squeezed, then stacked
])
def test_split_map_concat(split, keepdims, new_axis):
    if split is not None and split.ndim == 0 and split == 4:
        with pytest.raises(ShapeError, match="concat"):   # parts of 4 and 2 do not stack
            import_onnx(split_map_concat_model(split, keepdims, new_axis))
        new_axis = 0
    check(split_map_concat_model(split, keepdims, new_axis), {"x": rand(2, 6, 3)})


def test_construct_then_concat_and_stack_compiled():
    """SequenceConstruct of several tensors, concatenated and stacked, compiled to native
    code: the module computes what onnxruntime does."""
    nodes = [helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("SequenceConstruct", ["ra", "b", "c"], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["cat"], axis=-1),
             helper.make_node("ConcatFromSequence", ["s"], ["stack"], axis=-1, new_axis=1),
             helper.make_node("SequenceErase", ["s"], ["s2"]),      # drops c
             helper.make_node("SequenceErase", ["s2", "zero"], ["s3"]),  # drops ra
             helper.make_node("SequenceAt", ["s3", "zero"], ["only_b"])]
    model = make_model(nodes, [tensor_info(n, "float32", [3, 4]) for n in "abc"],
                       ["cat", "stack", "only_b"], initializers={"zero": i64(0)})
    feeds = {n: rand(3, 4) for n in "abc"}
    module = tensorc.compile(model)
    assert_close(module.run(feeds), ort_run(model, feeds))
    assert module.run(feeds)["stack"].shape == (3, 4, 3)


def test_sequence_map_with_a_tensor_input():
    """SequenceMap: the body once per element, the extra tensor input shared; elements of
    different shapes each keep their own."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["e", "w"], ["scaled"]),
         helper.make_node("ReduceSum", ["scaled"], ["total"], keepdims=0),
         helper.make_node("Shape", ["e"], ["shape"])],
        "body", [tensor_info("e", "float32", ["n", 4]), tensor_info("w", "float32", [4])],
        [tensor_info("total", "float32", []), tensor_info("shape", "int64", [2])])
    nodes = [helper.make_node("SequenceMap", ["xs", "w"], ["totals", "shapes"], body=body),
             helper.make_node("ConcatFromSequence", ["totals"], ["y"], axis=0, new_axis=1)]
    model = make_model(nodes, [seq_info("xs", "float32", ["n", 4]),
                               tensor_info("w", "float32", [4])], ["y", "shapes"])
    model.graph.output[1].CopyFrom(seq_info("shapes", "int64", [2]))
    xs = [rand(2, 4), rand(5, 4), rand(1, 4)]
    check(model, {"xs": xs, "w": rand(4)}, shapes={"xs": [x.shape for x in xs]})


def test_loop_carrying_a_sequence():
    """A Loop with a constant trip count that appends to a sequence each step (what
    ``out = []; for i in range(4): out.append(...)`` exports to), then stacks it."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["step"]),
         helper.make_node("SequenceInsert", ["seq_in", "step"], ["seq_out"])],
        "body", [tensor_info("i", "int64", []), tensor_info("cond_in", "bool", []),
                 seq_info("seq_in", "float32", [3])],
        [tensor_info("cond_out", "bool", []), seq_info("seq_out", "float32", [3])])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"]),
             helper.make_node("Loop", ["trips", "", "empty"], ["seq"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1)]
    model = make_model(nodes, [tensor_info("x", "float32", [3])], ["y"],
                       initializers={"trips": i64(4)})
    check(model, {"x": rand(3)})


def if_model(then_values: list[str], else_values: list[str]) -> onnx.ModelProto:
    """An If on a run-time condition whose branches each build a sequence."""
    def branch(name, values):
        nodes = [helper.make_node("Neg" if name == "then" else "Relu", ["x"], [f"{name}_x"]),
                 helper.make_node("SequenceConstruct", [v.replace("X", f"{name}_x")
                                                        for v in values], [f"{name}_s"])]
        return helper.make_graph(nodes, name, [], [seq_info(f"{name}_s", "float32", None)])
    nodes = [helper.make_node("If", ["c"], ["s"], then_branch=branch("then", then_values),
                              else_branch=branch("else", else_values)),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    return make_model(nodes, [tensor_info("x", "float32", [2, 3]),
                              tensor_info("c", "bool", [])], ["y"])


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_run_time_condition_selects_sequences(cond):
    """Branches whose sequences agree in length and element types: one where per element,
    chosen at run time."""
    model = if_model(["X", "x"], ["x", "X"])
    check(model, {"x": rand(2, 3), "c": np.array(cond)})


def test_if_with_sequences_of_different_lengths_needs_the_condition():
    model = if_model(["X", "x"], ["X"])
    with pytest.raises(ConstantRequiredError) as info:
        tensorc.compile(model)
    message = str(info.value)
    assert "then-branch but a sequence of 1 tensor" in message
    assert "input_values={'c': VALUE}" in message   # the fix, naming the input
    assert info.value.inputs == ("c",)
    # fixed at compile time it compiles, and takes the branch named
    module = tensorc.compile(model, input_values={"c": False})
    x = rand(2, 3)
    np.testing.assert_allclose(module.run({"x": x})["y"], np.maximum(x, 0))


def position_model(op: str, position_input: bool) -> onnx.ModelProto:
    inputs = ["s", "p"] if op != "SequenceInsert" else ["s", "a", "p"]
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node(op, inputs, ["r"], name="pick")]
    if op != "SequenceAt":
        nodes.append(helper.make_node("ConcatFromSequence", ["r"], ["y"], axis=0))
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["y"]))
    infos = [tensor_info("a", "float32", [2]), tensor_info("b", "float32", [2])]
    if position_input:
        infos.append(tensor_info("p", "int64", []))
        return make_model(nodes, infos, ["y"])
    return make_model(nodes, infos, ["y"], initializers={"p": i64(-1)})


@pytest.mark.parametrize("op", ["SequenceAt", "SequenceInsert", "SequenceErase"])
def test_constant_positions(op):
    check(position_model(op, position_input=False), {"a": rand(2), "b": rand(2)})


@pytest.mark.parametrize("op", ["SequenceAt", "SequenceInsert", "SequenceErase"])
def test_a_run_time_position_is_an_error_naming_the_node_and_the_fix(op):
    model = position_model(op, position_input=True)
    with pytest.raises(ConstantRequiredError) as info:
        tensorc.compile(model)
    message = str(info.value)
    assert f"node 'pick' ({op}, opset 17)" in message
    assert "position input %p" in message and "computed at run time" in message
    assert "input_values={'p': VALUE}" in message   # the fix, naming the input
    assert info.value.inputs == ("p",)


def test_a_position_out_of_range_names_the_length():
    model = position_model("SequenceAt", position_input=False)
    model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(i64(2), "p"))
    with pytest.raises(ShapeError, match=r"position 2 is out of range for a sequence of 2 "
                                         r"element\(s\) \(from -2 to 1\)"):
        import_onnx(model)


def test_a_sequence_where_a_tensor_is_expected():
    nodes = [helper.make_node("SequenceConstruct", ["a"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    model = make_model(nodes, [tensor_info("a", "float32", [2])], ["y"])
    with pytest.raises(InvalidModelError, match=r"node 'relu' \(Relu.*input 's' is a sequence "
                                                r"of 1 tensor \(float32\[2\]\), but Relu takes "
                                                r"tensors; take the tensor out first"):
        import_onnx(model)


def test_concat_of_an_empty_sequence():
    nodes = [helper.make_node("SequenceEmpty", [], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    model = make_model(nodes, [], ["y"])
    with pytest.raises(ShapeError, match="ConcatFromSequence of an empty sequence"):
        import_onnx(model)


def test_split_with_symbolic_dims():
    """Split sizes along a static axis with a symbolic batch: one module for every batch."""
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["parts"], axis=1),
             helper.make_node("SequenceAt", ["parts", "one"], ["mid"]),
             helper.make_node("Sigmoid", ["mid"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", ["batch", 5])], ["y"],
                       initializers={"split": i64([2, 2, 1]), "one": i64(1)})
    module = tensorc.compile(model)
    for batch in (1, 3):
        x = rand(batch, 5)
        assert_close(module.run({"x": x}), ort_run(model, {"x": x}))


def test_split_into_parts_of_a_size_over_a_symbolic_axis():
    nodes = [helper.make_node("SplitToSequence", ["x", "size"], ["parts"], axis=0),
             helper.make_node("ConcatFromSequence", ["parts"], ["y"], axis=0)]
    model = make_model(nodes, [tensor_info("x", "float32", ["n", 5])], ["y"],
                       initializers={"size": i64(2)})
    with pytest.raises(SymbolicDimError, match="the number of parts depends on the symbolic "
                                               "dim n; give concrete input_shapes"):
        import_onnx(model)
    check(model, {"x": rand(5, 5)}, shapes={"x": (5, 5)})

"""Every import error a user can cause: its type and what its message tells them."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import make_model, tensor_info
from onnx import defs, helper

from tensorc.errors import ModelLoadError, ShapeError, UnsupportedOpError
from tensorc.frontend.registry import CONVERTERS
from tensorc.frontend.onnx import import_onnx


def relu_model(shape=(2, 3)) -> onnx.ModelProto:
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                      [tensor_info("x", "float32", list(shape))], ["y"])


def test_every_unsupported_op_is_listed_at_once():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("RandomUniformLike", ["a"], ["b"], name="unique_1"),
             helper.make_node("RandomUniformLike", ["b"], ["c"], name="unique_2"),
             helper.make_node("FusedConv", ["c"], ["d"], name="fused", domain="com.microsoft"),
             helper.make_node("Det", ["d"], ["e"])]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 2])], ["e"], opset=13,
                       extra_opsets={"com.microsoft": 1})
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "uses 3 unsupported op(s)" in message
    assert "RandomUniformLike (opset 13): not supported; nodes unique_1, unique_2" in message
    assert "com.microsoft::FusedConv (domain 'com.microsoft' opset 1)" in message
    assert "node fused" in message
    assert "Det (opset 13): not supported; node #4" in message
    assert "ok" not in message.replace("not supported", "")


def test_op_supported_at_other_opsets_says_which():
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"], name="old_add")],
                       [tensor_info("x", "float32", [2])], ["y"], opset=6)
    with pytest.raises(UnsupportedOpError, match=r"Add \(opset 6\): supported for opsets >=7 "
                                                 r"only; node old_add"):
        import_onnx(model)


def test_unknown_attribute_is_reported():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r", fancy=1)],
                       [tensor_info("x", "float32", [2])], ["y"])
    with pytest.raises(UnsupportedOpError, match="Relu .*attribute 'fancy' not supported; node r"):
        import_onnx(model)


def test_unsupported_attribute_value_names_the_node():
    model = make_model([helper.make_node("Pad", ["x", "p"], ["y"], name="mirror_pad",
                                         mode="mirror")],
                       [tensor_info("x", "float32", [2, 3])], ["y"], opset=13,
                       initializers={"p": np.array([1, 1, 1, 1], np.int64)})
    with pytest.raises(UnsupportedOpError, match="node 'mirror_pad' \\(Pad, opset 13\\): Pad "
                                                 "mode 'mirror' is not supported"):
        import_onnx(model)


def test_uncomputed_output_is_reported():
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], name="mp", kernel_shape=[2]),
             helper.make_node("Cast", ["idx"], ["z"], name="use", to=onnx.TensorProto.FLOAT)]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 1, 4])], ["y", "z"])
    with pytest.raises(UnsupportedOpError, match="node 'use'.*input 'idx' is an output "
                                                 "tensorc does not compute"):
        import_onnx(model)


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="no_such.onnx.*no such file"):
        import_onnx(tmp_path / "no_such.onnx")


def test_random_bytes(tmp_path):
    path = tmp_path / "noise.onnx"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelLoadError, match="noise.onnx.*(corrupt or truncated|not a complete)"):
        import_onnx(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="not a complete ONNX model"):
        import_onnx(path)


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.9, 0.99])
def test_truncated_file(tmp_path, fraction):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 3, 8, 8])], ["y"],
                       initializers={"w": np.ones((4, 3, 3, 3), np.float32)})
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:int(len(data) * fraction)])
    with pytest.raises(ModelLoadError, match="cut.onnx.*(truncated)"):
        import_onnx(path)


def test_unbound_symbolic_dims_are_all_listed():
    inputs = [tensor_info("x", "float32", ["batch", 3, None, 224]),
              tensor_info("mask", "float32", ["batch", "seq"]),
              tensor_info("fixed", "float32", [2])]
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["mask"], ["b"]),
             helper.make_node("Relu", ["fixed"], ["c"])]
    model = make_model(nodes, inputs, ["a", "b", "c"])
    with pytest.raises(ShapeError) as info:  # compiling (import_model) imports this way
        import_onnx(model, symbolic=False)
    message = str(info.value)
    assert "x: float32[batch,3,?,224]: dim 0 ('batch'), dim 2 (unnamed)" in message
    assert "mask: float32[batch,seq]: dim 0 ('batch'), dim 1 ('seq')" in message
    assert "fixed" not in message
    assert "input_shapes={'x': (1, 3, 1, 224)}" in message
    assert "--input-shape x=1x3x1x224" in message
    # Binding x's 'batch' binds it for mask too; 'seq' is still missing.
    with pytest.raises(ShapeError, match="mask: float32\\[4,seq\\]: dim 1 \\('seq'\\)\n"):
        import_onnx(model, input_shapes={"x": (4, 3, 100, 224)}, symbolic=False)
    # symbolic (tensorc check, the default of import_onnx): the unbound dims stay symbolic
    graph = import_onnx(model, input_shapes={"x": (4, 3, 100, 224)})
    assert [str(v.type) for v in graph.inputs] == ["float32[4,3,100,224]", "float32[4,seq]",
                                                   "float32[2]"]
    graph = import_onnx(model, input_shapes={"x": (4, 3, 100, 224), "mask": (4, 7)})
    assert [v.type.shape for v in graph.inputs] == [(4, 3, 100, 224), (4, 7), (2,)]


def test_input_binding_shares_symbols_between_inputs():
    inputs = [tensor_info("a", "float32", ["n", 3]), tensor_info("b", "float32", ["n", 3])]
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])], inputs, ["y"])
    graph = import_onnx(model, input_shapes={"a": (5, 3)})
    assert graph.inputs[1].type.shape == (5, 3)


def test_input_without_shape_needs_input_shapes():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", None)], ["y"])
    with pytest.raises(ShapeError, match="x: float32, rank unknown"):
        import_onnx(model)
    assert import_onnx(model, input_shapes={"x": [2, 2]}).inputs[0].type.shape == (2, 2)


@pytest.mark.parametrize("given, expected", [
    ({"x": (2, 3, 1)}, "input 'x' expects shape float32\\[2,3\\], but input_shapes gives "
                       "\\(2, 3, 1\\)"),
    ({"x": (2, 4)}, "input 'x' expects shape float32\\[2,3\\], but input_shapes gives \\(2, 4\\)"),
    ({"x": (2, -3)}, "input 'x' expects shape"),
    ({"y": (2, 3)}, "input_shapes names 'y', but the model's inputs are 'x'"),
    ({"x": "2x3"}, "must be a sequence of ints"),
])
def test_wrong_input_shapes(given, expected):
    with pytest.raises(ShapeError, match=expected):
        import_onnx(relu_model(), input_shapes=given)


def test_shape_mismatch_names_node_and_inputs():
    model = make_model([helper.make_node("Add", ["x", "z"], ["y"], name="bad_add")],
                       [tensor_info("x", "float32", [2, 3]), tensor_info("z", "float32", [4])],
                       ["y"])
    with pytest.raises(ShapeError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "node 'bad_add' (Add, opset 17)" in message
    assert "cannot broadcast input 0 float32[2,3] with input 1 float32[4]" in message
    assert "inputs: x: float32[2,3], z: float32[4]" in message


def test_runtime_reshape_target_is_rejected():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn")],
                       [tensor_info("x", "float32", [2, 3]), tensor_info("s", "int64", [2])],
                       ["y"])
    with pytest.raises(ShapeError, match="node 'dyn' \\(Reshape.*shape input %s .* computed at "
                                         "run time"):
        import_onnx(model)


def test_bad_reshape_target():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                       [tensor_info("x", "float32", [2, 3])], ["y"],
                       initializers={"s": np.array([4, -1], np.int64)})
    with pytest.raises(ShapeError, match="node 'r'.*cannot reshape \\(2, 3\\) to \\(4, -1\\)"):
        import_onnx(model)


def test_unsupported_dtype():
    model = make_model([helper.make_node("Identity", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", onnx.TensorProto.STRING, [2])], ["y"])
    with pytest.raises(ShapeError, match="input 'x' has element type STRING"):
        import_onnx(model)


def test_node_reading_an_undefined_name():
    model = relu_model()
    model.graph.node[0].input[0] = "nowhere"
    with pytest.raises(ModelLoadError, match="node 'r' reads 'nowhere'"):
        import_onnx(model)


@pytest.mark.parametrize("op_type", sorted(CONVERTERS))
def test_converters_accept_every_attribute_of_their_opsets(op_type):
    """A converter's keyword arguments must cover the ONNX schema of each opset it claims."""
    versions = sorted({s.since_version for s in defs.get_all_schemas_with_history()
                       if s.name == op_type and s.domain == ""})
    for entry in CONVERTERS[op_type]:
        for version in versions:
            if entry.since <= version and (entry.until is None or version <= entry.until):
                schema = defs.get_schema(op_type, version)
                missing = set(schema.attributes) - entry.attributes
                assert not missing, f"{op_type} opset {version}: {sorted(missing)}"


def test_reshape_to_a_runtime_shape_names_the_input():
    # Reshape's target must be known (Range over run-time values is a data-dependent dim)
    model = make_model([helper.make_node("Reshape", ["a", "n"], ["y"], name="steps")],
                       [tensor_info("n", "int64", [2])], ["y"],
                       initializers={"a": np.zeros(6, np.float32)})
    with pytest.raises(ShapeError, match="node 'steps' \\(Reshape, opset 17\\): its shape input "
                                         "%n .* is computed at run time"):
        import_onnx(model)


# shapes that cannot be inferred ---------------------------------------------------------------
def test_unknown_rank_input_names_the_nodes_reading_it():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Add", ["a", "x"], ["y"], name="second")]
    model = make_model(nodes, [tensor_info("x", "float32", None)], ["y"])
    with pytest.raises(ShapeError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "x: float32, rank unknown\n    read by nodes 'first' (Relu), 'second' (Add)\n" in \
        message
    assert "--input-shape x=1" in message


def test_reshape_of_a_computed_shape_names_the_tensor_and_its_node():
    # The target shape is computed from the data (ReduceMax): no static shape exists.
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], name="rmax", keepdims=0),
             helper.make_node("Cast", ["m"], ["mi"], name="cast", to=onnx.TensorProto.INT64),
             helper.make_node("Unsqueeze", ["mi", "axes"], ["s"], name="unsq"),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn")]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 3])], ["y"],
                       initializers={"axes": np.array([0], np.int64)})
    with pytest.raises(ShapeError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "node 'dyn' (Reshape, opset 17): its shape input %" in message
    assert "(int64[1], ONNX tensor 's', computed by node 'unsq') is computed at run time" in \
        message
    assert "inputs: x: float32[2,3], s: int64[1]" in message


def test_shape_from_a_model_input_says_so():
    model = make_model([helper.make_node("Expand", ["x", "s"], ["y"], name="grow")],
                       [tensor_info("x", "float32", [1, 3]), tensor_info("s", "int64", [2])],
                       ["y"])
    with pytest.raises(ShapeError, match="node 'grow' \\(Expand, opset 17\\): its shape input "
                                         "%s \\(int64\\[2\\], a model input\\) is computed at "
                                         "run time"):
        import_onnx(model)


def test_nonzero_of_a_scalar_names_node_and_fix():
    # NonZero's output size depends on the data (a data-dependent dim); a scalar input has
    # no axis to give coordinates along
    nodes = [helper.make_node("NonZero", ["x"], ["idx"], name="where")]
    model = make_model(nodes, [tensor_info("x", "float32", [])], ["idx"])
    with pytest.raises(ShapeError, match="node 'where' \\(NonZero, opset 17\\): NonZero of a "
                                         "scalar input is not supported; give it one axis"):
        import_onnx(model)


def test_topk_with_a_k_of_two_values_names_node_and_input():
    model = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="best")],
                       [tensor_info("x", "float32", [5]), tensor_info("k", "int64", [2])],
                       ["v"])
    with pytest.raises(ShapeError, match="node 'best' \\(TopK, opset 17\\): TopK: k must hold "
                                         "one value, got int64\\[2\\]"):
        import_onnx(model)


# domains other than the default one -----------------------------------------------------------
def ml_model(opsets: dict[str, int]) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Binarizer", ["x"], ["y"], name="bin", domain="ai.onnx.ml")], "ml",
        [tensor_info("x", "float32", [3])], [tensor_info("y", "float32", [3])])
    return helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid(domain, version) for domain, version in opsets.items()])


@pytest.mark.parametrize("opsets", [{"ai.onnx.ml": 3}, {"ai.onnx.ml": 3, "": 17}])
def test_onnx_ml_model_gets_the_unsupported_op_error(opsets):
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(ml_model(opsets))
    message = str(info.value)
    assert "uses 1 unsupported op(s)" in message
    assert "ai.onnx.ml::Binarizer (domain 'ai.onnx.ml' opset 3): only the default ONNX domain " \
           "is supported; node bin" in message
    assert "truncated" not in message


def test_vendor_domain_only_model_names_the_op():
    graph = helper.make_graph(
        [helper.make_node("FusedMatMul", ["x", "x"], ["y"], name="fmm", domain="com.microsoft"),
         helper.make_node("Gelu", ["y"], ["z"], name="gelu", domain="com.microsoft")], "ms",
        [tensor_info("x", "float32", [3, 3])], [tensor_info("z", "float32", [3, 3])])
    model = helper.make_model(graph, ir_version=8,
                              opset_imports=[helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "uses 2 unsupported op(s)" in message
    assert "com.microsoft::FusedMatMul (domain 'com.microsoft' opset 1): only the default " \
           "ONNX domain is supported; node fmm" in message
    assert "com.microsoft::Gelu (domain 'com.microsoft' opset 1)" in message


def test_default_domain_nodes_without_its_opset_are_a_broken_model():
    model = ml_model({"ai.onnx.ml": 3})
    model.graph.node.append(helper.make_node("Relu", ["y"], ["z"], name="r"))
    model.graph.output[0].name = "z"
    with pytest.raises(ModelLoadError, match="not a complete ONNX model: its nodes use the "
                                             "default ONNX domain, but it imports no opset"):
        import_onnx(model)


def test_model_importing_no_opset_is_incomplete():
    with pytest.raises(ModelLoadError, match="not a complete ONNX model: it imports no opset"):
        import_onnx(ml_model({}))

"""tensorc.check: what it reports of supported and unsupported models, without compiling."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from helpers import branch_on_input_model, make_model, paddle_like_model, tensor_info
from onnx import TensorProto, helper

import tensorc
from tensorc.errors import ModelLoadError, ShapeError, TensorcError
from tensorc.frontend.check import check_model
from tensorc.frontend.onnx import import_onnx


def by_type(report) -> dict[str, object]:
    return {op.op_type: op for op in report.ops}


def test_supported_model():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Add", ["a", "b"], ["y"], name="sum")]
    report = tensorc.check(make_model(nodes, [tensor_info("x", "float32", [2, 3])], ["y"]))
    assert report.supported
    assert (report.ir_version, report.opsets) == (8, {"ai.onnx": 17})
    assert [(op.op_type, op.domain, op.opset, op.nodes) for op in report.ops] == [
        ("Relu", "", 17, ["r1", "r2"]), ("Add", "", 17, ["sum"])]
    assert all(op.ok and op.supported and not op.issues for op in report.ops)
    assert [(i.name, i.dims, i.bound) for i in report.inputs] == [("x", [2, 3], True)]
    text = str(report)
    assert "model 'test': IR version 8, opsets: ai.onnx 17" in text
    assert "x: float32[2,3]  static" in text
    assert "ok          Relu (opset 17): nodes r1, r2" in text
    assert text.endswith("result: every op is supported")
    data = json.loads(report.to_json())
    assert data["supported"] is True and data["opsets"] == {"ai.onnx": 17}
    assert data["ops"][0] == {"op_type": "Relu", "domain": "ai.onnx", "opset": 17,
                              "nodes": ["r1", "r2"], "issues": [], "supported": True,
                              "ok": True}


def test_every_unsupported_op_with_domain_opset_and_nodes():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("RandomUniformLike", ["a"], ["b"], name="unique_1"),
             helper.make_node("RandomUniformLike", ["b"], ["c"], name="unique_2"),
             helper.make_node("FusedConv", ["x"], ["d"], name="fused", domain="com.microsoft"),
             helper.make_node("Binarizer", ["x"], ["e"], name="bin", domain="ai.onnx.ml"),
             helper.make_node("Det", ["x"], ["f"])]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 2])], ["c", "d", "e", "f"],
                       opset=13, extra_opsets={"com.microsoft": 1, "ai.onnx.ml": 3})
    report = check_model(model)
    assert not report.supported
    assert report.opsets == {"ai.onnx": 13, "com.microsoft": 1, "ai.onnx.ml": 3}
    ops = by_type(report)
    assert ops["Relu"].ok
    unique = ops["RandomUniformLike"]
    assert (unique.supported, unique.opset, unique.nodes) == (False, 13, ["unique_1", "unique_2"])
    assert [(i.kind, i.reason, i.nodes) for i in unique.issues] == [
        ("op", "not supported", ["unique_1", "unique_2"])]
    fused = ops["FusedConv"]
    assert (fused.domain, fused.opset, fused.title) == ("com.microsoft", 1,
                                                        "com.microsoft::FusedConv (opset 1)")
    assert fused.issues[0].reason == "only the default ONNX domain is supported"
    assert (ops["Binarizer"].domain, ops["Binarizer"].opset) == ("ai.onnx.ml", 3)
    assert ops["Det"].nodes == ["#5"]  # unnamed: its index, as the importer says
    text = str(report)
    assert "UNSUPPORTED RandomUniformLike (opset 13): nodes unique_1, unique_2" in text
    assert "UNSUPPORTED ai.onnx.ml::Binarizer (opset 3): node bin" in text
    assert "result: NOT SUPPORTED: 4 of 5 op types have problems" in text
    # The Relu node ran on trial; nothing read what an unsupported node computes but outputs.
    assert report.untried == []


def test_op_supported_at_other_opsets_only():
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"], name="old_add")],
                       [tensor_info("x", "float32", [2])], ["y"], opset=6)
    (op,) = check_model(model).ops
    assert not op.supported
    assert op.issues[0].reason == "supported for opsets >=7 only"


def test_unknown_attribute_makes_a_supported_op_not_ok():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="plain"),
             helper.make_node("Relu", ["a"], ["y"], name="odd", fancy=1)]
    report = check_model(make_model(nodes, [tensor_info("x", "float32", [2])], ["y"]))
    (op,) = report.ops
    assert op.supported and not op.ok and not report.supported
    assert [(i.kind, i.reason, i.nodes) for i in op.issues] == [
        ("attribute", "attribute 'fancy' not supported", ["odd"])]
    assert "partial     Relu (opset 17): nodes plain, odd" in str(report)


def test_variants_found_by_trial_conversion_are_all_listed():
    nodes = [helper.make_node("Pad", ["x", "p"], ["a"], name="reflect", mode="reflect"),
             helper.make_node("Pad", ["x", "p"], ["b"], name="mirror", mode="mirror"),
             helper.make_node("Relu", ["b"], ["c"], name="after_mirror"),
             helper.make_node("Reshape", ["x", "s"], ["d"], name="runtime_shape"),
             helper.make_node("Relu", ["x"], ["e"], name="fine")]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 3]),
                               tensor_info("s", "int64", [2])], ["a", "c", "d", "e"], opset=13,
                       initializers={"p": np.array([0, 1, 0, 1], np.int64)})
    report = check_model(model)
    assert not report.supported
    ops = by_type(report)
    pad = ops["Pad"]
    assert pad.supported and not pad.ok
    assert [(i.kind, i.reason, i.nodes) for i in pad.issues] == [
        ("variant", "Pad mode 'mirror' is not supported", ["mirror"])]
    (reshape,) = ops["Reshape"].issues
    assert (reshape.kind, reshape.nodes, reshape.certain) == ("shape", ["runtime_shape"], True)
    assert "shape input %s (int64[2], a model input) is computed at run time" in reshape.reason
    assert ops["Relu"].ok
    assert report.untried == ["after_mirror"]
    assert "not tried, as they read what a failing node computes: node after_mirror" in \
        str(report)
    # what the importer says of the first failure
    with pytest.raises(TensorcError, match="Pad mode 'mirror' is not supported"):
        import_onnx(model)


def test_symbolic_dims_and_their_binding():
    inputs = [tensor_info("x", "float32", ["batch", 4]),
              tensor_info("mask", "float32", ["batch", "seq"]),
              tensor_info("fixed", "float32", [4])]
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["mask"], ["b"]),
             helper.make_node("Add", ["x", "fixed"], ["c"])]
    model = make_model(nodes, inputs, ["a", "b", "c"])
    report = check_model(model)
    assert report.supported  # unbound dims are no unsupported op
    assert report.unbound_inputs == ["x", "mask"]
    x = report.inputs[0]
    assert x.symbolic == [{"dim": 0, "symbol": "batch", "value": None}]
    text = str(report)
    assert "x: float32[batch,4]  symbolic: dim 0 'batch' = unbound" in text
    assert "--input-shape x=1x4 --input-shape mask=1x1" in text
    assert "conversion: tried with the unbound input dims symbolic (batch, seq)" in text
    assert "symbolic dims:\n  batch in [1, inf]  (from x[0], mask[0])\n  seq in [1, inf]" in text
    assert "outputs:\n  a: float32[batch,4]\n  b: float32[batch,seq]\n  c: float32[batch,4]" \
        in text
    found = json.loads(report.to_json())
    assert found["dims"]["symbols"][1] == {"name": "seq", "range": [1, None],
                                           "inputs": [["mask", 1]]}
    assert found["outputs"]["b"] == "float32[batch,seq]"

    # binding x binds 'batch' for mask too; 'seq' stays unbound
    report = check_model(model, {"x": (8, 4)})
    x, mask, fixed = report.inputs
    assert (x.shape, x.bound) == ([8, 4], True)
    assert mask.symbolic == [{"dim": 0, "symbol": "batch", "value": 8},
                             {"dim": 1, "symbol": "seq", "value": None}]
    assert (mask.bound, fixed.symbolic) == (False, [])
    assert "mask: float32[batch,seq]  symbolic: dim 0 'batch' = 8, dim 1 'seq' = unbound" \
        in str(report)

    report = check_model(model, {"x": (8, 4), "mask": (8, 5)})
    assert report.unbound_inputs == []
    assert "with every input shape bound" in report.conversion
    assert json.loads(report.to_json())["inputs"][1]["shape"] == [8, 5]


def test_shape_the_dims_may_break_is_a_run_time_constraint():
    # x[batch, 4] -> [2, 4] holds for batch 2 only: checked at run time, not assumed
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="to_2x4")],
                       [tensor_info("x", "float32", ["batch", 4])], ["y"],
                       initializers={"s": np.array([2, 4], np.int64)})
    report = check_model(model)
    assert report.ops[0].issues == [] and report.supported
    (constraint,) = report.dims["constraints"]
    assert constraint["constraint"] == "8 == batch*4"
    assert "node 'to_2x4' (Reshape)" in constraint["reason"]
    assert "checked at run time: 8 == batch*4" in str(report)
    assert check_model(model, {"x": (2, 4)}).ops[0].issues == []
    report = check_model(model, {"x": (3, 4)})
    assert not report.supported and report.ops[0].issues[0].certain


def test_what_symbolic_dims_do_not_support_yet_is_a_warning():
    # (a scale of 1/3: floor(scale * h) is no exact integer arithmetic of h)
    model = make_model([helper.make_node("Resize", ["x", "", "s"], ["y"], name="up",
                                         mode="linear")],
                       [tensor_info("x", "float32", [1, 1, "h", 4])], ["y"],
                       initializers={"s": np.array([1, 1, 1 / 3, 1], np.float32)})
    report = check_model(model)
    (issue,) = report.ops[0].issues
    assert (issue.kind, issue.certain) == ("shape", False)
    assert "symbolic dim h" in issue.reason and "not supported over symbolic dims" in \
        issue.reason
    assert report.supported
    assert check_model(model, {"x": (1, 1, 3, 4)}).ops[0].issues == []


def test_dim_ranges_in_the_report():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", ["batch", "seq"])], ["y"])
    report = check_model(model, dim_ranges={"seq": (1, 512)})
    assert "seq in [1, 512]  (from x[1])" in str(report)
    report = check_model(model, dim_ranges={"past": (0, None)})
    assert "dim_ranges names 'past'" in report.problems[0]


def test_unknown_rank_skips_the_trial_conversion():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    model = make_model(nodes, [tensor_info("x", "float32", None)], ["y"])
    report = check_model(model)
    assert report.supported and report.unbound_inputs == ["x"]
    assert report.conversion.startswith("not tried: inputs x have an unknown rank")
    assert "x: float32[?]  rank unknown: unbound" in str(report)
    report = check_model(model, {"x": (2, 5)})
    assert report.inputs[0].shape == [2, 5]
    assert "rank unknown: [2,5]" in str(report)
    assert "with every input shape bound" in report.conversion


def test_ops_inside_subgraphs_are_checked():
    then_branch = helper.make_graph([helper.make_node("RandomUniformLike", ["x"], ["t"],
                                                      name="inner")],
                                    "then", [], [tensor_info("t", "float32", [3])])
    else_branch = helper.make_graph([helper.make_node("Relu", ["x"], ["e"], name="inner_ok")],
                                    "else", [], [tensor_info("e", "float32", [3])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_branch,
                              else_branch=else_branch),
             helper.make_node("Neg", ["y"], ["z"], name="after")]
    model = make_model(nodes, [tensor_info("c", "bool", []), tensor_info("x", "float32", [3])],
                       ["z"])
    report = check_model(model)
    ops = by_type(report)
    assert ops["RandomUniformLike"].nodes == ["inner"]
    assert not ops["RandomUniformLike"].supported
    assert ops["If"].ok and ops["Relu"].ok
    # If itself was left out: its branch holds an unsupported op
    assert report.untried == ["after"]

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    (then,) = [a for a in fixed.graph.node[0].attribute if a.name == "then_branch"]
    then.g.node[0].op_type = "Relu"
    report = check_model(fixed)
    assert report.supported and report.untried == []
    assert sorted(by_type(report)["Relu"].nodes) == ["inner", "inner_ok"]


def test_uncomputed_graph_output_is_reported_on_its_node():
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], name="mp", kernel_shape=[2])]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 1, 4])], ["y", "idx"])
    report = check_model(model)
    (issue,) = report.ops[0].issues
    assert issue.nodes == ["mp"]
    assert issue.reason == "graph output 'idx' is an output tensorc does not compute"
    assert not report.supported


def test_input_of_an_unsupported_dtype_is_a_problem():
    model = make_model([helper.make_node("Identity", ["x"], ["y"], name="i")],
                       [helper.make_tensor_value_info("x", TensorProto.STRING, [2])], ["y"])
    report = check_model(model)
    assert not report.supported
    assert report.problems == ["input 'x' has element type STRING, which tensorc does not "
                               "support"]
    assert report.ops[0].ok


def test_onnx_ml_only_model():
    graph = helper.make_graph(
        [helper.make_node("Binarizer", ["x"], ["y"], name="bin", domain="ai.onnx.ml")], "ml",
        [tensor_info("x", "float32", [3])], [tensor_info("y", "float32", [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)],
                              ir_version=8)
    report = check_model(model)
    assert report.opsets == {"ai.onnx.ml": 3}
    (op,) = report.ops
    assert (op.op_type, op.domain, op.opset, op.nodes) == ("Binarizer", "ai.onnx.ml", 3, ["bin"])
    assert not op.supported and not report.supported


def test_bad_inputs_and_files_raise(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", [2, 3])], ["y"])
    with pytest.raises(ShapeError, match="input_shapes names 'z'"):
        check_model(model, {"z": (1,)})
    with pytest.raises(ShapeError, match="input 'x' expects shape float32\\[2,3\\]"):
        check_model(model, {"x": (2, 4)})
    with pytest.raises(ModelLoadError, match="no such file"):
        check_model(tmp_path / "missing.onnx")
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(ModelLoadError, match="truncated"):
        check_model(path)
    path = tmp_path / "whole.onnx"
    path.write_bytes(data)
    assert check_model(path).model == f"model {str(path)!r}"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ONNX computing its expected outputs
def test_check_agrees_with_the_importer_on_onnx_node_tests():
    """``supported`` is True exactly where the import succeeds, on ONNX's own node tests."""
    from onnx.backend.test.loader import load_model_tests
    cases = load_model_tests(kind="node")[::7]  # a spread of ~270 cases, both kinds
    outcomes = set()
    for case in cases:
        model = case.model if isinstance(case.model, onnx.ModelProto) else \
            onnx.load(case.model)
        try:
            import_onnx(model)
            imported = True
        except TensorcError:
            imported = False
        assert check_model(model).supported == imported, case.name
        outcomes.add(imported)
    assert outcomes == {True, False}


def test_dims_declared_negative_are_symbolic_as_compile_takes_them():
    from tensorc.cli.arguments import parse_input_shape
    model = paddle_like_model()
    report = check_model(model)
    assert report.supported and report.unbound_inputs == ["x"]
    assert "x: float32[x_dim0,3,x_dim2,x_dim3]  symbolic:" in str(report)   # as compile names them
    assert "-1x" not in str(report)
    hint = str(report).split("--input-shape ")[1].split()[0]
    parse_input_shape(hint)                            # a hint the parser accepts
    report = check_model(model, {"x": (1, 3, 48, 192)})
    assert report.supported and not report.unbound_inputs
    assert tensorc.compile(model, input_shapes={"x": (1, 3, 48, 192)}).outputs == \
        [("y", (1, 4), "float32")]


def test_check_takes_input_values_as_compile_does():
    model = branch_on_input_model()
    report = check_model(model)
    assert not report.supported
    with pytest.raises(TensorcError, match="depends on the value of input 'sr'"):
        tensorc.compile(model)
    report = tensorc.check(model, input_values={"sr": 16000})
    assert report.supported, str(report)
    assert [i.name for i in report.inputs] == ["x"]
    assert tensorc.compile(model, input_values={"sr": 16000}).outputs == \
        [("y", (2, 3), "float32")]


@pytest.mark.parametrize("name", ["mlp", "lenet5", "lstm", "bert", "audio"])
def test_check_agrees_with_compile_on_bundled_models(name: str):
    import models
    from test_models import SHAPES
    shapes = SHAPES[name][0]
    report = tensorc.check(models.load(name), input_shapes=shapes)
    assert report.supported, str(report)
    module = tensorc.compile(models.load(name), input_shapes=shapes)
    assert {n: s for n, s, _ in module.inputs} == shapes


def _list_code_model() -> onnx.ModelProto:
    """torch.stack([relu(p) for p in x.split(2)]) on a sequence input's first element."""
    body = helper.make_graph([helper.make_node("Relu", ["e"], ["r"])], "body",
                             [tensor_info("e", "float32", None)],
                             [tensor_info("r", "float32", None)])
    nodes = [helper.make_node("SequenceAt", ["xs", "zero"], ["x"], name="first"),
             helper.make_node("SplitToSequence", ["x", "two"], ["parts"], name="split"),
             helper.make_node("SequenceMap", ["parts"], ["relus"], body=body, name="map"),
             helper.make_node("ConcatFromSequence", ["relus"], ["y"], axis=0, new_axis=1,
                              name="stack"),
             helper.make_node("Optional", ["y"], ["o"], name="opt"),
             helper.make_node("OptionalHasElement", ["o"], ["has"], name="has")]
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
    return make_model(nodes, [helper.make_value_info("xs", helper.make_sequence_type_proto(
        elem))], ["y", "has", "parts"], opset=18,
        initializers={"zero": np.array(0, np.int64), "two": np.array(2, np.int64)})


def test_sequence_and_optional_ops_are_supported():
    report = tensorc.check(_list_code_model(), input_shapes={"xs": [(4, 3)]})
    assert report.supported, str(report)
    assert [op.op_type for op in report.ops] == [  # the model's ops, none of tensorc's own
        "SequenceAt", "SplitToSequence", "SequenceMap", "Relu", "ConcatFromSequence",
        "Optional", "OptionalHasElement"]
    assert [i.name for i in report.inputs] == ["xs[0]"]
    assert report.outputs == {"y": "float32[2,2,3]", "has": "bool[]",
                              "parts": "sequence [float32[2,3], float32[2,3]]"}


def test_a_sequence_input_without_its_length_is_a_problem_not_an_error():
    report = tensorc.check(_list_code_model())
    assert not report.supported
    assert all(op.ok for op in report.ops)      # every op is still reported supported
    assert report.problems == [
        "input 'xs' is a sequence of float32 tensors; tensorc resolves sequences while "
        "compiling and needs its length: give one shape per element with input_shapes, e.g. "
        "{'xs': [(2, 3), (4, 3)]} (None for an element of the declared type)"]
    assert report.conversion == "not tried: a sequence input's length is not given"


def test_data_dependent_ops_are_supported_and_their_dims_listed():
    nodes = [helper.make_node("NonZero", ["x"], ["i"], name="where"),
             helper.make_node("Unique", ["x"], ["u"], name="uniq")]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 3])], ["i", "u"], opset=13)
    report = check_model(model)
    assert report.supported, str(report)
    text = str(report)
    assert "nonzero_0.n in [0, 6]  (from node 'where' at run time, at most 6)" in text
    assert "unique_0.n in [0, 6]  (from node 'uniq' at run time, at most 6)" in text

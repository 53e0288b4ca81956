"""lower_for_target: the frontend imports convs, transposed convs and matmuls as ONNX means
them; the pass rewrites the slow forms. Before / After text, the numbers against onnxruntime
(the reference interpreter before and after the pass, and the compiled module)."""
from __future__ import annotations

import textwrap
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import pytest
from helpers import assert_close, make_model, ort_run, random_feeds, tensor_info
from onnx import helper

import tensorc
from tensorc.frontend.onnx import import_onnx
from tensorc.ir.graph import Graph, verify
from tensorc.ops.interpret import check_types, run_reference
from tensorc.passes.graph import GRAPH_PIPELINE
from tensorc.passes.graph.lower_for_target import lower_for_target
from tensorc.target import Target

RNG = np.random.default_rng(5)
HOST = Target.host()


def rand(*shape: int) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape), np.float32)


def text(s: str) -> str:
    return textwrap.dedent(s).strip("\n")


def node_model(op: str, node_inputs: Sequence[str], inputs: Mapping[str, Sequence[int]],
               inits: Mapping[str, np.ndarray] | None = None, **attrs: Any
               ) -> onnx.ModelProto:
    """A one-node model named after its op; ``inputs`` maps each graph input to its shape."""
    node = helper.make_node(op, list(node_inputs), ["y"], name=op.lower(), **attrs)
    infos = [tensor_info(name, "float32", shape) for name, shape in inputs.items()]
    return make_model([node], infos, ["y"], initializers=inits)


def lowered(model: onnx.ModelProto) -> tuple[Graph, Graph]:
    """The imported graph and the graph after the pass, both checked against onnxruntime
    with the reference interpreter."""
    before = import_onnx(model)
    after = lower_for_target(before, HOST)
    verify(after)
    check_types(after)
    feeds = random_feeds(model)
    want = ort_run(model, feeds)
    # float32 sums of a few hundred N(0, 1) products carry rounding in proportion to the
    # outputs' scale: an output near zero among outputs near 20 is off by ~1e-5 in any order
    atol = 1e-5 * max(1.0, max(float(np.abs(v).max(initial=0.0)) for v in want.values()))
    assert_close(run_reference(before, feeds), want, rtol=1e-4, atol=atol)
    assert_close(run_reference(after, feeds), want, rtol=1e-4, atol=atol)
    return before, after


def compiled_matches_onnxruntime(model: onnx.ModelProto) -> None:
    feeds = random_feeds(model)
    want = ort_run(model, feeds)
    # an absolute floor at the outputs' scale: a sum of hundreds of products near 30 that
    # cancels to 0.02 differs from onnxruntime's by rounding (1.6e-5 seen)
    atol = 1e-5 * max(1.0, max(float(np.abs(v).max(initial=0.0)) for v in want.values()))
    assert_close(tensorc.compile(model).run(feeds), want, rtol=1e-4, atol=atol)


def test_the_pass_runs_before_every_float_graph_pass():
    """Only the int8 passes run before it: they read the DQ -> conv / matmul -> Q chains as
    the importer wrote them (passes/graph/quantize_qdq.py)."""
    names = [p.__name__ for p in GRAPH_PIPELINE]
    first = names.index(lower_for_target.__name__)
    assert names[:first] and all(n.startswith("quantize_") for n in names[:first])


@pytest.mark.parametrize("target, stage", [("llvm", "llvm"), ("cuda -arch=sm_80", "cuda")])
def test_both_back_ends_compile_the_lowered_graph(target, stage):
    """compile_graph and compile_graph_cuda both start from optimize_graph: their kernels are
    the GEMM's and col2im's, none is a transposed conv's."""
    model = node_model("ConvTranspose", ["x", "w"], {"x": [1, 4, 5, 5]}, {"w": rand(4, 3, 2, 2)},
                       strides=[2, 2])
    code = tensorc.inspect(model, stage=stage, target=target)
    assert "_fused_matmul" in code and "_fused_col2im" in code and "conv_transpose" not in code


# Before / After -------------------------------------------------------------------------------
def test_a_grouped_conv_of_wide_groups_becomes_one_conv_per_group_with_its_bias():
    model = node_model("Conv", ["x", "w", "b"], {"x": [1, 64, 5, 5]},
                       {"w": rand(64, 32, 3, 3), "b": rand(64)}, group=2, pads=[1] * 4)
    before, after = lowered(model)
    assert str(before) == text("""
        graph test(%x: float32[1,64,5,5]) -> (%y: float32[1,64,5,5])
          const %w: float32[64,32,3,3]
          const %c0: float32[1,64,1,1]
          %1: float32[1,64,5,5] = conv(%x, %w) {strides=(1,1), pads=(1,1,1,1), dilations=(1,1), groups=2}
          %y: float32[1,64,5,5] = add(%1, %c0)
        """)  # noqa: E501
    assert str(after) == text("""
        graph test(%x: float32[1,64,5,5]) -> (%y: float32[1,64,5,5])
          const %c1: float32[32,32,3,3]
          const %c2: float32[1,32,1,1]
          const %c3: float32[32,32,3,3]
          const %c4: float32[1,32,1,1]
          %3: float32[1,32,5,5] = slice(%x) {starts=(0,0,0,0), steps=(1,1,1,1), shape=(1,32,5,5)}
          %4: float32[1,32,5,5] = conv(%3, %c1) {groups=1, strides=(1,1), pads=(1,1,1,1), dilations=(1,1)}
          %5: float32[1,32,5,5] = add(%4, %c2)
          %6: float32[1,32,5,5] = slice(%x) {starts=(0,32,0,0), steps=(1,1,1,1), shape=(1,32,5,5)}
          %7: float32[1,32,5,5] = conv(%6, %c3) {groups=1, strides=(1,1), pads=(1,1,1,1), dilations=(1,1)}
          %8: float32[1,32,5,5] = add(%7, %c4)
          %y: float32[1,64,5,5] = concat(%5, %8) {axis=1}
        """)  # noqa: E501
    assert {n.name for n in after.nodes} == {"conv"}   # named after the ONNX node
    compiled_matches_onnxruntime(model)


def test_a_3d_conv_becomes_a_2d_conv_over_the_output_depths():
    model = node_model("Conv", ["x", "w"], {"x": [1, 4, 5, 6, 7]}, {"w": rand(8, 4, 3, 3, 3)},
                       pads=[1] * 6)
    before, after = lowered(model)
    assert str(before) == text("""
        graph test(%x: float32[1,4,5,6,7]) -> (%y: float32[1,8,5,6,7])
          const %w: float32[8,4,3,3,3]
          %y: float32[1,8,5,6,7] = conv(%x, %w) {strides=(1,1,1), pads=(1,1,1,1,1,1), dilations=(1,1,1), groups=1}
        """)  # noqa: E501
    assert str(after) == text("""
        graph test(%x: float32[1,4,5,6,7]) -> (%y: float32[1,8,5,6,7])
          const %c1: float32[8,12,3,3]
          %2: float32[1,4,7,6,7] = pad(%x) {pads=(0,0,1,0,0,0,0,1,0,0), mode=constant, value=0.0}
          %3: float32[1,4,5,6,7] = slice(%2) {starts=(0,0,0,0,0), steps=(1,1,1,1,1), shape=(1,4,5,6,7)}
          %4: float32[1,4,5,6,7] = slice(%2) {starts=(0,0,1,0,0), steps=(1,1,1,1,1), shape=(1,4,5,6,7)}
          %5: float32[1,4,5,6,7] = slice(%2) {starts=(0,0,2,0,0), steps=(1,1,1,1,1), shape=(1,4,5,6,7)}
          %6: float32[1,12,5,6,7] = concat(%3, %4, %5) {axis=1}
          %7: float32[1,5,12,6,7] = transpose(%6) {perm=(0,2,1,3,4)}
          %8: float32[5,12,6,7] = reshape(%7) {shape=(5,12,6,7)}
          %9: float32[5,8,6,7] = conv(%8, %c1) {strides=(1,1), pads=(1,1,1,1), dilations=(1,1), groups=1}
          %10: float32[1,5,8,6,7] = reshape(%9) {shape=(1,5,8,6,7)}
          %y: float32[1,8,5,6,7] = transpose(%10) {perm=(0,2,1,3,4)}
        """)  # noqa: E501
    compiled_matches_onnxruntime(model)


def test_a_transposed_conv_becomes_a_gemm_and_a_col2im():
    model = node_model("ConvTranspose", ["x", "w"], {"x": [1, 4, 5, 5]}, {"w": rand(4, 3, 2, 2)},
                       strides=[2, 2])
    before, after = lowered(model)
    assert str(before) == text("""
        graph test(%x: float32[1,4,5,5]) -> (%y: float32[1,3,10,10])
          const %w: float32[4,3,2,2]
          %y: float32[1,3,10,10] = conv_transpose(%x, %w) {strides=(2,2), pads=(0,0,0,0), dilations=(1,1), groups=1, output_padding=(0,0)}
        """)  # noqa: E501
    assert str(after) == text("""
        graph test(%x: float32[1,4,5,5]) -> (%y: float32[1,3,10,10])
          const %c1: float32[12,4]
          %2: float32[1,4,25] = reshape(%x) {shape=(1,4,25)}
          %3: float32[1,12,25] = matmul(%c1, %2)
          %y: float32[1,3,10,10] = col2im(%3) {image_shape=(10,10), block_shape=(2,2), strides=(2,2), pads=(0,0,0,0), dilations=(1,1)}
        """)  # noqa: E501
    compiled_matches_onnxruntime(model)


def test_few_row_products_against_one_matrix_become_one_gemm():
    model = node_model("MatMul", ["x", "w"], {"x": [6, 1, 4]}, {"w": rand(4, 5)})
    before, after = lowered(model)
    assert str(before) == text("""
        graph test(%x: float32[6,1,4]) -> (%y: float32[6,1,5])
          const %w: float32[4,5]
          %y: float32[6,1,5] = matmul(%x, %w)
        """)
    assert str(after) == text("""
        graph test(%x: float32[6,1,4]) -> (%y: float32[6,1,5])
          const %w: float32[4,5]
          %2: float32[6,4] = reshape(%x) {shape=(6,4)}
          %3: float32[6,5] = matmul(%2, %w)
          %y: float32[6,1,5] = reshape(%3) {shape=(6,1,5)}
        """)


# which forms are rewritten (moved from the frontend's tests with the rewrites) -----------------
@pytest.mark.parametrize("a, merged", [([6, 1, 4], True), ([2, 3, 1, 4], True),
                                       ([3, 8, 4], True), ([2, 16, 4], False)])
def test_a_batch_of_few_row_products_against_one_matrix_is_one_gemm(a, merged):
    """[T, 1, C] @ W (a sequence-first export): the rows of all the products as one matrix,
    one GEMM, where each product has at most MERGE_ROWS_MAX rows; the result keeps its
    shape."""
    _, graph = lowered(node_model("MatMul", ["a", "b"], {"a": a, "b": [4, 5]}))
    (mm,) = [n for n in graph.nodes if n.op == "matmul"]
    assert (mm.inputs[0].type.ndim == 2) == merged
    assert graph.outputs[0].type.shape == (*a[:-1], 5)


def test_a_batch_of_few_row_products_by_a_vector_is_one_gemm_reshaped_once():
    """MatMul by a vector: the frontend's reshape dropping the vector's dim is the merged
    product's one reshape."""
    _, graph = lowered(node_model("MatMul", ["a", "b"], {"a": [6, 2, 4]}, {"b": rand(4)}))
    assert [n.op for n in graph.nodes] == ["reshape", "matmul", "reshape"]
    assert graph.outputs[0].type.shape == (6, 2)


@pytest.mark.parametrize("attrs,w_shape,direct", [
    ({"strides": [2, 2]}, (4, 3, 2, 2), False),
    ({"strides": [2, 2], "pads": [1, 1, 1, 1]}, (4, 3, 4, 4), False),
    ({"strides": [2, 2], "group": 2}, (4, 3, 2, 2), True),
    ({"strides": [2, 2], "output_shape": [11, 11]}, (4, 3, 2, 2), False)])
def test_a_transposed_conv_with_constant_weights_is_a_gemm_and_a_col2im(attrs, w_shape,
                                                                         direct):
    """ConvTranspose with constant weights: W^T @ x (the GEMM template) and col2im (an
    output_shape one larger than the full output included); grouped ones keep the direct
    form."""
    w = rand(*w_shape)
    _, graph = lowered(node_model("ConvTranspose", ["x", "w"], {"x": [1, 4, 5, 5]}, {"w": w},
                                  **attrs))
    ops = {n.op for n in graph.nodes}
    assert ("conv_transpose" in ops) == direct and ("col2im" in ops) != direct


@pytest.mark.parametrize("channels,groups,kernel,split", [
    (64, 2, 3, True), (96, 3, 1, True), (288, 9, 3, True), (64, 16, 3, False),
    (64, 64, 3, False)])
def test_a_conv_of_wide_groups_is_one_conv_per_group(channels, groups, kernel, split):
    """Groups of SPLIT_GROUP_MIN_CHANNELS input channels or more: one dense conv per group
    (slices of the input, the weights and the bias), concatenated; narrow groups (ResNeXt's
    4 channels) and depthwise convs stay one grouped conv."""
    w = rand(channels, channels // groups, kernel, kernel)
    _, graph = lowered(node_model("Conv", ["x", "w", "b"], {"x": [1, channels, 6, 6]},
                                  {"w": w, "b": rand(channels)}, group=groups,
                                  pads=[kernel // 2] * 4))
    convs = [n for n in graph.nodes if n.op == "conv"]
    assert len(convs) == (groups if split else 1)
    assert all(n.attrs["groups"] == (1 if split else groups) for n in convs)


@pytest.mark.parametrize("bias", ["none", "runtime"])
def test_a_conv_of_wide_groups_without_a_constant_bias(bias):
    """No bias: the groups' convs concatenated; a bias computed at run time: each group adds
    its slice of it."""
    inputs = {"x": [1, 64, 5, 5]} | ({"b": [64]} if bias == "runtime" else {})
    model = node_model("Conv", ["x", "w", "b"] if bias == "runtime" else ["x", "w"], inputs,
                       {"w": rand(64, 32, 3, 3)}, group=2, pads=[1] * 4)
    _, graph = lowered(model)
    ops = [n.op for n in graph.nodes]
    assert ops.count("conv") == 2 and ops[-1] == "concat"
    assert ops.count("add") == (2 if bias == "runtime" else 0)
    compiled_matches_onnxruntime(model)


@pytest.mark.parametrize("w_shape,attrs", [
    ((8, 4, 3, 3, 3), {"pads": [1] * 6}),
    ((8, 4, 3, 2, 3), {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 2, 0]}),
    ((8, 4, 2, 3, 3), {"dilations": [2, 1, 1], "pads": [1, 1, 1, 0, 1, 1]}),
    ((8, 4, 1, 3, 3), {"pads": [0, 1, 1, 0, 1, 1]})])
def test_a_3d_conv_is_a_batch_of_2d_convs(w_shape, attrs):
    """Conv3d as a 2-D conv over the output depths (the depth taps' input slices stacked as
    channels): no 3-D conv left, the same numbers as onnxruntime, through the compiler too."""
    model = node_model("Conv", ["x", "w", "b"], {"x": [1, 4, 5, 6, 7]},
                       {"w": rand(*w_shape), "b": rand(8)}, **attrs)
    _, graph = lowered(model)
    convs = [n for n in graph.nodes if n.op == "conv"]
    assert len(convs) == 1 and convs[0].inputs[0].type.ndim == 4
    compiled_matches_onnxruntime(model)


def test_a_3d_conv_with_weights_computed_at_run_time_stays_3d():
    model = node_model("Conv", ["x", "w"], {"x": [1, 2, 4, 5, 5], "w": [3, 2, 3, 3, 3]})
    before, after = lowered(model)
    assert str(after) == str(before)


def test_an_add_of_another_onnx_node_after_a_split_conv_stays_after_the_concat():
    """Only the Conv's own bias (its add, of the same node name) is split with the groups; an
    Add node of the model reads the concatenated channels."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", group=2),
             helper.make_node("Add", ["c", "b"], ["y"], name="add")]
    model = make_model(nodes, [tensor_info("x", "float32", [1, 64, 5, 5])], ["y"],
                       initializers={"w": rand(64, 32, 1, 1), "b": rand(1, 64, 1, 1)})
    _, graph = lowered(model)
    assert [n.op for n in graph.nodes][-2:] == ["concat", "add"]
    assert [n.op for n in graph.nodes].count("conv") == 2

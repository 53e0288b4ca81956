"""Graph passes: Before / After text, numbers unchanged (run_reference), graph still valid."""
from __future__ import annotations

import textwrap

import numpy as np
from helpers import make_model, tensor_info
from onnx import helper

from tensorc.frontend.onnx import import_onnx
from tensorc.ir.graph import Graph, Value, verify
from tensorc.ir.types import TensorType
from tensorc.ops.build import emit
from tensorc.ops.interpret import check_types, run_reference
from tensorc.passes.graph.fold_constants import fold_constants
from tensorc.passes.graph.simplify import eliminate_dead_code, simplify

RNG = np.random.default_rng(3)
C = 16  # channels; more than 8 so that the printer does not spell constants out


def rand(*shape: int) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape), np.float32)


def text(s: str) -> str:
    return textwrap.dedent(s).strip("\n")


def assert_same_numbers(before: Graph, after: Graph, **shapes: tuple[int, ...]) -> None:
    verify(after)
    check_types(after)
    feeds = {name: rand(*shape) for name, shape in shapes.items()}
    want, got = run_reference(before, feeds), run_reference(after, feeds)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def batch_norm_params(g: Graph) -> list[Value]:
    names = ("scale", "bias", "mean", "var")
    arrays = (rand(C), rand(C), rand(C), np.abs(rand(C)) + 0.5)
    return [g.add_constant(a, n) for n, a in zip(names, arrays)]


def conv(g: Graph, x: Value, w: Value) -> Value:
    return emit(g, "conv", [x, w], strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1),
                groups=1)


def conv_bn_graph(with_bias: bool = False, extra_use: bool = False) -> Graph:
    g = Graph("convbn")
    x = g.add_input("x", TensorType((1, 3, 6, 6), "float32"))
    y = conv(g, x, g.add_constant(rand(C, 3, 3, 3), "w"))
    if with_bias:
        y = emit(g, "add", [y, g.add_constant(rand(1, C, 1, 1), "b")])
    out = emit(g, "batch_norm", [y, *batch_norm_params(g)], epsilon=1e-5)
    g.outputs.append(emit(g, "relu", [out]))
    if extra_use:
        g.outputs.append(y)
    g.rename(g.outputs[0], "out")
    return g


def test_batch_norm_folds_into_conv_weight():
    before = conv_bn_graph()
    assert str(before) == text("""
        graph convbn(%x: float32[1,3,6,6]) -> (%out: float32[1,16,6,6])
          const %w: float32[16,3,3,3]
          const %scale: float32[16]
          const %bias: float32[16]
          const %mean: float32[16]
          const %var: float32[16]
          %1: float32[1,16,6,6] = conv(%x, %w) {strides=(1,1), pads=(1,1,1,1), dilations=(1,1), groups=1}
          %2: float32[1,16,6,6] = batch_norm(%1, %scale, %bias, %mean, %var) {epsilon=1e-05}
          %out: float32[1,16,6,6] = relu(%2)
        """)  # noqa: E501
    after = simplify(before)
    assert str(after) == text("""
        graph convbn(%x: float32[1,3,6,6]) -> (%out: float32[1,16,6,6])
          const %w_bn: float32[16,3,3,3]
          const %batch_norm_1_bias: float32[1,16,1,1]
          %1: float32[1,16,6,6] = conv(%x, %w_bn) {strides=(1,1), pads=(1,1,1,1), dilations=(1,1), groups=1}
          %4: float32[1,16,6,6] = add(%1, %batch_norm_1_bias)
          %out: float32[1,16,6,6] = relu(%4)
        """)  # noqa: E501
    assert_same_numbers(before, after, x=(1, 3, 6, 6))
    assert str(simplify(after)) == str(after)  # nothing left to do


def test_batch_norm_folds_conv_bias_too():
    before = conv_bn_graph(with_bias=True)
    after = simplify(before)
    assert [n.op for n in after.nodes] == ["conv", "add", "relu"]
    assert len(after.constants) == 2
    assert_same_numbers(before, after, x=(1, 3, 6, 6))


def test_batch_norm_becomes_mul_add_when_conv_output_is_shared():
    before = conv_bn_graph(extra_use=True)
    after = simplify(before)
    assert [n.op for n in after.nodes] == ["conv", "mul", "add", "relu"]
    assert after.nodes[0].inputs[1].name == "w"
    assert_same_numbers(before, after, x=(1, 3, 6, 6))


def test_batch_norm_without_conv_becomes_mul_add():
    g = Graph("bn")
    x = g.add_input("x", TensorType((2, C, 5), "float32"))
    g.outputs.append(emit(g, "batch_norm", [x, *batch_norm_params(g)], epsilon=1e-3))
    after = simplify(g)
    assert str(after) == text("""
        graph bn(%x: float32[2,16,5]) -> (%1: float32[2,16,5])
          const %batch_norm_0_scale: float32[1,16,1]
          const %batch_norm_0_bias: float32[1,16,1]
          %2: float32[2,16,5] = mul(%x, %batch_norm_0_scale)
          %1: float32[2,16,5] = add(%2, %batch_norm_0_bias)
        """)
    assert_same_numbers(g, after, x=(2, C, 5))


def test_batch_norm_with_runtime_parameters_stays():
    g = Graph("bn")
    x = g.add_input("x", TensorType((2, 4), "float32"))
    params = [g.add_input(n, TensorType((4,), "float32")) for n in ("s", "b", "m", "v")]
    g.outputs.append(emit(g, "batch_norm", [x, *params], epsilon=1e-5))
    assert str(simplify(g)) == str(g)


def test_no_op_nodes_vanish():
    g = Graph("noops")
    x = g.add_input("x", TensorType((2, 3), "float32"))
    ones = g.add_constant(np.ones((3,), np.float32), "ones")
    zeros = g.add_constant(np.zeros((2, 3), np.float32), "zeros")
    y = emit(g, "reshape", [x], shape=(2, 3))
    y = emit(g, "transpose", [y], perm=(0, 1))
    y = emit(g, "mul", [ones, y])
    y = emit(g, "add", [y, zeros])
    y = emit(g, "div", [y, ones])
    y = emit(g, "sub", [y, zeros])
    g.outputs.append(emit(g, "relu", [y]))
    after = simplify(g)
    assert str(after) == text("""
        graph noops(%x: float32[2,3]) -> (%7: float32[2,3])
          %7: float32[2,3] = relu(%x)
        """)
    assert_same_numbers(g, after, x=(2, 3))


def test_an_activation_of_a_concat_applies_to_its_inputs():
    """relu(concat(a, b)) -> concat(relu(a), relu(b)): each relu fuses into its input's
    producer and the concat moves no data. Not where the concat feeds something else too,
    nor for a two-input op."""
    g = Graph("sink")
    a = g.add_input("a", TensorType((1, 2, 3), "float32"))
    b = g.add_input("b", TensorType((1, 4, 3), "float32"))
    joined = emit(g, "concat", [a, b], axis=1)
    g.outputs.append(emit(g, "sigmoid", [emit(g, "relu", [joined])]))
    after = simplify(g)
    assert [n.op for n in after.nodes] == ["relu", "relu", "sigmoid", "sigmoid", "concat"]
    assert_same_numbers(g, after, a=(1, 2, 3), b=(1, 4, 3))
    shared = Graph("shared")
    a = shared.add_input("a", TensorType((1, 2, 3), "float32"))
    joined = emit(shared, "concat", [a, a], axis=1)
    shared.outputs += [emit(shared, "relu", [joined]), joined,
                       emit(shared, "add", [emit(shared, "concat", [a, a], axis=1), joined])]
    assert [n.op for n in simplify(shared).nodes] == ["concat", "relu", "concat", "add"]


def test_elementwise_ops_after_a_reshape_run_before_it():
    """A matmul over merged rows, reshaped back, then a bias, a residual and an activation:
    they move before the reshape (the bias as it is, the residual reshaped alike), so that
    they fuse into the matmul's epilogue; the numbers stay."""
    g = Graph("rows")
    x = g.add_input("x", TensorType((2, 3, 8), "float32"))
    r = g.add_input("r", TensorType((2, 3, 5), "float32"))
    rows = emit(g, "reshape", [x], shape=(6, 8))
    product = emit(g, "matmul", [rows, g.add_constant(rand(8, 5), "w")])
    back = emit(g, "reshape", [product], shape=(2, 3, 5))
    biased = emit(g, "add", [back, g.add_constant(rand(5), "b")])
    g.outputs.append(emit(g, "relu", [emit(g, "add", [biased, r])]))
    after = simplify(g)
    assert [n.op for n in after.nodes] == ["reshape", "matmul", "add", "reshape", "add",
                                           "relu", "reshape"]
    assert after.nodes[2].outputs[0].type.shape == (6, 5)       # the bias before the reshape
    assert_same_numbers(g, after, x=(2, 3, 8), r=(2, 3, 5))


def test_a_reshape_stays_where_an_operand_varies_along_dims_it_merges():
    """A per-row scale of [2, 3, 5] cannot move before the reshape from [6, 5]: its rows are
    merged there (nor does a reshape read by two ops move)."""
    g = Graph("mixed")
    x = g.add_input("x", TensorType((6, 5), "float32"))
    back = emit(g, "reshape", [x], shape=(2, 3, 5))
    g.outputs.append(emit(g, "mul", [back, g.add_constant(rand(3, 1), "per_row")]))
    assert [n.op for n in simplify(g).nodes] == ["reshape", "mul"]
    shared = Graph("shared")
    x = shared.add_input("x", TensorType((6, 5), "float32"))
    back = emit(shared, "reshape", [x], shape=(2, 3, 5))
    shared.outputs += [emit(shared, "relu", [back]), emit(shared, "exp", [back])]
    assert [n.op for n in simplify(shared).nodes] == ["reshape", "relu", "exp"]


def test_ops_that_only_look_like_no_ops_stay():
    g = Graph("kept")
    x = g.add_input("x", TensorType((3,), "float32"))
    ones = g.add_constant(np.ones((2, 3), np.float32), "ones")
    zero = g.add_constant(np.zeros((), np.float32), "zero")
    g.outputs.append(emit(g, "mul", [x, ones]))      # broadcasts x to [2,3]
    g.outputs.append(emit(g, "sub", [zero, x]))      # 0 - x is neg(x)
    g.outputs.append(emit(g, "reshape", [x], shape=(3, 1)))
    after = simplify(g)
    assert [n.op for n in after.nodes] == ["mul", "sub", "reshape"]


def test_dropping_an_output_node_keeps_the_output_name():
    g = Graph("named")
    x = g.add_input("x", TensorType((2, 3), "float32"))
    y = emit(g, "relu", [x])
    out = emit(g, "reshape", [y], shape=(2, 3))
    g.rename(out, "logits")
    g.outputs.append(out)
    after = simplify(g)
    assert str(after) == text("""
        graph named(%x: float32[2,3]) -> (%logits: float32[2,3])
          %logits: float32[2,3] = relu(%x)
        """)
    # An output that is a graph input cannot be renamed, so the copy stays.
    g = Graph("passthrough")
    x = g.add_input("x", TensorType((2, 3), "float32"))
    g.outputs.append(emit(g, "reshape", [x], shape=(2, 3)))
    assert str(simplify(g)) == str(g)


def test_fold_constants():
    g = Graph("consts")
    x = g.add_input("x", TensorType((2, 3), "float32"))
    a = g.add_constant(np.array([1, 2], np.int64), "a")
    b = g.add_constant(np.array([3], np.int64), "b")
    shape = emit(g, "concat", [a, b], axis=0)
    doubled = emit(g, "mul", [shape, shape])
    scale = emit(g, "cast", [emit(g, "reduce_sum", [doubled], axes=(0,), keepdims=True)],
                 dtype="float32")
    g.outputs.append(emit(g, "mul", [x, scale]))
    g.outputs.append(doubled)
    before_text = text("""
        graph consts(%x: float32[2,3]) -> (%5: float32[2,3], %2: int64[3])
          const %a: int64[2] = [1, 2]
          const %b: int64[1] = [3]
          %1: int64[3] = concat(%a, %b) {axis=0}
          %2: int64[3] = mul(%1, %1)
          %3: int64[1] = reduce_sum(%2) {axes=(0), keepdims=True}
          %4: float32[1] = cast(%3) {dtype=float32}
          %5: float32[2,3] = mul(%x, %4)
        """)
    assert str(g) == before_text
    after = fold_constants(g)
    assert str(after) == text("""
        graph consts(%x: float32[2,3]) -> (%5: float32[2,3], %2: int64[3])
          const %2: int64[3] = [1, 4, 9]
          const %c3: float32[1] = [14.0]
          %5: float32[2,3] = mul(%x, %c3)
        """)
    assert str(g) == before_text  # passes do not modify their input
    assert_same_numbers(g, after, x=(2, 3))


def test_shape_gather_concat_reshape_chain_folds_at_import():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["dims"], axis=0),
             helper.make_node("Concat", ["dims", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Relu", ["flat"], ["y"])]
    inits = {"i": np.array([0, 1], np.int64), "minus_one": np.array([-1], np.int64)}
    model = make_model(nodes, [tensor_info("x", "float32", ["N", 3, 4, 5])], ["y"], opset=13,
                       initializers=inits)
    graph = import_onnx(model, input_shapes={"x": (2, 3, 4, 5)})
    assert str(graph) == text("""
        graph test(%x: float32[2,3,4,5]) -> (%y: float32[2,3,20])
          %1: float32[2,3,20] = reshape(%x) {shape=(2,3,20)}
          %y: float32[2,3,20] = relu(%1)
        """)


def test_eliminate_dead_code():
    g = Graph("dead")
    x = g.add_input("x", TensorType((2,), "float32"))
    unused = g.add_constant(np.ones(2, np.float32), "unused")
    emit(g, "add", [x, unused])
    g.outputs.append(emit(g, "neg", [x]))
    after = eliminate_dead_code(g)
    assert str(after) == text("""
        graph dead(%x: float32[2]) -> (%2: float32[2])
          %2: float32[2] = neg(%x)
        """)
    verify(after)

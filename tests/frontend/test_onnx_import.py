"""ONNX import: every supported op against onnxruntime, on several shapes and attributes."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import pytest
from helpers import assert_close, make_model, ort_run, random_feeds, tensor_info
from onnx import helper

from tensorc.frontend.onnx import import_onnx
from tensorc.ir.graph import Graph, verify
from tensorc.ops.interpret import check_types, run_reference

RNG = np.random.default_rng(1)


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape), dtype=dtype)


def node_model(op: str, node_inputs: Sequence[str], inputs: Mapping[str, Any],
               inits: Mapping[str, np.ndarray] | None = None, opset: int = 17,
               outputs: Sequence[str] = ("y",), **attrs: Any) -> onnx.ModelProto:
    """A one-node model. ``inputs`` maps a graph input to its shape or (shape, dtype)."""
    infos = []
    for name, spec in inputs.items():
        shape, dtype = spec if isinstance(spec, tuple) and isinstance(spec[1], str) \
            else (spec, "float32")
        infos.append(tensor_info(name, dtype, shape))
    node = helper.make_node(op, list(node_inputs), list(outputs), name=f"{op.lower()}_node",
                            **attrs)
    return make_model([node], infos, [o for o in outputs if o], opset=opset, initializers=inits)


def check(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray] | None = None,
          shapes: Mapping[str, Sequence[int]] | None = None, rtol: float = 1e-4,
          atol: float = 1e-5) -> Graph:
    """Import ``model``, check the graph, and compare run_reference with onnxruntime."""
    graph = import_onnx(model, input_shapes=shapes)
    verify(graph)
    check_types(graph)
    feeds = dict(feeds) if feeds is not None else random_feeds(model, shapes)
    assert_close(run_reference(graph, feeds), ort_run(model, feeds), rtol=rtol, atol=atol)
    return graph


# elementwise ----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Log", "Sqrt"])
@pytest.mark.parametrize("shape", [[7], [2, 3, 5]])
def test_unary(op, shape):
    x = rand(*shape)
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + 0.1
    check(node_model(op, ["x"], {"x": shape}), {"x": x})


@pytest.mark.parametrize("alpha", [None, 0.2])
def test_leaky_relu(alpha):
    attrs = {} if alpha is None else {"alpha": alpha}
    check(node_model("LeakyRelu", ["x"], {"x": [3, 4]}, **attrs))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow"])
@pytest.mark.parametrize("a, b", [([2, 3], [2, 3]), ([2, 3, 4], [4]), ([1, 5], [3, 1]),
                                  ([], [2, 2]), ([4, 1, 6, 1], [5, 1, 7])])
def test_binary_broadcast(op, a, b):
    x, y = rand(*a), rand(*b)
    if op == "Pow":
        x = np.asarray(np.abs(x) + 0.5, "float32")
    if op == "Div":
        y = np.asarray(np.where(np.abs(y) < 0.1, 1.0, y), "float32")
    check(node_model(op, ["x", "w"], {"x": a, "w": b}), {"x": x, "w": y})


def test_binary_with_initializer_and_integers():
    check(node_model("Mul", ["x", "k"], {"x": [2, 3]}, {"k": np.array(3.0, "float32")}))
    a = np.array([7, -7, 7, -7, 9], np.int32)
    b = np.array([2, 2, -2, -2, 4], np.int32)
    check(node_model("Div", ["a", "b"], {"a": ([5], "int32"), "b": ([5], "int32")}),
          {"a": a, "b": b})


def test_pow_with_integer_exponent():
    model = node_model("Pow", ["x", "e"], {"x": [3, 2]}, {"e": np.array([2, 3], np.int64)},
                       opset=13)
    check(model, {"x": rand(3, 2)})


def test_variadic_sum_max_min():
    for op in ("Sum", "Max", "Min"):
        check(node_model(op, ["a", "b", "c"], {"a": [2, 3], "b": [3], "c": [1, 3]}))


@pytest.mark.parametrize("to, name", [(onnx.TensorProto.INT32, "int32"),
                                      (onnx.TensorProto.FLOAT, "float32"),
                                      (onnx.TensorProto.DOUBLE, "float64")])
def test_cast(to, name):
    graph = check(node_model("Cast", ["x"], {"x": [2, 5]}, to=to), {"x": rand(2, 5) * 10})
    assert graph.outputs[0].type.dtype == name


# Clip: attribute form (opset < 11) and input form with optional min / max.
@pytest.mark.parametrize("attrs", [{}, {"min": -0.5}, {"max": 0.25}, {"min": -1.0, "max": 1.0}])
def test_clip_attributes(attrs):
    check(node_model("Clip", ["x"], {"x": [4, 5]}, opset=10, **attrs))


@pytest.mark.parametrize("node_inputs, inits", [
    (["x"], {}), (["x", "lo"], {"lo": -0.5}), (["x", "", "hi"], {"hi": 0.3}),
    (["x", "lo", "hi"], {"lo": -1.0, "hi": 0.5}),
])
def test_clip_inputs(node_inputs, inits):
    arrays = {k: np.array(v, "float32") for k, v in inits.items()}
    check(node_model("Clip", node_inputs, {"x": [4, 5]}, arrays, opset=13))


def test_clip_with_computed_bounds():
    model = node_model("Clip", ["x", "lo", "hi"], {"x": [6], "lo": [], "hi": []}, opset=13)
    graph = check(model, {"x": rand(6), "lo": np.array(-0.3, "float32"),
                          "hi": np.array(0.4, "float32")})
    assert [n.op for n in graph.nodes] == ["maximum", "minimum"]


# matmul and gemm ------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", [([3, 4], [4, 5]), ([2, 3, 4], [4, 5]), ([2, 1, 3, 4],
                                                                          [5, 4, 2]),
                                  ([4], [4, 5]), ([2, 3, 4], [4]), ([4], [4]), ([7], [2, 7, 3])])
def test_matmul(a, b):
    check(node_model("MatMul", ["a", "b"], {"a": a, "b": b}))


@pytest.mark.parametrize("op, inputs, inits, attrs, core_op", [
    ("MatMul", {"x": [6, 1, 4]}, {"w": (4, 5)}, {}, "matmul"),
    ("ConvTranspose", {"x": [1, 4, 5, 5]}, {"w": (4, 3, 2, 2)}, {"strides": [2, 2]},
     "conv_transpose"),
    ("Conv", {"x": [1, 64, 5, 5]}, {"w": (64, 32, 3, 3)}, {"group": 2}, "conv"),
    ("Conv", {"x": [1, 4, 5, 6, 7]}, {"w": (8, 4, 3, 3, 3)}, {}, "conv")])
def test_convs_and_matmuls_import_as_onnx_means_them(op, inputs, inits, attrs, core_op):
    """The frontend imports ONNX semantics only: a grouped conv, a 3-D conv, a transposed
    conv, a batch of few-row products are one core op each (the graph pass lower_for_target
    rewrites them for speed; see tests/passes/test_lower_for_target.py)."""
    model = node_model(op, ["x", "w"], inputs, {k: rand(*s) for k, s in inits.items()},
                       **attrs)
    graph = check(model)
    assert [n.op for n in graph.nodes] == [core_op]
    assert graph.nodes[0].attrs.get("groups", 1) == attrs.get("group", 1)


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0)])
def test_gemm(trans_a, trans_b, alpha, beta):
    a_shape = [5, 3] if trans_a else [3, 5]
    b = rand(*([4, 5] if trans_b else [5, 4]))
    model = node_model("Gemm", ["a", "b", "c"], {"a": a_shape}, {"b": b, "c": rand(4)},
                       alpha=alpha, beta=beta, transA=trans_a, transB=trans_b)
    graph = check(model)
    # A constant transposed weight is transposed at import time.
    assert "transpose" not in [n.op for n in graph.nodes if n.inputs[0].name != "a"]


@pytest.mark.parametrize("c_shape", [None, [], [1], [3, 1], [3, 4]])
def test_gemm_bias_shapes(c_shape):
    inits = {"b": rand(5, 4)}
    node_inputs = ["a", "b"]
    if c_shape is not None:
        inits["c"] = rand(*c_shape)
        node_inputs.append("c")
    check(node_model("Gemm", node_inputs, {"a": [3, 5]}, inits, beta=0.5))


def test_gemm_runtime_operands():
    check(node_model("Gemm", ["a", "b"], {"a": [3, 5], "b": [4, 5]}, transB=1, alpha=3.0))


# convolution ----------------------------------------------------------------------------------
CONV_CASES = [
    # (x shape, w shape, attrs, bias)
    ([1, 3, 8, 8], [4, 3, 3, 3], {}, True),
    ([2, 3, 9, 7], [5, 3, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, True),
    ([1, 3, 10, 11], [4, 3, 3, 2], {"pads": [0, 1, 2, 0], "strides": [3, 2]}, False),
    ([1, 4, 9, 9], [6, 2, 3, 3], {"group": 2, "pads": [1, 1, 1, 1]}, True),
    ([1, 6, 7, 7], [6, 1, 3, 3], {"group": 6, "pads": [1, 1, 1, 1]}, True),  # depthwise
    ([1, 6, 7, 7], [12, 1, 3, 3], {"group": 6, "strides": [2, 2]}, False),   # multiplier 2
    ([1, 2, 12, 10], [3, 2, 3, 3], {"dilations": [2, 3]}, True),
    ([1, 3, 9, 8], [4, 3, 3, 3], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, True),
    ([1, 3, 9, 8], [4, 3, 4, 4], {"auto_pad": "SAME_LOWER", "strides": [2, 3]}, True),
    ([1, 3, 9, 8], [4, 3, 2, 2], {"auto_pad": "SAME_UPPER"}, False),
    ([1, 3, 9, 8], [4, 3, 3, 3], {"auto_pad": "VALID", "strides": [2, 2]}, True),
    ([1, 3, 9, 8], [4, 3, 3, 3], {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}, True),
    ([2, 3, 17], [4, 3, 5], {"strides": [2], "pads": [2, 1]}, True),                 # 1-D
    ([1, 2, 5, 6, 4], [3, 2, 2, 3, 2], {"pads": [1, 0, 1, 0, 1, 1]}, True),          # 3-D
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias", CONV_CASES)
def test_conv(x_shape, w_shape, attrs, bias):
    inits = {"w": rand(*w_shape)}
    if bias:
        inits["b"] = rand(w_shape[0])
    node_inputs = ["x", "w", "b"] if bias else ["x", "w"]
    check(node_model("Conv", node_inputs, {"x": x_shape}, inits, **attrs))


def test_conv_with_runtime_weight():
    check(node_model("Conv", ["x", "w"], {"x": [1, 2, 6, 6], "w": [3, 2, 3, 3]}, opset=11))


# pooling --------------------------------------------------------------------------------------
POOL_CASES = [
    ([1, 2, 8, 8], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ([1, 2, 7, 9], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ([1, 2, 7, 7], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ([1, 2, 6, 7], {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1,
                    "pads": [1, 0, 1, 1]}),
    # the last ceil-mode window would start in the end padding and is dropped
    ([1, 1, 4, 4], {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                    "ceil_mode": 1}),
    ([1, 2, 9, 8], {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ([1, 2, 9, 8], {"kernel_shape": [4, 4], "strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    ([1, 2, 9, 8], {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ([2, 3, 11], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ([1, 2, 5, 6, 7], {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2]}),
]


@pytest.mark.parametrize("shape, attrs", POOL_CASES)
def test_max_pool(shape, attrs):
    check(node_model("MaxPool", ["x"], {"x": shape}, opset=12, **attrs))


@pytest.mark.parametrize("dilations", [[2, 2], [1, 3]])
def test_max_pool_dilations(dilations):
    check(node_model("MaxPool", ["x"], {"x": [1, 2, 10, 11]}, kernel_shape=[2, 3],
                     dilations=dilations, strides=[1, 2]))


@pytest.mark.parametrize("shape, attrs", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(shape, attrs, count_include_pad):
    check(node_model("AveragePool", ["x"], {"x": shape}, opset=12,
                     count_include_pad=count_include_pad, **attrs))


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [[1, 3, 7, 5], [2, 4, 9], [1, 2, 3, 4, 5]])
def test_global_pool(op, shape):
    check(node_model(op, ["x"], {"x": shape}))


# normalization, reductions, softmax -----------------------------------------------------------
@pytest.mark.parametrize("opset", [9, 15])
@pytest.mark.parametrize("shape", [[2, 3], [1, 3, 5, 4]])
def test_batch_normalization(opset, shape):
    c = shape[1]
    inits = {"s": rand(c), "b": rand(c), "m": rand(c), "v": np.abs(rand(c)) + 0.2}
    check(node_model("BatchNormalization", ["x", "s", "b", "m", "v"], {"x": shape}, inits,
                     opset=opset, epsilon=1e-3))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0)])
def test_reduce(op, axes, keepdims):
    # ReduceSum takes axes as an input from opset 13, the others from opset 18.
    model = node_model(op, ["x"], {"x": [2, 3, 4]}, opset=11, keepdims=keepdims,
                       **({} if axes is None else {"axes": axes}))
    check(model)
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    node_inputs = ["x"] if axes is None else ["x", "axes"]
    check(node_model(op, node_inputs, {"x": [2, 3, 4]}, inits, opset=18, keepdims=keepdims))


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("shape, axis", [([3, 7], None), ([2, 3, 4], 1), ([2, 3, 4], -1),
                                         ([2, 3, 4, 5], 2), ([2, 3, 4], 0)])
def test_softmax(opset, shape, axis):
    attrs = {} if axis is None else {"axis": axis}
    x = rand(*shape) * 4
    check(node_model("Softmax", ["x"], {"x": shape}, opset=opset, **attrs), {"x": x})


def test_softmax_opset_11_flattens_from_axis():
    graph = check(node_model("Softmax", ["x"], {"x": [2, 3, 4]}, opset=11, axis=1))
    assert [n.op for n in graph.nodes] == ["reshape", "softmax", "reshape"]
    graph = check(node_model("Softmax", ["x"], {"x": [2, 3, 4]}, opset=13, axis=1))
    assert [n.op for n in graph.nodes] == ["softmax"]


# shapes and data movement ---------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3, None])
def test_flatten(axis):
    attrs = {} if axis is None else {"axis": axis}
    check(node_model("Flatten", ["x"], {"x": [2, 3, 4, 5]}, opset=13, **attrs))


@pytest.mark.parametrize("target, allowzero", [
    ([0, -1], 0), ([-1], 0), ([4, 0, 5, 2], 0), ([2, 60], 1), ([0, 3, 0, 5, -1], 0),
    ([6, -1, 1], 0),
])
def test_reshape(target, allowzero):
    model = node_model("Reshape", ["x", "shape"], {"x": [2, 3, 4, 5]},
                       {"shape": np.array(target, np.int64)}, opset=14, allowzero=allowzero)
    check(model)


def test_reshape_opset_1_attribute():
    model = node_model("Reshape", ["x"], {"x": [2, 3, 4]}, opset=1, shape=[0, -1])
    graph = import_onnx(model)
    assert graph.outputs[0].type.shape == (2, 12)


@pytest.mark.parametrize("perm", [None, [0, 2, 1, 3], [3, 1, 0, 2]])
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    check(node_model("Transpose", ["x"], {"x": [2, 3, 4, 5]}, **attrs))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = {"a": [2, 3, 4], "b": [2, 3, 4], "c": [2, 3, 4]}
    shapes["b"] = [s + 2 if i == axis % 3 else s for i, s in enumerate(shapes["b"])]
    check(node_model("Concat", ["a", "b", "c"], shapes, axis=axis))


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(opset):
    axes = [0, -1]
    if opset < 13:
        unsqueeze = helper.make_node("Unsqueeze", ["x"], ["u"], axes=axes)
        squeeze = helper.make_node("Squeeze", ["u"], ["y"], axes=[0])
        squeeze_all = helper.make_node("Squeeze", ["u"], ["z"])
        inits = {}
    else:
        unsqueeze = helper.make_node("Unsqueeze", ["x", "axes"], ["u"])
        squeeze = helper.make_node("Squeeze", ["u", "axes0"], ["y"])
        squeeze_all = helper.make_node("Squeeze", ["u"], ["z"])
        inits = {"axes": np.array(axes, np.int64), "axes0": np.array([0], np.int64)}
    model = make_model([unsqueeze, squeeze, squeeze_all], [tensor_info("x", "float32", [3, 4])],
                       ["u", "y", "z"], opset=opset, initializers=inits)
    graph = check(model)
    assert [v.type.shape for v in graph.outputs] == [(1, 3, 4, 1), (3, 4, 1), (3, 4)]


@pytest.mark.parametrize("opset", [11, 18])
def test_pad(opset):
    if opset < 18:
        model = node_model("Pad", ["x", "pads", "value"], {"x": [2, 3, 4]},
                           {"pads": np.array([0, 1, 2, 1, 0, 3], np.int64),
                            "value": np.array(1.5, "float32")}, opset=opset)
    else:
        model = node_model("Pad", ["x", "pads", "", "axes"], {"x": [2, 3, 4]},
                           {"pads": np.array([1, 2, 0, 3], np.int64),
                            "axes": np.array([1, -1], np.int64)}, opset=opset)
    check(model)


@pytest.mark.parametrize("opset", [7, 13])
def test_identity_and_dropout(opset):
    nodes = [helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("Dropout", ["i"], ["d", "mask"]),
             helper.make_node("Relu", ["d"], ["y"])]
    # onnxruntime fills the old float mask (opset < 12) with zeros, the bool one with true.
    outputs = ["y", "mask"] if opset >= 12 else ["y"]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 5])], outputs, opset=opset)
    graph = check(model)
    assert [n.op for n in graph.nodes] == ["relu"]


def test_constant_forms():
    nodes = [
        helper.make_node("Constant", [], ["t"], value=onnx.numpy_helper.from_array(
            np.arange(6, dtype=np.float32).reshape(2, 3))),
        helper.make_node("Constant", [], ["f"], value_float=2.5),
        helper.make_node("Constant", [], ["fs"], value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Constant", [], ["i"], value_int=4),
        helper.make_node("Constant", [], ["is"], value_ints=[2, 3]),
        helper.make_node("Add", ["x", "t"], ["a"]),
        helper.make_node("Mul", ["a", "f"], ["b"]),
        helper.make_node("Add", ["b", "fs"], ["y"]),
        helper.make_node("Reshape", ["y", "is"], ["z"]),
        helper.make_node("Cast", ["i"], ["ic"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Mul", ["z", "ic"], ["out"]),
    ]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 3])], ["out"], opset=13)
    check(model)


def test_shape_gather_concat_reshape_folds():
    """The classic exported flatten: x.view(x.size(0), -1)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
             "minus_one": np.array([-1], np.int64)}
    model = make_model(nodes, [tensor_info("x", "float32", ["N", 3, 4, 5])], ["y"], opset=13,
                       initializers=inits)
    graph = check(model, shapes={"x": (2, 3, 4, 5)})
    assert [n.op for n in graph.nodes] == ["reshape"]
    assert graph.nodes[0].attrs == {"shape": (2, 60)}
    assert not graph.constants  # the shape arithmetic left nothing behind


def test_shape_slice_and_constant_of_shape():
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
             helper.make_node("ConstantOfShape", ["s"], ["c"],
                              value=onnx.numpy_helper.from_array(np.array([0.5], np.float32))),
             helper.make_node("Add", ["x", "c"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 5, 5, 5])], ["y"], opset=15)
    check(model)


# names ----------------------------------------------------------------------------------------
def test_graph_names_inputs_and_outputs_keep_onnx_names():
    nodes = [helper.make_node("Relu", ["input.1"], ["5"]),
             helper.make_node("Identity", ["input.1"], ["copy"]),
             helper.make_node("Identity", ["5"], ["also"]),
             helper.make_node("Sigmoid", ["5"], ["1"])]
    model = make_model(nodes, [tensor_info("input.1", "float32", [2, 2])],
                       ["5", "copy", "also", "1", "k"], opset=13, name="net",
                       initializers={"k": np.ones(2, np.float32)})
    graph = check(model)
    assert graph.name == "net"
    assert [v.name for v in graph.inputs] == ["input.1"]
    assert [v.name for v in graph.outputs] == ["5", "copy", "also", "1", "k"]


def test_initializer_listed_as_input_is_a_constant():
    model = node_model("Add", ["x", "w"], {"x": [2, 3], "w": [3]}, {"w": rand(3)})
    graph = import_onnx(model)
    assert [v.name for v in graph.inputs] == ["x"]
    assert [v.name for v in graph.constants] == ["w"]


def test_import_from_file(tmp_path):
    model = node_model("Relu", ["x"], {"x": [2, 3]})
    path = tmp_path / "relu.onnx"
    onnx.save(model, str(path))
    graph = import_onnx(path)
    assert [n.op for n in graph.nodes] == ["relu"]
    assert import_onnx(str(path)).outputs[0].name == "y"

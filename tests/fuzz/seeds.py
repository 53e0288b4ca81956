"""Seed models for the fuzzer: single-op models like ONNX's node tests, and the bundled
models of ``models/`` that are small enough to compile in a fraction of a second."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(name, nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10  # the pinned onnxruntime refuses onnx's default IR version
    return model


def _rand(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(
        np.float32)


def _single_op_seeds() -> dict[str, onnx.ModelProto]:
    n = helper.make_node
    x23, x4 = ("x", F, [2, 3]), ("x", F, [1, 4, 5, 5])
    seeds = {
        "relu": _model("relu", [n("Relu", ["x"], ["y"], name="relu")], [x23], [("y", F)]),
        "softmax": _model("softmax", [n("Softmax", ["x"], ["y"], axis=1, name="sm")], [x23],
                          [("y", F)]),
        "reduce_mean": _model("reduce_mean", [n("ReduceMean", ["x"], ["y"], axes=[1],
                                                keepdims=1, name="mean")], [x23], [("y", F)],
                              opset=13),
        "argmax": _model("argmax", [n("ArgMax", ["x"], ["y"], axis=1, keepdims=0,
                                      name="argmax")], [x23], [("y", I64)]),
        "gemm": _model("gemm", [n("Gemm", ["x", "w", "b"], ["y"], transB=1, alpha=0.5,
                                  name="gemm")], [x23], [("y", F)],
                       [("w", _rand(4, 3)), ("b", _rand(4))]),
        "conv": _model("conv", [n("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1], strides=[1, 1], group=1, name="conv")],
                       [x4], [("y", F)], [("w", _rand(2, 4, 3, 3)), ("b", _rand(2))]),
        "max_pool": _model("max_pool", [n("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                          strides=[2, 2], name="pool")], [x4], [("y", F)]),
        "avg_pool": _model("avg_pool", [n("AveragePool", ["x"], ["y"], kernel_shape=[3, 3],
                                          pads=[1, 1, 1, 1], count_include_pad=0,
                                          name="avg")], [x4], [("y", F)]),
        "gather": _model("gather", [n("Gather", ["x", "i"], ["y"], axis=1, name="gather")],
                         [x23, ("i", I64, [4])], [("y", F)]),
        "gather_const": _model("gather_const", [n("Gather", ["x", "i"], ["y"], axis=0,
                                                  name="gather")], [x23], [("y", F)],
                               [("i", np.array([1, 0, -1], np.int64))]),
        "gather_elements": _model("gather_elements", [n("GatherElements", ["x", "i"], ["y"],
                                                        axis=1, name="ge")],
                                  [x23, ("i", I64, [2, 2])], [("y", F)]),
        "gather_nd": _model("gather_nd", [n("GatherND", ["x", "i"], ["y"], name="gnd")],
                            [x23, ("i", I64, [2, 2])], [("y", F)]),
        "scatter_elements": _model("scatter_elements", [n(
            "ScatterElements", ["x", "i", "u"], ["y"], axis=1, name="se")],
            [x23, ("i", I64, [2, 2]), ("u", F, [2, 2])], [("y", F)]),
        "scatter_nd": _model("scatter_nd", [n("ScatterND", ["x", "i", "u"], ["y"], name="snd")],
                             [x23, ("i", I64, [1, 1]), ("u", F, [1, 3])], [("y", F)]),
        "split": _model("split", [n("Split", ["x"], ["y", "z"], axis=1, num_outputs=2,
                                    name="split")], [("x", F, [2, 4])], [("y", F), ("z", F)],
                        opset=18),
        "concat": _model("concat", [n("Concat", ["x", "x"], ["y"], axis=0, name="concat")],
                         [x23], [("y", F)]),
        "transpose": _model("transpose", [n("Transpose", ["x"], ["y"], perm=[1, 0],
                                            name="t")], [x23], [("y", F)]),
        "reshape": _model("reshape", [n("Reshape", ["x", "s"], ["y"], name="reshape")], [x23],
                          [("y", F)], [("s", np.array([3, -1], np.int64))]),
        "group_norm": _model("group_norm", [n("GroupNormalization", ["x", "s", "b"], ["y"],
                                              num_groups=2, epsilon=1e-5, name="gn")],
                             [x4], [("y", F)], [("s", _rand(4)), ("b", _rand(4))], opset=21),
        "layer_norm": _model("layer_norm", [n("LayerNormalization", ["x", "s", "b"], ["y"],
                                              axis=-1, name="ln")], [x23], [("y", F)],
                             [("s", _rand(3)), ("b", _rand(3))]),
        "gru": _model("gru", [n("GRU", ["x", "w", "r", "b"], ["y", "h"], hidden_size=2,
                                name="gru")], [("x", F, [3, 1, 2])], [("y", F), ("h", F)],
                      [("w", _rand(1, 6, 2)), ("r", _rand(1, 6, 2)), ("b", _rand(1, 12))]),
        "slice": _model("slice", [n("Slice", ["x", "s", "e", "a"], ["y"], name="slice")],
                        [x23], [("y", F)], [("s", np.array([0, 1], np.int64)),
                                            ("e", np.array([2, 3], np.int64)),
                                            ("a", np.array([0, 1], np.int64))]),
        "clip": _model("clip", [n("Clip", ["x", "lo", "hi"], ["y"], name="clip")], [x23],
                       [("y", F)], [("lo", np.array(-0.5, np.float32)),
                                    ("hi", np.array(0.5, np.float32))]),
        "cumsum": _model("cumsum", [n("CumSum", ["x", "a"], ["y"], exclusive=0, reverse=1,
                                      name="cumsum")], [x23], [("y", F)],
                         [("a", np.array(1, np.int64))]),
        "topk": _model("topk", [n("TopK", ["x", "k"], ["v", "i"], axis=1, largest=1,
                                  name="topk")], [x23], [("v", F), ("i", I64)],
                       [("k", np.array([2], np.int64))]),
        "pad": _model("pad", [n("Pad", ["x", "p"], ["y"], mode="constant", name="pad")], [x23],
                      [("y", F)], [("p", np.array([0, 1, 1, 0], np.int64))]),
        "matmul_add": _model("matmul_add", [n("MatMul", ["x", "w"], ["m"], name="mm"),
                                            n("Add", ["m", "b"], ["y"], name="add")], [x23],
                             [("y", F)], [("w", _rand(3, 5)), ("b", _rand(5))]),
    }
    return seeds


def seed_models() -> dict[str, onnx.ModelProto]:
    """Name -> model: the single-op seeds, then the bundled small models."""
    seeds = _single_op_seeds()
    for name in ("mlp", "lenet5"):
        path = ROOT / "models" / f"{name}.onnx"
        if path.is_file():
            model = onnx.load(str(path))
            model.ir_version = min(model.ir_version, 10)
            seeds[name] = model
    return seeds

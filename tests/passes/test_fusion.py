"""Fusion follows the data: kernel counts of small models built for it, each checked against
onnxruntime. An epilogue may read the anchor's output several times; elementwise producers run
inside the reduction they feed; normalizations are one kernel; nothing is computed twice."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model, ort_run, tensor_info
from onnx import helper

import tensorc

RNG = np.random.default_rng(7)


def _kernels(model, feeds) -> list[tuple[str, ...]]:
    """The ops of each kernel of the compiled model, checked against onnxruntime first."""
    mod = tensorc.compile(model, num_threads=1)
    got = mod.run(feeds)
    want = ort_run(model, feeds)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=2e-5, err_msg=name)
    return [k.ops for k in mod.kernels]


def _conv_model(tail: list, out: str = "y", channels: int = 8, extra_inits=None):
    w = (RNG.standard_normal((channels, 4, 3, 3)) * 0.3).astype(np.float32)
    b = RNG.standard_normal(channels).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), *tail]
    inits = {"w": w, "b": b, **(extra_inits or {})}
    return make_model(nodes, [tensor_info("x", "float32", (1, 4, 9, 11))], [out],
                      initializers=inits, opset=18), \
        {"x": RNG.standard_normal((1, 4, 9, 11)).astype(np.float32)}


def _scalar(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


def _n(op: str, inputs: list[str], output: str, **attrs):
    return helper.make_node(op, inputs, [output], **attrs)


EPILOGUES = {
    "silu": [_n("Sigmoid", ["c"], "s"), _n("Mul", ["c", "s"], "y")],
    "gelu_erf": [_n("Div", ["c", "sqrt2"], "d"), _n("Erf", ["d"], "e"),
                 _n("Add", ["e", "one"], "e1"), _n("Mul", ["c", "e1"], "m"),
                 _n("Mul", ["m", "half"], "y")],
    "gelu_tanh": [_n("Pow", ["c", "three"], "p"), _n("Mul", ["p", "k"], "pk"),
                  _n("Add", ["c", "pk"], "inner"), _n("Mul", ["inner", "r2pi"], "a"),
                  _n("Tanh", ["a"], "t"), _n("Add", ["t", "one"], "t1"),
                  _n("Mul", ["c", "t1"], "m"), _n("Mul", ["m", "half"], "y")],
    "hardswish": [_n("HardSigmoid", ["c"], "h", alpha=1 / 6, beta=0.5),
                  _n("Mul", ["c", "h"], "y")],
    "mish": [_n("Softplus", ["c"], "sp"), _n("Tanh", ["sp"], "t"), _n("Mul", ["c", "t"], "y")],
    "residual_relu": [_n("Add", ["c", "x8"], "r"), _n("Relu", ["r"], "y")],
}
CONSTANTS = {"sqrt2": _scalar(2 ** 0.5), "one": _scalar(1.0), "half": _scalar(0.5),
             "three": _scalar(3.0), "k": _scalar(0.044715), "r2pi": _scalar((2 / np.pi) ** 0.5)}


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_conv_with_an_activation_dag_is_one_kernel(name) -> None:
    tail = EPILOGUES[name]
    used = {i for n in tail for i in n.input}
    inits = {k: v for k, v in CONSTANTS.items() if k in used}
    if "x8" in used:
        inits["x8"] = RNG.standard_normal((1, 8, 9, 11)).astype(np.float32)
    model, feeds = _conv_model(tail, extra_inits=inits)
    kernels = _kernels(model, feeds)
    assert len(kernels) == 1, kernels
    assert kernels[0][0] == "conv"


def test_an_epilogue_never_enlarges_the_anchor() -> None:
    # squeeze-and-excite: a 1x1 map's gate times the full map must not recompute the conv per
    # element of the map: the conv on the pooled map and the scaling are separate kernels
    w = (RNG.standard_normal((4, 4, 1, 1)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]),
             helper.make_node("Conv", ["p", "w"], ["g"]),
             helper.make_node("Sigmoid", ["g"], ["s"]),
             helper.make_node("Mul", ["x", "s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", (1, 4, 9, 11))], ["y"],
                       initializers={"w": w})
    kernels = _kernels(model, {"x": RNG.standard_normal((1, 4, 9, 11)).astype(np.float32)})
    assert ("conv", "sigmoid") in kernels
    assert ("mul",) in kernels


def test_a_value_read_outside_the_group_stays_a_kernel_output() -> None:
    # c feeds both the epilogue and the second output: it must be stored, so relu cannot
    # swallow it
    model, feeds = _conv_model([helper.make_node("Relu", ["c"], ["y"])])
    model.graph.output.append(helper.make_empty_tensor_value_info("c"))
    kernels = _kernels(model, feeds)
    assert kernels.count(("relu",)) == 1 and ("conv", "add") in kernels


def _single(nodes, shape, inits=None, opset=18):
    model = make_model(nodes, [tensor_info("x", "float32", shape)], ["y"],
                       initializers=inits or {}, opset=opset)
    return model, {"x": RNG.standard_normal(shape).astype(np.float32)}


def _layer_norm_nodes(axis=-1):
    return [helper.make_node("ReduceMean", ["x"], ["m"], axes=[axis]),
            helper.make_node("Sub", ["x", "m"], ["d"]),
            helper.make_node("Pow", ["d", "two"], ["d2"]),
            helper.make_node("ReduceMean", ["d2"], ["v"], axes=[axis]),
            helper.make_node("Add", ["v", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["s"]),
            helper.make_node("Div", ["d", "s"], ["n"]),
            helper.make_node("Mul", ["n", "g"], ["ng"]),
            helper.make_node("Add", ["ng", "b"], ["y"])]


def _rms_norm_nodes():
    return [helper.make_node("Mul", ["x", "x"], ["x2"]),
            helper.make_node("ReduceMean", ["x2"], ["v"], axes=[-1]),
            helper.make_node("Add", ["v", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["s"]),
            helper.make_node("Reciprocal", ["s"], ["r"]),
            helper.make_node("Mul", ["x", "r"], ["n"]),
            helper.make_node("Mul", ["n", "g"], ["y"])]


def _norm_case(name):
    d = 48
    g = RNG.standard_normal(d).astype(np.float32)
    b = RNG.standard_normal(d).astype(np.float32)
    c = 6
    gc, bc = RNG.standard_normal(c).astype(np.float32), RNG.standard_normal(c).astype(np.float32)
    eps = {"two": _scalar(2.0), "eps": _scalar(1e-5)}
    cases = {
        "softmax": ([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], (2, 3, 5, 37), {}),
        "log_softmax": ([helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)], (4, 100), {}),
        "layer_norm": ([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
                       (2, 7, d), {"g": g, "b": b}),
        "layer_norm_spelled_out": (_layer_norm_nodes(), (2, 7, d), {"g": g, "b": b, **eps}),
        "rms_norm_spelled_out": (_rms_norm_nodes(), (2, 7, d), {"g": g, **eps}),
        "group_norm": ([helper.make_node("GroupNormalization", ["x", "g", "b"], ["y"],
                                         num_groups=3)], (2, c, 5, 7), {"g": gc, "b": bc}),
        "instance_norm": ([helper.make_node("InstanceNormalization", ["x", "g", "b"], ["y"])],
                          (2, c, 5, 7), {"g": gc, "b": bc}),
    }
    nodes, shape, inits = cases[name]
    opset = {"group_norm": 21, "layer_norm_spelled_out": 17, "rms_norm_spelled_out": 17}
    return _single(nodes, shape, inits, opset=opset.get(name, 18))


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "layer_norm_spelled_out",
                                  "rms_norm_spelled_out", "group_norm", "instance_norm"])
def test_normalizations_are_one_kernel(name) -> None:
    kernels = _kernels(*_norm_case(name))
    assert len(kernels) == 1, kernels


def test_attention_softmax_is_one_kernel() -> None:
    # scores = q @ k^T * scale + mask; softmax; @ v
    q = RNG.standard_normal((1, 2, 16, 8)).astype(np.float32)
    k = RNG.standard_normal((1, 2, 8, 16)).astype(np.float32)
    v = RNG.standard_normal((1, 2, 16, 8)).astype(np.float32)
    mask = np.triu(np.full((16, 16), -1e4, np.float32), 1)
    nodes = [helper.make_node("MatMul", ["x", "k"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Add", ["ss", "mask"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", q.shape)], ["y"],
                       initializers={"k": k, "v": v, "mask": mask,
                                     "scale": _scalar(8 ** -0.5)})
    kernels = _kernels(model, {"x": q})
    assert kernels.count(("softmax",)) == 1, kernels
    assert len(kernels) == 3


@pytest.mark.parametrize("producer", ["square", "exp", "abs_scaled"])
def test_elementwise_producers_run_inside_the_reduction(producer) -> None:
    nodes = {"square": [helper.make_node("Mul", ["x", "x"], ["p"])],
             "exp": [helper.make_node("Exp", ["x"], ["p"])],
             "abs_scaled": [helper.make_node("Abs", ["x"], ["a"]),
                            helper.make_node("Mul", ["a", "two"], ["p"])]}[producer]
    nodes = [*nodes, helper.make_node("ReduceSum", ["p", "axes"], ["y"], keepdims=1)]
    model, feeds = _single(nodes, (3, 5, 40), {"axes": np.array([-1]), "two": _scalar(2.0)})
    kernels = _kernels(model, feeds)
    assert len(kernels) == 1 and kernels[0][-1] == "reduce_sum", kernels

"""Convs over symbolic heights and widths on blocked tensors (ops/nn/conv/blocked_symbolic.py,
conv/blocked_window.py): chains of two convs, dense or depthwise (with a pool between where
asked), compiled once with H and W symbolic, run at every width whose output row leaves each
remainder of the register tile (widths 1-9 and primes past them), at 1 and 2 threads, against
onnxruntime. A pointwise conv whose filters fill no whole blocks (a detector head's 18) runs
as one GEMM over the map's positions (conv/conv_gemm.py), between the layout transforms back
to plain."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import tensorc

WIDTHS = (*range(1, 10), 13, 23, 37)


def _conv(nodes, inits, rng, x, c_in, c_out, kernel, stride=1, dilation=1, pads=None,
          group=1):
    name = f"c{len(nodes)}"
    w = rng.standard_normal((c_out, c_in // group, *kernel)).astype(np.float32) / \
        np.sqrt(c_in // group)
    b = rng.standard_normal(c_out).astype(np.float32)
    inits += [helper.make_tensor(f"{name}_w", TensorProto.FLOAT, w.shape, w.ravel()),
              helper.make_tensor(f"{name}_b", TensorProto.FLOAT, b.shape, b)]
    pads = pads if pads is not None else [dilation * (k // 2) for k in kernel] * 2
    nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name],
                                  kernel_shape=list(kernel), strides=[stride, stride],
                                  dilations=[dilation, dilation], pads=pads, group=group))
    nodes.append(helper.make_node("Relu", [name], [f"{name}_relu"]))
    return f"{name}_relu"


MAX_2X2 = ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]})


def _chain(c_in, first: dict, second: dict, pool: tuple | None = None):
    rng = np.random.default_rng(c_in)
    nodes, inits = [], []
    c_mid = first["c_out"]
    y = _conv(nodes, inits, rng, "x", c_in, **first)
    if pool:
        op, attrs = pool
        nodes.append(helper.make_node(op, [y], ["pooled"], **attrs))
        y = "pooled"
    y = _conv(nodes, inits, rng, y, c_mid, **second)
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                       ["n", c_in, "h", "w"])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


CASES = {
    "3x3 then 3x3": (16, {"c_out": 16, "kernel": (3, 3)}, {"c_out": 24, "kernel": (3, 3)},
                     None, True),
    "stem 3x3/2 then 3x3/2": (3, {"c_out": 8, "kernel": (3, 3), "stride": 2},
                              {"c_out": 16, "kernel": (3, 3), "stride": 2}, None, True),
    "dilated, pointwise": (8, {"c_out": 16, "kernel": (3, 3), "dilation": 2},
                           {"c_out": 8, "kernel": (1, 1)}, None, True),
    "3x3 then depthwise 3x3/2": (8, {"c_out": 16, "kernel": (3, 3)},
                                 {"c_out": 16, "kernel": (3, 3), "stride": 2, "group": 16},
                                 None, True),
    "a pointwise head of odd filters": (8, {"c_out": 16, "kernel": (3, 3)},
                                        {"c_out": 18, "kernel": (1, 1)}, None, False),
    "pool between, a column kernel": (8, {"c_out": 8, "kernel": (3, 3)},
                                      {"c_out": 16, "kernel": (5, 1), "pads": [0, 0, 0, 0]},
                                      MAX_2X2, True),
    # padded average pools: the divisor counts the live taps, or the padded window, over a
    # run-time size (a 64-bit dim against 32-bit window arithmetic failed to compile)
    "padded average pool between": (8, {"c_out": 16, "kernel": (3, 3)},
                                    {"c_out": 16, "kernel": (3, 3)},
                                    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                     "pads": [1, 1, 1, 1]}), True),
    "padded average pool counting the padding": (
        8, {"c_out": 16, "kernel": (3, 3)}, {"c_out": 8, "kernel": (1, 1)},
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2],
                         "count_include_pad": 1}), True),
    # a ceil-mode window over a dim that is itself an expression (a strided conv's output)
    "ceil-mode pool after a strided conv": (
        3, {"c_out": 16, "kernel": (3, 3), "stride": 2},
        {"c_out": 16, "kernel": (3, 3)},
        ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}), True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_symbolic_blocked_chain_matches_onnxruntime_at_every_remainder(case):
    c_in, first, second, pool, blocked = CASES[case]
    model = _chain(c_in, first, second, pool)
    graph = tensorc.inspect(model, stage="graph")
    assert ("layout_block" in graph and "layout_transform" in graph) == blocked, graph
    module = tensorc.compile(model, cache=False)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    height = 12 if pool else 5
    for k, width in enumerate(WIDTHS):
        w = width + (3 if pool or "/2" in case else 0)
        x = rng.standard_normal((1 + k % 3, c_in, height + k % 4, w)).astype(np.float32)
        module.num_threads = 1 + k % 2
        (got,) = module.run({"x": x}).values()
        (expected,) = session.run(None, {"x": x})
        assert got.shape == expected.shape, (case, x.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{case} at {x.shape}")

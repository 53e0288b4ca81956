"""Convs over symbolic heights and widths on blocked tensors (ops/nn/conv/blocked_symbolic.py,
conv/blocked_window.py): chains of two convs, dense or depthwise (with a pool between where
asked), compiled once with H and W symbolic, run at every width whose output row leaves each
remainder of the register tile (widths 1-9 and primes past them), at 1 and 2 threads, against
onnxruntime. A pointwise conv whose filters fill no whole blocks (a detector head's 18) runs
as one GEMM over the map's positions (conv/conv_gemm.py), between the layout transforms back
to plain."""
from __future__ import annotations

import re

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


def _single_conv(c_in, c_out, kernel, pads=None, batch="n"):
    rng = np.random.default_rng(c_out)
    nodes, inits = [], []
    y = _conv(nodes, inits, rng, "x", c_in, c_out, kernel, pads=pads)
    graph = helper.make_graph(
        nodes, "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [batch, c_in, "h", "w"])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _matches_onnxruntime(model, shapes):
    module = tensorc.compile(model, cache=False)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        for threads in (1, 2):
            module.num_threads = threads
            (got,) = module.run({"x": x}).values()
            (expected,) = session.run(None, {"x": x})
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{shape} on {threads} threads")


def test_a_blocked_conv_over_small_maps_gets_its_own_register_tile():
    """The conv's small-dims variant (compiler/variants.py) is scheduled at small dims: the
    kernel's own dims (the padded width, an expression of the graph's) take the small hint,
    not the large one their expression gives (which made the small schedule the large one's,
    so no conv had a variant). Over a row of 2, 2 outputs x 4 filter blocks, not a 6-output
    tile's remainder of 2 x 2 blocks; results at small and odd maps against onnxruntime.
    (The small variant takes the row dims small and leaves a symbolic batch at its hint,
    under which this conv's large form is another formulation: the batch is concrete
    here; the symbolic batch's module is checked at the same maps.)"""
    model = _single_conv(16, 32, (3, 3), batch=1)
    loops = tensorc.inspect(model, stage="loops")
    assert re.search(r"(?m)^func k\d+_fused_conv\w*_small\(", loops), loops[:2000]
    maps = [(1, 1), (1, 4), (5, 5), (2, 3), (7, 2), (4, 9), (3, 13)]
    _matches_onnxruntime(model, [(1, 16, h, w) for h, w in maps])
    _matches_onnxruntime(_single_conv(16, 32, (3, 3)),
                         [(n, 16, h, w) for n, (h, w) in zip([1, 1, 2, 1, 3, 1, 2], maps)])


def test_a_pointwise_head_over_a_small_map_runs_narrow_vectors():
    """A pointwise conv of 18 filters over the map's positions (conv_gemm.py): a map of fewer
    than 16 positions is all last tile, whose remainder reads dims alone; it runs 4-lane
    vectors where at most 4 positions remain, 8-lane where at most 8
    (passes/loop/narrow_tails.py), else 16-lane; every count of positions modulo 16 against
    onnxruntime."""
    model = _single_conv(16, 18, (1, 1), pads=[0, 0, 0, 0])
    loops = tensorc.inspect(model, stage="loops")
    main = loops[loops.index("func k0_fused_conv_add_relu("):]
    assert re.search(r"if \(\(.*h\*w.*\) <= 4\)", main), main
    assert re.search(r"for \(p: vectorized, 0, 4\)", main), main
    assert re.search(r"for \(p: vectorized, 0, 8\)", main), main
    _matches_onnxruntime(model, [(1, 16, h, w) for h, w in
                                 [(1, 1), (1, 4), (2, 3), (5, 5), (1, 7), (3, 3), (2, 6),
                                  (1, 13), (4, 4), (3, 7)]])

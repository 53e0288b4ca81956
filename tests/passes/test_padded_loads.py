"""The padded-load idiom over a symbolic bound (passes/loop/padded_loads.py): a clamp at
both ends, ``min(max(u, 0), n - 1)`` under ``u >= 0 && u < n`` (a padding's left border over
a run-time width), is written so that codegen strips both clamps and loads the row with one
masked load, where it gathered every lane; the values stay numpy's at every width."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import tensorc
from tensorc.codegen.llvm.vector_index import strip_justified_clamps
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer
from tensorc.passes.loop.padded_loads import _select


def test_a_clamp_at_both_ends_under_its_bounds_becomes_strippable():
    j, width, base = E.Var("j"), E.Var("width"), E.Var("base")
    u = j - 1
    cond = E.Logical("and", E.Compare("ge", u, E.const(0)), E.Compare("lt", u, width))
    row = Buffer("row", (64,), "float32")
    load = E.Load(row, [base + E.minimum(E.maximum(u, E.const(0)), width - 1)])
    before = E.Select(cond, load, E.const(0.0, "float32"))
    # as it was, the upper clamp to a run-time bound stayed: a gather
    assert "min(" in str(strip_justified_clamps(load.indices[0], cond))
    after = _select(before)
    assert str(after.cond) == "((j - 1) >= 0 && (j - 1 - width) < 0)", after
    stripped = strip_justified_clamps(after.true_value.indices[0], after.cond)
    assert stripped is not None and "min(" not in str(stripped) and \
        "max(" not in str(stripped), stripped
    # the same element wherever the condition holds
    for w in (1, 2, 5):
        for jv in range(1, w + 1):
            env = {j: E.const(jv), width: E.const(w), base: E.const(10)}
            assert _value(stripped, env) == _value(load.indices[0], env) == 10 + jv - 1


def _value(e: E.Expr, env: dict) -> int | None:
    return arith.as_const_int(arith.simplify(E.substitute(e, env)))


def test_a_clamp_whose_lower_bound_no_conjunct_justifies_stays():
    j, width = E.Var("j"), E.Var("width")
    u = j - 1
    cond = E.Compare("lt", u, width)            # no u >= 0: max(u, 0) must stay
    row = Buffer("row", (64,), "float32")
    sel = E.Select(cond, E.Load(row, [E.minimum(E.maximum(u, E.const(0)), width - 1)]),
                   E.const(0.0, "float32"))
    after = _select(sel)
    assert after is None or "max(" in str(after.true_value.indices[0])


def _pad_model():
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["y"])], "pad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_symbolic_padding_loads_rows_without_gathers_and_matches_numpy():
    model = _pad_model()
    llvm = tensorc.inspect(model, stage="llvm")
    assert "masked.gather" not in llvm
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(0)
    for k, (h, w) in enumerate([(1, 1), (1, 4), (5, 5), (2, 3), (3, 7), (4, 9), (2, 17)]):
        x = rng.standard_normal((1 + k % 2, 3, h, w)).astype(np.float32)
        for threads in (1, 2):
            module.num_threads = threads
            np.testing.assert_array_equal(module.run({"x": x})["y"],
                                          np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))),
                                          err_msg=f"{x.shape} on {threads} threads")

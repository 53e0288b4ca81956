"""Softmax over rows of symbolic length: one artifact for every shape, matching numpy at
sizes of 1, primes and rows that are no whole vector, on one thread and on two (each thread's
rows keep their exp values in their own slice of one block). The row keeps exp(x - max)
(one exp per element), its last partial vector is read with masked loads, not gathers, and
the block is malloc'd once per call, not in the parallel loop."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorc
from tests.ops.test_softmax_rows import _model as rows_model
from tests.ops.test_softmax_rows import _numpy

DIMS = ["batch", "heads", "seq", "keys"]


def _model(op: str):
    return rows_model(op, DIMS)


@pytest.fixture(scope="module", params=["Softmax", "LogSoftmax"])
def compiled(request):
    return request.param, tensorc.compile(_model(request.param))


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 2, 1, 7), (3, 2, 5, 26), (2, 4, 13, 97),
                                   (1, 3, 2, 1031), (37, 4, 3, 17)])
def test_symbolic_rows_match_numpy(compiled, shape):
    op, mod = compiled
    x = np.random.default_rng(sum(shape)).uniform(-6, 6, shape).astype(np.float32)
    x.reshape(-1, shape[-1])[0, -1] = -1e4      # an exp that underflows to zero
    for threads in (1, 2):
        mod.num_threads = threads
        out = mod.run({"x": x})["y"]
        np.testing.assert_allclose(out, _numpy(op, x), rtol=2e-5, atol=1e-6,
                                   err_msg=f"{shape} on {threads} threads")


def _kernel_ir(text: str, name: str) -> str:
    parts = re.split(r"(?m)^(?=define )", text)
    return "".join(p for p in parts if p.startswith("define") and name in p.split("(")[0])


def test_symbolic_row_keeps_exp_in_one_block_per_call():
    model = _model("Softmax")
    loops = tensorc.inspect(model, stage="loops")
    assert "allocate softmax_exp: float32[1, 1, 1, keys] (local)" in loops
    # one exp per element: every exp is stored into the row's block
    exps = [line.strip() for line in loops.splitlines() if "exp(" in line]
    assert exps and all(line.startswith("softmax_exp[") for line in exps), exps
    llvm = tensorc.inspect(model, stage="llvm")
    workers = _kernel_ir(llvm, ".par")
    assert workers, "the symbolic softmax runs its rows in a parallel loop"
    assert "aligned_alloc" not in workers       # one block per call, sliced per iteration
    assert "aligned_alloc" in _kernel_ir(llvm, "softmax")
    # the rows' last partial vectors: masked loads, never a gather
    assert "masked.gather" not in _kernel_ir(llvm, "softmax")
    assert "masked.load" in _kernel_ir(llvm, "softmax")


def _concat_model():
    """softmax over [past keys ++ new keys] (a KV cache's row: past + seq, twice the hint's
    length, so the row's reductions take partial results in two registers)."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["p", "q"], ["x"], axis=-1),
         helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "rows",
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", 2, "seq", "past"]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, ["batch", 2, "seq", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, "seq", "keys"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_rows_of_a_sum_of_dims_load_their_tail_masked():
    model = _concat_model()
    llvm = tensorc.inspect(model, stage="llvm")
    assert "masked.gather" not in _kernel_ir(llvm, "softmax")
    mod = tensorc.compile(model)
    rng = np.random.default_rng(7)
    for batch, seq, past in [(1, 1, 0), (2, 3, 7), (3, 13, 13), (1, 5, 61)]:
        p = rng.uniform(-6, 6, (batch, 2, seq, past)).astype(np.float32)
        q = rng.uniform(-6, 6, (batch, 2, seq, seq)).astype(np.float32)
        for threads in (1, 2):
            mod.num_threads = threads
            got = mod.run({"p": p, "q": q})["y"]
            np.testing.assert_allclose(got, _numpy("Softmax", np.concatenate([p, q], -1)),
                                       rtol=2e-5, atol=1e-6)


def test_every_row_remainder_matches_numpy():
    """Rows of every length up to two vectors and past them: the row's last, partial vector
    is read whole from its block (the lanes past the row zeroed, then discarded). A longer
    call first, so that a shorter one would show any lanes it kept."""
    mod = tensorc.compile(_model("Softmax"))
    rng = np.random.default_rng(3)
    for keys in (41, *range(1, 19), 31, 33):
        x = rng.uniform(-6, 6, (2, 1, 3, keys)).astype(np.float32)
        for threads in (1, 2):
            mod.num_threads = threads
            np.testing.assert_allclose(mod.run({"x": x})["y"], _numpy("Softmax", x),
                                       rtol=2e-5, atol=1e-6,
                                       err_msg=f"keys={keys} on {threads} threads")



HEADS = ["batch", 4, "seq", "keys"]


def _hardmax(x: np.ndarray) -> np.ndarray:
    first = x.argmax(axis=-1)[..., None]
    return (np.arange(x.shape[-1]) == first).astype(np.float32)


@pytest.fixture(scope="module", params=["Softmax", "LogSoftmax", "Hardmax"])
def heads_compiled(request):
    return request.param, tensorc.compile(rows_model(request.param, HEADS))


@pytest.mark.parametrize("shape", [(126, 4, 3, 3), (1, 4, 1, 1), (3, 4, 7, 8), (2, 4, 8, 5),
                                   (131, 4, 1, 2), (5, 4, 3, 9), (2, 4, 11, 3)])
def test_short_rows_of_a_constant_head_count_match_numpy(heads_compiled, shape):
    """Rows shorter than a vector under a large batch (the small-dims variant, which runs the
    four heads' rows in a vector's lanes), and around it."""
    op, mod = heads_compiled
    x = np.random.default_rng(sum(shape)).uniform(-6, 6, shape).astype(np.float32)
    want = _hardmax(x) if op == "Hardmax" else _numpy(op, x)
    for threads in (1, 2):
        mod.num_threads = threads
        np.testing.assert_allclose(mod.run({"x": x})["y"], want, rtol=2e-5, atol=1e-6,
                                   err_msg=f"{op} {shape} on {threads} threads")


def test_short_rows_run_in_the_lanes_of_the_heads():
    loops = tensorc.inspect(rows_model("Softmax", HEADS), stage="loops")
    small = loops[loops.index("func k0_fused_softmax_small"):]
    small = small[:small.index("\n\n")]
    # every pass of the row walks the keys, the four heads' rows in the lanes
    assert re.search(r"for \(i1: vectorized, 0, 4\)", small), small
    assert "for (k: serial, 0, keys)" in small, small

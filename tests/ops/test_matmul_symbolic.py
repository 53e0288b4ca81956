"""The GEMM template over a symbolic row count (a batch x sequence of tokens): rows in blocks
that each meet every column panel while in cache (the last block partial), and every config
the space lists builds. Results against numpy at 1, primes and
counts that are no multiple of a tile or a block, on one thread and two."""
from __future__ import annotations

import re

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorc
from tests.ops.test_matmul_gemm import knob_configs
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.ops.catalog import get_op
from tensorc.ops.matmul.space import WHOLE
from tensorc.ops.matmul.tile import pack_b_panels, panel_width
from tensorc.passes.loop import optimize
from tensorc.runtime.kernel import build_kernel
from tensorc.target import Target

HOST = Target.host()
K, N = 128, 64


def _model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (K, N)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.uniform(-1, 1, (N,)).astype(np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"]),
         helper.make_node("Add", ["a", "r"], ["y"])], "ffn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", K]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, ["batch", "seq", N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", N])], [w, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), \
        numpy_helper.to_array(w), numpy_helper.to_array(bias)


@pytest.fixture(scope="module")
def compiled():
    model, w, bias = _model()
    return tensorc.compile(model), w, bias


@pytest.mark.parametrize("batch,seq", [(1, 1), (1, 13), (2, 37), (7, 97), (1, 96), (1, 97),
                                       (31, 61)])
def test_symbolic_rows_match_numpy(compiled, batch, seq):
    mod, w, bias = compiled
    rng = np.random.default_rng(batch * seq)
    x = rng.uniform(-1, 1, (batch, seq, K)).astype(np.float32)
    r = rng.uniform(-1, 1, (batch, seq, N)).astype(np.float32)
    want = x.astype(np.float64) @ w + bias + r
    for threads in (1, 2):
        mod.num_threads = threads
        got = mod.run({"x": x, "r": r})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{batch}x{seq} on {threads} threads")


def _group(packed: bool):
    """relu(A[M, K] @ B + bias) with M symbolic: (out, mm, attrs, placeholders)."""
    m = dim_var("M")
    attrs, b_shape = {}, (K, N)
    if packed:
        nr = panel_width(HOST, N)
        attrs, b_shape = {"b_panel": nr, "n": N}, (-(-N // nr), K, nr)
    a = te.placeholder((m, K), name="A")
    b = te.placeholder(b_shape, name="B")
    c = te.placeholder((N,), name="bias")
    mm = get_op("matmul").compute_fn(attrs, a, b)
    out = te.compute(mm.shape, lambda i, j: E.maximum(mm[i, j] + c[j], 0.0), name="relu")
    return out, mm, attrs, [a, b, c, out]


def _build(packed: bool, config):
    out, mm, attrs, args = _group(packed)
    template = get_op("matmul").template("llvm")
    sch = create_schedule(out)
    template.apply(HOST, sch, out, mm, attrs, config)
    return optimize(lower(sch, args, "gemm"))


@pytest.mark.parametrize("packed", [True, False], ids=["packed_b", "dynamic_b"])
def test_row_blocks_by_default_match_numpy(packed):
    out, mm, attrs, _ = _group(packed)
    space = get_op("matmul").template("llvm").search_space(HOST, out, mm, attrs)
    config = space.default()
    assert config["row_tiles"] < WHOLE      # symbolic rows (at their hint) come in blocks
    func = _build(packed, config)
    rng = np.random.default_rng(1)
    w, bias = rng.uniform(-1, 1, (K, N)).astype(np.float32), rng.uniform(-1, 1, N).astype(
        np.float32)
    b_arg = pack_b_panels(w, attrs["b_panel"]) if packed else w
    kernel = build_kernel(func)
    for rows in (1, 5, 6, 7, 95, 96, 97, 193, 1000):
        x = rng.uniform(-1, 1, (rows, K)).astype(np.float32)
        got = np.full((rows, N), np.nan, np.float32)
        for threads in (1, 2):
            kernel(x, b_arg, bias, got, num_threads=threads)
            np.testing.assert_allclose(got, np.maximum(x @ w + bias, 0), rtol=1e-4,
                                       atol=1e-4, err_msg=f"{rows} rows")


@pytest.mark.parametrize("packed", [True, False], ids=["packed_b", "dynamic_b"])
def test_every_listed_config_builds(packed):
    """The space over symbolic rows lists no config its schedule cannot build (a packed A
    of all the rows was a local block of run-time size)."""
    out, mm, attrs, _ = _group(packed)
    space = get_op("matmul").template("llvm").search_space(HOST, out, mm, attrs)
    for config in knob_configs(space, samples=0):
        _build(packed, config)
    # pack_a over all the rows: rejected, naming why
    whole = space.default().replace(row_tiles=WHOLE, pack_a=True)
    if "pack_a" in space.knobs and True in space.knobs["pack_a"].choices:
        assert not space.is_valid(whole)


def _scores_model():
    """Attention scores over a symbolic key count: q [batch, 2, seq, 16] x k^T [batch, 2,
    16, keys], scaled: the column panels end in a partial one at most key counts."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["q", "k"], ["s"]),
         helper.make_node("Mul", ["s", "scale"], ["y"])], "scores",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, ["batch", 2, "seq", 16]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, ["batch", 2, 16, "keys"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, "seq", "keys"])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [], [0.25])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_partial_column_panels_match_numpy():
    """Every remainder of the key count modulo a panel, short and long rows: the last,
    partial panel accumulates under its lane mask without branches."""
    mod = tensorc.compile(_scores_model())
    rng = np.random.default_rng(5)
    for batch, seq, keys in [(1, 1, 1), (3, 5, 10), (2, 3, 40), (1, 17, 84), (2, 7, 97),
                             *[(1, 3, n) for n in range(2, 18)]]:
        q = rng.standard_normal((batch, 2, seq, 16)).astype(np.float32)
        k = rng.standard_normal((batch, 2, 16, keys)).astype(np.float32)
        for threads in (1, 2):
            mod.num_threads = threads
            np.testing.assert_allclose(mod.run({"q": q, "k": k})["y"], (q @ k) * 0.25,
                                       rtol=1e-4, atol=1e-5,
                                       err_msg=f"{batch, seq, keys} on {threads} threads")


def test_partial_column_panel_halves_where_its_remainder_fits():
    """The last column panel's tile runs 8-lane vectors where at most 8 columns remain
    (passes/loop/narrow_tails.py), else its 16-lane vectors; the whole panels keep 16."""
    loops = tensorc.inspect(_scores_model(), stage="loops")
    main = loops[loops.index("func k0_fused_matmul_mul("):]
    main = main[:main.index("\nfunc ")]
    assert re.search(r"if \(\(.*keys.*\) <= 8\)", main), main
    assert re.search(r"for \(j: vectorized, 0, 8\)", main), main
    assert re.search(r"for \(j: vectorized, 0, 16\)", main), main


def _transposed_conv_model():
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 2, 2)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])], "up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_batched_symbolic_columns_run_one_tail():
    """A transposed conv's GEMM over a symbolic image (batched, N = h*w): whole 16-column
    panels, then one tail panel that halves where at most 8 columns remain; blocks of two
    panels ended in a partial block whose last panel was a masked 16-lane tile (2.5x the
    static kernel at N = 40). Results at every remainder of N modulo a panel against
    onnxruntime."""
    model = _transposed_conv_model()
    loops = tensorc.inspect(model, stage="loops")
    main = loops[loops.index("func k0_fused_matmul("):]
    main = main[:main.index("\nfunc ")]
    assert re.search(r"if \(\(.*d\.0.*\) <= 8\)", main), main
    assert "min(d.0 // 32" not in main, main
    mod = tensorc.compile(model)
    session = onnxruntime.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(8)
    for n, h, w in [(1, 1, 1), (2, 1, 7), (3, 5, 8), (1, 4, 10), (2, 3, 13), (1, 17, 3)]:
        x = rng.standard_normal((n, 16, h, w)).astype(np.float32)
        np.testing.assert_allclose(mod.run({"x": x})["y"], session.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-5, err_msg=f"{n, h, w}")

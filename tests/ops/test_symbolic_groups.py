"""Op groups over symbolic dims, scheduled as the compiler schedules a fused group (the
anchor's template where it takes symbolic shapes, else ops/symbolic.py's generic schedule)
and run at many dims against numpy."""
import numpy as np
import pytest

from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.ops.catalog import get_op
from tensorc.ops.schedules import INJECTIVE
from tensorc.ops.symbolic import GENERIC
from tensorc.passes.loop import optimize
from tensorc.runtime.kernel import build_kernel
from tensorc.target import Target

TARGET = Target.host()


def _build(params, out, anchor=None, hints=None, op=None, attrs=None):
    """As compiler/kernel.py schedules a group: the anchor op's template where it takes
    symbolic shapes, else the generic one."""
    sch = create_schedule(out)
    for stage in sch.compute_stages:
        if stage.is_output or stage.op.reduce_axis or stage.op.tag.startswith("anchor:"):
            continue
        stage.compute_inline()
    with te.dim_hints(hints or {}):
        template = INJECTIVE["llvm"] if anchor is None else GENERIC
        if op is not None and get_op(op).template("llvm").symbolic:
            template = get_op(op).template("llvm")
        space = template.search_space(TARGET, out, anchor, attrs or {})
        template.apply(TARGET, sch, out, anchor, attrs or {}, space.default())
    return build_kernel(optimize(lower(sch, [*params, out], "group")))


@pytest.mark.parametrize("hints", [{}, {"N": 1}, {"N": 4096}])
def test_bias_add_relu_over_symbolic_rows(hints):
    n = dim_var("N")
    x = te.placeholder((n, 77), name="x")
    bias = te.placeholder((77,), name="bias")
    added = get_op("add").compute_fn({}, x, te.compute((1, 77), lambda i, j: bias[j]))
    out = get_op("relu").compute_fn({}, added)
    kernel = _build([x, bias], out, hints=hints)
    rng = np.random.default_rng(0)
    b = rng.standard_normal(77).astype("float32")
    for rows in (0, 1, 3, 8, 33, 500):
        a = rng.standard_normal((rows, 77)).astype("float32")
        got = np.full((rows, 77), np.nan, "float32")
        kernel(a, b, got, num_threads=2)
        np.testing.assert_allclose(got, np.maximum(a + b, 0), rtol=1e-6)


def test_elementwise_over_two_symbolic_dims():
    batch, seq = dim_var("batch"), dim_var("seq")
    x = te.placeholder((batch, seq, 24), name="x")
    y = te.placeholder((batch, seq, 24), name="y")
    out = get_op("mul").compute_fn({}, x, y)
    kernel = _build([x, y], out)
    rng = np.random.default_rng(1)
    for shape in [(1, 1, 24), (2, 7, 24), (3, 64, 24), (5, 129, 24)]:
        a, b = (rng.standard_normal(shape).astype("float32") for _ in range(2))
        got = np.empty(shape, "float32")
        kernel(a, b, got)
        np.testing.assert_allclose(got, a * b, rtol=1e-6)


def test_a_detector_heads_transpose_reads_its_contiguous_axis():
    """A detector head's [batch, 3, 6, HW] -> [batch, 3, HW, 6] over symbolic dims,
    vectorized along HW (contiguous loads, stores scattered) rather than along the 6 (a
    masked gather of 6 lanes per vector); right at 1, 7, 8, 13, 37 and 129 against numpy.
    (Attention's keys: tests/ops/test_transpose_symbolic.py.)"""
    batch, n = dim_var("batch"), dim_var("n")
    shape, perm = (batch, 3, 6, n), (0, 1, 3, 2)
    x = te.placeholder(shape, name="x")
    out = get_op("transpose").compute_fn({"perm": perm}, x)
    kernel = _build([x], out)
    loops = str(optimize(lower(_scheduled(out), [x, out], "group")))
    lanes = TARGET.vector_lanes("float32")
    assert f"vectorized, 0, {lanes})" in loops and "vectorized, 0, 6)" not in loops
    rng = np.random.default_rng(4)
    for b, size in [(1, 1), (2, 7), (3, 8), (1, 13), (4, 37), (2, 129)]:
        a = rng.standard_normal((b, 3, 6, size)).astype("float32")
        want = np.ascontiguousarray(a.transpose(perm))
        got = np.full(want.shape, np.nan, "float32")
        kernel(a, got, num_threads=2)
        np.testing.assert_array_equal(got, want)


def _scheduled(out):
    sch = create_schedule(out)
    space = INJECTIVE["llvm"].search_space(TARGET, out, None, {})
    INJECTIVE["llvm"].apply(TARGET, sch, out, None, {}, space.default())
    return sch


def test_softmax_over_symbolic_row_length():
    batch, seq = dim_var("batch"), dim_var("seq")
    x = te.placeholder((batch, 4, seq, seq), name="scores")
    out = get_op("softmax").compute_fn({"axis": 3}, x)
    kernel = _build([x], out, anchor=out, op="softmax", attrs={"axis": 3})
    rng = np.random.default_rng(2)
    for b, s in [(1, 1), (1, 7), (2, 16), (3, 33)]:
        a = rng.standard_normal((b, 4, s, s)).astype("float32")
        got = np.empty_like(a)
        kernel(a, got, num_threads=2)
        e = np.exp(a - a.max(-1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_matmul_over_symbolic_rows_and_batch():
    batch, seq = dim_var("batch"), dim_var("seq")
    a = te.placeholder((batch, seq, 48), name="a")
    w = te.placeholder((48, 40), name="w")
    out = get_op("matmul").compute_fn({}, a, w)
    kernel = _build([a, w], out, anchor=out, op="matmul")
    rng = np.random.default_rng(3)
    wv = rng.standard_normal((48, 40)).astype("float32")
    for b, s in [(1, 1), (1, 9), (2, 16), (3, 31)]:
        av = rng.standard_normal((b, s, 48)).astype("float32")
        got = np.empty((b, s, 40), "float32")
        kernel(av, wv, got, num_threads=2)
        np.testing.assert_allclose(got, av @ wv, rtol=1e-4, atol=1e-4)


def test_attention_scores_reduce_over_symbolic_depth():
    seq = dim_var("seq")
    q = te.placeholder((4, seq, 16), name="q")
    k = te.placeholder((4, 16, seq), name="k")
    out = get_op("matmul").compute_fn({}, q, k)
    kernel = _build([q, k], out, anchor=out, op="matmul")
    rng = np.random.default_rng(4)
    for s in (1, 5, 17, 64):
        qv = rng.standard_normal((4, s, 16)).astype("float32")
        kv = rng.standard_normal((4, 16, s)).astype("float32")
        got = np.empty((4, s, s), "float32")
        kernel(qv, kv, got)
        np.testing.assert_allclose(got, qv @ kv, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hints", [{}, {"seq": 1}, {"seq": 2048}])
def test_gemm_template_over_symbolic_depth_and_columns(hints):
    seq = dim_var("seq")
    p = te.placeholder((2, 3, seq, seq), name="p")
    v = te.placeholder((2, 3, seq, 24), name="v")
    out = get_op("matmul").compute_fn({}, p, v)
    kernel = _build([p, v], out, anchor=out, op="matmul", hints=hints)
    rng = np.random.default_rng(6)
    for s in (1, 4, 15, 33):
        pv = rng.standard_normal((2, 3, s, s)).astype("float32")
        vv = rng.standard_normal((2, 3, s, 24)).astype("float32")
        got = np.empty((2, 3, s, 24), "float32")
        kernel(pv, vv, got, num_threads=2)
        np.testing.assert_allclose(got, pv @ vv, rtol=1e-4, atol=1e-4)


def test_reduce_mean_over_symbolic_axis():
    seq = dim_var("seq")
    x = te.placeholder((2, seq, 30), name="x")
    out = get_op("reduce_mean").compute_fn({"axes": (1,), "keepdims": 0}, x)
    kernel = _build([x], out, anchor=out)
    rng = np.random.default_rng(5)
    for s in (1, 2, 13, 100):
        a = rng.standard_normal((2, s, 30)).astype("float32")
        got = np.empty((2, 30), "float32")
        kernel(a, got)
        np.testing.assert_allclose(got, a.mean(1), rtol=1e-5, atol=1e-6)

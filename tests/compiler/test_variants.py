"""Which kernels over symbolic dims get a small-dims variant (compiler/variants.py): none where
the second schedule differs only in a parallel loop that runs as one chunk, on the calling
thread, at every small shape; the variant's code holds no tile of larger dims; it is called
where its row dims are small, whatever its batch dims, and matches numpy there."""
import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorc
from tensorc.compiler.variants import (
    SMALL_MAX, SMALL_SUFFIX, call_forms, parallel_alone_when_small, row_dims,
)
from tensorc.ir.dims import Dim, dim_to_json
from tensorc.ir.loop import Buffer, PrimFunc, Seq
from tensorc.ir import arith, te
from tensorc.ir.loop import For, walk_stmts
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.passes.loop import optimize
from tensorc.passes.loop.parallel_work import MIN_CHUNK_WORK
from tensorc.runtime.kernel import build_kernel


def _rows(columns: int):
    """C[n, columns] = A + 1, its rows in parallel."""
    n = dim_var("N")
    a = te.placeholder((n, columns), name="A")
    c = te.compute((n, columns), lambda i, j: a[i, j] + 1.0, name="C")
    s = create_schedule([c])
    s[c].parallel(s[c].op_axis[0])
    return optimize(lower(s, [a, c], "rows"))


def test_a_loop_of_light_iterations_runs_alone_at_small_dims():
    # SMALL_MAX rows of 37 stores each: far below one chunk's work
    assert parallel_alone_when_small(_rows(37))


def test_a_loop_whose_small_extent_makes_several_chunks_keeps_its_variant():
    # each row is half a chunk's work: SMALL_MAX rows are several chunks, run on the team
    columns = MIN_CHUNK_WORK // 2
    assert SMALL_MAX > 2
    assert not parallel_alone_when_small(_rows(columns))


def _doubled(bound: int | None):
    """C[N, M] = 2 A in 16-lane vectors over M; with the loop passes told that every dim is at
    most ``bound``."""
    n, m = dim_var("N"), dim_var("M")
    a = te.placeholder((n, m), name="A")
    c = te.compute((n, m), lambda i, j: a[i, j] * 2.0, name="C")
    s = create_schedule([c])
    s[c].vectorize(s[c].split(s[c].op_axis[1], 16)[1])
    func = lower(s, [a, c], "doubled")
    if bound is not None:
        func.attrs["dims_at_most"] = bound
    return optimize(func)


def _vector_widths(func) -> list[int]:
    return sorted(arith.as_const_int(s.extent) for s in walk_stmts(func.body)
                  if isinstance(s, For) and s.kind == "vectorized")


def test_a_variant_over_small_dims_drops_the_tiles_of_larger_dims():
    # over any M: whole 16-lane tiles, then a tail of 8 lanes or of two halves
    assert _vector_widths(_doubled(None)) == [8, 8, 8, 16]
    # where M <= SMALL_MAX: the 8-lane tail alone
    small = _doubled(SMALL_MAX)
    assert _vector_widths(small) == [8]
    kernel = build_kernel(small)
    rng = np.random.default_rng(0)
    for rows, cols in [(0, 3), (1, 1), (3, 7), (8, 8), (5, 0)]:
        x = rng.standard_normal((rows, cols)).astype("float32")
        out = np.full((rows, cols), np.nan, "float32")
        kernel(x, out)
        np.testing.assert_allclose(out, 2 * x)


def test_a_bound_on_some_dims_leaves_the_others_whole():
    # M bounded: the 8-lane tail alone, at any N
    rows_bounded = _doubled({"M": SMALL_MAX})
    assert _vector_widths(rows_bounded) == [8]
    # N bounded: M's tiles all stay
    assert _vector_widths(_doubled({"N": SMALL_MAX})) == [8, 8, 8, 16]
    kernel = build_kernel(rows_bounded)
    rng = np.random.default_rng(1)
    for rows, cols in [(1, 1), (131, 3), (2000, 8), (7, 5)]:
        x = rng.standard_normal((rows, cols)).astype("float32")
        out = np.full((rows, cols), np.nan, "float32")
        kernel(x, out)
        np.testing.assert_allclose(out, 2 * x)


def _func(*shapes) -> PrimFunc:
    dims = sorted({v for shape in shapes for d in shape if not isinstance(d, int)
                   for v in [d]}, key=lambda v: v.name)
    params = [Buffer(f"b{k}", shape, "float32") for k, shape in enumerate(shapes)]
    return PrimFunc("f", params, Seq([]), dims=dims)


def test_row_dims_leave_out_the_batch_dims_that_lead_tensors():
    batch, seq, rows = dim_var("batch"), dim_var("seq"), dim_var("d.0")
    # attention's scores: the batch leads, the rows are the sequence's
    assert row_dims(_func((batch, 4, seq, seq))) == ["seq"]
    assert row_dims(_func((batch, seq, 4, 16), (batch, 4, 16, seq))) == ["seq"]
    # a matrix's rows are rows (a projection over batch x seq, a pooled [batch, 64])
    assert row_dims(_func((rows, 64))) == ["d.0"]
    assert row_dims(_func((batch, 64), (batch, 4, 16, 16))) == ["batch"]
    # batch dims alone: all of them
    assert row_dims(_func((batch, 4, 16, 16))) == ["batch"]


def test_call_forms_bound_only_the_dims_the_small_variant_names():
    past_seq = dim_to_json(Dim("past") + Dim("seq"))
    meta = {"dims": ["batch", "seq", "d.0"], "dim_values": {"d.0": past_seq},
            "variants": [{"suffix": "_small", "dims": ["batch", "seq", "d.0"],
                          "dim_values": {"d.0": past_seq}, "small": ["d.0", "seq"]}]}
    (cond, symbol, args), last = call_forms("k", meta)
    assert symbol == "k_small" and len(args) == 3 and last[0] is None
    text = str(cond).replace("(", "").replace(")", "")
    assert "seq <= 8" in text and "past + seq <= 8" in text and "batch" not in text, text


def _scores_model():
    """Attention's scores and weights over [batch, 4, seq, 16] queries and keys: QK^T, a
    scale and a softmax along the keys."""
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
         helper.make_node("MatMul", ["q", "kt"], ["s"]),
         helper.make_node("Mul", ["s", "scale"], ["t"]),
         helper.make_node("Softmax", ["t"], ["y"], axis=-1)], "scores",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4, "seq", 16])
         for n in ("q", "k")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "seq", "seq"])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [], [0.25])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _scores_reference(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    s = (q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2)) * 0.25
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_the_small_variants_run_where_the_rows_are_short_at_any_batch():
    loops = tensorc.inspect(_scores_model(), stage="loops")
    entry = loops[loops.index("func tensorc_entry"):]
    calls = re.findall(r"if \((.*)\)\n\s+call (k\d+\w*" + SMALL_SUFFIX + r")\(", entry)
    assert calls, entry
    for cond, _ in calls:
        assert "seq <= 8" in cond and "batch" not in cond, (cond, entry)


@pytest.fixture(scope="module")
def scores():
    return tensorc.compile(_scores_model())


@pytest.mark.parametrize("batch,seq", [(126, 3), (1, 1), (127, 1), (3, 7), (9, 8), (2, 13),
                                       (31, 5)])
def test_scores_match_numpy_at_short_rows_under_any_batch(scores, batch, seq):
    rng = np.random.default_rng(batch * 100 + seq)
    q, k = (rng.standard_normal((batch, 4, seq, 16)).astype(np.float32) for _ in range(2))
    for threads in (1, 2):
        scores.num_threads = threads
        np.testing.assert_allclose(scores.run({"q": q, "k": k})["y"], _scores_reference(q, k),
                                   rtol=1e-5, atol=1e-6)

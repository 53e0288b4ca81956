"""Guarded clamps (E.guarded_clamp): a concat's loads keep their clamps where dropping them
could leave the buffer, and lose them where the concat's selects make them no-ops and the
index stays inside (a concat of slices of one tensor then reads it contiguously)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tensorc
from helpers_kernels import random_array, run_func
from tensorc.ir import expr as E
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, placeholder
from tensorc.passes.loop import optimize

RNG = np.random.default_rng(5)


def _lt(a, k: int) -> E.Expr:
    return E.Compare("lt", a, E.const(k))


def test_a_concat_of_parts_of_one_row_reads_it_contiguously():
    # out[i, j] = x[i, j] for j < 4, 2 x[i, 4] at j = 4, x[i, j] + 1 after: every row's
    # parts are slices of one row of X, fused into one loop of 16-lane vectors
    X = placeholder((8, 13), name="X")

    def body(i, j):
        part1 = X[i, 4 + E.guarded_clamp(j - 4, 1)] * 2.0
        part2 = X[i, 5 + E.guarded_clamp(j - 5, 8)] + 1.0
        return E.select(_lt(j, 4), X[i, E.guarded_clamp(j, 4)],
                        E.select(_lt(j, 5), part1, part2))
    out = compute((8, 13), body, name="out")
    s = create_schedule(out)
    fused = s[out].fuse(*s[out].op_axis)
    _, inner = s[out].split(fused, 16)
    s[out].vectorize(inner)
    func = optimize(lower(s, [X, out], "parts"))
    text = str(func)
    assert "clamp" not in text and "min(" not in text and "max(" not in text, text
    assert text.count("X[i_j.i + i_j.o*16]") == 3, text      # one contiguous load, thrice
    x = random_array(RNG, (8, 13))
    (got,) = run_func(func, [x])
    want = np.concatenate([x[:, :4], 2 * x[:, 4:5], x[:, 5:] + 1], axis=1)
    np.testing.assert_array_equal(got, want)


def test_clamps_stay_where_the_unclamped_load_would_leave_its_buffer():
    # a concat of A (5) and B (3) in one vector of 8 lanes: lanes 5..7 would read A[5..7]
    # and lanes 0..4 B[-5..-1], so both loads keep their clamps (as min/max)
    A = placeholder((5,), name="A")
    B = placeholder((3,), name="B")
    out = compute((8,), lambda i: E.select(_lt(i, 5), A[E.guarded_clamp(i, 5)],
                                           B[E.guarded_clamp(i - 5, 3)]), name="out")
    s = create_schedule(out)
    s[out].vectorize(s[out].op_axis[0])
    func = optimize(lower(s, [A, B, out], "concat"))
    text = str(func)
    assert "clamp" not in text and "min(" in text and "max(" in text, text
    a, b = random_array(RNG, (5,)), random_array(RNG, (3,))
    (got,) = run_func(func, [a, b])
    np.testing.assert_array_equal(got, np.concatenate([a, b]))


def test_a_concat_of_rows_in_a_fused_loop_is_split_at_the_row_boundary():
    # rows 0..5 from A, 6..7 from B, the two axes fused and split by 8: the row test
    # (i_j // 4 < 6) becomes a split of the outer loop at the 24th element
    A = placeholder((6, 4), name="A")
    B = placeholder((2, 4), name="B")
    out = compute((8, 4), lambda i, j: E.select(_lt(i, 6), A[E.guarded_clamp(i, 6), j],
                                                B[E.guarded_clamp(i - 6, 2), j]), name="out")
    s = create_schedule(out)
    fused = s[out].fuse(*s[out].op_axis)
    _, inner = s[out].split(fused, 8)
    s[out].vectorize(inner)
    func = optimize(lower(s, [A, B, out], "rows"))
    text = str(func)
    assert "select" not in text and "min(" not in text, text
    assert "A[i_j.i + i_j.o*8]" in text and "B[i_j.i]" in text, text
    a, b = random_array(RNG, (6, 4)), random_array(RNG, (2, 4))
    (got,) = run_func(func, [a, b])
    np.testing.assert_array_equal(got, np.concatenate([a, b]))


def test_a_detector_head_concat_compiles_to_contiguous_loads():
    # Split a [1, 96, 13] map into box (4), objectness (1) and classes (8), sigmoid the last
    # two, concat back: one kernel that loads the map contiguously (no gathers, no clamps)
    split = numpy_helper.from_array(np.array([4, 1, 8], np.int64), "split")
    nodes = [helper.make_node("Split", ["x", "split"], ["box", "obj", "cls"], axis=2),
             helper.make_node("Sigmoid", ["obj"], ["obj_s"]),
             helper.make_node("Sigmoid", ["cls"], ["cls_s"]),
             helper.make_node("Concat", ["box", "obj_s", "cls_s"], ["y"], axis=2)]
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 96, 13])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 96, 13])], [split])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    loops = tensorc.inspect(model, stage="loops")
    assert "min(" not in loops and "max(" not in loops and "clamp" not in loops, loops
    x = RNG.standard_normal((1, 96, 13)).astype(np.float32) * 4
    got = tensorc.compile(model).run({"x": x})["y"]
    want = np.concatenate([x[..., :4], 1 / (1 + np.exp(-x[..., 4:]))], axis=2)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)

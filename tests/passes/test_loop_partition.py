"""Loop partitioning: a loop is split where an affine condition inside it changes value, so
that each piece runs one branch (a concat, a guarded tail) with no select or guard left."""
from __future__ import annotations

import numpy as np
import pytest

from helpers_kernels import random_array, run_func
from tensorc.ir import expr as E
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, placeholder
from tensorc.passes.loop import optimize

RNG = np.random.default_rng(11)


def test_a_concat_runs_each_input_in_its_own_loop():
    A = placeholder((5, 7), name="A")
    B = placeholder((3, 7), name="B")
    C = compute((8, 7), lambda i, j: E.select(E.Compare("lt", i, E.const(5)),
                                               A[E.minimum(i, 4), j],
                                               B[E.maximum(i - 5, 0), j]), name="C")
    func = optimize(lower(create_schedule(C), [A, B, C], "concat"))
    text = str(func)
    assert "select" not in text and "min(" not in text and "max(" not in text
    assert text.count("for (i: serial") == 2
    a, b = random_array(RNG, (5, 7)), random_array(RNG, (3, 7))
    (out,) = run_func(lower(create_schedule(C), [A, B, C], "concat"), [a, b])
    np.testing.assert_array_equal(out, np.concatenate([a, b]))


def test_a_guarded_tail_is_peeled():
    A = placeholder((10, 8), name="A")
    B = compute((10, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = create_schedule(B)
    s[B].split(s[B].op_axis[0], 4)
    text = str(optimize(lower(s, [A, B], "tail")))
    assert "if (" not in text
    assert "for (i.o: serial, 0, 2)" in text      # two whole blocks, then the tail of 2 rows
    a = random_array(RNG, (10, 8))
    (out,) = run_func(lower(s, [A, B], "tail"), [a])
    np.testing.assert_array_equal(out, a * 2)


def test_a_parallel_loop_keeps_its_pieces_in_one_parallel_loop():
    """A parallel loop's guarded tail is a branch of the one parallel loop (a separate
    parallel loop after it would run the tail on one thread while the others wait); each
    branch is simplified for its piece: no guard in the whole blocks, the tail's index a
    constant."""
    A = placeholder((10, 8), name="A")
    B = compute((10, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = create_schedule(B)
    outer, _ = s[B].split(s[B].op_axis[0], 4)
    s[B].parallel(outer)
    text = str(optimize(lower(s, [A, B], "tail")))
    assert text.count("parallel") == 1 and "for (i.o: parallel, 0, 3)" in text
    assert "if (i.o < 2)" in text and text.count("if (") == 1
    a = random_array(RNG, (10, 8))
    (out,) = run_func(lower(s, [A, B], "tail"), [a])
    np.testing.assert_array_equal(out, a * 2)


def test_only_what_a_parallel_piece_decides_is_branched():
    """A padded stage computed at each block of a parallel loop has a guard the edge blocks
    decide; the consumer under it has none, so it runs once after the branches, not copied
    into each (a Winograd conv's GEMM after its padded input transform)."""
    A = placeholder((12, 8), name="A")
    P = compute((14, 8), lambda r, j: E.select(
        E.Logical("and", E.Compare("ge", r, E.const(1)), E.Compare("lt", r, E.const(13))),
        A[E.minimum(E.maximum(r - 1, 0), 11), j], E.Const(0.0, "float32")), name="P")
    B = compute((12, 8), lambda i, j: P[i, j] + P[i + 2, j] * 3.0, name="B")
    s = create_schedule(B)
    outer, _ = s[B].split(s[B].op_axis[0], 4)
    s[B].parallel(outer)
    s[P].compute_at(s[B], outer)
    func = lower(s, [A, B], "padded")
    text = str(optimize(func))
    assert text.count("parallel") == 1 and "if (i.o < 1)" in text and "select" not in text
    assert text.count("B[") == 1           # the consumer's one store, outside the branches
    a = random_array(RNG, (12, 8))
    (out,) = run_func(func, [a])
    padded = np.pad(a, ((1, 1), (0, 0)))
    np.testing.assert_allclose(out, padded[:12] + padded[2:] * 3.0, rtol=1e-6)


def test_a_triangle_is_split_in_both_loops_and_stays_right():
    A = placeholder((4, 4), name="A")
    B = compute((4, 4), lambda i, j: E.select(E.Compare("lt", i + j, E.const(6)), A[i, j],
                                               E.Const(0.0, "float32")), name="B")
    func = lower(create_schedule(B), [A, B], "tri")
    assert "select" not in str(optimize(func))
    a = random_array(RNG, (4, 4))
    (out,) = run_func(func, [a])
    np.testing.assert_array_equal(out, np.where(np.add.outer(range(4), range(4)) < 6, a, 0))


def _six_way_concat(work: int):
    """A concat of six inputs, each element passed through ``work`` multiply-adds."""
    parts = [placeholder((1, 3), name=f"P{k}") for k in range(6)]

    def value(k, j):
        v = parts[k][0, j]
        for _ in range(work):
            v = v * 1.0001 + 0.5
        return v
    C = compute((6, 3), lambda i, j: E.select(E.Compare("lt", i, E.const(1)), value(0, j),
             E.select(E.Compare("lt", i, E.const(2)), value(1, j),
             E.select(E.Compare("lt", i, E.const(3)), value(2, j),
             E.select(E.Compare("lt", i, E.const(4)), value(3, j),
             E.select(E.Compare("lt", i, E.const(5)), value(4, j),
                      value(5, j)))))), name="C")
    return parts, C


@pytest.mark.parametrize("work,split", [(0, True), (40, False)])
def test_many_pieces_only_where_the_body_is_small(work, split):
    """Five breakpoints: a small body (a concat's copy) splits into one piece per input, with
    no select left; a body whose six copies would exceed PIECES_BUDGET keeps the loop
    whole."""
    parts, C = _six_way_concat(work)
    func = lower(create_schedule(C), [*parts, C], "many")
    text = str(optimize(func))
    if split:
        assert "select" not in text and text.count("for (j: serial") == 6
    else:
        assert text.count("for (i: serial") == 1 and "select" in text
    inputs = [random_array(RNG, (1, 3)) for _ in parts]
    (out,) = run_func(func, inputs)
    want = np.concatenate(inputs).astype(np.float64)
    for _ in range(work):
        want = want * 1.0001 + 0.5
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_a_three_way_concat_is_split_at_exactly_its_two_boundaries():
    """Split sizes 2, 2, 81 (a YOLO head's xy, wh, conf): the comparisons i < 2 and i < 4
    are decided on [0, 2), [2, 4) and [4, 85), three pieces and no select."""
    A = placeholder((85, 9), name="A")
    C = compute((85, 9), lambda i, j: E.select(
        E.Compare("lt", i, E.const(2)), A[i, j] * 2.0,
        E.select(E.Compare("lt", i, E.const(4)), A[i, j] * 3.0, A[i, j])), name="C")
    func = optimize(lower(create_schedule(C), [A, C], "three"))
    text = str(func)
    assert "select" not in text
    assert [line.strip() for line in text.splitlines() if "for (i:" in line] == [
        "for (i: serial, 0, 2)", "for (i: serial, 0, 2)", "for (i: serial, 0, 81)"]
    a = random_array(RNG, (85, 9))
    (out,) = run_func(func, [a])
    want = np.concatenate([a[:2] * 2, a[2:4] * 3, a[4:]])
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_a_guarded_last_block_keeps_only_the_vectors_in_range():
    """A row of 27 in blocks of 3 x 8 lanes (an unrolled loop of vectors): once the block
    loop is split into the whole block and the last one, the last block's unrolled loop is
    split too, and its two vectors past the end of the row are dropped, not run masked."""
    A = placeholder((4, 27), name="A")
    B = compute((4, 27), lambda i, j: A[i, j] * 2.0, name="B")
    s = create_schedule(B)
    jo, ji = s[B].split(s[B].op_axis[1], 24)
    vo, vi = s[B].split(ji, 8)
    s[B].unroll(vo)
    s[B].vectorize(vi)
    func = optimize(lower(s, [A, B], "blocks"))
    assert str(func).splitlines()[-6:] == [
        "    for (j.i.o: unrolled, 0, 3)",
        "      for (j.i.i: vectorized, 0, 8)",
        "        B[i*27 + j.i.i + j.i.o*8] = A[i*27 + j.i.i + j.i.o*8]*2.0f",
        "    for (j.i.i: vectorized, 0, 8)",
        "      if ((j.i.i + 24) < 27)",
        "        B[i*27 + j.i.i + 24] = A[i*27 + j.i.i + 24]*2.0f"]
    a = random_array(RNG, (4, 27))
    (out,) = run_func(func, [a])
    np.testing.assert_array_equal(out, a * 2)


def test_an_interleaved_tile_is_kept_whole():
    # out[i, 4 v + u], u unrolled around v vectorized, the row's last tile short (29 = 4 * 7
    # + 1): codegen interleaves the four vectors into whole ones, so the unrolled loop keeps
    # its guard rather than splitting into one strided store per piece
    A = placeholder((3, 4, 8), name="A")
    B = compute((3, 29), lambda i, x: A[i, x % 4, x // 4] + 1.0, name="B")
    s = create_schedule(B)
    i, x = s[B].op_axis
    xo, xi = s[B].split(x, 4)
    s[B].reorder(i, xi, xo)
    s[B].unroll(xi)
    s[B].vectorize(xo)
    text = str(optimize(lower(s, [A, B], "tile")))
    assert text.count("for (x.i: unrolled, 0, 4)") == 1, text
    a = random_array(RNG, (3, 4, 8))
    (out,) = run_func(lower(s, [A, B], "tile"), [a])
    np.testing.assert_array_equal(out, a.transpose(0, 2, 1).reshape(3, 32)[:, :29] + 1)


@pytest.mark.parametrize("size", [8, 12, 16])
def test_a_serial_loop_branches_only_the_padded_copies_it_decides(size):
    """A padded patch computed per block of a parallel row loop and a serial column loop
    (a Winograd tile's input patch): the edge blocks of either loop decide only the patch's
    copies, so those are branched (one copy per edge case, no select left) and the large
    consumer after them is stored once, not copied into the nine pieces."""
    A = placeholder((size, size), name="A")

    def padded(r, c):
        inside = E.Logical("and", E.Logical("and", E.Compare("ge", r, E.const(1)),
                                            E.Compare("lt", r, E.const(size + 1))),
                           E.Logical("and", E.Compare("ge", c, E.const(1)),
                                     E.Compare("lt", c, E.const(size + 1))))
        return E.select(inside, A[E.minimum(E.maximum(r - 1, 0), size - 1),
                                  E.minimum(E.maximum(c - 1, 0), size - 1)],
                        E.Const(0.0, "float32"))
    P = compute((size + 2, size + 2), padded, name="P")

    def smoothed(i, j):
        v = E.Const(0.0, "float32")
        for a in range(3):
            for b in range(3):
                v = v + P[i + a, j + b] * float(1 + a + 2 * b)
        for _ in range(60):           # a consumer far larger than the copies
            v = v * 0.5 + 0.25
        return v
    B = compute((size, size), smoothed, name="B")
    s = create_schedule(B)
    i, j = s[B].op_axis
    io, ii = s[B].split(i, 4)
    jo, ji = s[B].split(j, 4)
    s[B].reorder(io, jo, ii, ji)
    s[B].parallel(io)
    s[P].compute_at(s[B], jo)
    func = lower(s, [A, B], "patch")
    text = str(optimize(func))
    assert "select" not in text and text.count("B[") == 1, text
    assert text.count("P[") - text.count("= P[") >= 4      # the edge cases' copies
    a = random_array(RNG, (size, size))
    (out,) = run_func(func, [a])
    pad = np.pad(a.astype(np.float64), 1)
    want = sum(pad[x:x + size, y:y + size] * (1 + x + 2 * y) for x in range(3)
               for y in range(3))
    for _ in range(60):
        want = want * 0.5 + 0.25
    np.testing.assert_allclose(out, want, rtol=1e-5)

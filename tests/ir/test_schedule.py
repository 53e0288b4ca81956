"""Schedule primitives: the loop nest each one produces, the errors illegal calls raise, and
traces that rebuild a schedule."""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from helpers_kernels import compile_func, random_array, run_func, run_kernel
from tensorc.runtime.kernel import llvm_ir
from tensorc.errors import ScheduleError
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, placeholder, reduce_axis, sum_
from tensorc.ir.trace import replay, trace_from_json, trace_to_json
from tensorc.passes.loop import flatten_buffers, optimize, simplify

RNG = np.random.default_rng(7)


def nest(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def guarded(func):
    """The loop IR as lowering leaves it, simplified and flattened, before loop partitioning
    splits guarded loops (the tests below read the guards)."""
    return simplify(flatten_buffers(simplify(func)))


def scale(n: int = 10, m: int = 8):
    """B = A * 2."""
    A = placeholder((n, m), name="A")
    B = compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    return A, B


def chain(n: int = 10, m: int = 8):
    """B = A * 2; C = B + 1."""
    A, B = scale(n, m)
    C = compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    return A, B, C


def stencil():
    """B = A * 2; C[y, x] = B[y, x] + B[y + 1, x] + B[y + 2, x]."""
    A = placeholder((16, 12), name="A")
    B = compute((16, 12), lambda i, j: A[i, j] * 2.0, name="B")
    C = compute((14, 12), lambda y, x: B[y, x] + B[y + 1, x] + B[y + 2, x], name="C")
    return A, B, C


def matmul(m: int = 6, k: int = 5, n: int = 7):
    A = placeholder((m, k), name="A")
    B = placeholder((k, n), name="B")
    r = reduce_axis(k, "k")
    M = compute((m, n), lambda i, j: sum_(A[i, r] * B[r, j], axis=r), name="M")
    return A, B, M


def row_sum_then_add():
    """R[i] = sum_k B[i, k] with B = A * 2; C = B + R (a reduction that is not an output)."""
    A, B = scale()
    k = reduce_axis(8, "k")
    R = compute((10,), lambda i: sum_(B[i, k], axis=k), name="R")
    C = compute((10, 8), lambda i, j: B[i, j] + R[i], name="C")
    return A, B, R, C


def check_numbers(sch, args, reference):
    """The scheduled kernel computes ``reference(*inputs)``."""
    inputs = [random_array(RNG, t.shape) for t in args[:-1]]
    (out,) = run_func(lower(sch, args, "kernel"), inputs)
    np.testing.assert_allclose(out, reference(*inputs), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# primitives and the loop nests they produce

def test_unscheduled_nest():
    A, B, C = chain()
    s = create_schedule(C)
    assert str(lower(s, [A, C], "f")) == nest("""
        func f(A: float32[10, 8], C: float32[10, 8])
          allocate B: float32[10, 8] (global)
          for (i: serial, 0, 10)
            for (j: serial, 0, 8)
              B[i, j] = A[i, j]*2.0f
          for (i: serial, 0, 10)
            for (j: serial, 0, 8)
              C[i, j] = B[i, j] + 1.0f
        """)


def test_split_that_divides_has_no_guard():
    A, B = scale()
    s = create_schedule(B)
    io, ii = s[B].split(s[B].op_axis[1], 4)
    assert (io.name, ii.name) == ("j.o", "j.i")
    assert str(lower(s, [A, B], "f")) == nest("""
        func f(A: float32[10, 8], B: float32[10, 8])
          for (i: serial, 0, 10)
            for (j.o: serial, 0, 2)
              for (j.i: serial, 0, 4)
                B[i, j.i + j.o*4] = A[i, j.i + j.o*4]*2.0f
        """)


def test_split_that_does_not_divide_leaves_a_guard():
    A, B = scale()
    s = create_schedule(B)
    s[B].split(s[B].op_axis[0], 4)
    assert str(guarded(lower(s, [A, B], "f"))) == nest("""
        func f(A: float32[10, 8], B: float32[10, 8])
          for (i.o: serial, 0, 3)
            for (i.i: serial, 0, 4)
              for (j: serial, 0, 8)
                if ((i.i + i.o*4) < 10)
                  B[i.i*8 + i.o*32 + j] = A[i.i*8 + i.o*32 + j]*2.0f
        """)
    check_numbers(s, [A, B], lambda a: a * 2)


def test_a_shift_tail_split_ends_its_last_block_at_the_extent():
    A, B = scale(10, 27)
    s = create_schedule(B)
    jo, ji = s[B].split(s[B].op_axis[1], 8, shift_tail=True)
    s[B].vectorize(ji)
    # four whole blocks, the last one starting at 19 (overlapping the third): no guard
    assert str(guarded(lower(s, [A, B], "f"))) == nest("""
        func f(A: float32[10, 27], B: float32[10, 27])
          for (i: serial, 0, 10)
            for (j.o: serial, 0, 4)
              for (j.i: vectorized, 0, 8)
                B[i*27 + j.i + min(j.o*8, 19)] = A[i*27 + j.i + min(j.o*8, 19)]*2.0f
        """)
    assert s.trace[-2]["shift_tail"] is True
    check_numbers(s, [A, B], lambda a: a * 2)
    with pytest.raises(ScheduleError, match="overlaps the one before it"):
        s[B].parallel(jo)


def test_a_shift_tail_block_attached_computes_its_whole_region():
    A, B, C = stencil()
    s = create_schedule(C)
    xo, xi = s[C].split(s[C].op_axis[1], 5, shift_tail=True)
    s[B].compute_at(s[C], xo)
    # each block reads a 3 x 5 box of B, the last one B[y:y+3, 7:12]: whole, unguarded
    assert str(optimize(lower(s, [A, C], "f"))) == nest("""
        func f(A: float32[16, 12], C: float32[14, 12])
          for (y: serial, 0, 14)
            for (x.o: serial, 0, 3)
              allocate B: float32[3, 5] (local)
              for (i: serial, 0, 3)
                for (j: serial, 0, 5)
                  B[i*5 + j] = A[i*12 + j + y*12 + min(x.o*5, 7)]*2.0f
              for (x.i: serial, 0, 5)
                C[x.i + y*12 + min(x.o*5, 7)] = B[x.i] + B[x.i + 5] + B[x.i + 10]
        """)
    check_numbers(s, [A, C], lambda a: 2 * (a[:-2] + a[1:-1] + a[2:]))


def test_split_by_nparts():
    A, B = scale()
    s = create_schedule(B)
    s[B].split(s[B].op_axis[0], nparts=3)       # 3 parts of ceil(10 / 3) = 4
    assert str(lower(s, [A, B], "f")) == nest("""
        func f(A: float32[10, 8], B: float32[10, 8])
          for (i.o: serial, 0, 3)
            for (i.i: serial, 0, 4)
              for (j: serial, 0, 8)
                if ((i.o*4 + i.i) < 10)
                  B[i.i + i.o*4, j] = A[i.i + i.o*4, j]*2.0f
        """)
    check_numbers(s, [A, B], lambda a: a * 2)


def test_split_factor_larger_than_the_extent_leaves_one_loop():
    A, B = scale()
    s = create_schedule(B)
    s[B].split(s[B].op_axis[0], 16)
    assert str(optimize(lower(s, [A, B], "f"))) == nest("""
        func f(A: float32[10, 8], B: float32[10, 8])
          for (i.i: serial, 0, 10)
            for (j: serial, 0, 8)
              B[i.i*8 + j] = A[i.i*8 + j]*2.0f
        """)


def test_tile_orders_outer_loops_first():
    A, B = scale()
    s = create_schedule(B)
    i, j = s[B].op_axis
    loops = s[B].tile(i, j, 5, 4)
    assert [sv.name for sv in loops] == ["i.o", "j.o", "i.i", "j.i"]
    assert s[B].leaf_vars == list(loops)
    assert str(optimize(lower(s, [A, B], "f"))) == nest("""
        func f(A: float32[10, 8], B: float32[10, 8])
          for (i.o: serial, 0, 2)
            for (j.o: serial, 0, 2)
              for (i.i: serial, 0, 5)
                for (j.i: serial, 0, 4)
                  B[i.i*8 + i.o*40 + j.i + j.o*4] = A[i.i*8 + i.o*40 + j.i + j.o*4]*2.0f
        """)


def test_fuse_makes_one_loop_and_flattening_undoes_the_div_mod():
    A, B = scale()
    s = create_schedule(B)
    fused = s[B].fuse(*s[B].op_axis)
    assert s[B].leaf_vars == [fused]
    assert str(lower(s, [A, B], "f")) == nest(f"""
        func f(A: float32[10, 8], B: float32[10, 8])
          for ({fused.name}: serial, 0, 80)
            B[{fused.name} // 8, {fused.name} % 8] = A[{fused.name} // 8, {fused.name} % 8]*2.0f
        """)
    assert str(optimize(lower(s, [A, B], "f"))) == nest(f"""
        func f(A: float32[10, 8], B: float32[10, 8])
          for ({fused.name}: serial, 0, 80)
            B[{fused.name}] = A[{fused.name}]*2.0f
        """)


def test_fuse_then_split_with_guard_computes_the_same():
    A, B, C = chain(7, 5)
    s = create_schedule(C)
    fused = s[C].fuse(*s[C].op_axis)
    outer, inner = s[C].split(fused, 8)          # 35 = 4 * 8 + 3
    s[C].vectorize(inner)
    s[B].compute_inline()
    check_numbers(s, [A, C], lambda a: a * 2 + 1)


def test_reorder_moves_only_the_named_loops():
    A = placeholder((4, 6, 5), name="A")
    B = compute((4, 6, 5), lambda a, b, c: A[a, b, c] + 1.0, name="B")
    s = create_schedule(B)
    a, b, c = s[B].op_axis
    s[B].reorder(c, a)                           # b keeps its place
    assert [sv.name for sv in s[B].leaf_vars] == ["c", "b", "a"]
    assert str(lower(s, [A, B], "f")) == nest("""
        func f(A: float32[4, 6, 5], B: float32[4, 6, 5])
          for (c: serial, 0, 5)
            for (b: serial, 0, 6)
              for (a: serial, 0, 4)
                B[a, b, c] = A[a, b, c] + 1.0f
        """)
    check_numbers(s, [A, B], lambda x: x + 1)


def test_loop_annotations_are_loop_kinds():
    A, B = scale()
    s = create_schedule(B)
    i, j = s[B].op_axis
    jo, ji = s[B].split(j, 4)
    s[B].parallel(i)
    s[B].unroll(jo)
    s[B].vectorize(ji)
    assert str(lower(s, [A, B], "f")) == nest("""
        func f(A: float32[10, 8], B: float32[10, 8])
          for (i: parallel, 0, 10)
            for (j.o: unrolled, 0, 2)
              for (j.i: vectorized, 0, 4)
                B[i, j.i + j.o*4] = A[i, j.i + j.o*4]*2.0f
        """)
    check_numbers(s, [A, B], lambda a: a * 2)


def test_reduction_init_nest_follows_the_first_reduction_loop():
    A, B, M = matmul()
    s = create_schedule(M)
    i, j = s[M].op_axis
    s[M].reorder(i, s[M].reduce_axis[0], j)
    s[M].vectorize(j)
    assert str(lower(s, [A, B, M], "mm")) == nest("""
        func mm(A: float32[6, 5], B: float32[5, 7], M: float32[6, 7])
          for (i: serial, 0, 6)
            for (j.init: vectorized, 0, 7)
              M[i, j.init] = 0.0f
            for (k: serial, 0, 5)
              for (j: vectorized, 0, 7)
                M[i, j] = M[i, j] + A[i, k]*B[k, j]
        """)
    check_numbers(s, [A, B, M], lambda a, b: a @ b)


def test_split_reduction_guards_the_update_only():
    A, B, M = matmul()
    s = create_schedule(M)
    s[M].split(s[M].reduce_axis[0], 2)           # 5 = 2 * 2 + 1
    assert str(lower(s, [A, B, M], "mm")) == nest("""
        func mm(A: float32[6, 5], B: float32[5, 7], M: float32[6, 7])
          for (i: serial, 0, 6)
            for (j: serial, 0, 7)
              M[i, j] = 0.0f
              for (k.o: serial, 0, 3)
                for (k.i: serial, 0, 2)
                  if ((k.o*2 + k.i) < 5)
                    M[i, j] = M[i, j] + A[i, k.i + k.o*2]*B[k.i + k.o*2, j]
        """)
    check_numbers(s, [A, B, M], lambda a, b: a @ b)


def test_compute_inline_removes_the_stage():
    A, B, C = chain()
    s = create_schedule(C)
    s[B].compute_inline()
    assert str(lower(s, [A, C], "f")) == nest("""
        func f(A: float32[10, 8], C: float32[10, 8])
          for (i: serial, 0, 10)
            for (j: serial, 0, 8)
              C[i, j] = A[i, j]*2.0f + 1.0f
        """)
    check_numbers(s, [A, C], lambda a: a * 2 + 1)


def test_compute_at_computes_the_region_the_consumer_reads():
    A, B, C = stencil()
    s = create_schedule(C)
    yo, yi = s[C].split(s[C].op_axis[0], 4)
    s[B].compute_at(s[C], yo)
    # 4 rows of C read 6 rows of B; the last block overhangs B (16 rows) and is guarded
    assert str(guarded(lower(s, [A, C], "f"))) == nest("""
        func f(A: float32[16, 12], C: float32[14, 12])
          for (y.o: serial, 0, 4)
            allocate B: float32[6, 12] (local)
            for (i: serial, 0, 6)
              for (j: serial, 0, 12)
                if ((i + y.o*4) < 16)
                  B[i*12 + j] = A[i*12 + j + y.o*48]*2.0f
            for (y.i: serial, 0, 4)
              for (x: serial, 0, 12)
                if ((y.i + y.o*4) < 14)
                  C[x + y.i*12 + y.o*48] = B[x + y.i*12] + B[x + y.i*12 + 12] + B[x + y.i*12 + 24]
        """)
    check_numbers(s, [A, C], lambda a: 2 * (a[:-2] + a[1:-1] + a[2:]))


def test_compute_at_an_inner_loop_shrinks_the_region():
    A, B, C = stencil()
    s = create_schedule(C)
    y, x = s[C].op_axis
    s[B].compute_at(s[C], x)                     # one column, three rows per element of C
    func = lower(s, [A, C], "f")
    assert "allocate B: float32[3, 1] (local)" in str(func)
    check_numbers(s, [A, C], lambda a: 2 * (a[:-2] + a[1:-1] + a[2:]))


def test_cache_write_computes_into_a_local_buffer():
    A, B, M = matmul()
    s = create_schedule(M)
    ML = s.cache_write(M, "local")
    assert ML.name == "M.local"
    assert s[M].reduce_axis == []                # M became a copy out of M.local
    io, ii = s[M].split(s[M].op_axis[0], nparts=2)
    s[ML].compute_at(s[M], io)
    assert str(lower(s, [A, B, M], "mm")) == nest("""
        func mm(A: float32[6, 5], B: float32[5, 7], M: float32[6, 7])
          for (i.o: serial, 0, 2)
            allocate M.local: float32[3, 7] (local)
            for (i: serial, 0, 3)
              for (j: serial, 0, 7)
                M.local[i, j] = 0.0f
                for (k: serial, 0, 5)
                  M.local[i, j] = M.local[i, j] + A[i + i.o*3, k]*B[k, j]
            for (i.i: serial, 0, 3)
              for (j: serial, 0, 7)
                M[i.i + i.o*3, j] = M.local[i.i, j]
        """)
    check_numbers(s, [A, B, M], lambda a, b: a @ b)


def test_cache_read_copies_the_input_where_it_is_read():
    A, B, M = matmul()
    s = create_schedule(M)
    AL = s.cache_read(A, "local", [M])
    s[AL].compute_at(s[M], s[M].op_axis[0])
    func = str(lower(s, [A, B, M], "mm"))
    assert "allocate A.local: float32[1, 5] (local)" in func
    assert "M[i, j] + A.local[0, k]*B[k, j]" in func
    check_numbers(s, [A, B, M], lambda a, b: a @ b)


def test_compute_root_undoes_compute_at():
    A, B, C = chain()
    s = create_schedule(C)
    s[B].compute_at(s[C], s[C].op_axis[0])
    s[B].compute_root()
    A2, B2, C2 = chain()
    assert str(lower(s, [A, C], "f")) == str(lower(create_schedule(C2), [A2, C2], "f"))


def test_the_readme_example_runs():
    A = placeholder((64, 32), name="A")
    B = placeholder((32, 40), name="B")
    k = reduce_axis(32, "k")
    C = compute((64, 40), lambda i, j: sum_(A[i, k] * B[k, j], axis=k), name="C")
    D = compute((64, 40), lambda i, j: C[i, j] + 1.0, name="D")
    s = create_schedule(D)
    CL = s.cache_write(C, "local")
    i, j = s[D].op_axis
    io, jo, ii, ji = s[D].tile(i, j, 4, 16)
    s[D].vectorize(ji)
    s[D].parallel(io)
    s[C].compute_at(s[D], jo)
    a, b = s[CL].op_axis
    s[CL].reorder(s[CL].reduce_axis[0], a, b)
    s[CL].vectorize(b)
    s[CL].unroll(a)
    s[CL].compute_at(s[D], jo)
    check_numbers(s, [A, B, D], lambda a, b: a @ b + 1)


# ---------------------------------------------------------------------------------------------
# illegal calls

def _split_zero(s, A, B, R, C):
    s[C].split(s[C].op_axis[0], 0)


def _split_nparts_zero(s, A, B, R, C):
    s[C].split(s[C].op_axis[0], nparts=0)


def _shift_tail_reduction(s, A, B, R, C):
    s[R].split(s[R].reduce_axis[0], 3, shift_tail=True)


def _split_both(s, A, B, R, C):
    s[C].split(s[C].op_axis[0], factor=2, nparts=2)


def _fuse_non_consecutive(s, A, B, R, C):
    i, j = s[C].op_axis
    io, ii = s[C].split(i, 2)
    s[C].fuse(io, j)


def _fuse_spatial_and_reduce(s, A, B, R, C):
    s[R].fuse(s[R].op_axis[0], s[R].reduce_axis[0])


def _parallel_reduce(s, A, B, R, C):
    s[R].parallel(s[R].reduce_axis[0])


def _inline_reduction(s, A, B, R, C):
    s[R].compute_inline()


def _inline_output(s, A, B, R, C):
    s[C].compute_inline()


def _compute_at_output(s, A, B, R, C):
    s[C].compute_at(s[R], s[R].op_axis[0])


def _reorder_non_leaf(s, A, B, R, C):
    i, j = s[C].op_axis
    s[C].split(i, 2)
    s[C].reorder(j, i)


def _reorder_twice(s, A, B, R, C):
    i, j = s[C].op_axis
    s[C].reorder(j, j)


def _split_again(s, A, B, R, C):
    i, j = s[C].op_axis
    s[C].split(i, 2)
    s[C].split(i, 2)


def _loop_of_another_stage(s, A, B, R, C):
    s[B].vectorize(s[C].op_axis[1])


def _compute_at_loop_of_another_stage(s, A, B, R, C):
    s[B].compute_at(s[C], s[R].op_axis[0])


def _unknown_loop_name(s, A, B, R, C):
    s[C].split("zz", 2)


def _unknown_stage(s, A, B, R, C):
    s["nope"]


def _cache_write_input(s, A, B, R, C):
    s.cache_write(A, "local")


def _cache_write_after_split(s, A, B, R, C):
    s[R].split(s[R].op_axis[0], 2)
    s.cache_write(R, "local")


@pytest.mark.parametrize("illegal, message", [
    (_split_zero, "split factor must be >= 1, got 0"),
    (_split_nparts_zero, "split nparts must be >= 1, got 0"),
    (_split_both, "exactly one of factor= and nparts="),
    (_shift_tail_reduction, "shift_tail splits a spatial loop by a factor"),
    (_fuse_non_consecutive, "fuse needs consecutive loops"),
    (_fuse_spatial_and_reduce, "cannot fuse a spatial loop with a reduction loop"),
    (_parallel_reduce, "cannot run reduction loop k in parallel"),
    (_inline_reduction, "cannot inline R: only reduction-free computes"),
    (_inline_output, "cannot inline C: it is an output"),
    (_compute_at_output, "cannot compute output C at another stage"),
    (_reorder_non_leaf, "loop i of stage C is not a leaf loop"),
    (_reorder_twice, "reorder got the same loop twice"),
    (_split_again, "loop i of stage C is not a leaf loop"),
    (_loop_of_another_stage, "loop j is not a loop of stage B"),
    (_compute_at_loop_of_another_stage, "loop i is not a loop of stage C"),
    (_unknown_loop_name, "stage C has no loop named 'zz'"),
    (_unknown_stage, "schedule has no stage named 'nope'"),
    (_cache_write_input, "cannot cache_write input A"),
    (_cache_write_after_split, "cache_write on R must come before its loops are split"),
])
def test_illegal_primitive_raises(illegal, message):
    A, B, R, C = row_sum_then_add()
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        illegal(s, A, B, R, C)


def test_a_refused_call_changes_nothing():
    A, B, R, C = row_sum_then_add()
    s = create_schedule(C)
    i, j = s[C].op_axis
    io, ii = s[C].split(i, 4)
    trace, leaves = list(s.trace), list(s[C].leaf_vars)
    for illegal in (lambda: s[C].split(ii, 0), lambda: s[C].fuse(io, j),
                    lambda: s[C].reorder(ii, ii), lambda: s[R].parallel(s[R].reduce_axis[0]),
                    lambda: s[R].compute_inline(), lambda: s[C].compute_inline(),
                    lambda: s[C].compute_at(s[R], s[R].op_axis[0])):
        with pytest.raises(ScheduleError):
            illegal()
    assert s.trace == trace
    assert s[C].leaf_vars == leaves
    assert s[R].loop_kind == {} and s[R].attach == "root" and s[C].attach == "root"


def test_compute_at_one_reader_while_another_reads_it_outside_fails_to_lower():
    A, B, R, C = row_sum_then_add()
    s = create_schedule(C)
    s[B].compute_at(s[R], s[R].op_axis[0])       # C reads B too, outside R's loop
    with pytest.raises(ScheduleError, match="B is computed at R.i but is also read outside "
                                            "that loop"):
        lower(s, [A, C], "f")


def _three_stage_chain():
    """P = A * 2; S = P + 1; Q = S * 3."""
    A = placeholder((6, 8), name="A")
    P = compute((6, 8), lambda i, j: A[i, j] * 2.0, name="P")
    S = compute((6, 8), lambda i, j: P[i, j] + 1.0, name="S")
    Q = compute((6, 8), lambda i, j: S[i, j] * 3.0, name="Q")
    return A, P, S, Q


def test_compute_at_where_nothing_reads_it_fails_to_lower():
    A, P, S, Q = _three_stage_chain()
    s = create_schedule(Q)
    i, j = s[Q].op_axis
    s[S].compute_at(s[Q], i)
    s[P].compute_at(s[Q], j)                     # S, its reader, runs outside loop j
    with pytest.raises(ScheduleError, match="P is computed at Q.j but neither Q nor a stage "
                                            "computed there reads it"):
        lower(s, [A, Q], "f")


def test_producer_and_consumer_computed_at_the_same_loop():
    A, P, S, Q = _three_stage_chain()
    s = create_schedule(Q)
    i, j = s[Q].op_axis
    s[P].compute_at(s[Q], i)
    s[S].compute_at(s[Q], i)
    func = str(lower(s, [A, Q], "f"))
    assert func.index("allocate P: float32[1, 8]") < func.index("allocate S: float32[1, 8]")
    check_numbers(s, [A, Q], lambda a: (a * 2 + 1) * 3)


def test_output_missing_from_the_arguments_fails_to_lower():
    A, B, C = chain()
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="output C is not among the function's arguments"):
        lower(s, [A], "f")


def test_input_missing_from_the_arguments_fails_to_lower():
    A, B, C = chain()
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="input A is read but is neither an argument"):
        lower(s, [C], "f")


# ---------------------------------------------------------------------------------------------
# traces

def _scheduled_program():
    """A program and a schedule using every kind of primitive; returns (schedule, args)."""
    A = placeholder((33, 20), name="A")
    B = placeholder((20, 27), name="B")
    bias = placeholder((27,), name="bias")
    k = reduce_axis(20, "k")
    scaled = compute((33, 20), lambda i, j: A[i, j] * 0.5, name="scaled")
    C = compute((33, 27), lambda i, j: sum_(scaled[i, k] * B[k, j], axis=k), name="C")
    D = compute((33, 27), lambda i, j: C[i, j] + bias[j], name="D")
    s = create_schedule(D)
    return s, [A, B, bias, D]


def _schedule_it(s):
    scaled, C, D = s["scaled"], s["C"], s["D"]
    CL = s.cache_write(C.tensor, "local")
    BL = s.cache_read(s["B"].tensor, "local", [CL])
    i, j = D.op_axis
    io, jo, ii, ji = D.tile(i, j, 8, 16)
    fused = D.fuse(io, jo)
    D.parallel(fused)
    D.vectorize(ji)
    C.compute_at(D, fused)
    a, b = s[CL].op_axis
    ko, ki = s[CL].split(s[CL].reduce_axis[0], nparts=3)
    s[CL].reorder(ko, a, ki, b)
    s[CL].vectorize(b)
    s[CL].unroll(ki)
    s[CL].compute_at(D, fused)
    s[BL].compute_at(s[CL], ko)
    scaled.compute_inline()
    return s


def test_trace_records_every_call():
    s, args = _scheduled_program()
    _schedule_it(s)
    assert [rec["prim"] for rec in s.trace] == [
        "cache_write", "cache_read", "split", "split", "reorder", "fuse", "parallel",
        "vectorize", "compute_at", "split", "reorder", "vectorize", "unroll", "compute_at",
        "compute_at", "compute_inline"]
    assert s.trace[2] == {"prim": "split", "stage": "D", "var": "i", "factor": 8,
                          "nparts": None}


def test_trace_round_trip_rebuilds_the_same_kernel():
    s, args = _scheduled_program()
    _schedule_it(s)
    text = trace_to_json(s.trace)
    assert trace_from_json(text) == s.trace

    fresh, fresh_args = _scheduled_program()
    replay(fresh, trace_from_json(text))
    assert fresh.trace == s.trace
    func = lower(s, args, "mm")
    replayed = lower(fresh, fresh_args, "mm")
    assert str(replayed) == str(func)
    assert str(optimize(replayed)) == str(optimize(func))

    inputs = [random_array(RNG, t.shape) for t in args[:-1]]
    (want,) = run_kernel(compile_func(func), inputs)
    (got,) = run_kernel(compile_func(replayed), inputs)
    np.testing.assert_array_equal(got, want)
    a, b, bias = inputs
    np.testing.assert_allclose(got, (a * 0.5) @ b + bias, rtol=1e-5, atol=1e-5)


def test_replay_rejects_an_unknown_primitive():
    s, _ = _scheduled_program()
    with pytest.raises(ScheduleError, match="unknown schedule primitive 'swizzle'"):
        replay(s, [{"prim": "swizzle", "stage": "D"}])


def test_replay_on_another_program_fails_with_a_schedule_error():
    s, _ = _scheduled_program()
    _schedule_it(s)
    A, B, C = chain()
    with pytest.raises(ScheduleError, match="no stage named"):
        replay(create_schedule(C), s.trace)


# ---------------------------------------------------------------------------------------------
# rfactor: partial reductions in a vector

@pytest.mark.parametrize("extents, factor", [((13, 13), 8), ((8, 16), 8), ((1, 100), 16),
                                             ((37,), 4)])
def test_rfactor_vectorizes_a_row_reduction(extents, factor):
    A = placeholder((5, *extents), name="A")
    axes = [reduce_axis(n, f"r{d}") for d, n in enumerate(extents)]
    B = compute((5,), lambda i: sum_(A[(i, *axes)], axis=axes), name="B")
    s = create_schedule(B)
    rf = s.rfactor(B, factor)
    (i,) = s[B].op_axis
    s[rf].compute_at(s[B], i)
    *_, j = s[rf].op_axis
    s[rf].reorder(*s[rf].reduce_axis, j)
    s[rf].vectorize(j)
    func = optimize(lower(s, [A, B], "rowsum"))
    # the partials accumulate along the contiguous row: one load per lane, no div/mod
    assert f"B.rf: float32[1, {factor}] (local)" in str(func)
    assert "//" not in str(func) and "%" not in str(func)
    check_numbers(s, [A, B], lambda a: a.reshape(5, -1).sum(axis=1))
    again = replay(create_schedule(compute((5,), lambda i: sum_(A[(i, *axes)], axis=axes),
                                           name="B")), trace_from_json(trace_to_json(s.trace)))
    assert "rfactor" in trace_to_json(s.trace)
    assert len(again.stages) == len(s.stages)


def test_rfactor_lane_first_puts_the_partials_axis_first():
    """K in 2 consecutive blocks with the block axis first: RF[b, i, j], each block's
    partial row contiguous in a local buffer (whole vectors), the blocks' sums side by side
    inside the k loop; 37 = 19 + 18, the overhanging k adds nothing. Replays."""
    A, B, M = matmul(3, 37, 32)
    s = create_schedule(M)
    rf = s.rfactor(M, 19, blocked=True, lane_first=True)
    assert rf.shape == (2, 3, 32)
    i, j = s[M].op_axis
    (b,) = s[M].reduce_axis
    s[M].reorder(i, b, j)
    s[rf].compute_at(s[M], i)
    lb, li, lj = s[rf].op_axis
    (k,) = s[rf].reduce_axis
    s[rf].reorder(li, k, lb, lj)
    s[rf].unroll(lb)
    s[rf].vectorize(lj)
    text = str(guarded(lower(s, [A, B, M], "f")))
    assert "M.rf: float32[2, 1, 32] (local)" in text
    check_numbers(s, [A, B, M], lambda a, b: a @ b)
    assert '"lane_first": true' in trace_to_json(s.trace)
    A2, B2, M2 = matmul(3, 37, 32)
    again = replay(create_schedule(M2), trace_from_json(trace_to_json(s.trace)))
    assert str(guarded(lower(again, [A2, B2, M2], "f"))) == text


def test_rfactor_keeps_max_semantics_with_an_overhang():
    from tensorc.ir.te import max_
    A = placeholder((3, 21), name="A")
    k = reduce_axis(21, "k")
    B = compute((3,), lambda i: max_(A[i, k] - 100.0, axis=k), name="B")
    s = create_schedule(B)
    s.rfactor(B, 8)     # 24 slots for 21 elements: the 3 extra contribute -inf, not 0
    check_numbers(s, [A, B], lambda a: (a - 100).max(axis=1))


def test_rfactor_refuses_what_it_cannot_do():
    A, B = scale()
    s = create_schedule(B)
    with pytest.raises(ScheduleError, match="needs a reduction"):
        s.rfactor(B, 8)
    A, B, M = matmul()
    s = create_schedule(M)
    s[M].split(s[M].op_axis[0], 2)
    with pytest.raises(ScheduleError, match="before its loops are split"):
        s.rfactor(M, 4)



def test_rfactor_axis_puts_one_reduction_axis_outside_the_output_loops():
    """C[i, j] = sum(A[c, i, k] * B[c, k, j] for c, k): the c axis split off (a conv's
    channel blocks), outside C's j tiles: each c adds its partial sums to C's row."""
    A = placeholder((3, 4, 8), name="A")
    Bt = placeholder((3, 8, 32), name="B")
    c, k = reduce_axis(3, "c"), reduce_axis(8, "k")
    C = compute((4, 32), lambda i, j: sum_(A[c, i, k] * Bt[c, k, j], axis=[c, k]), name="C")
    s = create_schedule(C)
    rf = s.rfactor_axis(C, s[C].op.reduce_axis[0])
    assert [iv.var.name for iv in s[rf].op.reduce_axis] == ["k"]
    assert rf.shape == (4, 32, 3)
    i, j = s[C].op_axis
    (rc,) = s[C].reduce_axis
    jo, ji = s[C].split(j, 8)
    s[C].reorder(i, rc, jo, ji)
    s[rf].compute_at(s[C], jo)
    *_, rj, _ = s[rf].op_axis
    s[rf].reorder(*s[rf].reduce_axis, rj)
    s[rf].vectorize(rj)
    text = str(optimize(lower(s, [A, Bt, C], "kernel")))
    # the channel loop outside the row's tiles, each tile a partial sum of 8 in a buffer
    assert text.index("for (c: serial, 0, 3)") < text.index("for (j.o: serial, 0, 4)")
    assert "C.rf: float32[1, 8, 1] (local)" in text
    check_numbers(s, [A, Bt, C], lambda a, b: np.einsum("cik,ckj->ij", a, b))
    again = create_schedule(compute((4, 32), lambda i, j: sum_(A[c, i, k] * Bt[c, k, j],
                                                               axis=[c, k]), name="C"))
    again = replay(again, trace_from_json(trace_to_json(s.trace)))
    assert str(optimize(lower(again, [A, Bt, again.outputs[0]], "kernel"))) == text


def test_rfactor_axis_refuses_what_it_cannot_do():
    A, B, M = matmul()
    s = create_schedule(M)
    with pytest.raises(ScheduleError, match="several reduction axes"):
        s.rfactor_axis(M, s[M].op.reduce_axis[0])       # a single axis: nothing to split off
    A, B = scale()
    with pytest.raises(ScheduleError, match="needs a reduction"):
        create_schedule(B).rfactor_axis(B, None)

def test_a_stage_recomputed_whole_in_every_iteration_is_reported():
    import warnings

    from tensorc.ir.lower import RedundantComputeWarning
    # the max-pool: 3 axes fused and split by 16 (13 is no multiple): the region of
    # one outer iteration cannot be narrowed through the fused index
    A = placeholder((4, 13, 13), name="A")
    B = compute((4, 13, 13), lambda c, i, j: A[c, i, j] * 2.0, name="B")
    C = compute((4, 13, 13), lambda c, i, j: B[c, i, j] + 1.0, name="C")
    s = create_schedule(C)
    outer, _ = s[C].split(s[C].fuse(*s[C].op_axis), 16)
    s[B].compute_at(s[C], outer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        func = lower(s, [A, C], "redundant")
    assert any(issubclass(w.category, RedundantComputeWarning) and
               "recomputed 43 times" in str(w.message) for w in caught)
    assert "B: float32[4, 13, 13] (local)" in str(func)


# ---------------------------------------------------------------------------------------------
# compute_if: a stage computed only where a flag is nonzero

def flagged(n: int = 6, m: int = 8):
    """F[i] = sum of A[i, :] > 0 counted; B = A * 2; C[i, j] = F[i] > 0 ? B[i, j] : -A[i, j]."""
    from tensorc.ir import expr as E
    A = placeholder((n, m), name="A")
    k = reduce_axis(m, "k")
    one, zero = E.Const(1.0, "float32"), E.Const(0.0, "float32")
    F = compute((n,), lambda i: sum_(E.select(E.Compare("gt", A[i, k], zero), one, zero),
                                     axis=k), name="F")
    B = compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = compute((n, m), lambda i, j: E.select(E.Compare("gt", F[i], zero), B[i, j],
                                              A[i, j] * -1.0), name="C")
    return A, F, B, C


def test_compute_if_wraps_the_stage_in_its_test():
    A, F, B, C = flagged()
    s = create_schedule(C)
    i, _ = s[C].op_axis
    s[F].compute_at(s[C], i)
    s[B].compute_at(s[C], i)
    s[B].compute_if(F)
    assert str(guarded(lower(s, [A, C], "f"))) == nest("""
        func f(A: float32[6, 8], C: float32[6, 8])
          for (i: serial, 0, 6)
            allocate F: float32[1] (local)
            F[0] = 0.0f
            for (k: serial, 0, 8)
              F[0] = F[0] + select(A[i*8 + k] > 0.0f, 1.0f, 0.0f)
            allocate B: float32[1, 8] (local)
            if (F[0] != 0.0f)
              for (j: serial, 0, 8)
                B[j] = A[i*8 + j]*2.0f
            for (j: serial, 0, 8)
              C[i*8 + j] = select(F[0] > 0.0f, B[j], A[i*8 + j]*-1.0f)
        """)
    a = random_array(RNG, A.shape)
    a[1] = -np.abs(a[1]) - 0.5          # rows with no positive element take the other value
    a[4] = -np.abs(a[4]) - 0.5
    (out,) = run_func(lower(s, [A, C], "kernel"), [a])
    want = np.where((a > 0).any(axis=1, keepdims=True), 2 * a, -a)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    again = replay(create_schedule(flagged()[3]), trace_from_json(trace_to_json(s.trace)))
    assert again[B.op.name].condition is not None


def test_compute_if_needs_one_flag_per_region():
    A, F, B, C = flagged()
    s = create_schedule(C)
    s[B].compute_if(F)                   # at the root: no loop to test the flag at
    with pytest.raises(ScheduleError, match="needs a loop to test it at"):
        lower(s, [A, C], "f")
    s = create_schedule(C)
    io, _ = s[C].split(s[C].op_axis[0], 2)
    s[F].compute_at(s[C], io)
    s[B].compute_at(s[C], io)           # two rows of B per iteration: which flag?
    s[B].compute_if(F)
    with pytest.raises(ScheduleError, match="spans 2 elements of axis i"):
        lower(s, [A, C], "f")
    with pytest.raises(ScheduleError, match="more than the 1 axes"):
        create_schedule(F)[F].compute_if(C)



# ---------------------------------------------------------------------------------------------
# prefetch: a hint at the top of a loop for what its body reads some iterations later

def test_prefetch_opens_the_loop_with_the_run_read_offset_iterations_on():
    A, B, M = matmul(6, 40, 32)
    s = create_schedule(M)
    i, j = s[M].op_axis
    (k,) = s[M].reduce_axis
    s[M].reorder(i, k, j)
    s[M].vectorize(j)
    s[M].prefetch(B, k, 4)
    func = guarded(lower(s, [A, B, M], "f"))
    assert str(func) == nest("""
        func f(A: float32[6, 40], B: float32[40, 32], M: float32[6, 32])
          for (i: serial, 0, 6)
            for (j.init: vectorized, 0, 32)
              M[i*32 + j.init] = 0.0f
            for (k: serial, 0, 40)
              prefetch B[k*32 + 128] (128 bytes)
              for (j: vectorized, 0, 32)
                M[i*32 + j] = M[i*32 + j] + A[i*40 + k]*B[j + k*32]
        """)
    # one prefetch per 64-byte line of the row, past B's end in the last iterations (a
    # prefetch does not fault)
    text = llvm_ir(optimize(lower(s, [A, B, M], "f")))
    assert len(re.findall(r'call void @"llvm\.prefetch', text)) == 2
    a, b = random_array(RNG, A.shape), random_array(RNG, B.shape)
    (out,) = run_func(lower(s, [A, B, M], "kernel"), [a, b])
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    again = replay(create_schedule(matmul(6, 40, 32)[2]), trace_from_json(trace_to_json(s.trace)))
    assert [(t.name, sv.name, n, along, level) for t, sv, n, along, level in
            again[M.op.name].prefetches] == [("B", "k", 4, None, 1)]


def _panel_tiles(s, A, B, M):
    """M's columns in panels of 16 outside its rows; a local tile per (panel, row) computed
    at the row loop, k outside the tile's columns. Returns the tile's stage, its k and the
    panel loop."""
    local = s.cache_write(M, "local")
    i, j = s[M].op_axis
    jo, ji = s[M].split(j, 16)
    s[M].reorder(jo, i, ji)
    s[local].compute_at(s[M], i)
    li, lj = s[local].op_axis
    (k,) = s[local].reduce_axis
    s[local].reorder(li, k, lj)
    s[local].vectorize(lj)
    return s[local], k, jo


def test_prefetch_along_an_enclosing_loop_asks_for_its_next_iteration_into_l2():
    """A tile's k loop asks for the row that the next panel's tiles will read (``along`` the
    panel loop of the stage it is computed at), into L2: the offset is one panel, not rows
    of k, the codegen's locality is 2 (prefetcht1), and the trace replays it."""
    A, B, M = matmul(6, 40, 64)
    s = create_schedule(M)
    tile, k, panel = _panel_tiles(s, A, B, M)
    tile.prefetch(B, k, 1, along=(s[M], panel), level=2)
    text = str(guarded(lower(s, [A, B, M], "f")))
    assert [line.strip() for line in text.splitlines() if "prefetch" in line] == [
        "prefetch B[j.o*16 + k*64 + 16] (64 bytes, into L2)"]
    ir_text = llvm_ir(optimize(lower(s, [A, B, M], "f")))
    assert re.search(r'call void @"llvm\.prefetch\.p0"\(ptr [^,]+, i32 0, i32 2, i32 1\)',
                     ir_text)
    check_numbers(s, [A, B, M], lambda a, b: a @ b)
    A2, B2, M2 = matmul(6, 40, 64)
    again = replay(create_schedule(M2), trace_from_json(trace_to_json(s.trace)))
    (prefetch,) = again[s.trace[-1]["stage"]].prefetches
    assert (prefetch[0].name, prefetch[1].name, prefetch[2], prefetch[3].name, prefetch[4]) == \
        ("B", "k", 1, "j.o", 2)
    assert str(guarded(lower(again, [A2, B2, M2], "f"))) == text


def test_prefetch_along_is_checked():
    A, B, M = matmul(6, 40, 64)
    s = create_schedule(M)
    tile, k, panel = _panel_tiles(s, A, B, M)
    with pytest.raises(ScheduleError, match="level 3 is not a cache level"):
        tile.prefetch(B, k, 1, along=(s[M], panel), level=3)
    rows = s[M].leaf_vars[1]
    tile.prefetch(B, k, 1, along=(s[M], rows))      # every row's tile reads the same B
    with pytest.raises(ScheduleError, match="at the same place in every iteration of i"):
        lower(s, [A, B, M], "f")


def test_prefetch_is_checked_where_it_is_declared_and_lowered():
    A, B, M = matmul(6, 40, 32)
    s = create_schedule(M)
    i, j = s[M].op_axis
    (k,) = s[M].reduce_axis
    with pytest.raises(ScheduleError, match="at least one iteration ahead"):
        s[M].prefetch(B, k, 0)
    s[M].prefetch(B, i, 1)          # the loops inside i read all of B
    with pytest.raises(ScheduleError, match="one iteration reads 80 cache lines of B"):
        lower(s, [A, B, M], "f")
    s = create_schedule(M)
    s[M].prefetch(B, s[M].reduce_axis[0], 2)
    s[M].split(s[M].reduce_axis[0], 8)
    with pytest.raises(ScheduleError, match="split or fused after the prefetch"):
        lower(s, [A, B, M], "f")
    C = compute((6, 32), lambda i, j: M[i, j] * 2.0, name="C")
    s = create_schedule(C)
    s[C].prefetch(B, s[C].op_axis[0], 1)
    with pytest.raises(ScheduleError, match="C does not read B"):
        lower(s, [A, B, C], "f")


def test_prefetch_of_a_strided_region_asks_for_each_run():
    A, B, M = matmul(6, 40, 32)
    s = create_schedule(M)
    i, j = s[M].op_axis
    (k,) = s[M].reduce_axis
    s[M].reorder(k, i, j)              # each step of k reads a column of A: 6 runs of one
    s[M].prefetch(A, k, 2)
    text = str(guarded(lower(s, [A, B, M], "f")))
    assert [line.strip() for line in text.splitlines() if "prefetch" in line] == [
        f"prefetch A[k + {2 + 40 * r}] (4 bytes)" for r in range(6)]
    check_numbers(s, [A, B, M], lambda a, b: a @ b)

"""The tail tile of a symbolic split run as pieces of 4, 2 and 1 rows (passes/loop/tail_pieces.py):
each remainder count of rows against numpy, with serial and parallel row blocks; the pieces'
count in the loop IR; the local accumulators indexed by constants in every piece."""
import numpy as np
import pytest

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.loop import Allocate, Store, walk_stmts
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.passes.loop import optimize
from tensorc.runtime.kernel import build_kernel


def _register_tiled_matmul(rows: int, parallel: bool):
    """C[M, 24] = A[M, K] @ B[K, 24], M and K symbolic, in register tiles of ``rows`` rows
    (unrolled) by 8 lanes: (func, A, B, C)."""
    m, kd = dim_var("M"), dim_var("K")
    a = te.placeholder((m, kd), name="A")
    b = te.placeholder((kd, 24), name="B")
    k = te.reduce_axis(kd, "k")
    c = te.compute((m, 24), lambda i, j: te.sum_(a[i, k] * b[k, j], axis=k), name="C")
    s = create_schedule([c])
    cl = s.cache_write(c, "local")
    i, j = s[c].op_axis
    io, ii = s[c].split(i, rows)
    jo, ji = s[c].split(j, 8)
    s[c].reorder(io, jo, ii, ji)
    s[c].vectorize(ji)
    if parallel:
        s[c].parallel(io)
    s[cl].compute_at(s[c], jo)
    ci, cj = s[cl].op_axis
    s[cl].reorder(s[cl].reduce_axis[0], ci, cj)
    s[cl].vectorize(cj)
    s[cl].unroll(ci)
    return optimize(lower(s, [a, b, c], "mm"))


def _accumulators(func):
    return [s for s in walk_stmts(func.body)
            if isinstance(s, Allocate) and s.buffer.scope == "local"]


@pytest.mark.parametrize("rows", [4, 6, 8])
@pytest.mark.parametrize("parallel", [False, True])
def test_each_remainder_of_rows_matches_numpy(rows, parallel):
    func = _register_tiled_matmul(rows, parallel)
    kernel = build_kernel(func)
    rng = np.random.default_rng(rows)
    # every remainder 0..rows-1 with no whole tile before it and with some
    for m in [*range(0, 2 * rows + 2), 61]:
        for depth in (1, 7):
            x = rng.standard_normal((m, depth)).astype("float32")
            y = rng.standard_normal((depth, 24)).astype("float32")
            out = np.full((m, 24), np.nan, "float32")
            for threads in (1, 2):
                kernel(x, y, out, num_threads=threads)
                np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4,
                                           err_msg=f"{m} rows in tiles of {rows}")


@pytest.mark.parametrize("rows,pieces", [(4, 2), (6, 3), (8, 3)])
def test_the_tail_is_one_piece_per_binary_digit(rows, pieces):
    # the whole tiles' accumulators, then one per piece (not one per remainder: rows - 1)
    assert len(_accumulators(_register_tiled_matmul(rows, parallel=True))) == 1 + pieces


def test_a_piece_keeps_its_accumulators_at_constant_rows():
    func = _register_tiled_matmul(6, parallel=False)
    local = {a.buffer for a in _accumulators(func)}
    dims = set(func.dims)
    for s in walk_stmts(func.body):
        indices = [s.indices] if isinstance(s, Store) and s.buffer in local else []
        if isinstance(s, Store):
            indices += [x.indices for x in E.walk(s.value)
                        if isinstance(x, E.Load) and x.source in local]
        for index in indices:
            assert not any(E.free_vars(i) & dims for i in index), index

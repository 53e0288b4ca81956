"""Kernels over symbolic dims: loop extents and buffer shapes that are expressions of dims
whose values arrive at run time, with constant tiles, guarded tails, and the guard-free
whole tiles that passes/loop/symbolic_tails.py splits off. Checked against numpy at dims of
0, 1, primes, multiples of the tiles and sizes just past them."""
import numpy as np
import pytest
from helpers_kernels import symbolic_tiled_matmul

from tensorc.errors import InputError, ScheduleError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.loop import IfThenElse, walk_stmts
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.passes.loop import optimize
from tensorc.runtime.kernel import build_kernel

SIZES = [0, 1, 2, 7, 8, 9, 31, 100, 257]


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def test_elementwise_rows_symbolic_parallel():
    n = dim_var("N")
    a = te.placeholder((n, 37), name="A")
    b = te.placeholder((37,), name="B")
    c = te.compute((n, 37), lambda i, j: a[i, j] + b[j], name="C")
    s = create_schedule([c])
    i, j = s[c].op_axis
    s[c].vectorize(s[c].split(j, 8)[1])
    s[c].parallel(i)
    func = optimize(lower(s, [a, b, c], "add"))
    assert [v.name for v in func.dims] == ["N"]
    kernel = build_kernel(func)
    rng = np.random.default_rng(0)
    for rows in SIZES:
        x, y = _rand(rng, rows, 37), _rand(rng, 37)
        out = np.full((rows, 37), np.nan, "float32")
        for threads in (1, 2):
            kernel(x, y, out, num_threads=threads)
            np.testing.assert_allclose(out, x + y, rtol=1e-6)


def test_symbolic_inner_dim_vectorized_with_tail():
    r, length = dim_var("R"), dim_var("L")
    a = te.placeholder((r, length), name="A")
    c = te.compute((r, length), lambda i, j: a[i, j] * 2.0, name="C")
    s = create_schedule([c])
    i, j = s[c].op_axis
    s[c].vectorize(s[c].split(j, 8)[1])
    s[c].parallel(i)
    func = optimize(lower(s, [a, c], "scale"))
    # the whole tiles carry no guard; only the tail's lanes do (the tail itself, which runs
    # once or not at all, is an if over the dims: passes/loop/single_tails.py)
    guards = [st for st in walk_stmts(func.body) if isinstance(st, IfThenElse)]
    assert len([g for g in guards if E.free_vars(g.cond) - set(func.dims)]) == 1
    kernel = build_kernel(func)
    rng = np.random.default_rng(1)
    for rows, cols in [(1, 1), (3, 7), (5, 8), (2, 9), (17, 100), (4, 0), (0, 5)]:
        x = _rand(rng, rows, cols)
        out = np.full((rows, cols), np.nan, "float32")
        kernel(x, out)
        np.testing.assert_allclose(out, x * 2, rtol=1e-6)


def test_reduction_over_symbolic_axis():
    r, length = dim_var("R"), dim_var("L")
    a = te.placeholder((r, length), name="A")
    k = te.reduce_axis(length, "k")
    out_t = te.compute((r,), lambda i: te.sum_(a[i, k], axis=k), name="S")
    s = create_schedule([out_t])
    s[out_t].split(s[out_t].reduce_axis[0], 8)
    s[out_t].parallel(s[out_t].op_axis[0])
    kernel = build_kernel(optimize(lower(s, [a, out_t], "rowsum")))
    rng = np.random.default_rng(2)
    for rows, cols in [(1, 1), (3, 7), (5, 8), (17, 100), (64, 1000), (3, 0)]:
        x = _rand(rng, rows, cols)
        out = np.full((rows,), np.nan, "float32")
        kernel(x, out)
        np.testing.assert_allclose(out, x.sum(1), rtol=1e-5, atol=1e-5)


def test_matmul_register_tile_over_symbolic_rows_and_depth():
    kernel = build_kernel(symbolic_tiled_matmul(4, dim_var("K"), 32, parallel=True))
    rng = np.random.default_rng(3)
    for rows, depth in [(1, 1), (3, 7), (4, 8), (5, 8), (17, 100), (64, 333), (0, 3), (3, 0)]:
        x, y = _rand(rng, rows, depth), _rand(rng, depth, 32)
        out = np.full((rows, 32), np.nan, "float32")
        for threads in (1, 2):
            kernel(x, y, out, num_threads=threads)
            np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)


def test_dims_of_expressions_and_wrong_shapes():
    n = dim_var("N")
    a = te.placeholder((n, 3), name="A")
    c = te.compute((n * 3,), lambda i: a[i // 3, i % 3] + 1.0, name="C")
    s = create_schedule([c])
    kernel = build_kernel(optimize(lower(s, [a, c], "flat")))
    x = np.arange(15, dtype="float32").reshape(5, 3)
    out = np.empty(15, "float32")
    kernel(x, out)
    np.testing.assert_allclose(out, x.reshape(-1) + 1)
    with pytest.raises(InputError, match=r"float32\[15\]"):
        kernel(x, np.empty(14, "float32"))


def test_nparts_split_of_symbolic_extent_is_refused():
    n = dim_var("N")
    a = te.placeholder((n,), name="A")
    c = te.compute((n,), lambda i: a[i] + 1.0, name="C")
    s = create_schedule([c])
    s[c].split(s[c].op_axis[0], nparts=4)
    with pytest.raises(ScheduleError, match="symbolic extent"):
        lower(s, [a, c], "bad")


def _tiled_product(overcompute: bool):
    """C[M, N] = A @ B with N symbolic: 16-column blocks, a register tile (local) per block
    accumulating over K, its columns overcomputed or guarded."""
    n = dim_var("N")
    a = te.placeholder((4, 24), name="A")
    b = te.placeholder((24, n), name="B")
    k = te.reduce_axis(24, "k")
    c = te.compute((4, n), lambda i, j: te.sum_(a[i, k] * b[k, j], axis=k), name="C")
    s = create_schedule([c])
    local = s.cache_write(c, "local")
    i, j = s[c].op_axis
    jo, ji = s[c].split(j, 16)
    s[c].reorder(jo, i, ji)
    s[c].vectorize(ji)
    s[local].compute_at(s[c], jo)
    li, lj = s[local].op_axis
    s[local].reorder(*s[local].reduce_axis, li, lj)
    s[local].vectorize(lj)
    if overcompute:
        s[local].overcompute(lj)
    return optimize(lower(s, [a, b, c], "product"))


def test_an_overcomputed_register_tile_runs_its_tail_unguarded():
    """The partial last block of a symbolic N: guarded, its multiply-adds test the column at
    every step; overcomputed, only the stores do. Same numbers at every N."""
    def guards(func):
        return len([st for st in walk_stmts(func.body) if isinstance(st, IfThenElse)])
    guarded, free = _tiled_product(False), _tiled_product(True)
    assert guards(free) < guards(guarded)
    kernel = build_kernel(free)
    rng = np.random.default_rng(5)
    for cols in [1, 7, 16, 17, 40]:
        x, y = _rand(rng, 4, 24), _rand(rng, 24, cols)
        out = np.full((4, cols), np.nan, "float32")
        kernel(x, y, out)
        np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)


def test_overcompute_takes_a_local_stage_only():
    n = dim_var("N")
    a = te.placeholder((n,), name="A")
    c = te.compute((n,), lambda i: a[i] + 1.0, name="C")
    s = create_schedule([c])
    with pytest.raises(ScheduleError, match="overcompute"):
        s[c].overcompute(s[c].op_axis[0])



def test_padded_window_over_run_time_rows_in_unrolled_tiles():
    """A 3x3 window over an H x W map of run-time size padded by 1, rows on threads, each row
    in unrolled tiles of 4: partitioning cuts a row's first tile (the left padding) off at a
    constant point and the tails pass gives each piece one copy per remainder of W. Where W
    is below the tile, the second piece is empty and its copies must not run: they read the
    row with the left padding's test dropped."""
    h, w = dim_var("H"), dim_var("W")
    a = te.placeholder((h, w, 8), name="A")
    ky, kx = te.reduce_axis(3, "ky"), te.reduce_axis(3, "kx")

    def tap(y, x, c):
        sy, sx = y + ky.var - 1, x + kx.var - 1
        inside = E.all_of(sy >= 0, sy < h, sx >= 0, sx < w)
        load = a[E.minimum(E.maximum(sy, 0), h - 1), E.minimum(E.maximum(sx, 0), w - 1), c]
        return E.select(inside, load, E.Const(0.0, "float32"))
    out = te.compute((h, w, 8), lambda y, x, c: te.sum_(tap(y, x, c), axis=[ky, kx]),
                     name="W")
    s = create_schedule([out])
    y, x, c = s[out].op_axis
    xo, xi = s[out].split(x, 4)
    s[out].reorder(y, xo, xi, c)
    s[out].unroll(xi)
    s[out].vectorize(c)
    s[out].parallel(y)
    kernel = build_kernel(optimize(lower(s, [a, out], "window")))
    rng = np.random.default_rng(2)
    for rows in (1, 2, 5):
        for cols in range(1, 14):
            x = _rand(rng, rows, cols, 8)
            p = np.pad(x, ((1, 1), (1, 1), (0, 0)))
            want = sum(p[i:i + rows, j:j + cols] for i in range(3) for j in range(3))
            got = np.full((rows, cols, 8), np.nan, "float32")
            kernel(x, got, num_threads=2)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"H={rows} W={cols}")


def test_row_statistic_at_a_loop_fused_from_two_symbolic_dims_needs_no_guard():
    # a layer norm's rows: [B, S] fused into one loop over B*S, the row sum computed inside
    # it; (i // S, i % S) lie in [0, B) x [0, S) wherever i < B*S runs, so no division
    # per row keeps the sum's stage inside its domain
    b, seq = dim_var("B"), dim_var("S")
    a = te.placeholder((b, seq, 16), name="A")
    k = te.reduce_axis(16, "k")
    total = te.compute((b, seq), lambda i, j: te.sum_(a[i, j, k], axis=k), name="T")
    c = te.compute((b, seq, 16), lambda i, j, m: a[i, j, m] - total[i, j], name="C")
    s = create_schedule([c])
    i, j, m = s[c].op_axis
    row = s[c].fuse(i, j)
    s[total].compute_at(s[c], row)
    func = optimize(lower(s, [a, c], "centre"))
    assert not [st for st in walk_stmts(func.body) if isinstance(st, IfThenElse)]
    kernel = build_kernel(func)
    rng = np.random.default_rng(5)
    for rows, cols in [(1, 1), (3, 7), (2, 1), (1, 5), (0, 3), (4, 0)]:
        x = _rand(rng, rows, cols, 16)
        out = np.full((rows, cols, 16), np.nan, "float32")
        kernel(x, out)
        np.testing.assert_allclose(out, x - x.sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)

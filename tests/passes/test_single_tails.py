"""passes/loop/single_tails.py: a symbolic dim's tail loop that runs once or never becomes an
``if``; the kernel's numbers stay numpy's at lengths with and without a tail."""
import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.loop import For, IfThenElse, walk_stmts
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.passes.loop import optimize
from tensorc.passes.loop.single_tails import zero_or_one
from tensorc.runtime.kernel import build_kernel


def test_zero_or_one_reads_a_ceiling_less_its_floor():
    n = dim_var("N")
    assert zero_or_one((n + 15) // 16 - n // 16)
    assert zero_or_one(E.Binary("min", (n + 7) // 8, E.Binary("max", (n + 7) // 8, n // 8))
                       - n // 8)
    assert not zero_or_one((n + 16) // 16 - n // 16)       # 1 or 2
    assert not zero_or_one((n + 15) // 16 - n // 8)        # not one tile's
    assert not zero_or_one(n // 16)
    assert not zero_or_one(E.const(1))


def test_a_row_reduction_tail_runs_as_an_if():
    rows, length = dim_var("R"), dim_var("L")
    a = te.placeholder((rows, length), name="A")
    k = te.reduce_axis(length, "k")
    total = te.compute((rows,), lambda i: te.max_(a[i, k], axis=k), name="M")
    s = create_schedule([total])
    rf = s.rfactor(total, 16)
    s[rf].compute_at(s[total], s[total].op_axis[0])
    *_, j = s[rf].op_axis
    s[rf].reorder(*s[rf].reduce_axis, j)
    s[rf].vectorize(j)
    func = optimize(lower(s, [a, total], "rowmax"))
    dims = set(func.dims)
    loops = [st for st in walk_stmts(func.body) if isinstance(st, For)]
    assert not [lp for lp in loops if zero_or_one(lp.extent)]
    assert [st for st in walk_stmts(func.body) if isinstance(st, IfThenElse)
            and E.free_vars(st.cond) <= dims]
    kernel = build_kernel(func)
    rng = np.random.default_rng(3)
    for r, n in [(1, 1), (3, 10), (2, 16), (5, 17), (1, 32), (4, 47)]:
        x = rng.standard_normal((r, n)).astype("float32")
        out = np.full((r,), np.nan, "float32")
        kernel(x, out)
        np.testing.assert_array_equal(out, x.max(axis=1))

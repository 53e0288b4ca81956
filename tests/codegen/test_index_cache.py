"""The index cache of kernels over symbolic dims (codegen/llvm/index_cache.py): each index term
emitted once per binding of its variables, where the innermost of them is bound, and floor
divisions of never-negative values as one instruction. Checked on the emitted IR and against
numpy at dims of 0, 1, primes and sizes past the tiles, at 1 and 2 threads."""
import re

import numpy as np

from helpers_kernels import symbolic_tiled_matmul

from tensorc.codegen.llvm.index_cache import nonnegative, pure_index
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.passes.loop import optimize
from tensorc.runtime.kernel import build_kernel, llvm_ir


def _tiled_matmul():
    """A register tile of 6 rows over symbolic rows and depth: whole tiles, then one copy of
    the tile per remainder of M by 6 (passes/loop/symbolic_tails.py), each reading M // 6."""
    return symbolic_tiled_matmul(6, dim_var("K"), 32, parallel=True)


def test_a_dim_term_is_computed_once_where_the_dim_is_bound():
    text = llvm_ir(_tiled_matmul())
    # M % 6, which the five remainder copies test in turn (inside the parallel loop's body,
    # where M arrives in the closure): one unsigned remainder (M is never negative), not a
    # signed one with its sign fix-up per test
    assert len(re.findall(r'urem i64 %"[^"]+", 6\n', text)) == 1
    assert not re.findall(r"(sdiv|srem) i64 %\"[^\"]+\", 6\n", text)


def test_kernels_with_hoisted_index_terms_compute_the_product():
    kernel = build_kernel(_tiled_matmul())
    rng = np.random.default_rng(0)
    for rows, depth in [(1, 1), (5, 3), (6, 8), (7, 8), (13, 100), (64, 33), (0, 3), (3, 0)]:
        x = rng.standard_normal((rows, depth)).astype("float32")
        y = rng.standard_normal((depth, 32)).astype("float32")
        for threads in (1, 2):
            out = np.full((rows, 32), np.nan, "float32")
            kernel(x, y, out, num_threads=threads)
            np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)


def test_what_may_be_moved_and_what_is_never_negative():
    n, i = E.Var("n"), E.Var("i")
    assert pure_index(n // 6 * 6 + i % 4)
    assert pure_index(E.Compare("lt", i * 8, n - 3))
    # a division by a dim may be by 0 where a guard has not run yet: never moved
    assert not pure_index(i // n)
    assert not pure_index(E.Binary("floordiv", i, E.const(0)))
    assert nonnegative(n // 6 + i % 4) and nonnegative(E.maximum(i - 1, E.const(0)))
    assert not nonnegative(i - 1) and not nonnegative((i - 1) // 2)
    # x % c is never negative for c > 0, whatever x is
    assert nonnegative((i - 7) % 4)


def test_unrolled_loads_of_a_static_kernel_share_one_address():
    """A static kernel's unrolled loads (a Winograd transform's) are a constant offset each
    from one address, which is computed once: no multiply per load."""
    a = te.placeholder((16, 6, 8), name="A")
    b = te.compute((16, 8), lambda i, j: a[i, 0, j] * 2.0 + a[i, 1, j] * 3.0 - a[i, 2, j] +
                   a[i, 3, j] * 5.0 - a[i, 4, j] * 7.0 + a[i, 5, j], name="B")
    s = create_schedule([b])
    s[b].vectorize(s[b].op_axis[1])
    func = optimize(lower(s, [a, b], "rows"))
    text = llvm_ir(func)
    assert len(re.findall(r"= mul i64", text)) <= 2
    assert len(re.findall(r"getelementptr float, ptr %\"[^\"]+\", i64 (8|16|24|32|40)\n",
                          text)) == 5
    x = np.random.default_rng(1).standard_normal((16, 6, 8)).astype("float32")
    out = np.zeros((16, 8), "float32")
    build_kernel(func)(x, out)
    np.testing.assert_allclose(out, x[:, 0] * 2 + x[:, 1] * 3 - x[:, 2] + x[:, 3] * 5 -
                               x[:, 4] * 7 + x[:, 5], rtol=1e-5, atol=1e-5)

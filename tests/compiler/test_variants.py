"""Which kernels over symbolic dims get a small-dims variant (compiler/variants.py): none where
the second schedule differs only in a parallel loop that runs as one chunk, on the calling
thread, at every small shape; and the variant's code holds no tile of larger dims."""
import numpy as np

from tensorc.compiler.variants import SMALL_MAX, parallel_alone_when_small
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

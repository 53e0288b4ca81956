"""Which kernels over symbolic dims get a small-dims variant (compiler/variants.py): none where
the second schedule differs only in a parallel loop that runs as one chunk, on the calling
thread, at every small shape."""
from tensorc.compiler.variants import SMALL_MAX, parallel_alone_when_small
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import dim_var
from tensorc.passes.loop import optimize
from tensorc.passes.loop.parallel_work import MIN_CHUNK_WORK


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

"""The work of one iteration of each parallel loop, which codegen's chunk protocol sizes its
chunks by (codegen/llvm/parallel.py): ``iteration_work``, the stores the loop's body
executes, counted from its loop nest: an int, or over symbolic dims an expression of them
that the chunk size is computed from at run time (a detector's 5x5 map then runs on the
calling thread, as its static build does, instead of waking a worker for a few rows).

>>> annotate_parallel_loops(func)   # doctest: +SKIP
(for (i: parallel, 0, 64) [iteration_work=4096])
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    Allocate, For, IfThenElse, KernelCall, PrimFunc, Seq, Stmt, Store, map_stmt,
)

# The fewest stores a parallel loop's chunk does: 2^17 vector multiply-adds take a core 1-3 us,
# about what waking a sleeping worker costs, so a loop of less than two such chunks runs on
# the calling thread alone and bigger chunks keep the shared counter's cost small (0cff703)
MIN_CHUNK_WORK = 1 << 17


def stmt_work(s: Stmt, dims: frozenset = frozenset()) -> int | E.Expr:
    """Stores that ``s`` executes, from its loop nest (a loop of unknown extent counts 16,
    a conditional its larger branch, a kernel call one whole chunk): the size of a parallel
    loop's iteration. A loop whose extent is an expression of the kernel's ``dims`` keeps it
    (the work at the run's dims: an expression, where an int is otherwise returned)."""
    if isinstance(s, For):
        return _times(_extent(s, dims), stmt_work(s.body, dims))
    if isinstance(s, Seq):
        total = 0
        for c in s.stmts:
            total = _plus(total, stmt_work(c, dims))
        return total
    if isinstance(s, Store):
        return 1
    if isinstance(s, Allocate):
        return stmt_work(s.body, dims)
    if isinstance(s, IfThenElse):
        a = stmt_work(s.then_case, dims)
        b = stmt_work(s.else_case, dims) if s.else_case is not None else 0
        return max(a, b) if isinstance(a, int) and isinstance(b, int) else \
            E.maximum(E.as_expr(a), E.as_expr(b))
    if isinstance(s, KernelCall):
        return MIN_CHUNK_WORK
    return 0


def _extent(loop: For, dims: frozenset) -> int | E.Expr:
    n = arith.as_const_int(loop.extent)
    if n is not None:
        return max(n, 0)
    if dims and E.free_vars(loop.extent) <= dims:
        return E.maximum(loop.extent, E.const(0, loop.extent.dtype))
    return 16


def _times(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if 0 in (a, b):
        return 0
    return E.as_expr(a) * E.as_expr(b)


def _plus(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return E.as_expr(a) + E.as_expr(b)


def annotate_parallel_loops(func: PrimFunc) -> PrimFunc:
    """Give each parallel loop its ``iteration_work`` (see the module docstring)."""
    dims = frozenset(func.dims)

    def visit(s: Stmt) -> Stmt | None:
        if isinstance(s, For) and s.kind == "parallel":
            work = stmt_work(s.body, dims)
            s.annotations["iteration_work"] = work if isinstance(work, int) else \
                arith.simplify(work)
        return None
    return func.with_body(map_stmt(func.body, fstmt=visit))

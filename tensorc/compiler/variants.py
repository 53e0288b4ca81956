"""Kernel variants over symbolic dims: one more schedule where every dim is small, and how
the entry calls a kernel over symbolic dims.

A kernel over symbolic dims is scheduled at the dims' hints (te.hint): tiles for dims of
about DEFAULT_HINT. Where the dims are far smaller at run time (a 7-token sequence), those
tiles are mostly tail: a 16-wide vector over a row of 7, a 6-row register tile over 7 rows.
So the group is scheduled a second time with every dim at SMALL_HINT, and where that gives
another schedule, the entry calls it when every dim the kernel reads is at most SMALL_MAX:
a predicate over a range, never one value (both kernels serve every value correctly; the
predicate only picks the faster). Groups whose two schedules agree keep one kernel, and so do
groups whose schedules differ only in a parallel loop that runs as one chunk at every small
shape (codegen's chunk protocol then calls its body on the calling thread: the serial copy
would buy nothing but its compile time).

A kernel's *call meta* (:func:`kernel_meta`, JSON data: kept with its object in the kernel
cache) lists the dims its function takes, the expressions of graph dims its own dims stand
for (compiler/kernel.py), and its variants; :func:`call_forms` turns it into the calls the
entry makes.

>>> kernel.calls      # [(batch <= 8 && seq <= 8, 'k3_small', [batch, seq]), (None, 'k3', ...)]
"""
from __future__ import annotations

from tensorc.compiler.kernel import schedule_group
from tensorc.compiler.timing import CompileTimes
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.dims import as_expr, dim_from_json, dim_to_json, dim_var
from tensorc.ir.graph import Graph
from tensorc.ir.loop import For, PrimFunc, walk_stmts
from tensorc.passes.graph.fuse import FusedGroup
from tensorc.passes.loop.parallel_work import MIN_CHUNK_WORK, stmt_work
from tensorc.target import Target

SMALL_HINT = 4
SMALL_MAX = 8
SMALL_SUFFIX = "_small"


def small_dims_variants(group: FusedGroup, graph: Graph, target: Target, func: PrimFunc,
                        times: CompileTimes | None = None) -> list[tuple[E.Expr, PrimFunc]]:
    """[(every dim <= SMALL_MAX, the group scheduled at SMALL_HINT)], or [] where the
    kernel has no symbolic dim or the small schedule is ``func``'s own."""
    if not func.dims:
        return []
    # (the template's default at small dims: a tuned config is the large dims' choice)
    # (a schedule equal to the first is neither lowered nor optimized: None)
    small = schedule_group(group, graph, target, f"{func.name}{SMALL_SUFFIX}", None, times,
                           hints={v.name: SMALL_HINT for v in func.dims},
                           unless_trace=func.attrs["trace"],
                           same_but_parallel=parallel_alone_when_small(func))
    if small is None:
        return []
    return [(_small_dims(_dim_args(small)), small)]


def parallel_alone_when_small(func: PrimFunc) -> bool:
    """Whether every parallel loop of ``func`` runs as one chunk (on the calling thread,
    codegen/llvm/parallel.py) wherever every dim is at most SMALL_MAX: its extent there is at
    most its fewest iterations per chunk (MIN_CHUNK_WORK over its iteration's work)."""
    small = {v: (0, SMALL_MAX) for v in func.dims}
    for loop in walk_stmts(func.body):
        if isinstance(loop, For) and loop.kind == "parallel":
            fewest = -(-MIN_CHUNK_WORK // max(1, stmt_work(loop.body)))
            _, most = arith.const_bounds(arith.simplify(loop.extent), small)
            if most is None or most > fewest:
                return False
    return True


def kernel_meta(func: PrimFunc, variants: list[tuple[E.Expr, PrimFunc]]) -> dict:
    """What the entry needs to call a kernel over symbolic dims ({} for a static one): its
    dims, those of its own that stand for expressions, and its variants' (by suffix)."""
    if not func.dims:
        return {}

    def one(f: PrimFunc) -> dict:
        return {"dims": [v.name for v in f.dims],
                "dim_values": {n: dim_to_json(d) for n, d in
                               f.attrs.get("dim_values", {}).items()}}
    return {**one(func), "variants": [{"suffix": f.name[len(func.name):], **one(f)}
                                      for _, f in variants]}


def call_forms(symbol: str, meta: dict) -> list:
    """The entry's calls of a kernel with ``meta`` (:func:`kernel_meta`): (condition or
    None, symbol, the values of its dims as expressions of the graph's), tried in order."""
    if not meta:
        return []

    def args(m: dict) -> list[E.Expr]:
        own = {n: dim_from_json(d) for n, d in m["dim_values"].items()}
        return [as_expr(own[n]) if n in own else dim_var(n) for n in m["dims"]]
    forms = [(_small_dims(args(v)), symbol + v["suffix"], args(v)) for v in meta["variants"]]
    return [*forms, (None, symbol, args(meta))]


def _dim_args(func: PrimFunc) -> list[E.Expr]:
    own = func.attrs.get("dim_values", {})
    return [as_expr(own[v.name]) if v.name in own else v for v in func.dims]


def _small_dims(values: list[E.Expr]) -> E.Expr:
    return E.all_of(*[E.Compare("le", v, E.const(SMALL_MAX)) for v in values])

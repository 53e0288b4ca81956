"""Kernel variants over symbolic dims: one more schedule where every dim is small.

A kernel over symbolic dims is scheduled at the dims' hints (te.hint): tiles for dims of
about DEFAULT_HINT. Where the dims are far smaller at run time (a 7-token sequence), those
tiles are mostly tail: a 16-wide vector over a row of 7, a 6-row register tile over 7 rows.
So the group is scheduled a second time with every dim at SMALL_HINT, and where that gives
another schedule, the entry calls it when every dim the kernel reads is at most SMALL_MAX:
a predicate over a range, never one value (both kernels serve every value correctly; the
predicate only picks the faster). Groups whose two schedules agree keep one kernel.

>>> kernel.variants      # [(batch <= 16 && seq <= 16, k3_fused_matmul_small)]
"""
from __future__ import annotations

from tensorc.compiler.kernel import schedule_group
from tensorc.compiler.timing import CompileTimes
from tensorc.ir import expr as E
from tensorc.ir.dims import as_expr
from tensorc.ir.graph import Graph
from tensorc.ir.loop import PrimFunc
from tensorc.passes.graph.fuse import FusedGroup
from tensorc.target import Target

SMALL_HINT = 4
SMALL_MAX = 8


def small_dims_variants(group: FusedGroup, graph: Graph, target: Target, func: PrimFunc,
                        times: CompileTimes | None = None) -> list[tuple[E.Expr, PrimFunc]]:
    """[(every dim <= SMALL_MAX, the group scheduled at SMALL_HINT)], or [] where the
    kernel has no symbolic dim or the small schedule is ``func``'s own."""
    if not func.dims:
        return []
    # (the template's default at small dims: a tuned config is the large dims' choice)
    small = schedule_group(group, graph, target, f"{func.name}_small", None, times,
                           hints={v.name: SMALL_HINT for v in func.dims})
    if small.attrs["trace"] == func.attrs["trace"]:
        return []
    # over the caller's dims: a kernel dim stands for an expression of them
    own = func.attrs.get("dim_values", {})
    condition = E.all_of(*[E.Compare("le", as_expr(own[v.name]) if v.name in own else v,
                                     E.const(SMALL_MAX)) for v in func.dims])
    return [(condition, small)]

"""Kernel variants over symbolic dims: one more schedule where its row dims are small, one
where every dim the kernel reads is 1, and how the entry calls a kernel over symbolic dims.

A kernel over symbolic dims is scheduled at the dims' hints (te.hint): tiles for dims of
about DEFAULT_HINT. Where the dims are far smaller at run time (a 7-token sequence), those
tiles are mostly tail: a 16-wide vector over a row of 7, a 6-row register tile over 7 rows.
So the group is scheduled a second time with its *row dims* at SMALL_HINT, and where that
gives another schedule, the entry calls it when each row dim is at most SMALL_MAX: a
predicate over a range, never one value (both kernels serve every value correctly; the
predicate only picks the faster). The row dims are those the tiles and rows are made of:
every dim of the kernel but a batch dim, one that only leads tensors of three or more axes
(:func:`row_dims`). A batch dim keeps its hint and no bound, so that a large batch of short
rows (bert at batch 126, sequence 3: the scores' softmax and QK^T took 9x and 4.5x the
static kernels in the large dims' form) runs the short rows' form too. Groups whose two
schedules agree keep one kernel, and so do groups whose schedules differ only in a parallel
loop that runs as one chunk at every small shape (codegen's chunk protocol then calls its
body on the calling thread: the serial copy would buy nothing but its compile time).

At batch 1 or a one-token step, a kernel takes a few hundred nanoseconds, and the small
schedule's tiles of 4 are then all tail: a masked 4x4 register tile for one score, masked
gathers for a one-column transpose (2-7x a static build's kernel). So a kernel over
symbolic dims also gets the group where each of its dims is 1, scheduled as a static build
schedules it (:func:`unit_dims_variant`): the entry calls it when they are (a predicate on a
dim equal to 1; a kernel dim past + seq is one dim). Its function takes no dims.

A kernel's *call meta* (:func:`kernel_meta`, JSON data: kept with its object in the kernel
cache) lists the dims its function takes, the expressions of graph dims its own dims stand
for (compiler/kernel.py), and its variants; :func:`call_forms` turns it into the calls the
entry makes.

>>> kernel.calls      # [(batch == 1 && seq == 1, 'k3_unit', []),
...                   #  (seq <= 8, 'k3_small', [batch, seq]), (None, 'k3', ...)]
"""
from __future__ import annotations

import itertools
import math
from typing import Any

from tensorc.compiler.kernel import anchor_layouts, loop_kernel_node, schedule_group
from tensorc.compiler.timing import CompileTimes
from tensorc.ir import arith, te
from tensorc.ir import expr as E
from tensorc.ir.bounds import SYMBOLIC_MAX
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import (
    as_expr, dim_from_json, dim_to_json, dim_var, dims_in, evaluate, evaluate_within,
    is_symbolic,
)
from tensorc.ir.graph import Graph, Node, Value
from tensorc.ir.types import TensorType
from tensorc.ir.loop import For, PrimFunc, walk_stmts
from tensorc.passes.graph.fuse import FusedGroup
from tensorc.passes.loop.parallel_work import MIN_CHUNK_WORK, stmt_work
from tensorc.target import Target

SMALL_HINT = 4
SMALL_MAX = 8
SMALL_SUFFIX = "_small"
UNIT_SUFFIX = "_unit"
# where the unit variant's point is searched: each dim's first values, at most this many points
UNIT_SEARCH = 8
MAX_UNIT_POINTS = 4096


def small_dims_variants(group: FusedGroup, graph: Graph, target: Target, func: PrimFunc,
                        times: CompileTimes | None = None) -> list[tuple[E.Expr, PrimFunc]]:
    """[(each row dim <= SMALL_MAX, the group scheduled with them at SMALL_HINT)], or []
    where the kernel has no symbolic dim or the small schedule is ``func``'s own."""
    if not func.dims:
        return []
    rows = row_dims(func)
    # (the template's default at small dims: a tuned config is the large dims' choice)
    # (a schedule equal to the first is neither lowered nor optimized: None)
    small = schedule_group(group, graph, target, f"{func.name}{SMALL_SUFFIX}", None, times,
                           hints={**te.current_hints(), **{n: SMALL_HINT for n in rows}},
                           unless_trace=func.attrs["trace"],
                           same_but_parallel=parallel_alone_when_small(func, rows),
                           dims_at_most={n: SMALL_MAX for n in rows})
    variants = [] if small is None else [(_small_dims(_dim_args(small, rows)), small)]
    return unit_dims_variant(group, graph, target, func, times) + variants


def row_dims(func: PrimFunc) -> list[str]:
    """The names of ``func``'s dims that its small variant takes small: all but its batch
    dims, those that occur in its buffers' shapes only as the first axis of a buffer of three
    or more axes (a matrix's rows are rows; a kernel of batch dims alone takes them all).

    >>> row_dims(func)      # ['seq'] for softmax over float32[batch, 4, seq, seq]
    """
    names = [v.name for v in func.dims]
    inner = {v.name for buffer in func.params for extent in row_extents(buffer.shape)
             if isinstance(extent, E.Expr) for v in E.free_vars(extent)}
    rows = [n for n in names if n in inner]
    return rows or names


def row_extents(shape) -> list:
    """The extents of a shape that hold row dims (:func:`row_dims`): all but the first of
    three or more."""
    shape = list(shape)
    return shape[1:] if len(shape) >= 3 else shape


def unit_dims_variant(group: FusedGroup, graph: Graph, target: Target, func: PrimFunc,
                      times: CompileTimes | None = None) -> list[tuple[E.Expr, PrimFunc]]:
    """[(each of ``func``'s dims == 1, the group at a point of the graph's dims where they
    are, scheduled as a static build schedules it)], or [] where no such point is in the
    dims' ranges or a tensor of the group is empty there, the group computes or writes dims
    (dim_values, data-dependent sizes), or is a loop-IR kernel. The kernel's code is a
    function of its own dims' values (a compound dim such as past + seq is one of them), so
    any such point gives the same code. Its function's parameters are the buffers of
    ``func``, without the dims."""
    table = graph.dims
    names = _group_dims(group)
    if not names or loop_kernel_node(group) is not None or \
            any(n in table.data or n in table.capacities for n in names) or \
            any(node.op == "dim_values" or node.attrs.get("writes") for node in group.nodes):
        return []
    # the group's weights as the graph holds them: a tuned config that picks another layout
    # gets them repacked after the build (kernel.apply_layout), which this kernel would not read
    layouts = anchor_layouts(group, target)
    if layouts is not None and \
            (func.attrs.get("config") or {}).get(layouts.knob, layouts.current) != \
            layouts.current:
        return []
    point = _unit_point(func, names, table)
    if point is None:
        return []
    unit, unit_graph = _specialized(group, graph, point)
    # (an empty tensor there, a pool's output width // 2 at width 1: no kernel worth a form)
    if any(d <= 0 for v in [*unit.inputs, *(o for n in unit.nodes for o in n.outputs)]
           for d in v.type.shape):
        return []
    with DimTable().active():
        static = schedule_group(unit, unit_graph, target, f"{func.name}{UNIT_SUFFIX}",
                                None, times)
    if static is None or static.dims or len(static.params) != len(func.params):
        return []
    static.attrs["unit"] = True
    return [(_all_one(_dim_args(func)), static)]


def _unit_point(func: PrimFunc, names: list[str], table: DimTable) -> dict[str, int] | None:
    """Values of the graph dims ``names`` within their ranges at which every dim of ``func``
    is 1, or None. Searched over 0, 1, 2 and the first UNIT_SEARCH values of each range (a
    line at least 4 wide whose width // 4 is a kernel dim)."""
    own = func.attrs.get("dim_values", {})
    choices = []
    for n in names:
        lo, hi = table.ranges.get(n, (0, None))
        lo = lo or 0
        values = sorted({0, 1, 2, *range(lo, lo + UNIT_SEARCH)})
        choices.append([v for v in values if v >= lo and (hi is None or v <= hi)])
    if not all(choices) or math.prod(len(c) for c in choices) > MAX_UNIT_POINTS:
        return None
    # (the graph's run-time constraints on these dims hold there too: a pool's window fits)
    constraints = [c for c in table.constraints if set(c.names()) <= set(names)]
    for values in itertools.product(*choices):
        point = dict(zip(names, values))
        if all(evaluate(own[v.name], point) == 1 if v.name in own else point.get(v.name) == 1
               for v in func.dims) and all(c.holds(point) for c in constraints):
            return point
    return None


def parallel_alone_when_small(func: PrimFunc, rows: list[str] | None = None) -> bool:
    """Whether every parallel loop of ``func`` runs as one chunk (on the calling thread,
    codegen/llvm/parallel.py) wherever each of its dims named in ``rows`` (by default all) is
    at most SMALL_MAX: its extent there is at most its fewest iterations per chunk
    (MIN_CHUNK_WORK over its iteration's work)."""
    small = {v: (0, SMALL_MAX) if rows is None or v.name in rows else (0, SYMBOLIC_MAX)
             for v in func.dims}
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
        out = {"dims": [v.name for v in f.dims],
               "dim_values": {n: dim_to_json(d) for n, d in
                              f.attrs.get("dim_values", {}).items()}}
        if f.attrs.get("unit"):
            out["unit"] = True
        if isinstance(f.attrs.get("dims_at_most"), dict):
            out["small"] = sorted(f.attrs["dims_at_most"])      # the dims its call bounds
        return out
    return {**one(func), "variants": [{"suffix": f.name[len(func.name):], **one(f)}
                                      for _, f in variants]}


def call_forms(symbol: str, meta: dict) -> list:
    """The entry's calls of a kernel with ``meta`` (:func:`kernel_meta`): (condition or
    None, symbol, the values of its dims as expressions of the graph's), tried in order."""
    if not meta:
        return []

    def args(m: dict, only: list[str] | None = None) -> list[E.Expr]:
        own = {n: dim_from_json(d) for n, d in m["dim_values"].items()}
        return [as_expr(own[n]) if n in own else dim_var(n) for n in m["dims"]
                if only is None or n in only]
    forms = [(_all_one(args(meta)) if v.get("unit") else _small_dims(args(v, v.get("small"))),
              symbol + v["suffix"], args(v)) for v in meta["variants"]]
    return [*forms, (None, symbol, args(meta))]


def _dim_args(func: PrimFunc, only: list[str] | None = None) -> list[E.Expr]:
    own = func.attrs.get("dim_values", {})
    return [as_expr(own[v.name]) if v.name in own else v for v in func.dims
            if only is None or v.name in only]


def _small_dims(values: list[E.Expr]) -> E.Expr:
    return E.all_of(*[E.Compare("le", v, E.const(SMALL_MAX)) for v in values])


def _all_one(values: list[E.Expr]) -> E.Expr:
    return E.all_of(*[E.Compare("eq", v, E.const(1)) for v in values])


def _group_dims(group: FusedGroup) -> list[str]:
    """The graph dims a group's shapes and attributes read, sorted."""
    values = [*group.inputs, *(v for node in group.nodes for v in node.outputs)]
    names = {n for v in values for d in v.type.shape if is_symbolic(d) for n in d.names}
    names |= {n for node in group.nodes for d in dims_in(node.attrs.values())
              for n in d.names}
    return sorted(names)


def _specialized(group: FusedGroup, graph: Graph, values: dict[str, int]
                 ) -> tuple[FusedGroup, Graph]:
    """A copy of ``group`` over a graph of its own in which every dim is its value: its
    inputs (constants sharing their arrays), nodes and types with their Dims evaluated."""
    def concrete(value: Any) -> Any:
        return evaluate_within(value, values)

    def typed(v: Value) -> TensorType:
        return TensorType(concrete(tuple(v.type.shape)), v.type.dtype)

    own = Graph(f"{graph.name}.unit")
    mapping: dict[Value, Value] = {}
    for v in group.inputs:
        mapping[v] = own.add_constant(graph.constants[v], v.name) if v in graph.constants \
            else own.add_input(v.name, typed(v))
    nodes = []
    for node in group.nodes:
        copy = Node(node.op, [mapping[v] for v in node.inputs],
                    {k: concrete(a) for k, a in node.attrs.items()}, [], node.name)
        for v in node.outputs:
            mapping[v] = Value(typed(v), v.name, copy)
            copy.outputs.append(mapping[v])
        own.nodes.append(copy)
        nodes.append(copy)
    anchor = nodes[group.nodes.index(group.anchor)] if group.anchor is not None else None
    own.outputs = [mapping[group.output]]
    return FusedGroup(nodes, anchor, group.kind, [mapping[v] for v in group.inputs]), own

"""One fused group -> one kernel: the group's tensor expressions, scheduled by its anchor's
template with a config, lowered to loop IR; and the workload key that says when two groups are
the same kernel.

>>> func = schedule_group(group, graph, Target.from_string("llvm"), "k0_conv")
>>> func.attrs["config"]                    # the template's default config
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Mapping

from tensorc.compiler.timing import CompileTimes
from tensorc.errors import TensorcError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.dims import bounds as dim_bounds
from tensorc.ir.dims import dim_var, is_symbolic
from tensorc.ir.graph import Graph, Value
from tensorc.ir.loop import PrimFunc
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ops.catalog import get_op
from tensorc.ops.registry import Template
from tensorc.ops.schedules import INJECTIVE
from tensorc.ops.symbolic import GENERIC
from tensorc.passes import loop as loop_passes
from tensorc.passes.graph.fuse import FusedGroup
from tensorc.target import Target


@dataclass
class Kernel:
    """One kernel call of a model: the group it computes, its workload key, and its scheduled
    loop IR (None where its object code came from the kernel cache, unscheduled)."""
    func: PrimFunc | None
    group: FusedGroup
    key: tuple
    name: str = ""          # what reports call it (k3_conv...); func.name by default
    symbol: str = ""        # the function the entry calls; name by default
    # over symbolic dims, how the entry calls it: (condition on the dims or None, symbol,
    # the values of the kernel's dims), the first whose condition holds (compiler/variants.py)
    calls: list = field(default_factory=list)
    # (condition, PrimFunc) variants scheduled in this process (compile_graph, inspect)
    variants: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.name = self.name or self.func.name
        self.symbol = self.symbol or self.name

    def funcs(self) -> list[PrimFunc]:
        return [*(f for _, f in self.variants), self.func]


def inlined_scalar(v: Value, graph: Graph) -> bool:
    """One-element constants become literals inside the kernels that read them."""
    return v in graph.constants and v.type.size == 1


def group_to_te(group: FusedGroup, graph: Graph, kernel_dims: dict | None = None):
    """Tensor expressions of a group: placeholders for its inputs, one compute per node.
    With ``kernel_dims`` (a dict it fills), each compound symbolic dim of an input
    (``(H - 1)//4 + 1``) is a dim of the kernel's own (``d.0``), whose value its caller
    computes: the kernel's index arithmetic then reads one parameter, not the expression."""
    tensors: dict[Value, te.Tensor] = {}
    params: list[te.Tensor] = []
    for k, v in enumerate(group.inputs):
        if inlined_scalar(v, graph):
            value = graph.constants[v].reshape(-1)[0].item()
            c = E.Const(value, v.type.dtype)
            tensors[v] = te.compute(v.type.shape, lambda *i, c=c: c, name=f"scalar{k}")
            continue
        shape = v.type.shape if kernel_dims is None else \
            tuple(_kernel_dim(d, kernel_dims) for d in v.type.shape)
        t = te.placeholder(shape, v.type.dtype, name=f"in{k}")
        tensors[v] = t
        params.append(t)
    with _kernel_table(graph, kernel_dims or {}):
        out, anchor = _computes(group, tensors)
    return params, out, anchor


@contextlib.contextmanager
def _kernel_table(graph: Graph, kernel_dims: dict):
    """With kernel dims, the shape rules that computes call decide on a copy of the graph's
    dim table that knows them (their ranges their expressions'), and record into it."""
    if not kernel_dims:
        yield
        return
    table = graph.dims.copy()
    for n, d in kernel_dims.items():
        lo, hi = dim_bounds(d)
        table.ranges[n] = (lo if lo is not None else 0, hi)
    with table.active():
        yield


def _computes(group: FusedGroup, tensors: dict):
    anchor = None
    for node in group.nodes:
        opdef = get_op(node.op)
        if opdef.compute_fn is None:
            raise TensorcError(f"op {node.op} has no compute definition")
        out = opdef.compute_fn(node.attrs, *[tensors[v] for v in node.inputs])
        tensors[node.outputs[0]] = out
        if node is group.anchor:
            anchor = out
    return tensors[group.output], anchor


def _kernel_dim(d, kernel_dims: dict):
    """``d``, or for a compound symbolic dim the kernel dim standing for it."""
    if not is_symbolic(d) or d.is_name:
        return d
    for name, expr in kernel_dims.items():
        if expr == d:
            return dim_var(name)
    name = f"d.{len(kernel_dims)}"
    kernel_dims[name] = d
    return dim_var(name)


def group_template(group: FusedGroup, target: Target) -> Template:
    """The schedule template of a group: its anchor op's for this target kind, or the
    injective one."""
    if group.anchor is None:
        template = INJECTIVE.get(target.kind)
    else:
        template = get_op(group.anchor.op).template(target.kind)
    if template is None:
        what = group.anchor.op if group.anchor is not None else "elementwise"
        raise TensorcError(f"no {target.kind} schedule for {what} kernels ({group.name})")
    return template


def schedule_group(group: FusedGroup, graph: Graph, target: Target, name: str,
                   config: Mapping | None = None,
                   times: CompileTimes | None = None,
                   hints: Mapping[str, int] | None = None) -> PrimFunc:
    """One group's kernel, scheduled by its template with ``config`` (by default the
    template's heuristic choice). The PrimFunc's attrs record the config and the trace.
    ``times`` collects the seconds of scheduling, lowering and loop passes. Over symbolic
    dims, the schedule chooses at ``hints`` (by dim name; te.hint), and a template that does
    not take symbolic shapes yet gives way to the generic one (ops/symbolic.py)."""
    times = times if times is not None else CompileTimes()
    hinted = te.dim_hints(hints) if hints is not None else contextlib.nullcontext()
    with times.phase("scheduling", name), hinted, contextlib.ExitStack() as stack:
        kernel_dims: dict = {}
        params, out, anchor = group_to_te(group, graph, kernel_dims)
        # a kernel dim's hint is its expression's at the dims' hints
        own = {n: te.hint(d) for n, d in kernel_dims.items()}
        stack.enter_context(te.dim_hints({**te.current_hints(), **own}))
        sch = create_schedule(out)
        # everything but the anchor and the output is computed inline
        anchor_stages = _anchor_stages(sch, anchor)
        for stage in sch.compute_stages:
            if stage.is_output or stage in anchor_stages or stage.op.reduce_axis:
                continue
            stage.compute_inline()
        template = group_template(group, target)
        if not template.symbolic and not all(te.is_static(t.shape) for t in [*params, out]):
            template = GENERIC
        attrs = group.anchor.attrs if group.anchor is not None else {}
        space = template.search_space(target, out, anchor, attrs)
        # a record written before a knob joined the space takes that knob's default, the
        # value the schedule chose before the knob existed, so older tuning logs still apply
        config = space.default() if config is None else \
            space.validate({**space.default(), **config})
        template.apply(target, sch, out, anchor, attrs, config)
    with times.phase("lowering to loop IR", name):
        func = lower(sch, [*params, out], name)
    with times.phase("loop passes", name):
        func = loop_passes.optimize(func)
    # the kernel dims' values, for its callers (compiler/llvm.py's entry)
    func.attrs.update(config=config, trace=list(sch.trace), dim_values=kernel_dims)
    return func


def _anchor_stages(sch, anchor) -> set:
    """The anchor's own stages (its tensor and the stages it reads that its op defined), which
    the anchor's schedule decides about."""
    if anchor is None:
        return set()
    # an anchor op's final stage without a reduction (avg_pool's division, softmax's) is
    # inlined like an epilogue; its reduction stages are tagged "anchor:" and kept
    stages = {sch[anchor]} if anchor.op.reduce_axis else set()
    frontier = [anchor]
    while frontier:
        t = frontier.pop()
        for inp in t.op.input_tensors():
            if isinstance(inp.op, te.ComputeOp) and inp.op.tag.startswith("anchor:"):
                stages.add(sch[inp])
                frontier.append(inp)
    return stages


def workload_key(group: FusedGroup, graph: Graph) -> tuple:
    """Two groups with equal keys compute the same function of their inputs."""
    index = {v: ("in", k) for k, v in enumerate(group.inputs)}
    parts = []
    for j, node in enumerate(group.nodes):
        index[node.outputs[0]] = ("node", j)
        parts.append((node.op, repr(sorted(node.attrs.items())),
                      tuple(index[v] for v in node.inputs)))
    ins = []
    for v in group.inputs:
        scalar = None
        if inlined_scalar(v, graph):
            scalar = graph.constants[v].reshape(-1)[0].item()
        ins.append((v.type.shape, v.type.dtype, scalar))
    return tuple(parts), tuple(ins)

"""One fused group -> one kernel: the group's tensor expressions, scheduled by its anchor's
template with a config, lowered to loop IR; and the workload key that says when two groups are
the same kernel.

>>> func = schedule_group(group, graph, Target.from_string("llvm"), "k0_conv")
>>> func.attrs["config"]                    # the template's default config
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tensorc.compiler.timing import CompileTimes
from tensorc.errors import TensorcError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.graph import Graph, Value
from tensorc.ir.loop import PrimFunc
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ops.catalog import get_op
from tensorc.ops.registry import Template
from tensorc.ops.schedules import INJECTIVE
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

    def __post_init__(self) -> None:
        self.name = self.name or self.func.name
        self.symbol = self.symbol or self.name


def inlined_scalar(v: Value, graph: Graph) -> bool:
    """One-element constants become literals inside the kernels that read them."""
    return v in graph.constants and v.type.size == 1


def group_to_te(group: FusedGroup, graph: Graph):
    """Tensor expressions of a group: placeholders for its inputs, one compute per node."""
    tensors: dict[Value, te.Tensor] = {}
    params: list[te.Tensor] = []
    for k, v in enumerate(group.inputs):
        if inlined_scalar(v, graph):
            value = graph.constants[v].reshape(-1)[0].item()
            c = E.Const(value, v.type.dtype)
            tensors[v] = te.compute(v.type.shape, lambda *i, c=c: c, name=f"scalar{k}")
            continue
        t = te.placeholder(v.type.shape, v.type.dtype, name=f"in{k}")
        tensors[v] = t
        params.append(t)
    anchor = None
    for node in group.nodes:
        opdef = get_op(node.op)
        if opdef.compute_fn is None:
            raise TensorcError(f"op {node.op} has no compute definition")
        out = opdef.compute_fn(node.attrs, *[tensors[v] for v in node.inputs])
        tensors[node.outputs[0]] = out
        if node is group.anchor:
            anchor = out
    return params, tensors[group.output], anchor


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
                   times: CompileTimes | None = None) -> PrimFunc:
    """One group's kernel, scheduled by its template with ``config`` (by default the
    template's heuristic choice). The PrimFunc's attrs record the config and the trace.
    ``times`` collects the seconds of scheduling, lowering and loop passes."""
    times = times if times is not None else CompileTimes()
    with times.phase("scheduling", name):
        params, out, anchor = group_to_te(group, graph)
        sch = create_schedule(out)
        # everything but the anchor and the output is computed inline
        anchor_stages = _anchor_stages(sch, anchor)
        for stage in sch.compute_stages:
            if stage.is_output or stage in anchor_stages or stage.op.reduce_axis:
                continue
            stage.compute_inline()
        template = group_template(group, target)
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
    func.attrs.update(config=config, trace=list(sch.trace))
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

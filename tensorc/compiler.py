"""The compilation pipeline, top to bottom: ONNX -> graph -> fused groups -> tensor expressions
-> schedules -> loop IR -> LLVM -> one native entry function.

Each stage can be printed (``tensorc inspect --stage ...``); :func:`compile_graph` runs them
all and returns a :class:`tensorc.runtime.module.Module`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

from tensorc.codegen.llvm.codegen import LLVMCodegen
from tensorc.codegen.llvm.objects import emit_object, optimize_module
from tensorc.errors import TensorcError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.graph import Graph, Value
from tensorc.ir.loop import Buffer, KernelCall, PrimFunc, seq
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ops.cost import bytes_moved, node_flops
from tensorc.ops.registry import Template, get_op
from tensorc.ops.space import InvalidConfigError
from tensorc.ops.schedules import INJECTIVE
from tensorc.passes import loop as loop_passes
from tensorc.passes.graph import GRAPH_PIPELINE
from tensorc.passes.graph.fuse import VIEW_OPS, FusedGroup, fuse, view_base
from tensorc.passes.graph.plan_memory import MemoryPlan, plan_memory
from tensorc.profile import KernelInfo
from tensorc.target import Target

Progress = Callable[[str], None]
ENTRY = "tensorc_entry"


def inlined_scalar(v: Value, graph: Graph) -> bool:
    """One-element constants become literals inside the kernels that read them."""
    return v in graph.constants and v.type.size == 1


def optimize_graph(graph: Graph, target: Target) -> Graph:
    """Run the graph passes (constant folding, simplification, layout) in order."""
    for graph_pass in GRAPH_PIPELINE:
        graph = graph_pass(graph, target) if getattr(graph_pass, "needs_target", False) \
            else graph_pass(graph)
    return _materialize_outputs(graph)


def _materialize_outputs(graph: Graph) -> Graph:
    """Every graph output must be written by a kernel into the caller's array: copy outputs
    that are inputs, constants or listed twice, and views whose base cannot be computed in
    the caller's array itself (plan_memory places a view output's base there)."""
    seen: set[Value] = set()
    bases: set[Value] = set()       # view outputs' bases, each computed in one output
    for k, v in enumerate(graph.outputs):
        copy = v in seen or v.producer is None
        if not copy and v.producer.op in VIEW_OPS:
            base = view_base(v)
            copy = base.producer is None or base in graph.outputs or base in bases
            bases.add(base)
        if copy:
            (graph.outputs[k],) = graph.add_node("cast", [v], {"dtype": v.type.dtype},
                                                 [v.type], name=f"output_copy_{k}")
        seen.add(graph.outputs[k])
    return graph


# ---------------------------------------------------------------------------------------------
# one group -> one kernel

@dataclass
class Kernel:
    func: PrimFunc
    group: FusedGroup
    key: tuple


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
                   config: Mapping | None = None) -> PrimFunc:
    """One group's kernel, scheduled by its template with ``config`` (by default the
    template's heuristic choice). The PrimFunc's attrs record the config and the trace."""
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
    config = space.default() if config is None else space.validate(config)
    template.apply(target, sch, out, anchor, attrs, config)
    func = lower(sch, [*params, out], name)
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


# ---------------------------------------------------------------------------------------------
# the whole graph

@dataclass
class Compiled:
    graph: Graph
    groups: list[FusedGroup]
    kernels: list[Kernel]            # one per non-view group, in execution order
    plan: MemoryPlan
    entry: PrimFunc
    llvm_ir: str
    output_names: list[str]


def build_kernels(graph: Graph, groups: list[FusedGroup], target: Target,
                  progress: Progress | None = None, configs=None) -> list[Kernel]:
    """One kernel per non-view group, identical workloads scheduled once; ``configs`` (an
    ``autotune.records.BestConfigs``) gives tuned configs by workload key, the rest get their
    template's default."""
    kernels: list[Kernel] = []
    by_key: dict[tuple, PrimFunc] = {}
    # views move no data, and an empty output needs no kernel
    work = [g for g in groups if not g.view and g.output.type.size > 0]
    for n, group in enumerate(work, 1):
        key = workload_key(group, graph)
        func = by_key.get(key)
        if func is None:
            name = f"k{len(by_key)}_{group.name}"
            if progress:
                progress(f"[{n}/{len(work)}] scheduling {group.name}")
            config = configs.config_for(key) if configs is not None else None
            try:
                func = schedule_group(group, graph, target, name, config)
            except InvalidConfigError:      # the space changed since the log was written
                configs.reject(key)
                func = schedule_group(group, graph, target, name)
            if configs is not None and not func.attrs["config"]:
                configs.untunable(key)      # no knobs: nothing a log could hold for it
            by_key[key] = func
        kernels.append(Kernel(func, group, key))
    return kernels


def make_entry(graph: Graph, kernels: list[Kernel], plan: MemoryPlan) -> PrimFunc:
    """The entry function: one call per kernel, with pointers into the caller's arrays, the
    constant pool and the arena."""
    inputs = [Buffer(f"input{k}", v.type.shape, v.type.dtype) for k, v in
              enumerate(graph.inputs)]
    outputs = [Buffer(f"output{k}", v.type.shape, v.type.dtype) for k, v in
               enumerate(graph.outputs)]
    pool = Buffer("const_pool", (plan.const_pool.nbytes,), "uint8")
    arena = Buffer("arena", (plan.arena_size,), "uint8")
    by_kind = {"input": inputs, "output": outputs}
    calls = []
    for kernel in kernels:
        group = kernel.group
        args = []
        values = [v for v in group.inputs if not inlined_scalar(v, graph)]
        for v in [*values, group.output]:
            place = plan.places[v]
            if place.kind == "const":
                args.append((pool, place.offset))
            elif place.kind == "arena":
                args.append((arena, place.offset))
            else:
                args.append((by_kind[place.kind][place.index], place.offset))
        calls.append(KernelCall(kernel.func.name, args))
    return PrimFunc(ENTRY, [*inputs, *outputs, pool, arena], seq(*calls) if calls else seq())


def compile_graph(graph: Graph, target: Target, progress: Progress | None = None,
                  configs=None) -> Compiled:
    """Compile an imported graph; the outputs keep the names they have now. ``configs``:
    tuned schedule configs by workload (see :func:`build_kernels`)."""
    start = time.perf_counter()
    output_names = [v.name for v in graph.outputs]
    graph = optimize_graph(graph, target)
    groups = fuse(graph)
    kernels = build_kernels(graph, groups, target, progress, configs)
    plan = plan_memory(graph, groups)
    entry = make_entry(graph, kernels, plan)
    cg = LLVMCodegen(target, graph.name)
    done: set[str] = set()
    for kernel in kernels:
        if kernel.func.name not in done:
            cg.add_kernel(kernel.func)
            done.add(kernel.func.name)
    cg.add_entry(entry)
    if progress:
        progress(f"lowered {len(done)} distinct kernels for {len(kernels)} groups in "
                 f"{time.perf_counter() - start:.1f}s; running LLVM")
    return Compiled(graph, groups, kernels, plan, entry, str(cg.module), output_names)


def to_object(compiled: Compiled, target: Target) -> bytes:
    return emit_object(compiled.llvm_ir, target)


def optimized_llvm_ir(compiled: Compiled, target: Target) -> str:
    mod, _ = optimize_module(compiled.llvm_ir, target)
    return str(mod)


def kernel_infos(compiled: Compiled) -> list[KernelInfo]:
    """One record per kernel call of the entry function: what the profiler reports."""
    graph = compiled.graph
    infos = []
    for kernel in compiled.kernels:
        group = kernel.group
        inputs = [v for v in group.inputs if not inlined_scalar(v, graph)]
        out = group.output
        infos.append(KernelInfo(kernel.func.name, tuple(n.op for n in group.nodes),
                                tuple(out.type.shape), out.type.dtype,
                                sum(node_flops(n) for n in group.nodes),
                                bytes_moved(inputs, out),
                                tuple(n.name or n.op for n in group.nodes)))
    return infos


def signature(values: list[Value]) -> list[tuple[str, tuple[int, ...], str]]:
    return [(v.name, tuple(v.type.shape), v.type.dtype) for v in values]


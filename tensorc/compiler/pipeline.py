"""The front half of compilation that both back ends share: graph passes, fusion, one scheduled
kernel per distinct workload, and the memory plan.

    graph -> optimize_graph -> fuse -> build_kernels (by workload key) -> plan_memory

:func:`lower_graph` runs it and returns a :class:`Lowered`, which the CPU back end
(compiler/llvm.py) turns into LLVM IR and the CUDA back end (compiler/cuda.py) into CUDA C.

>>> lowered = lower_graph(graph, Target.from_string("llvm"))
>>> [k.func.name for k in lowered.kernels]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from tensorc.compiler.kernel import (
    Kernel, apply_layout, inlined_scalar, repackable, schedule_group, workload_key,
)
from tensorc.compiler.timing import GRAPH_PASS, CompileTimes
from tensorc.compiler.variants import call_forms, kernel_meta, small_dims_variants
from tensorc.ir import te
from tensorc.ir.graph import Graph, Value
from tensorc.ir.loop import PrimFunc
from tensorc.ops.cost import bytes_moved, node_flops
from tensorc.ops.space import InvalidConfigError
from tensorc.passes.graph import GRAPH_PIPELINE
from tensorc.passes.graph.fuse import VIEW_OPS, FusedGroup, fuse, view_base
from tensorc.passes.graph.plan_memory import MemoryPlan, plan_memory
from tensorc.runtime.profile import KernelInfo
from tensorc.target import Target

Progress = Callable[[str], None]
Signature = list[tuple[str, tuple[int, ...], str]]


def optimize_graph(graph: Graph, target: Target, times: CompileTimes | None = None) -> Graph:
    """Run the graph passes (constant folding, simplification, layout) in order; ``times``
    collects each pass's seconds."""
    times = times if times is not None else CompileTimes()
    for graph_pass in GRAPH_PIPELINE:
        with times.phase(GRAPH_PASS + graph_pass.__name__):
            graph = graph_pass(graph, target) if getattr(graph_pass, "needs_target", False) \
                else graph_pass(graph)
    with times.phase(GRAPH_PASS + "materialize_outputs"):
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


def build_kernels(graph: Graph, groups: list[FusedGroup], target: Target,
                  progress: Progress | None = None, configs=None,
                  times: CompileTimes | None = None) -> list[Kernel]:
    """One kernel per non-view group, identical workloads scheduled once; ``configs`` (an
    ``autotune.records.BestConfigs``) gives tuned configs by workload key, the rest get their
    template's default. ``times`` collects each kernel's seconds by phase."""
    kernels: list[Kernel] = []
    by_key: dict[tuple, PrimFunc] = {}
    variants: dict[tuple, list] = {}
    # views move no data, and an empty output needs no kernel
    work = [g for g in groups if not g.view and not empty_at_every_run(g.output.type.size)]
    keys = [workload_key(group, graph) for group in work]
    distinct = len(set(keys))       # the steps: a repeated workload is scheduled once
    for group, key in zip(work, keys):
        func = by_key.get(key)
        if func is None:
            name = f"k{len(by_key)}_{group.name}"
            if progress:
                progress(f"[{len(by_key) + 1}/{distinct}] scheduling {group.name}")
            config = configs.config_for(key) if configs is not None else None
            try:
                if config is not None and not repackable(group, graph, target, config):
                    raise InvalidConfigError("the config repacks weights that are no constant")
                func = schedule_group(group, graph, target, name, config, times)
            except InvalidConfigError:      # the space changed since the log was written
                configs.reject(key)
                func = schedule_group(group, graph, target, name, times=times)
            if configs is not None and not func.attrs["config"]:
                configs.untunable(key)      # no knobs: nothing a log could hold for it
            by_key[key] = func
            variants[key] = small_dims_variants(group, graph, target, func, times)
        # a config that picks another layout of the weights: the constant repacked for it
        apply_layout(group, graph, target, func.attrs["config"])
        kernels.append(Kernel(func, group, key, variants=variants[key],
                              calls=call_forms(func.name, kernel_meta(func, variants[key]))))
    return kernels


def empty_at_every_run(size) -> bool:
    """Whether a tensor of ``size`` elements is empty at every run (a symbolic size may be 0
    at some runs: its kernel runs no iteration then)."""
    return isinstance(size, int) and size == 0


@dataclass
class Lowered:
    """A graph after the shared stages: what each back end starts from."""
    graph: Graph                     # optimized; its outputs materialized
    groups: list[FusedGroup]
    kernels: list[Kernel]            # one per non-view group, in execution order
    plan: MemoryPlan
    output_names: list[str]          # the names the outputs had before the graph passes


def lower_graph(graph: Graph, target: Target, progress: Progress | None = None,
                configs=None, times: CompileTimes | None = None,
                hints: Mapping[str, int] | None = None) -> Lowered:
    """Optimize, fuse, schedule and plan an imported graph; the outputs keep the names they
    have now. ``configs``: tuned schedule configs by workload (see :func:`build_kernels`);
    ``times`` collects the seconds of each phase."""
    times = times if times is not None else CompileTimes()
    output_names = [v.name for v in graph.outputs]
    # symbolic dims: comparisons decided by their ranges, choices made at their hints
    with graph.dims.active(), te.dim_hints(hints or {}):
        graph = optimize_graph(graph, target, times)
        with times.phase("fusion"):
            groups = fuse(graph)
        kernels = build_kernels(graph, groups, target, progress, configs, times)
        with times.phase("memory plan"):
            plan = plan_memory(graph, groups)
    return Lowered(graph, groups, kernels, plan, output_names)


def kernel_infos(lowered: Lowered) -> list[KernelInfo]:
    """One record per kernel call of the model: what the profiler reports."""
    graph = lowered.graph
    infos = []
    for kernel in lowered.kernels:
        group = kernel.group
        inputs = [v for v in group.inputs if not inlined_scalar(v, graph)]
        out = group.output
        infos.append(KernelInfo(kernel.name, tuple(n.op for n in group.nodes),
                                tuple(out.type.shape), out.type.dtype,
                                sum(node_flops(n, exact=True) for n in group.nodes),
                                bytes_moved(inputs, out, exact=True),
                                tuple(n.name or n.op for n in group.nodes)))
    return infos


def signature(values: list[Value]) -> Signature:
    return [(v.name, tuple(v.type.shape), v.type.dtype) for v in values]


def input_signature(lowered: Lowered) -> Signature:
    """The module's inputs as (name, shape, dtype)."""
    return signature(lowered.graph.inputs)


def output_signature(lowered: Lowered) -> Signature:
    """The module's outputs as (name, shape, dtype), under the names they had on import."""
    return [(name, sig[1], sig[2]) for name, sig in
            zip(lowered.output_names, signature(lowered.graph.outputs))]

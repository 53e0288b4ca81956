"""Tuning tasks: the distinct kernels of a model, each a standalone fused group whose schedule
template's search space the tuner explores.

A :class:`Task` carries a small graph of its own (the group's nodes over fresh inputs, no
weights), so it can be sent to a builder process and scheduled there with any config of its
space. Identical workloads (same ops, attributes, shapes, dtypes) are one task; its ``weight``
is how many times the model runs it.

A model compiled with symbolic dims has tasks over symbolic dims (:func:`symbolic_tasks`):
keyed by their symbolic workloads, as the symbolic compile keys its kernels, so the log's
records apply to it; each is measured at the tuning shapes (``Task.shapes``, graph dim values)
where it runs its own schedule: at a shape where every row dim of the kernel (all but its batch
dims) is at most ``variants.SMALL_MAX`` the model runs its small-dims variant, which no config
changes.

>>> tasks = extract_tasks("resnet.onnx", {"input": (1, 3, 224, 224)}, "llvm")
>>> tasks[0].name, tasks[0].weight, tasks[0].flops, tasks[0].default_latency
('k3_fused_conv_add_relu', 2, 231211008, 0.00121)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from tensorc.autotune.features import extract_features
from tensorc.autotune.records import target_string, workload_hash
from tensorc.autotune.shapes import feeds_at, resolve_shapes
from tensorc.compiler.kernel import (
    group_space, inlined_scalar, loop_kernel_node, picked_layout, schedule_group,
)
from tensorc.compiler.kernel_objects import kernel_jobs
from tensorc.compiler.llvm import compile_graph, compile_model
from tensorc.compiler.pipeline import optimize_graph
from tensorc.compiler.variants import SMALL_MAX, row_extents
from tensorc.errors import TensorcError
from tensorc.frontend.model import import_model
from tensorc.ir.dims import Dim, dims_in, evaluate, is_symbolic
from tensorc.ir.graph import Graph
from tensorc.ops.cost import bytes_moved, node_flops
from tensorc.ops.interpret import run_reference
from tensorc.ops.catalog import get_op
from tensorc.ops.space import SearchSpace
from tensorc.passes.graph.fuse import FusedGroup, fuse
from tensorc.target import Target


@dataclass
class Task:
    """One distinct kernel of a model."""

    name: str                       # the kernel's name in the compiled model
    key: tuple                      # compiler.kernel.workload_key of the group
    graph: Graph                    # the group's nodes over fresh inputs (no weights)
    group: FusedGroup               # the group, over ``graph``
    target: str                     # Target string, e.g. "llvm -mcpu=znver3"
    weight: int = 1                 # how many times the model runs this kernel
    flops: int = 0
    bytes: int = 0
    default_latency: float | None = None    # seconds, the default schedule in the model
    ops: tuple[str, ...] = ()
    _space: SearchSpace | None = field(default=None, repr=False, compare=False)
    # over symbolic dims: the tuning shapes (graph dim values) it is measured at; () static
    shapes: tuple = ()

    @property
    def workload(self) -> str:
        return workload_hash(self.key)

    @property
    def description(self) -> str:
        shape = "x".join(map(str, self.group.output.type.shape))
        return f"{'+'.join(self.ops)} {shape}"

    def get_target(self) -> Target:
        return Target.from_string(self.target)

    def space(self) -> SearchSpace:
        """The search space of this kernel: its schedule template's, and where its weights
        may take other layouts (a conv's Winograd or direct algorithm), the knob that picks
        one (``compiler.kernel.group_space``)."""
        if self._space is None:
            with self.graph.dims.active():     # (symbolic dims: decided by their ranges)
                self._space = group_space(self.group, self.graph, self.get_target())
        return self._space

    def schedule(self, config: Mapping | None = None):
        """The kernel's lowered PrimFunc for ``config`` (default: the template's choice);
        ``func.attrs`` hold the config and its trace. A config that picks another layout of
        the weights gets a kernel over weights of that layout (:meth:`inputs_for`)."""
        with self.graph.dims.active():
            return schedule_group(self.group, self.graph, self.get_target(), self.name, config)

    def features(self, func) -> np.ndarray:
        """The feature vector of ``func`` (a :meth:`schedule`); over symbolic dims, read at
        the task's largest tuning shape (``features.extract_features``)."""
        if not self.shapes or not func.dims:
            return extract_features(func)
        largest = max(self.shapes, key=lambda v: math.prod(v.values()))
        own = func.attrs.get("dim_values", {})
        return extract_features(func, {v.name: evaluate(own.get(v.name, Dim(v.name)), largest)
                                       for v in func.dims})

    def inputs_for(self, config: Mapping | None, arrays: Sequence[np.ndarray]
                   ) -> list[np.ndarray]:
        """:meth:`inputs` (``arrays``) as the kernel that ``config`` picks reads them: where it
        picks another layout of the weights, the weights repacked into it (the same weights,
        so the default's reference output serves)."""
        if self.shapes:         # one list of arrays per tuning shape
            return [self._repacked(config, a) for a in arrays]
        return self._repacked(config, arrays)

    def _repacked(self, config: Mapping | None, arrays: Sequence[np.ndarray]
                  ) -> list[np.ndarray]:
        picked = picked_layout(self.group, self.get_target(), config)
        if picked is None:
            return list(arrays)
        layouts, value = picked
        k = self.graph.inputs.index(self.group.anchor.inputs[layouts.operand])
        arrays = list(arrays)
        arrays[k] = np.ascontiguousarray(layouts.repack(arrays[k], value))
        return arrays

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Seeded inputs of the kernel's parameters (floats standard normal; integers zero, a
        valid index everywhere). Where not every array is a valid value of an op's input
        (a Winograd conv's transformed weights), the op's ``sample_input`` (in its registry
        entry's extras) gives one. Over symbolic dims: one list per tuning shape."""
        if self.shapes:
            return [self._arrays(values, seed) for values in self.shapes]
        return self._arrays({}, seed)

    def _arrays(self, values: Mapping[str, int], seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        arrays = []
        for v in self.graph.inputs:
            shape = tuple(evaluate(d, values) for d in v.type.shape)
            dtype = np.dtype(v.type.dtype)
            if dtype.kind == "f":
                arrays.append(rng.standard_normal(shape).astype(dtype))
            else:
                arrays.append(np.zeros(shape, dtype))
        for node in self.graph.nodes:
            sample = get_op(node.op).extra.get("sample_input")
            for k, v in enumerate(node.inputs):
                if sample is not None and v in self.graph.inputs:
                    array = sample(node.attrs, k, [i.type for i in node.inputs], rng)
                    if array is not None:
                        arrays[self.graph.inputs.index(v)] = array
        return arrays

    def reference(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray] | None:
        """The unscheduled program's output (the numpy references of the group's ops), or
        None where an op has no reference (or the kernel is over symbolic dims: then the
        default config's outputs at each shape serve)."""
        if self.shapes:
            return None
        try:
            out = run_reference(self.graph, {v.name: a for v, a in
                                             zip(self.graph.inputs, arrays)})
        except Exception:       # noqa: BLE001  (no reference: the default's output serves)
            return None
        return [np.ascontiguousarray(out[v.name]) for v in self.graph.outputs]


def standalone(group: FusedGroup, graph: Graph, name: str) -> tuple[Graph, FusedGroup]:
    """The group as a graph of its own: its inputs become graph inputs (one-element constants,
    which kernels inline, stay constants), its nodes are copied."""
    g = Graph(name)
    g.dims = graph.dims.copy()          # symbolic dims: their ranges decide the schedule
    mapping = {}
    for k, v in enumerate(group.inputs):
        if inlined_scalar(v, graph):
            mapping[v] = g.add_constant(graph.constants[v], f"scalar{k}")
        else:
            mapping[v] = g.add_input(f"in{k}", v.type)
    anchor = None
    for node in group.nodes:
        outs = g.add_node(node.op, [mapping[v] for v in node.inputs], dict(node.attrs),
                          [o.type for o in node.outputs], name=node.name)
        for old, new in zip(node.outputs, outs):
            mapping[old] = new
        if node is group.anchor:
            anchor = g.nodes[-1]
    g.outputs.append(mapping[group.output])
    copy = FusedGroup(nodes=list(g.nodes), anchor=anchor, kind=group.kind,
                      inputs=[mapping[v] for v in group.inputs], view=False)
    return g, copy


def tasks_of_compiled(compiled, target: Target) -> list[Task]:
    """The distinct kernels of a compiled model (``compiler.llvm.Compiled``), in first-run order."""
    return tasks_of_kernels(compiled.kernels, compiled.graph, target)


def tasks_of_kernels(kernels, graph: Graph, target: Target) -> list[Task]:
    """The distinct kernels among ``kernels`` (``compiler.kernel.Kernel``s of ``graph``, in
    first-run order)."""
    tasks: dict[tuple, Task] = {}
    for kernel in kernels:
        task = tasks.get(kernel.key)
        if task is not None:
            task.weight += 1
            continue
        group = kernel.group
        # no knobs (a loop-IR kernel), or sizes known only at run time: nothing to tune
        table = graph.dims
        if loop_kernel_node(group) is not None or any(
                table.is_data_dependent(d) for v in [*group.inputs, group.output]
                for d in v.type.shape):
            continue
        g, copy = standalone(group, graph, kernel.name)
        inputs = [v for v in group.inputs if not inlined_scalar(v, graph)]
        tasks[kernel.key] = Task(
            kernel.name, kernel.key, g, copy, target_string(target), 1,
            sum(node_flops(n) for n in group.nodes), bytes_moved(inputs, group.output),
            ops=tuple(n.op for n in group.nodes))
    return list(tasks.values())


def kernel_dims(group: FusedGroup, graph: Graph) -> list:
    """The symbolic dims a group's kernel takes, as expressions of the graph's dims: each
    dim of its arrays' shapes (a compound one, ``batch*seq``, is one kernel dim) and of its
    nodes' attributes; what the small-dims variant's condition reads (compiler/variants.py)."""
    found = []
    values = [v for v in group.inputs if not inlined_scalar(v, graph)] + [group.output]
    dims = [d for v in values for d in v.type.shape]
    dims += [d for node in group.nodes for d in dims_in(node.attrs.values())]
    for d in dims:
        if is_symbolic(d) and d not in found:
            found.append(d)
    return found


def runs_own_schedule(task: Task, values: Mapping[str, int]) -> bool:
    """Whether the model runs ``task``'s kernel with its own schedule (a tuned config's)
    where the dims take ``values``: not where every dim it takes is at most ``SMALL_MAX``
    (the small-dims variant runs there, compiler/variants.py; a batch dim may be any size);
    always for a static one."""
    dims = kernel_dims(task.group, task.graph)
    # (the variant's condition reads its row dims alone: compiler/variants.py's row_dims)
    rows = [d for d in dims if d in {e for v in [*task.group.inputs, task.group.output]
                                     for e in row_extents(v.type.shape)}] or dims
    return not dims or any(evaluate(d, values) > SMALL_MAX for d in rows)


def symbolic_tasks(graph: Graph, shapes, target: Target) -> list[Task]:
    """The distinct kernels of ``graph`` compiled with its dims symbolic (keyed as that
    compile keys them), each with the tuning ``shapes`` (graph dim values) at which it runs
    its own schedule: where every dim it takes is at most ``SMALL_MAX`` the model runs its
    small-dims variant, whatever the config, so a kernel small at every shape is left out.
    A kernel with no symbolic dim is a static task."""
    with graph.dims.active():
        graph = optimize_graph(graph, target)
        groups = fuse(graph)
        _, kernels = kernel_jobs(graph, groups, None, target)
    tasks = []
    for task in tasks_of_kernels(kernels, graph, target):
        if kernel_dims(task.group, task.graph):
            task.shapes = tuple(dict(values) for values in shapes
                                if runs_own_schedule(task, values))
            if not task.shapes:
                continue
            # the geometric mean over the shapes, as its latency is: GFLOP/s is their ratio
            exact = sum(node_flops(n, exact=True) for n in task.group.nodes)
            counts = [max(evaluate(exact, v), 1) for v in task.shapes]
            task.flops = int(round(float(np.exp(np.mean(np.log(counts))))))
        tasks.append(task)
    return tasks


def extract_tasks(model, input_shapes: Mapping[str, Sequence[int]] | None = None,
                  target: str | Target = "llvm", measure: bool = True,
                  num_threads: int | None = None) -> list[Task]:
    """The distinct kernels of ``model`` (an ONNX path or ModelProto): identical workloads
    once, each with its weight (runs per inference), FLOPs, and default latency (each
    kernel's median time inside the compiled model's entry function, ``Module.profile``;
    None when ``measure`` is False).

    >>> [(t.name, t.weight) for t in extract_tasks("mlp.onnx", measure=False)]
    [('k0_fused_matmul_add_relu', 1), ('k1_fused_matmul_add', 1)]
    """
    tgt = Target.from_string(target)
    if tgt.kind != "llvm":
        raise TensorcError(f"the autotuner tunes CPU (llvm) kernels; {tgt} is not one")
    _, graph = import_model(model, input_shapes)
    compiled = compile_graph(graph, tgt)
    tasks = tasks_of_compiled(compiled, tgt)
    if measure:
        mod = compile_model(model, tgt, input_shapes, num_threads)
        profile = mod.profile(seconds=0.5, min_runs=5)
        by_name: dict[str, list[float]] = {}
        for k in profile.kernels:
            by_name.setdefault(k.info.name, []).append(k.seconds)
        for task in tasks:
            times = by_name.get(task.name)
            if times:
                task.default_latency = float(np.median(times))
    return tasks



def extract_symbolic_tasks(model, shapes: Sequence[Mapping[str, int]] | None = None,
                           target: str | Target = "llvm",
                           input_shapes: Mapping[str, Sequence[int]] | None = None,
                           dim_ranges: Mapping[str, tuple] | None = None, measure: bool = True,
                           num_threads: int | None = None) -> tuple[list[Task], list[dict]]:
    """The distinct kernels of ``model`` compiled with its dims symbolic (those
    ``input_shapes`` leaves open, in ``dim_ranges``), and the tuning shapes: ``shapes``
    checked, or a default set across each dim's range (``autotune.shapes``). Each task's
    default latency (with ``measure``) is the geometric mean, over its shapes, of its median
    time inside the symbolic module's entry function at each.

    >>> tasks, shapes = extract_symbolic_tasks("bert.onnx", [{"batch": 1, "seq": 9}])
    >>> tasks[0].workload, tasks[0].shapes
    ('3f0c...', ({'batch': 1, 'seq': 9},))
    """
    tgt = Target.from_string(target)
    if tgt.kind != "llvm":
        raise TensorcError(f"the autotuner tunes CPU (llvm) kernels; {tgt} is not one")
    _, graph = import_model(model, input_shapes, None, dim_ranges, symbolic=True)
    shapes = resolve_shapes(graph, shapes)
    tasks = symbolic_tasks(graph, shapes, tgt)
    if measure and tasks:
        mod = compile_model(model, tgt, input_shapes, num_threads, symbolic=True,
                            dim_ranges=dim_ranges)
        times: dict[str, dict[int, float]] = {}     # kernel -> shape index -> seconds
        for k, values in enumerate(shapes):
            profile = mod.profile(feeds_at(mod.inputs, values), seconds=0.3, min_runs=5)
            by_name: dict[str, list[float]] = {}
            for kernel in profile.kernels:
                by_name.setdefault(kernel.info.name, []).append(kernel.seconds)
            for name, seconds in by_name.items():
                times.setdefault(name, {})[k] = float(np.median(seconds))
        for task in tasks:
            at = times.get(task.name, {})
            picked = [at[k] for k, values in enumerate(shapes)
                      if k in at and (not task.shapes or values in task.shapes)]
            if picked:
                task.default_latency = float(np.exp(np.mean(np.log(np.maximum(picked,
                                                                              1e-9)))))
    return tasks, shapes

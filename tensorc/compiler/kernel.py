"""One fused group -> one kernel: the group's tensor expressions, scheduled by its anchor's
template with a config, lowered to loop IR; and the workload key that says when two groups are
the same kernel.

>>> func = schedule_group(group, graph, Target.from_string("llvm"), "k0_conv")
>>> func.attrs["config"]                    # the template's default config
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from tensorc.compiler.timing import CompileTimes
from tensorc.errors import TensorcError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.dims import bounds as dim_bounds
from tensorc.ir.dims import dim_var, dims_in, is_symbolic
from tensorc.ir.graph import Graph, Value
from tensorc.ir.loop import Buffer, PrimFunc
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ops.catalog import get_op
from tensorc.ops.loop_kernels import build_loop_kernel
from tensorc.ops.registry import Template
from tensorc.ops.schedules import INJECTIVE
from tensorc.ops.space import EMPTY, Config, Knob, SearchSpace
from tensorc.ops.symbolic import GENERIC
from tensorc.ops.weight_layouts import WeightLayouts
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


def group_to_te(group: FusedGroup, graph: Graph, target: Target | None = None,
                kernel_dims: dict | None = None):
    """Tensor expressions of a group: placeholders for its inputs, one compute per node
    (``target``: for the computes that follow the machine). With ``kernel_dims`` (a dict it
    fills), each compound symbolic dim of an input (``(H - 1)//4 + 1``) is a dim of the
    kernel's own (``d.0``), whose value its caller computes: the kernel's index arithmetic
    then reads one parameter, not the expression."""
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
        out, anchor = _computes(group, tensors, target)
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


def _computes(group: FusedGroup, tensors: dict, target: Target | None):
    anchor = None
    for node in group.nodes:
        opdef = get_op(node.op)
        if opdef.compute_fn is None:
            raise TensorcError(f"op {node.op} has no compute definition")
        args = [tensors[v] for v in node.inputs]
        out = opdef.compute_fn(node.attrs, *args, target=target) \
            if opdef.compute_reads_target else opdef.compute_fn(node.attrs, *args)
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
                   hints: Mapping[str, int] | None = None,
                   unless_trace: list | None = None,
                   same_but_parallel: bool = False,
                   dims_at_most: Mapping[str, int] | None = None) -> PrimFunc | None:
    """One group's kernel, scheduled by its template with ``config`` (by default the
    template's heuristic choice). The PrimFunc's attrs record the config and the trace.
    A config that picks another layout of the anchor's weights (:func:`group_space`) gets
    the kernel over weights of that layout, its parameters in the group's order
    (:func:`apply_layout` repacks a compiled graph's constant to match). ``times`` collects
    the seconds of scheduling, lowering and loop passes. Over symbolic dims, the schedule
    chooses at ``hints`` (by dim name; te.hint), and a template that does not take symbolic
    shapes yet gives way to the generic one (ops/symbolic.py). With ``unless_trace``: None,
    neither lowered nor passed through the loop passes, where the schedule's trace is that
    one (compiler/variants.py: a second schedule that may equal the first), or with
    ``same_but_parallel`` that one but for the loops it runs in parallel. ``dims_at_most``:
    the kernel runs only where each dim it names is at most its value (a variant's
    predicate): the loop passes drop the code of larger dims (passes/loop/simplify.py's
    dim_ranges)."""
    times = times if times is not None else CompileTimes()
    if loop_kernel_node(group) is not None:
        if unless_trace == []:      # a loop-IR kernel has no schedule: its trace is empty
            return None
        return _schedule_loop_kernel(group, graph, name, times)
    hinted = te.dim_hints(hints) if hints is not None else contextlib.nullcontext()
    with times.phase("scheduling", name), hinted, contextlib.ExitStack() as stack:
        layouts = anchor_layouts(group, target)
        if config is not None and layouts is not None:
            # a record written before a knob joined the space takes that knob's default, the
            # value the schedule chose before the knob existed, so older logs still apply
            # (and the knobs of an algorithm it does not pick do not matter)
            space = group_space(group, graph, target)
            config = space.validate(space.normalized({**space.default(), **config}))
            value = config[layouts.knob]
            if value != layouts.current:
                graph, group = relaid_group(group, graph, layouts, value)
        kernel_dims: dict = {}
        params, out, anchor = group_to_te(group, graph, target, kernel_dims)
        # a kernel dim's hint is its expression's at the dims' hints, unless ``hints`` names
        # the kernel dim itself (a variant's: every dim of the kernel small, a padded height
        # among them; overriding it with its expression at the graph dims' default hints
        # scheduled a conv's small variant as its large one)
        own_hints = {n: te.hint(d) for n, d in kernel_dims.items()
                     if hints is None or n not in hints}
        stack.enter_context(te.dim_hints({**te.current_hints(), **own_hints}))
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
        own = template.search_space(target, out, anchor, attrs)
        if config is None:
            config = applied = own.default()
            if layouts is not None and layouts.new_knob:
                config = config.replace(**{layouts.knob: layouts.current})
        elif layouts is None:
            config = applied = own.validate({**own.default(), **config})
        else:
            picks = next(c for c in space.constraints if isinstance(c, PicksLayout))
            applied = picks.own(config)
        template.apply(target, sch, out, anchor, attrs, applied)
    if unless_trace is not None and (list(sch.trace) == unless_trace or same_but_parallel and
                                     serial_steps(sch.trace) == serial_steps(unless_trace)):
        return None
    with times.phase("lowering to loop IR", name):
        func = lower(sch, [*params, out], name)
        if dims_at_most is not None:
            func.attrs["dims_at_most"] = dict(dims_at_most)
    with times.phase("loop passes", name):
        func = loop_passes.optimize(func)
    # the kernel dims' values, for its callers (compiler/llvm.py's entry)
    func.attrs.update(config=config, trace=list(sch.trace), dim_values=kernel_dims)
    return func


def serial_steps(trace) -> list:
    """A schedule's trace without its ``parallel`` steps."""
    return [step for step in trace if step.get("prim") != "parallel"]


def loop_kernel_node(group: FusedGroup):
    """The node of a group whose kernel its op writes as loop IR (ops/loop_kernels.py), or
    None."""
    if len(group.nodes) != 1 or get_op(group.nodes[0].op).kernel_fn is None:
        return None
    return group.nodes[0]


def _schedule_loop_kernel(group: FusedGroup, graph: Graph, name: str,
                          times: CompileTimes) -> PrimFunc:
    """A loop-IR kernel: no schedule, no knobs; its inputs as every kernel's (one-element
    constants inlined), then its output and the dims it writes."""
    node = group.nodes[0]
    with times.phase("lowering to loop IR", name):
        operands = {}
        for k, v in enumerate(group.inputs):
            if inlined_scalar(v, graph):
                operands[v] = E.Const(graph.constants[v].reshape(-1)[0].item(), v.type.dtype)
            else:
                operands[v] = Buffer(f"in{k}", v.type.shape, v.type.dtype)
        func = build_loop_kernel(get_op(node.op).kernel_fn, node.attrs,
                                 [operands[v] for v in node.inputs], group.output.type, name)
    with times.phase("loop passes", name):
        func = loop_passes.flatten_buffers(func)
        func = loop_passes.simplify(func)
    func.attrs.update(config={}, trace=[], dim_values={})
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
    # over symbolic dims the ranges decide code too (a guard or a tail the ranges prove
    # needless is dropped): a kernel built for seq in [1, 8] must not serve seq in [1, inf),
    # from the kernel cache or a tuning log. Keys without symbolic dims stay as they were.
    names = sorted({n for v in [*group.inputs, group.output] for d in v.type.shape
                    if is_symbolic(d) for n in d.names} |
                   {n for node in group.nodes for d in dims_in(node.attrs.values())
                    for n in d.names})
    if names:
        return tuple(parts), tuple(ins), tuple((n, graph.dims.ranges.get(n)) for n in names)
    return tuple(parts), tuple(ins)


# ---------------------------------------------------------------------------------------------
# knobs that pick the layout of the anchor's weights (ops/weight_layouts.py)

def anchor_layouts(group: FusedGroup, target: Target) -> WeightLayouts | None:
    """The layouts the weights of the group's anchor may take, where it has more than one."""
    node = group.anchor
    if node is None or get_op(node.op).layouts_fn is None:
        return None
    layouts = get_op(node.op).layouts_fn(node.attrs, [v.type for v in node.inputs], target)
    return layouts if layouts is not None and len(layouts.attrs) > 1 else None


def group_space(group: FusedGroup, graph: Graph, target: Target) -> SearchSpace:
    """The search space of a group's kernel: its template's; and where the anchor's weights
    may take other layouts, the knob that picks one, beside the knobs of each layout's
    schedule. A knob the op adds (a conv's ``algorithm``) keeps the schedule of the layout
    the node has (the space's default) under its knobs' own names, and each other's under
    ``<value>.<knob>`` (``winograd.tiles``), each knob at its default where its algorithm is
    not picked (``SearchSpace.conditions``), so switching the algorithm alone gives the other
    algorithm's default schedule; a knob the schedule has (a matmul's ``vectors``) takes the
    values of every layout. A config is checked against the space of the layout it picks.

    >>> group_space(group, graph, Target.from_string("llvm -mcpu=znver4")).knobs["algorithm"]
    Knob(name='algorithm', choices=('winograd', 'filter_lanes'), default='winograd', doc=...)
    """
    if loop_kernel_node(group) is not None:
        return EMPTY            # a loop-IR kernel has no knobs
    layouts = anchor_layouts(group, target)
    spaces = {}
    for value in layouts.values if layouts is not None else (None,):
        g, grp = (graph, group) if layouts is None or value == layouts.current else \
            relaid_group(group, graph, layouts, value)
        spaces[value] = _template_space(grp, g, target)
    if layouts is None:
        return spaces[None]
    picks = PicksLayout(layouts.knob, layouts.current, layouts.new_knob, spaces)
    knobs: dict[str, Knob] = {}
    conditions = {}     # a conv's algorithm's knobs matter where it is picked
    for value, space in spaces.items():
        for knob in space.knobs.values():
            name = picks.name(value, knob.name)
            if layouts.new_knob:
                conditions[name] = (layouts.knob, value)
            old = knobs.get(name)
            knobs[name] = Knob(name, knob.choices, knob.default, knob.doc) if old is None \
                else Knob(name, old.choices + tuple(c for c in knob.choices
                                                    if c not in old.choices),
                          old.default, old.doc)
    if layouts.new_knob:
        knobs[layouts.knob] = Knob(layouts.knob, layouts.values, layouts.current,
                                   "the weights' layout, and so the algorithm (the weights "
                                   "repacked at compile time)")
    return SearchSpace(list(knobs.values()), [picks], spaces[layouts.current].name,
                       conditions)


def _template_space(group: FusedGroup, graph: Graph, target: Target) -> SearchSpace:
    """The space of the template :func:`schedule_group` schedules ``group`` with: over
    symbolic dims, chosen at the dims' hints with its compound dims as kernel dims, and the
    generic template's (no knobs) where the anchor's does not take symbolic shapes."""
    kernel_dims: dict = {}
    params, out, anchor = group_to_te(group, graph, target, kernel_dims)
    own_hints = {n: te.hint(d) for n, d in kernel_dims.items()}
    template = group_template(group, target)
    if not template.symbolic and not all(te.is_static(t.shape) for t in [*params, out]):
        template = GENERIC
    attrs = group.anchor.attrs if group.anchor is not None else {}
    with te.dim_hints({**te.current_hints(), **own_hints}):
        return template.search_space(target, out, anchor, attrs)


@dataclass(frozen=True)
class PicksLayout:
    """The constraint of a group's space with a layout knob: a config is legal in the space
    of the schedule of the layout it picks. (A class, not a closure: spaces go to the
    tuner's build processes.)"""

    knob: str
    current: Any
    new_knob: bool
    spaces: dict        # knob value -> the space of that layout's schedule

    def name(self, value, knob: str) -> str:
        """The name in the group's space of knob ``knob`` of the schedule of ``value``."""
        if not self.new_knob or value == self.current:
            return knob
        return f"{value}.{knob}"

    def own(self, config: Mapping) -> Config:
        """The values of ``config`` for the knobs of the schedule of the layout it picks."""
        value = config[self.knob]
        return Config({k: config[self.name(value, k)] for k in self.spaces[value].knobs})

    def __call__(self, config) -> str | None:
        return self.spaces[config[self.knob]].violation(self.own(config))


def relaid_group(group: FusedGroup, graph: Graph, layouts: WeightLayouts, value
                 ) -> tuple[Graph, FusedGroup]:
    """The group as a graph of its own with its anchor in the layout ``value`` picks: its
    inputs, in the group's order, are the graph's inputs (one-element constants stay
    constants), the anchor's weights one of the new layout's type."""
    g = Graph(graph.name)
    mapping = {}
    weights = group.anchor.inputs[layouts.operand]
    for v in group.inputs:
        if inlined_scalar(v, graph):
            mapping[v] = g.add_constant(graph.constants[v], v.name)
        else:
            mapping[v] = g.add_input(v.name, layouts.types[value] if v is weights else v.type)
    anchor = None
    for node in group.nodes:
        attrs = layouts.attrs[value] if node is group.anchor else node.attrs
        outs = g.add_node(node.op, [mapping[v] for v in node.inputs], dict(attrs),
                          [o.type for o in node.outputs], name=node.name)
        mapping.update(zip(node.outputs, outs))
        if node is group.anchor:
            anchor = g.nodes[-1]
    g.outputs.append(mapping[group.output])
    return g, FusedGroup(nodes=list(g.nodes), anchor=anchor, kind=group.kind,
                         inputs=[mapping[v] for v in group.inputs], view=group.view)


def picked_layout(group: FusedGroup, target: Target, config: Mapping | None):
    """(layouts, value) where ``config`` picks another layout of the anchor's weights than
    the node has, else None."""
    layouts = anchor_layouts(group, target)
    if config is None or layouts is None or \
            config.get(layouts.knob, layouts.current) == layouts.current:
        return None
    return layouts, config[layouts.knob]


def apply_layout(group: FusedGroup, graph: Graph, target: Target, config: Mapping) -> None:
    """Where ``config`` (a kernel's, as :func:`schedule_group` recorded it) picks another
    layout for the anchor's weights than the layout pass wrote: the constant repacked into it
    and the anchor's attrs and the group's inputs changed in ``graph`` (the old constant
    dropped where nothing else reads it). The anchor's weights must be a constant
    (:func:`repackable`)."""
    picked = picked_layout(group, target, config)
    if picked is None:
        return
    layouts, value = picked
    node = group.anchor
    old = node.inputs[layouts.operand]
    if old not in graph.constants:
        raise TensorcError(f"{node.name}: {layouts.knob}={value!r} repacks its weights "
                           f"%{old.name}, which are no constant (check repackable first)")
    new = graph.add_constant(layouts.repack(graph.constants[old], value),
                             f"{old.name}_{value}")
    node.inputs[layouts.operand] = new
    node.attrs = dict(layouts.attrs[value])
    group.inputs = [new if v is old else v for v in group.inputs]
    if not graph.consumers().get(old) and old not in graph.outputs:
        del graph.constants[old]


def repackable(group: FusedGroup, graph: Graph, target: Target, config: Mapping) -> bool:
    """Whether the layout ``config`` picks for the anchor's weights can be written at compile
    time: the node's own layout, or weights that are a constant."""
    picked = picked_layout(group, target, config)
    return picked is None or group.anchor.inputs[picked[0].operand] in graph.constants

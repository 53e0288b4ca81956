"""Operator fusion: partition a graph into groups, each of which becomes one kernel.

Fusion follows the data. A node fuses with everything between it and its immediate
post-dominator (the first node that every path from it to the graph's outputs passes
through) when the nodes on those paths may join its group: then no value inside the group is
read from outside it, and the group has one output, whatever its inner shape (a DAG such as
``x * sigmoid(x)`` or a tanh-GELU reads the anchor's output several times).

What may join is one table, ``CAN_JOIN[group kind][node pattern]``: a group has at most one
*anchor* (an op of class reduction or out-elementwise-fusable: conv, matmul, pooling,
softmax, reductions); elementwise and broadcast ops join after it as an epilogue, never
enlarging the anchor's output (each epilogue node has the anchor's output shape); and a group
of elementwise ops may run *into* a reduction, which then computes them inline. Anchor-free
groups fuse elementwise, broadcast and injective ops. ``reshape`` moves no data: it forms a
*view* group that aliases its input's storage.

    %3 = conv(%x, %w); %4 = sigmoid(%3); %5 = mul(%3, %4)   ->   group(conv, sigmoid, mul)
    %1 = mul(%x, %x); %2 = reduce_sum(%1)                   ->   group(mul, reduce_sum)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorc.ir.graph import Graph, Node, Value
from tensorc.ops.catalog import get_op
from tensorc.ops.registry import Pattern

_ELEMWISE, _BROADCAST, _INJECTIVE = Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.INJECTIVE
_REDUCTION, _ANCHOR = Pattern.REDUCTION, Pattern.OUT_ELEMWISE_FUSABLE

# Which node patterns may join a group whose strongest member has pattern `kind`: after an
# anchor, an elementwise epilogue; anchor-free groups take injective ops, or a reduction that
# their elementwise work feeds (the group's kind is then the reduction's).
CAN_JOIN: dict[Pattern, frozenset] = {
    _ELEMWISE: frozenset({_ELEMWISE, _BROADCAST, _INJECTIVE, _REDUCTION}),
    _BROADCAST: frozenset({_ELEMWISE, _BROADCAST, _INJECTIVE, _REDUCTION}),
    _INJECTIVE: frozenset({_ELEMWISE, _BROADCAST, _INJECTIVE}),
    _REDUCTION: frozenset({_ELEMWISE, _BROADCAST}),
    _ANCHOR: frozenset({_ELEMWISE, _BROADCAST}),
    Pattern.OPAQUE: frozenset(),
}

VIEW_OPS = ("reshape",)


@dataclass(eq=False)
class FusedGroup:
    """Nodes that run as one kernel (or, for a view, as no kernel at all)."""

    nodes: list[Node]
    anchor: Node | None = None
    kind: Pattern = Pattern.ELEMWISE
    inputs: list[Value] = field(default_factory=list)
    view: bool = False

    @property
    def output(self) -> Value:
        return self.nodes[-1].outputs[0]

    @property
    def name(self) -> str:
        names = [n.op for n in self.nodes]
        return "fused_" + "_".join(names[:4]) + ("_etc" if len(names) > 4 else "")

    def __str__(self) -> str:
        ins = ", ".join(f"%{v.name}" for v in self.inputs)
        head = f"{'view' if self.view else 'kernel'} {self.name}({ins}) -> %{self.output.name}"
        body = "".join(f"\n    %{n.outputs[0].name} = {n.op}("
                       f"{', '.join('%' + v.name for v in n.inputs)})" for n in self.nodes)
        return head + body


_SINK = None      # the virtual node after the graph's outputs


def post_dominators(graph: Graph) -> dict[Node, Node | None]:
    """The immediate post-dominator of every node (None: only the graph's end)."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    ipdom: dict[Node, Node | None] = {}
    depth: dict[Node | None, int] = {_SINK: 0}

    def meet(a: Node | None, b: Node | None) -> Node | None:
        while a is not b:
            if depth[a] >= depth[b]:
                a = ipdom[a]
            else:
                b = ipdom[b]
        return a

    for node in reversed(graph.nodes):
        succs: list[Node | None] = []
        for v in node.outputs:
            readers = consumers.get(v, [])
            if v in outputs or not readers:
                succs.append(_SINK)
            succs.extend(readers)
        dom = succs[0] if succs else _SINK
        for s in succs[1:]:
            dom = meet(dom, s)
        ipdom[node] = dom
        depth[node] = depth[dom] + 1
    return ipdom


def _between(node: Node, end: Node, consumers: dict[Value, list[Node]],
             position: dict[Node, int]) -> list[Node]:
    """Every node on a path from ``node`` to its post-dominator ``end`` (``end`` included),
    in execution order."""
    seen: dict[Node, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        for v in n.outputs:
            for c in consumers.get(v, []):
                if c not in seen:
                    seen[c] = None
                    if c is not end:
                        stack.append(c)
    return sorted(seen, key=position.__getitem__)


class _Groups:
    """Union-find over nodes; each set remembers its anchor and strongest pattern."""

    def __init__(self, nodes: list[Node]):
        self.parent = {n: n for n in nodes}
        self.kind = {n: _pattern(n) for n in nodes}
        self.anchor = {n: (n if _pattern(n) >= _REDUCTION else None) for n in nodes}

    def find(self, n: Node) -> Node:
        while self.parent[n] is not n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def union(self, a: Node, b: Node) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is rb:
            return
        self.parent[rb] = ra
        self.kind[ra] = max(self.kind[ra], self.kind[rb])
        self.anchor[ra] = self.anchor[ra] or self.anchor[rb]


def _pattern(node: Node) -> Pattern:
    if node.op in VIEW_OPS or len(node.outputs) != 1:
        return Pattern.OPAQUE
    return get_op(node.op).pattern


def _may_join(groups: _Groups, root: Node, path: list[Node]) -> bool:
    """Whether every node of ``path`` may join the group of ``root`` (in order)."""
    kind, anchor = groups.kind[root], groups.anchor[root]
    for m in path:
        if groups.find(m) is root:
            continue
        p = _pattern(m)
        other = groups.find(m)
        if groups.anchor[other] is not None and groups.anchor[other] is not m:
            return False            # m already belongs to another anchor's group
        if p not in CAN_JOIN[kind]:
            return False
        if p >= _REDUCTION:
            if anchor is not None:
                return False        # one anchor per kernel
            anchor = m
        elif anchor is not None and m.outputs[0].type.shape != anchor.outputs[0].type.shape:
            return False            # an epilogue never enlarges the anchor's output
        kind = max(kind, p, groups.kind[other])
    return True


def fuse(graph: Graph) -> list[FusedGroup]:
    """Partition ``graph``'s nodes into fused groups, in execution order.

    >>> [g.name for g in fuse(graph)]     # conv+sigmoid+mul, then matmul+add, ...
    """
    consumers = graph.consumers()
    position = {node: k for k, node in enumerate(graph.nodes)}
    ipdom = post_dominators(graph)
    groups = _Groups(graph.nodes)
    for node in graph.nodes:
        end = ipdom[node]
        if _pattern(node) == Pattern.OPAQUE or end is None:
            continue
        path = _between(node, end, consumers, position)
        root = groups.find(node)
        if _may_join(groups, root, path):
            for m in path:
                groups.union(root, m)
    members: dict[Node, list[Node]] = {}
    for node in graph.nodes:
        members.setdefault(groups.find(node), []).append(node)
    result = [_make_group(nodes, groups) for nodes in members.values()]
    # A group runs when its last node can: after every group that feeds it.
    result.sort(key=lambda g: position[g.nodes[-1]])
    _concats_in_place(graph, result, consumers)
    return result


def _concats_in_place(graph: Graph, groups: list[FusedGroup],
                      consumers: dict[Value, list[Node]]) -> None:
    """A lone concat whose inputs are contiguous slabs of its output (every dim before the
    axis is 1, as channel concats at batch 1) becomes a view: the kernels that produce its
    inputs write them into their slabs (plan_memory places them there), and no kernel copies
    them. Each input must be (a reshape of) a kernel's output read by nothing else."""
    producer_group = {g.output: g for g in groups}
    claimed: set[Value] = set()
    for group in groups:
        if group.view or len(group.nodes) != 1 or group.nodes[0].op != "concat":
            continue
        node = group.nodes[0]
        out = node.outputs[0]
        axis = node.attrs["axis"] % len(out.type.shape)
        if any(d != 1 for d in out.type.shape[:axis]):
            continue
        # slabs after one of a data-dependent size would move with its run-time value
        if any(graph.dims.is_data_dependent(v.type.nbytes) for v in node.inputs):
            continue
        bases = [_sole_base(v, node, consumers, producer_group, graph) for v in node.inputs]
        if any(b is None or b in claimed for b in bases) or len(set(bases)) != len(bases):
            continue
        claimed.update(bases)
        group.view = True


def view_base(v: Value) -> Value:
    """The value whose storage ``v`` shares: through views (reshapes) to their input."""
    while v.producer is not None and v.producer.op in VIEW_OPS:
        v = v.producer.inputs[0]
    return v


def _sole_base(v: Value, reader: Node, consumers: dict[Value, list[Node]],
               producer_group: dict[Value, FusedGroup], graph: Graph) -> Value | None:
    """The kernel output that ``v`` is (through reshapes), if ``reader`` is all that reads it
    and it can live in another value's storage (not a graph input, output or constant)."""
    while True:
        if len(consumers.get(v, [])) != 1 or consumers[v][0] is not reader or \
                v in graph.outputs or v.producer is None:
            return None
        if v.producer.op not in VIEW_OPS:
            break
        reader, v = v.producer, v.producer.inputs[0]
    group = producer_group.get(v)
    if group is None or group.view or v.type.size == 0:
        return None
    return v


def _make_group(nodes: list[Node], groups: _Groups) -> FusedGroup:
    root = groups.find(nodes[0])
    view = len(nodes) == 1 and nodes[0].op in VIEW_OPS
    kind = Pattern.INJECTIVE if view else groups.kind[root]
    group = FusedGroup(nodes, groups.anchor[root], kind, view=view)
    inside = {v for n in nodes for v in n.outputs}
    seen: dict[Value, None] = {}
    for n in nodes:
        for v in n.inputs:
            if v not in inside:
                seen.setdefault(v, None)
    group.inputs = list(seen)
    return group


def format_groups(groups: list[FusedGroup]) -> str:
    return "\n".join(str(g) for g in groups) + "\n"

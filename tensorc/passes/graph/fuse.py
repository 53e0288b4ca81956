"""Operator fusion: partition a graph into groups, each of which becomes one kernel.

A group has at most one *anchor* (an op of class reduction or out-elementwise-fusable, such as
conv, matmul, pooling, softmax) and a chain of elementwise / broadcast consumers fused into its
epilogue; groups without an anchor fuse elementwise, broadcast and injective ops. A producer
joins its consumer's group only when the consumer is its sole reader, so every group has one
output. ``reshape`` moves no data: it forms a *view* group that aliases its input's storage.

Fusion is decided by one table, ``CAN_APPEND[group_kind][node_pattern]``.

    %3 = conv(%x, %w); %4 = add(%3, %b); %5 = relu(%4)   ->   group(conv, add, relu)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorc.ir.graph import Graph, Node, Value
from tensorc.ops.registry import Pattern, get_op

_ELEMWISE, _BROADCAST, _INJECTIVE = Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.INJECTIVE

# Which node patterns a group whose strongest member has pattern `kind` may take at its end.
CAN_APPEND: dict[Pattern, frozenset] = {
    Pattern.ELEMWISE: frozenset({_ELEMWISE, _BROADCAST, _INJECTIVE}),
    Pattern.BROADCAST: frozenset({_ELEMWISE, _BROADCAST, _INJECTIVE}),
    Pattern.INJECTIVE: frozenset({_ELEMWISE, _BROADCAST, _INJECTIVE}),
    Pattern.REDUCTION: frozenset({_ELEMWISE, _BROADCAST}),
    Pattern.OUT_ELEMWISE_FUSABLE: frozenset({_ELEMWISE, _BROADCAST}),
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


def fuse(graph: Graph) -> list[FusedGroup]:
    """Partition ``graph``'s nodes into fused groups, in execution order.

    >>> [g.name for g in fuse(graph)]     # conv+add+relu, then matmul+add, ...
    """
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    group_of: dict[Node, FusedGroup] = {}
    groups: list[FusedGroup] = []
    for node in graph.nodes:
        pattern = get_op(node.op).pattern
        if node.op in VIEW_OPS:
            group = FusedGroup([node], None, Pattern.INJECTIVE, view=True)
            groups.append(group)
            group_of[node] = group
            continue
        target = None
        for value in node.inputs:
            producer = value.producer
            if producer is None or producer not in group_of:
                continue
            group = group_of[producer]
            sole_reader = len(consumers.get(value, [])) == 1 and value not in outputs
            if (sole_reader and not group.view and group.output is value
                    and pattern in CAN_APPEND[group.kind]):
                target = group
                break
        if target is None:
            target = FusedGroup([], None, pattern)
            groups.append(target)
        target.nodes.append(node)
        if pattern >= Pattern.REDUCTION:
            target.anchor = node
        target.kind = max(target.kind, pattern)
        group_of[node] = target
    # A group runs when its last node can: after every group that feeds it.
    position = {node: k for k, node in enumerate(graph.nodes)}
    groups.sort(key=lambda g: position[g.nodes[-1]])
    for group in groups:
        inside = {v for n in group.nodes for v in n.outputs}
        seen: dict[Value, None] = {}
        for n in group.nodes:
            for v in n.inputs:
                if v not in inside:
                    seen.setdefault(v, None)
        group.inputs = list(seen)
    return groups


def format_groups(groups: list[FusedGroup]) -> str:
    return "\n".join(str(g) for g in groups) + "\n"

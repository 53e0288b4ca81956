"""Constant folding: evaluate every node whose inputs are all constants (except where that
would expand data past ops.interpret.MAX_FOLDED_EXPANSION_BYTES)."""
from __future__ import annotations

from tensorc.ir.graph import Graph, Node, Value, rewrite
from tensorc.ops.interpret import evaluate_node, worth_folding
from tensorc.passes.graph.simplify import eliminate_dead_code


def _fold(g: Graph, node: Node) -> list[Value] | None:
    if not node.inputs or not all(g.is_constant(v) for v in node.inputs):
        return None
    arrays = [g.constants[v] for v in node.inputs]
    if not worth_folding(arrays, [v.type for v in node.outputs]):
        return None
    results = evaluate_node(node, arrays)
    return [g.add_constant(array) for array in results]


def fold_constants(g: Graph) -> Graph:
    """Replace nodes computable at compile time by constants; drop what becomes unused.

    Before:  const %c0: int64[2] = [2, 3]
             %1: int64[2] = mul(%c0, %c0)
    After:   const %c1: int64[2] = [4, 9]

    >>> g = fold_constants(g)    # doctest: +SKIP
    """
    return eliminate_dead_code(rewrite(g, _fold))

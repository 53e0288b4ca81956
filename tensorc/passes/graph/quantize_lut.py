"""8-bit unary functions as lookup tables: DequantizeLinear -> unary float ops (Sigmoid,
Tanh, Relu, Clip, ...) -> QuantizeLinear, from an int8 / uint8 tensor to one, becomes a
gather from a 256-entry table computed at compile time (as onnxruntime's QLinearSigmoid does).

The importer spells the chain ``cast(xq) [- zp] * s -> f(...) -> div / round / [+ zp] /
clip / cast``; every node after the DequantizeLinear must be read once (the dequantized
value itself may feed others: a SiLU's Mul keeps it). Each unary op takes one tensor and
scalar constants. The table is the chain's own numpy references evaluated on all 256 inputs,
so it holds what the float kernels would compute up to their last-bit rounding (a value
within one quantization step where a float lands on a rounding tie).

    %1 = cast(%xq); %2 = mul(%1, %s); %3 = sigmoid(%2); ...; %yq = cast(clip(...))
    ->  %i = cast(%xq) {int32} [+ 128]; %yq = gather(%table, %i) {axis=0}
"""
from __future__ import annotations

import numpy as np

from tensorc.ir.graph import Graph, Node, Value
from tensorc.ir.types import TensorType
from tensorc.ops.build import emit
from tensorc.ops.catalog import get_op
from tensorc.ops.interpret import evaluate_node
from tensorc.ops.registry import Pattern
from tensorc.passes.graph.quantize_qdq import (
    QUANTIZED, dequantized_activation, finish_rewrite, quantize_chain, single_use,
)


def quantize_lut(g: Graph) -> Graph:
    """Replace each DQ -> unary ops -> Q chain over 8-bit tensors by a table lookup; a graph
    with none is returned as it is."""
    consumers = g.consumers()
    outputs = set(g.outputs)
    chains = [(node, chain) for node in g.nodes
              if (chain := _chain(g, node, consumers, outputs)) is not None]
    if not chains:
        return g
    tables = {id(node): (chain[0], _table(g, chain)) for node, chain in chains}
    old, g.nodes = g.nodes, []
    replaced: dict[Value, Value] = {}
    renames = []
    for node in old:
        node.inputs = [replaced.get(v, v) for v in node.inputs]
        found = tables.get(id(node))
        if found is None:
            g.nodes.append(node)
            continue
        first, table = found
        x = first.inputs[0]
        index = emit(g, "cast", [x], dtype="int32")
        if x.type.dtype == "int8":
            index = emit(g, "add", [index, g.add_constant(np.array(128, np.int32))])
        value = emit(g, "gather", [g.add_constant(table, f"{node.name}_table"), index], axis=0)
        replaced[node.outputs[0]] = value
        if node.outputs[0] in outputs:
            renames.append((value, node.outputs[0].name))
    return finish_rewrite(g, replaced, renames)


def _chain(g: Graph, cast: Node, consumers: dict, outputs: set) -> list[Node] | None:
    """The nodes from the DequantizeLinear's cast to ``cast`` (the QuantizeLinear's last),
    in order, or None where ``cast`` ends no such chain."""
    if cast.op != "cast" or cast.attrs["dtype"] not in QUANTIZED:
        return None
    quantize = quantize_chain(g, cast, consumers, outputs)
    if quantize is None:
        return None
    y = quantize[0]
    q_nodes = _back_to(cast, lambda n: n.inputs[0] is y)
    unary: list[Node] = []
    v = quantize[0]
    while v.producer is not None and _is_unary(g, v.producer) and \
            single_use(v, consumers, outputs) is not None and \
            dequantized_activation(g, v, consumers, outputs) is None:
        unary.append(v.producer)
        v = v.producer.inputs[_tensor_input(g, v.producer)]
    if not unary or dequantized_activation(g, v, consumers, outputs) is None:
        return None
    return _back_to(v.producer, lambda n: n.op == "cast") + unary[::-1] + q_nodes


def _back_to(node: Node, done) -> list[Node]:
    """``node`` and the producers along first inputs until ``done(node)`` holds (that node
    included), in graph order."""
    nodes = [node]
    while not done(nodes[-1]):
        nodes.append(nodes[-1].inputs[0].producer)
    return nodes[::-1]


def _tensor_input(g: Graph, node: Node) -> int:
    return next(k for k, v in enumerate(node.inputs) if not g.is_constant(v))


def _is_unary(g: Graph, node: Node) -> bool:
    """One tensor input, the rest one-element constants; an elementwise op."""
    if len(node.outputs) != 1 or get_op(node.op).pattern > Pattern.BROADCAST:
        return False
    tensors = [v for v in node.inputs if not g.is_constant(v)]
    return len(tensors) == 1 and all(g.constants[v].size == 1 for v in node.inputs
                                     if g.is_constant(v)) and \
        node.outputs[0].type.dtype.startswith("float")


def _table(g: Graph, chain: list[Node]) -> np.ndarray:
    """The chain evaluated on every value of its input's dtype, in index order."""
    first = chain[0]
    dtype = first.inputs[0].type.dtype
    low, high = QUANTIZED[dtype]
    values: dict[Value, np.ndarray] = {first.inputs[0]: np.arange(low, high + 1).astype(dtype)}
    for node in chain:
        arrays = [values[v] if v in values else g.constants[v].reshape(())
                  for v in node.inputs]
        (out,) = evaluate_node(_shaped(node, arrays[_tensor_input(g, node)].shape), arrays)
        values[node.outputs[0]] = out
    return np.ascontiguousarray(values[chain[-1].outputs[0]])


def _shaped(node: Node, shape: tuple) -> Node:
    """``node`` with output types of ``shape``, for evaluating it on the 256 inputs."""
    outputs = [Value(TensorType(shape, v.type.dtype), v.name) for v in node.outputs]
    return Node(node.op, node.inputs, node.attrs, outputs, node.name)

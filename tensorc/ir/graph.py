"""The graph IR: a typed SSA dataflow graph of core ops.

A :class:`Graph` holds its inputs, its constants (numpy arrays), its nodes in topological order
and its outputs. Every :class:`Value` is defined exactly once: as a graph input, as a constant,
or as an output of one node. Value names are unique within a graph; output names are the
names the user sees (the runtime returns a dict keyed by them), so passes keep them stable.

This module knows op *names* only; shape rules and semantics live in :mod:`tensorc.ops`
(which imports this module, never the reverse).
"""
from __future__ import annotations

import itertools
import re
from typing import Any, Callable, Iterable

import numpy as np

from tensorc.errors import TensorcError
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import Dim, dims_in
from tensorc.ir.types import TensorType, dtype_of


class Value:
    """One SSA value. Hashed and compared by identity, so it can key dicts.

    >>> Value(TensorType((2, 3), "float32"), "x")
    %x: float32[2,3]
    """

    __slots__ = ("type", "name", "producer")

    def __init__(self, type: TensorType, name: str, producer: Node | None = None):
        self.type = type
        self.name = name
        self.producer = producer  # None for graph inputs and constants

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


class Node:
    """One application of a core op: ``outputs = op(inputs) {attrs}``."""

    __slots__ = ("op", "inputs", "attrs", "outputs", "name")

    def __init__(self, op: str, inputs: list[Value], attrs: dict[str, Any],
                 outputs: list[Value], name: str):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.outputs = outputs
        self.name = name

    def __repr__(self) -> str:
        return f"Node({self.name!r}: {_format_node(self)})"


class Graph:
    """A typed SSA dataflow graph.

    >>> g = Graph("tiny")
    >>> x = g.add_input("x", TensorType((2, 3), "float32"))
    >>> (y,) = g.add_node("relu", [x], {}, [x.type])
    >>> g.outputs.append(y)
    >>> print(g)
    graph tiny(%x: float32[2,3]) -> (%1: float32[2,3])
      %1: float32[2,3] = relu(%x)
    """

    def __init__(self, name: str = "main"):
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.nodes: list[Node] = []
        self.constants: dict[Value, np.ndarray] = {}
        # the symbolic dims: ranges, unified dims, run-time constraints (empty when static)
        self.dims = DimTable()
        self._names: set[str] = set()
        # what names begin with before a separator (c1 of a model's c1.weight): automatic
        # names skip these, so that %c1 is never a stranger beside %c1.weight
        self._stems: set[str] = set()
        # Counters for automatic names: values %1, %2, ...; constants %c0, %c1, ...
        self._counters = {"value": 1, "const": 0, "node": 0}

    # building ---------------------------------------------------------------------------------
    def add_input(self, name: str, type: TensorType) -> Value:
        """Add a graph input. ``name`` is made unique if it is taken."""
        value = Value(type, self._unique(name))
        self.inputs.append(value)
        return value

    def add_constant(self, array: np.ndarray, name: str | None = None) -> Value:
        """Add a constant; its type is the array's shape and dtype."""
        array = np.asarray(array)
        base = name if name else self._auto_name("const", "c")
        value = Value(TensorType(array.shape, dtype_of(array)), self._unique(base))
        self.constants[value] = array
        return value

    def add_node(self, op: str, inputs: list[Value], attrs: dict[str, Any],
                 output_types: list[TensorType], name: str | None = None) -> list[Value]:
        """Append a node (after every existing node) and return its fresh output values."""
        if name is None:
            name = f"{op}_{self._counters['node']}"
            self._counters["node"] += 1
        node = Node(op, list(inputs), dict(attrs), [], name)
        node.outputs = [Value(t, self._unique(self._auto_name("value")), node)
                        for t in output_types]
        self.nodes.append(node)
        return list(node.outputs)

    def reserve(self, name: str) -> None:
        """Keep ``name`` from being given to new values (it is meant for a later rename)."""
        self._names.add(name)
        self._stems.add(_stem(name))

    def rename(self, value: Value, name: str) -> None:
        """Give ``value`` the name ``name``; a value of this graph that holds it must be dead."""
        if value.name == name:
            return
        holder = next((v for v in self.values() if v.name == name), None)
        if holder is not None:
            raise TensorcError(f"graph {self.name}: cannot rename %{value.name} to %{name}: "
                               f"the name is taken")
        self._names.discard(value.name)
        self._names.add(name)
        self._stems.add(_stem(name))
        value.name = name

    # queries ----------------------------------------------------------------------------------
    def consumers(self) -> dict[Value, list[Node]]:
        """Map every value that some node reads to the nodes reading it (in node order)."""
        uses: dict[Value, list[Node]] = {}
        for node in self.nodes:
            for value in node.inputs:
                users = uses.setdefault(value, [])
                if not users or users[-1] is not node:
                    users.append(node)
        return uses

    def is_constant(self, value: Value) -> bool:
        return value in self.constants

    def values(self) -> Iterable[Value]:
        """Every value defined in the graph: inputs, constants, then node outputs in order."""
        yield from self.inputs
        yield from self.constants
        for node in self.nodes:
            yield from node.outputs

    def copy(self) -> Graph:
        """A structural copy with fresh Values and Nodes; constant arrays are shared."""
        new = Graph(self.name)
        new._counters = dict(self._counters)
        new.dims = self.dims.copy()
        mapping: dict[Value, Value] = {}
        for value in self.inputs:
            mapping[value] = new.add_input(value.name, value.type)
        for value, array in self.constants.items():
            mapping[value] = new.add_constant(array, value.name)
        for node in self.nodes:
            inputs = [mapping[v] for v in node.inputs]
            copy = Node(node.op, inputs, dict(node.attrs), [], node.name)
            for value in node.outputs:
                mapping[value] = Value(value.type, new._unique(value.name), copy)
                copy.outputs.append(mapping[value])
            new.nodes.append(copy)
        new.outputs = [mapping[v] for v in self.outputs]
        return new

    def __str__(self) -> str:
        return print_graph(self)

    # names ------------------------------------------------------------------------------------
    def _unique(self, base: str) -> str:
        name = base
        for i in itertools.count(1):
            if name not in self._names:
                break
            name = f"{base}_{i}"
        self._names.add(name)
        self._stems.add(_stem(name))
        return name

    def _auto_name(self, kind: str, prefix: str = "") -> str:
        """The next automatic name of this kind that no value holds (not yet reserved)."""
        while True:
            name = f"{prefix}{self._counters[kind]}"
            self._counters[kind] += 1
            if name not in self._names and name not in self._stems:
                return name

    def release_dead_names(self) -> None:
        """Free the names of values that are no longer in the graph."""
        self._names = {v.name for v in self.values()}
        self._stems = {_stem(name) for name in self._names}


def _stem(name: str) -> str:
    """``name`` up to its first separator (., /, :): what a reader takes for its owner."""
    return re.split(r"[./:]", name, maxsplit=1)[0]


# printing -------------------------------------------------------------------------------------
_MAX_PRINTED_ELEMENTS = 8  # small constants (folded shapes, scalars) print their contents


def _format_attr(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_format_attr(v) for v in value) + ")"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _format_node(node: Node) -> str:
    args = ", ".join(f"%{v.name}" for v in node.inputs)
    text = f"{node.op}({args})"
    if node.attrs:
        attrs = ", ".join(f"{k}={_format_attr(v)}" for k, v in node.attrs.items())
        text += f" {{{attrs}}}"
    return text


def _format_constant(value: Value, array: np.ndarray) -> str:
    text = f"const {value!r}"
    if array.size <= _MAX_PRINTED_ELEMENTS:
        # str of a numpy scalar is its shortest round-trip form: 0.5, not 0.5000000
        text += " = [" + ", ".join(str(v) for v in array.reshape(-1)) + "]"
    return text


def print_graph(g: Graph) -> str:
    """The readable text form of a graph, one line per constant and node.

    >>> print(print_graph(g))    # doctest: +SKIP
    graph resnet(%x: float32[1,3,224,224]) -> (%out: float32[1,1000])
      const %w0: float32[64,3,7,7]
      %1: float32[1,64,112,112] = conv(%x, %w0) {strides=(2,2), pads=(3,3,3,3), ...}
    """
    inputs = ", ".join(repr(v) for v in g.inputs)
    outputs = ", ".join(repr(v) for v in g.outputs)
    lines = [f"graph {g.name}({inputs}) -> ({outputs})"]
    lines += [f"  dim {line}" for line in g.dims.describe()]
    lines += [f"  {_format_constant(v, a)}" for v, a in g.constants.items()]
    for node in g.nodes:
        results = ", ".join(repr(v) for v in node.outputs)
        lines.append(f"  {results} = {_format_node(node)}")
    return "\n".join(lines)


# verification ---------------------------------------------------------------------------------
def verify(g: Graph) -> None:
    """Check the structural invariants of ``g``; raise TensorcError naming the culprit.

    SSA (each value defined once, before its uses), nodes in topological order, outputs
    defined, names unique, constants whose arrays match their declared types.

    >>> verify(g)    # doctest: +SKIP
    """
    defined: set[Value] = set()
    names: dict[str, str] = {}

    def define(value: Value, where: str) -> None:
        if value in defined:
            raise TensorcError(f"graph {g.name}: %{value.name} is defined twice ({where})")
        if value.name in names:
            raise TensorcError(f"graph {g.name}: the name %{value.name} is used by "
                               f"{names[value.name]} and {where}")
        defined.add(value)
        names[value.name] = where

    for value in g.inputs:
        if value.producer is not None:
            raise TensorcError(f"graph {g.name}: input %{value.name} has a producer")
        define(value, f"input %{value.name}")
    for value, array in g.constants.items():
        where = f"constant %{value.name}"
        if value.producer is not None:
            raise TensorcError(f"graph {g.name}: {where} has a producer")
        if not isinstance(array, np.ndarray):
            raise TensorcError(f"graph {g.name}: {where} holds a {type(array).__name__}, "
                               f"not a numpy array")
        actual = TensorType(array.shape, dtype_of(array))
        if actual != value.type:
            raise TensorcError(f"graph {g.name}: {where} is declared {value.type} but its "
                               f"array is {actual}")
        define(value, where)
    for node in g.nodes:
        where = f"node {node.name!r} ({node.op})"
        if not isinstance(node.op, str) or not isinstance(node.attrs, dict):
            raise TensorcError(f"graph {g.name}: {where} has a malformed op or attrs")
        for i, value in enumerate(node.inputs):
            if value not in defined:
                raise TensorcError(f"graph {g.name}: {where} reads %{value.name} (input {i}) "
                                   f"before it is defined (not topologically ordered, or a "
                                   f"value from another graph)")
        for value in node.outputs:
            define(value, where)
            if value.producer is not node:
                raise TensorcError(f"graph {g.name}: {where} output %{value.name} names "
                                   f"another producer")
    for i, value in enumerate(g.outputs):
        if value not in defined:
            raise TensorcError(f"graph {g.name}: output {i} (%{value.name}) is never defined")
    if len(set(g.outputs)) != len(g.outputs):
        raise TensorcError(f"graph {g.name}: the same value is listed twice as an output")


# rewriting ------------------------------------------------------------------------------------
def eliminate_dead_code(g: Graph) -> Graph:
    """A copy of ``g`` without the nodes no output depends on and the constants no node reads.

    >>> g = eliminate_dead_code(g)    # doctest: +SKIP
    """
    g = g.copy()
    live = set(g.outputs)
    # a node that writes a data-dependent dim (attrs["writes"]) lives while a live value's
    # size reads the dim, even where no live node reads its output (a NonZero whose count
    # alone is used, through Shape)
    live_dims = {n for v in g.outputs for n in _dim_names(v)}
    kept = []
    for node in reversed(g.nodes):
        if any(v in live for v in node.outputs) or \
                live_dims.intersection(node.attrs.get("writes", ())):
            kept.append(node)
            live.update(node.inputs)
            if g.dims.data:
                for v in [*node.inputs, *node.outputs]:
                    live_dims.update(_dim_names(v))
                live_dims.update(n for d in dims_in(node.attrs.values())
                                 for n in d.names)
    g.nodes = kept[::-1]
    g.constants = {v: a for v, a in g.constants.items() if v in live}
    g.release_dead_names()
    return g


def _dim_names(v: Value) -> set[str]:
    return {n for d in v.type.shape if isinstance(d, Dim) for n in d.names}


Rule = Callable[[Graph, Node], "list[Value] | None"]


def rewrite(g: Graph, rule: Rule) -> Graph:
    """Return a copy of ``g`` in which ``rule`` may replace each node, visited in order.

    ``rule(new_graph, node)`` sees the node with its inputs already rewritten. It returns
    None to keep the node, or one replacement value per node output: values it built with
    ``new_graph.add_node`` / ``add_constant`` (appended in place of the node) or existing
    values. A graph output keeps its name: its replacement is renamed. A replacement that
    cannot carry the name (a graph input, or a value that already is an output) is refused
    and the node kept, so rules need not think about outputs.

    >>> drop_relu = lambda g, n: n.inputs[:1] if n.op == "relu" else None
    >>> rewrite(g, drop_relu)    # doctest: +SKIP
    """
    g = g.copy()
    old_nodes, g.nodes = g.nodes, []
    is_output = set(g.outputs)
    mapping: dict[Value, Value] = {}
    claimed: set[Value] = set()
    for node in old_nodes:
        node.inputs = [mapping.get(v, v) for v in node.inputs]
        node_mark, const_mark = len(g.nodes), len(g.constants)
        result = rule(g, node)
        if result is not None and len(result) != len(node.outputs):
            raise TensorcError(f"rewrite of node {node.name!r} ({node.op}) returned "
                               f"{len(result)} values for {len(node.outputs)} outputs")
        if result is not None and _can_claim(g, node, result, is_output, claimed):
            for old, new in zip(node.outputs, result):
                if old is not new:
                    mapping[old] = new
                    if old in is_output:
                        claimed.add(new)
            continue
        # Keep the node; undo whatever the refused rule built.
        del g.nodes[node_mark:]
        for value in list(g.constants)[const_mark:]:
            del g.constants[value]
        g.nodes.append(node)
    renames = [(mapping[v], v.name) for v in g.outputs if v in mapping]
    g.outputs = [mapping.get(v, v) for v in g.outputs]
    g.release_dead_names()
    for value, name in renames:
        g.rename(value, name)
    return g


def _can_claim(g: Graph, node: Node, result: list[Value], is_output: set[Value],
               claimed: set[Value]) -> bool:
    for old, new in zip(node.outputs, result):
        if old in is_output and old is not new:
            if new in is_output or new in claimed or new in g.inputs:
                return False
    return True

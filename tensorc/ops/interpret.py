"""Evaluate graphs with the numpy references: the test oracle and the constant folder."""
from __future__ import annotations

from typing import Any

import numpy as np

from tensorc.errors import InputError, ShapeError, TensorcError
from tensorc.ir.graph import Graph, Node, Value
from tensorc.ir.types import TensorType, dtype_of
from tensorc.ops.build import infer_types
from tensorc.ops.catalog import get_op


# Constant folding never expands data past this many bytes: a broadcast, tile or filled
# constant that large (a reduction of an empty [10^9, 0] tensor to [10^9, 1], say) is computed
# at run time, in the arena, rather than built at compile time and stored in the constant pool.
MAX_FOLDED_EXPANSION_BYTES = 256 << 20


def worth_folding(arrays: list[np.ndarray], outputs: list[TensorType]) -> bool:
    """Whether constant folding may evaluate a node of inputs ``arrays`` into ``outputs``:
    not where its results are past MAX_FOLDED_EXPANSION_BYTES and more than its inputs."""
    if not all(t.is_static for t in outputs):
        return False        # its size is known at run time only (a Range up to a dim)
    made = sum(t.nbytes for t in outputs)
    return made <= MAX_FOLDED_EXPANSION_BYTES or made <= sum(a.nbytes for a in arrays)


def evaluate(op: str, attrs: dict[str, Any], arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Run the numpy reference of core op ``op``; outputs are contiguous arrays.

    >>> evaluate("add", {}, [np.ones(2, "float32"), np.ones(2, "float32")])    # doctest: +SKIP
    [array([2., 2.], dtype=float32)]
    """
    opdef = get_op(op)
    if opdef.reference_fn is None:
        raise TensorcError(f"{op}: the op has no reference implementation")
    return [np.asarray(a, order="C") for a in opdef.reference_fn(attrs, *arrays)]


def evaluate_node(node: Node, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Evaluate one node and check its results against the node's output types."""
    results = evaluate(node.op, node.attrs, arrays)
    if len(results) != len(node.outputs):
        raise TensorcError(f"node {node.name!r} ({node.op}): the reference returned "
                           f"{len(results)} arrays for {len(node.outputs)} outputs")
    for value, array in zip(node.outputs, results):
        actual = TensorType(array.shape, dtype_of(array))
        if actual != value.type:
            raise TensorcError(f"node {node.name!r} ({node.op}): the reference produced "
                               f"{actual} for %{value.name}: {value.type}")
    return results


def run_reference(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate ``graph`` on ``feeds`` (input name -> array); return output name -> array.

    >>> run_reference(g, {"x": np.zeros((1, 3, 224, 224), "float32")})    # doctest: +SKIP
    {'out': array(...)}
    """
    env: dict[Value, np.ndarray] = dict(graph.constants)
    names = {v.name for v in graph.inputs}
    unknown = sorted(set(feeds) - names)
    if unknown:
        raise InputError(f"graph {graph.name}: no input named {', '.join(unknown)}; the inputs "
                         f"are {', '.join(sorted(names))}")
    for value in graph.inputs:
        if value.name not in feeds:
            raise InputError(f"graph {graph.name}: input {value.name!r} ({value.type}) is not "
                             f"fed")
        array = np.asarray(feeds[value.name])
        given = TensorType(array.shape, dtype_of(array))
        if given != value.type:
            raise InputError(f"graph {graph.name}: input {value.name!r} expects {value.type}, "
                             f"got {given}")
        env[value] = array
    for node in graph.nodes:
        results = evaluate_node(node, [env[v] for v in node.inputs])
        env.update(zip(node.outputs, results))
    return {value.name: env[value] for value in graph.outputs}


def check_types(graph: Graph) -> None:
    """Re-infer every node's output types and compare them with the recorded ones.

    >>> check_types(g)    # doctest: +SKIP
    """
    for node in graph.nodes:
        where = f"graph {graph.name}: node {node.name!r} ({node.op})"
        try:
            types = infer_types(node.op, node.attrs, [v.type for v in node.inputs])
        except KeyError:
            raise ShapeError(f"{where}: no core op named {node.op!r}") from None
        except ShapeError as error:
            raise ShapeError(f"{where}: {error}") from None
        recorded = [v.type for v in node.outputs]
        if types != recorded:
            raise ShapeError(f"{where}: outputs are typed {recorded} but the op infers {types}")

"""Symbolic input dims: the dims ``input_shapes`` leaves unbound, their names and ranges.

Each unbound input dim becomes a :class:`~tensorc.ir.dims.Dim` named by its ``dim_param``;
a dim with neither a value nor a name (and Paddle's -1, see bind.py) is named
``<input>_dim<k>``. Its range is [1, inf), or [0, inf) where the model accepts an empty
tensor there: a dim that each input carrying it only concatenates along (a KV cache's
``past``, the one dim that grows). ``dim_ranges`` replaces these defaults, per dim name.

The spelling of ranges: Python ``dim_ranges={"seq": (1, 512), "past": (0, None)}``; on the
command line ``--dim-range seq=1:512 --dim-range past=0:`` (cli/arguments.py).

>>> check_range("seq", (1, 512), "model")
(1, 512)
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from tensorc.errors import ShapeError
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import Dim, evaluate_within
from tensorc.ir.graph import Graph
from tensorc.ir.types import TensorType


def generated_name(input: str, axis: int) -> str:
    """The name of an input dim the model leaves unnamed."""
    return f"{input}_dim{axis}"


def declare_symbolic_dims(proto: onnx.ModelProto, specs: list, shapes: dict[str, Any],
                          table: DimTable, dim_ranges: Mapping[str, Any], label: str
                          ) -> dict[str, tuple]:
    """``shapes`` (per input: ints, dim names, None for unnamed) with every unbound dim a
    Dim declared in ``table``, ranges from ``dim_ranges`` or the defaults."""
    empty_ok = _concatenated_only(proto, specs, shapes)
    result = {}
    for spec in specs:
        dims = []
        for axis, d in enumerate(shapes[spec.name]):
            if isinstance(d, int):
                dims.append(d)
                continue
            name = d if isinstance(d, str) else generated_name(spec.name, axis)
            dims.append(table.declare(name, spec.name, axis, 0 if name in empty_ok else 1))
        result[spec.name] = tuple(dims)
    _apply_ranges(table, dim_ranges, label)
    return result


def _apply_ranges(table: DimTable, dim_ranges: Mapping[str, Any], label: str) -> None:
    unknown = [n for n in dim_ranges if n not in table.ranges]
    if unknown:
        names = ", ".join(map(repr, table.ranges)) or "none (every dim is bound)"
        raise ShapeError(f"{label}: dim_ranges names {', '.join(map(repr, unknown))}, but "
                         f"the model's symbolic dims are {names}")
    for name, given in dim_ranges.items():
        lo, hi = check_range(name, given, label)
        table.narrow(name, lo, hi)


def check_range(name: str, given: Any, label: str) -> tuple[int, int | None]:
    """``given`` as (lo, hi): two ints, hi None for unbounded, 0 <= lo <= hi."""
    try:
        lo, hi = given
        lo = int(lo)
        hi = None if hi is None else int(hi)
    except (TypeError, ValueError):
        raise ShapeError(f"{label}: dim_ranges[{name!r}] must be (lo, hi) with hi None for "
                         f"unbounded, e.g. (1, 512) or (0, None); got {given!r}") from None
    if lo < 0 or (hi is not None and hi < lo):
        raise ShapeError(f"{label}: dim_ranges[{name!r}] is {given!r}: it needs 0 <= lo <= hi")
    return lo, hi


def _concatenated_only(proto: onnx.ModelProto, specs: list, shapes: dict[str, Any]
                       ) -> set[str]:
    """The dim names that every input carrying them only concatenates along (its readers
    are Concat nodes over that axis, and Shape): there an empty tensor is fine."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in proto.graph.node:
        for name in set(node.input):
            readers.setdefault(name, []).append(node)
    verdict: dict[str, bool] = {}
    for spec in specs:
        for axis, d in enumerate(shapes[spec.name]):
            if isinstance(d, int):
                continue
            name = d if isinstance(d, str) else generated_name(spec.name, axis)
            # Shape reads only the sizes, which an empty tensor has too
            nodes = [n for n in readers.get(spec.name, []) if n.op_type != "Shape"]
            ok = bool(nodes) and all(_concat_axis(n, len(shapes[spec.name])) == axis
                                     for n in nodes)
            verdict[name] = verdict.get(name, True) and ok
    return {n for n, ok in verdict.items() if ok}


def _concat_axis(node: onnx.NodeProto, ndim: int) -> int | None:
    if node.op_type != "Concat":
        return None
    for attribute in node.attribute:
        if attribute.name == "axis":
            return attribute.i % ndim if ndim else None
    return None


def resolve_unified_dims(graph: Graph) -> None:
    """Rewrite every type and attribute of ``graph`` in place with the unified dims replaced
    by their representatives (graph.dims.substitutions), so one dim has one name."""
    table = graph.dims
    if not table.substitutions:
        return
    for value in graph.values():
        shape = table.resolve_shape(value.type.shape)
        if shape != value.type.shape:
            value.type = TensorType(shape, value.type.dtype)
    for node in graph.nodes:
        node.attrs = {k: table.resolve_value(v) for k, v in node.attrs.items()}


def symbolic_shape(shape: Sequence[Any]) -> bool:
    return any(isinstance(d, Dim) for d in shape)


def specialize_dims(graph: Graph, values: Mapping[str, int]) -> Graph:
    """A static copy of a symbolic ``graph`` for one set of dim values (what
    ``graph.dims.check`` returns for a run's input shapes): every type and attribute with its
    Dims evaluated, each ``dim_values`` node a constant. For tests and the reference
    interpreter; the compiled artifact stays symbolic.

    >>> static = specialize_dims(graph, graph.dims.check({"ids": (2, 7)}))  # doctest: +SKIP
    """
    static = graph.copy()
    static.dims = DimTable()

    def concrete(value: Any) -> Any:
        return evaluate_within(value, values)

    for value in static.values():
        if not value.type.is_static:
            value.type = TensorType(concrete(value.type.shape), value.type.dtype)
    kept = []
    for node in static.nodes:
        node.attrs = {k: concrete(v) for k, v in node.attrs.items()}
        if node.op == "dim_values":
            (out,) = node.outputs
            array = np.array(node.attrs["values"], dtype=out.type.dtype)
            out.producer = None
            static.constants[out] = array.reshape(node.attrs["shape"])
            continue
        kept.append(node)
    static.nodes = kept
    return static

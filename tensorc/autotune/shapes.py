"""Tuning shapes: the values of a model's symbolic dims that the tuner measures it at.

A model compiled with symbolic dims runs every shape in their ranges with one set of kernels,
so its tuning picks one config per kernel for all of them: each candidate is timed at every
tuning shape. The user names the shapes (``tune_shapes=[{"batch": 1, "seq": 7}, ...]``, or
``--tune-shape batch=1,seq=7`` once per shape: cli/arguments.py), each giving every open dim
a value; without any, :func:`default_shapes` draws a few across each dim's range: its low
end (at least 1), a small odd size (7), a middle value (``te.DEFAULT_HINT``, the size
schedules choose tiles for, where the range is unbounded) and its high end where it is
finite, all dims stepping together (the i-th shape takes each dim's i-th value).

>>> default_shapes(graph)       # batch, seq in [1, inf)
[{'batch': 1, 'seq': 1}, {'batch': 7, 'seq': 7}, {'batch': 64, 'seq': 64}]
>>> format_shape({"batch": 1, "seq": 7})
'batch=1,seq=7'
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from tensorc.errors import InputError, TensorcError
from tensorc.ir.dims import Dim, evaluate
from tensorc.ir.graph import Graph
from tensorc.ir.te import DEFAULT_HINT
from tensorc.reference import random_inputs

SMALL_ODD = 7


def open_dims(graph: Graph) -> list[str]:
    """The symbolic dims an input of ``graph`` carries (not data-dependent sizes, which the
    model computes), in the order the model declares them."""
    table = graph.dims
    return [n for n in table.symbols if n not in table.data and n not in table.capacities
            and table.origins.get(n)]


def dim_levels(lo: int, hi: int | None) -> list[int]:
    """The values a dim in [lo, hi] (hi None: unbounded) is tuned at by default, ascending:
    its low end (at least 1), a small odd size, a middle value, its high end if finite."""
    low = max(lo, 1)
    if hi is not None and hi < low:
        return [hi]
    middle = DEFAULT_HINT if hi is None else (low + hi) // 2
    wanted = [low, SMALL_ODD, middle] + ([hi] if hi is not None else [])
    inside = {v for v in wanted if v >= low and (hi is None or v <= hi)}
    return sorted(inside)


def default_shapes(graph: Graph) -> list[dict[str, int]]:
    """Tuning shapes across each open dim's range (:func:`dim_levels`), the dims stepping
    together; a shape the model's run-time constraints refuse is left out."""
    names = open_dims(graph)
    levels = {n: dim_levels(*graph.dims.ranges[n]) for n in names}
    count = max((len(v) for v in levels.values()), default=0)
    shapes: list[dict[str, int]] = []
    for k in range(count):
        shape = {n: values[min(k, len(values) - 1)] for n, values in levels.items()}
        if shape in shapes:
            continue
        try:
            check_shape(graph, shape)
        except InputError:
            continue
        shapes.append(shape)
    if names and not shapes:
        raise TensorcError(f"no default tuning shape of the dims {', '.join(names)} meets the "
                           f"model's run-time constraints: name the shapes to tune at "
                           f"(tune_shapes=, --tune-shape)")
    return shapes


def input_shapes_at(graph: Graph, values: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """Each graph input's shape where the dims take ``values``."""
    table = graph.dims
    return {v.name: tuple(evaluate(table.resolve(d), values) for d in v.type.shape)
            for v in graph.inputs}


def check_shape(graph: Graph, values: Mapping[str, int]) -> dict[str, int]:
    """``values`` checked against the dims' ranges and the model's run-time constraints (an
    InputError naming the broken one); the dims' values."""
    return graph.dims.check(input_shapes_at(graph, values))


def resolve_shapes(graph: Graph, given: Sequence[Mapping[str, int]] | None
                   ) -> list[dict[str, int]]:
    """The tuning shapes of ``graph``: ``given`` checked (each names every open dim, with a
    value its range and the model's constraints accept), else :func:`default_shapes`."""
    names = open_dims(graph)
    if not given:
        return default_shapes(graph)
    if not names:
        raise TensorcError("tuning shapes were given, but the model has no symbolic input "
                           "dims (or input_shapes binds them all): tune without them")
    shapes: list[dict[str, int]] = []
    for k, shape in enumerate(given, 1):
        if not isinstance(shape, Mapping):
            raise TensorcError(f"tuning shape {k} is {shape!r}: give a dict of dim values, "
                               f"e.g. {example(names)}")
        values: dict[str, int] = {}
        for name, value in shape.items():
            resolved = graph.dims.resolve(Dim(str(name)))
            key = resolved.names[0] if isinstance(resolved, Dim) and resolved.is_name \
                else str(name)
            if key not in names:
                raise TensorcError(f"tuning shape {k} names dim {name!r}, which is no "
                                   f"symbolic input dim of the model: its dims are "
                                   f"{', '.join(names)}")
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise TensorcError(f"tuning shape {k} gives dim {name!r} the value {value!r}: "
                                   f"give a non-negative integer")
            values[key] = int(value)
        missing = [n for n in names if n not in values]
        if missing:
            raise TensorcError(f"tuning shape {k} ({format_shape(values)}) gives no value for "
                               f"the dim{'s' if len(missing) > 1 else ''} "
                               f"{', '.join(missing)}: each shape names every symbolic dim, "
                               f"e.g. {example(names)}")
        try:
            check_shape(graph, values)
        except InputError as error:
            raise TensorcError(f"tuning shape {k} ({format_shape(values)}): {error}") from None
        ordered = {n: values[n] for n in names}
        if ordered not in shapes:
            shapes.append(ordered)
    return shapes


def format_shape(values: Mapping[str, int]) -> str:
    """``batch=1,seq=7``: how reports and the command line spell a tuning shape."""
    return ",".join(f"{n}={v}" for n, v in values.items())


def example(names: Sequence[str]) -> str:
    return "{" + ", ".join(f"{n!r}: {v}" for n, v in zip(names, (1, 7, 16, 3, 5))) + "}"


def feeds_at(signature, values: Mapping[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random feeds for a module's inputs (its ``(name, shape, dtype)`` signature,
    shapes over symbolic dims) where the dims take ``values``."""
    shapes = {name: tuple(evaluate(d, values) for d in shape) for name, shape, _ in signature}
    return random_inputs(signature, seed, shapes)

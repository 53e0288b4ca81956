"""A run's symbolic dims: read off its inputs, checked, and the sizes that follow from them.

The dims' expressions (output shapes, the arena's size, the constraints the model's graph
recorded) are compiled to Python once (``ir.dims.evaluator``), so that binding a run costs
microseconds. Where a check fails, the dim table's own ``check`` raises the error that names
the input, the dim and the constraint.

>>> binding = DimBinding(table, inputs, outputs, arena_size)
>>> values, out_shapes, arena = binding.bind([x.shape, mask.shape])
"""
from __future__ import annotations

from typing import Sequence

from tensorc.errors import InputError
from tensorc.ir import types
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import evaluator


class DimBinding:
    def __init__(self, table: DimTable, inputs, outputs, arena_size):
        self.table = table
        self.names = sorted(table.symbols)
        self.input_names = [n for n, _, _ in inputs]
        position = {n: k for k, n in enumerate(self.input_names)}
        # where each dim's value is read: (input, axis) places, the first one giving it
        self.places = {name: [(position[i], axis) for i, axis in places if i in position]
                       for name, places in table.origins.items() if name in self.names}
        self.ranges = [(name, *table.ranges[name]) for name in self.names]
        self.ranks = [len(shape) for _, shape, _ in outputs]
        sizes = [d for _, shape, _ in outputs for d in shape] + [arena_size]
        self._sizes = evaluator(sizes, self.names)
        constraints = [c for c in table.constraints if set(c.names()) <= set(self.names)]
        self._ops = [c.op for c in constraints]
        self._sides = evaluator([x for c in constraints for x in (c.lhs, c.rhs)], self.names)

    def bind(self, shapes: Sequence[tuple[int, ...]]
             ) -> tuple[list[int], list[tuple[int, ...]], int]:
        """The dims' values (in name order), the outputs' shapes and the arena's bytes for a
        run whose inputs have ``shapes``; an InputError where a check fails."""
        values = []
        for name in self.names:
            places = self.places.get(name) or []
            if not places:
                return self._refuse(shapes)
            first = shapes[places[0][0]][places[0][1]]
            if any(shapes[i][axis] != first for i, axis in places[1:]):
                return self._refuse(shapes)
            values.append(first)
        for (_, lo, hi), v in zip(self.ranges, values):
            if v < lo or (hi is not None and v > hi):
                return self._refuse(shapes)
        sides = self._sides(values)
        for k, op in enumerate(self._ops):
            a, b = sides[2 * k], sides[2 * k + 1]
            if not (a == b if op == "==" else a >= b if op == ">=" else a <= b):
                return self._refuse(shapes)
        sizes = self._sizes(values)
        shapes_out, at = [], 0
        for rank in self.ranks:
            shapes_out.append(tuple(sizes[at:at + rank]))
            at += rank
        arena = sizes[-1]
        if arena > types.MAX_TENSOR_BYTES:
            given = ", ".join(f"{n}={v}" for n, v in zip(self.names, values))
            raise InputError(f"at {given} the model's intermediate tensors need "
                             f"{arena / (1 << 30):.3g} GiB, over the limit of "
                             f"{types.MAX_TENSOR_BYTES / (1 << 30):.3g} GiB; run smaller "
                             f"inputs (or raise tensorc.ir.types.MAX_TENSOR_BYTES)")
        return values, shapes_out, arena

    def _refuse(self, shapes):
        self.table.check(dict(zip(self.input_names, shapes)))
        raise InputError("the input shapes break a constraint of the model's dims: "
                         f"{dict(zip(self.input_names, shapes))}")

"""A run's symbolic dims: read off its inputs, checked, and the sizes that follow from them.

The dims' expressions (output shapes, the arena's size, the constraints the model's graph
recorded) are compiled to Python once (``ir.dims.evaluator``), so that binding a run costs
microseconds. Where a check fails, the dim table's own ``check`` raises the error that names
the input, the dim and the constraint.

Data-dependent dims (NonZero's count) have no input to read: a run starts with each at its
bound, so that the outputs are allocated at their largest; the kernels write the actual values
into the dims array, and :meth:`DimBinding.cut` then cuts the outputs to them. A capacity (the
bound of a data-dependent dim that nothing else bounds) starts at INITIAL_CAPACITY; a run
whose dim exceeds it fails its check, :meth:`DimBinding.grow` makes room, and the module runs
it again.

>>> binding = DimBinding(table, inputs, outputs, arena_size)
>>> values, out_shapes, arena = binding.bind([x.shape, mask.shape])
"""
from __future__ import annotations

from typing import Sequence

from tensorc.errors import InputError
from tensorc.ir import types
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import evaluator


INITIAL_CAPACITY = 64


class DimBinding:
    def __init__(self, table: DimTable, inputs, outputs, arena_size):
        self.table = table
        self.names = sorted(table.symbols)
        self.input_names = [n for n, _, _ in inputs]
        position = {n: k for k, n in enumerate(self.input_names)}
        # where each dim's value is read: (input, axis) places, the first one giving it
        self.places = {name: [(position[i], axis) for i, axis in places if i in position]
                       for name, places in table.origins.items() if name in self.names}
        data = [n for n in self.names if n in table.data]
        # the capacities' values now, kept between runs (they only grow)
        self.capacities = {n: INITIAL_CAPACITY for n in table.capacities if n in self.names}
        self._capacity_at = [(self.names.index(n), n) for n in self.capacities]
        self.ranges = [(name, *table.ranges[name]) for name in self.names
                       if name not in data and name not in self.capacities]
        self.ranks = [len(shape) for _, shape, _ in outputs]
        sizes = [d for _, shape, _ in outputs for d in shape] + [arena_size]
        self._sizes = evaluator(sizes, self.names)
        # data-dependent dims: (position, the bound a run starts them at), and the outputs
        # whose shapes hold one (cut after the run)
        self.data = [(self.names.index(n), table.data[n][0]) for n in data]
        self._bounds = evaluator([b for _, b in self.data], self.names)
        self.cut_outputs = [(k, name) for k, (name, shape, _) in enumerate(outputs)
                            if any(table.is_data_dependent(d) for d in shape)]
        constraints = [c for c in table.constraints if set(c.names()) <= set(self.names)
                       and not set(c.names()) & set(data)]
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
                values.append(0)        # a data-dependent dim: its bound, below
                continue
            first = shapes[places[0][0]][places[0][1]]
            if any(shapes[i][axis] != first for i, axis in places[1:]):
                return self._refuse(shapes)
            values.append(first)
        for k, name in self._capacity_at:
            values[k] = self.capacities[name]
        if self.data:
            for (k, _), bound in zip(self.data, self._bounds(values)):
                values[k] = bound
        for name, lo, hi in self.ranges:
            v = values[self.names.index(name)]
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

    def grow(self, index: int | None, size: int | None) -> bool:
        """After a run failed a size check that read ``index`` against ``size``: where that
        size is a capacity's (its value plus one) and the value is above it, the capacity
        grows to hold it (at least doubling); whether one grew, so the run is worth
        repeating."""
        if index is None or size is None or index < size:
            return False
        grown = False
        for name, capacity in self.capacities.items():
            if capacity + 1 == size:
                self.capacities[name] = max(2 * capacity, index)
                grown = True
        return grown

    def cut(self, result: dict, dims) -> dict:
        """The outputs of a run cut to the data-dependent dims' values its kernels wrote into
        ``dims``: each a view of its array's first elements (allocated at the bounds)."""
        sizes = self._sizes([int(v) for v in dims])
        at = {}
        k = 0
        for index, rank in enumerate(self.ranks):
            at[index] = tuple(sizes[k:k + rank])
            k += rank
        for index, name in self.cut_outputs:
            out = result[name]
            shape = at[index]
            count = 1
            for d in shape:
                count *= d
            if count > out.size:     # a kernel's bug, never the user's
                raise InputError(f"output {name!r} came out {shape}, larger than the "
                                 f"{out.shape} allocated for it")
            result[name] = out.reshape(-1)[:count].reshape(shape)
        return result

    def _refuse(self, shapes):
        self.table.check(dict(zip(self.input_names, shapes)))
        raise InputError("the input shapes break a constraint of the model's dims: "
                         f"{dict(zip(self.input_names, shapes))}")

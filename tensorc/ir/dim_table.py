"""A graph's record of its symbolic dims (``graph.dims``): each dim's range, where the inputs
carry it, the dims unified with others, and the constraints that must hold at run time.

- Ranges: each dim name takes values in [lo, hi] (hi None: unbounded); [1, inf) unless the
  model accepts empty tensors there ([0, inf), an empty KV cache) or the user narrows it with
  ``dim_ranges``.
- Unification: where the graph needs two dims equal (a broadcast of an attention mask's
  ``mask_seq`` with the input's ``seq``), one becomes the other's representative
  (``substitutions``), and the equality is a run-time constraint on the inputs.
- Constraints: ``lhs op rhs`` (op ``==``, ``>=`` or ``<=``) that the ranges cannot decide at
  compile time, each with the reason (the node that needs it). :meth:`DimTable.check` checks
  ranges and constraints for the dims of one run and raises an ``InputError`` that names the
  input, the dim and the constraint.
- Data-dependent dims (``data``): the size of an output that depends on the values of a
  tensor (NonZero's count, TopK's run-time k), in [0, bound] where the bound is an expression
  of the input dims. The kernel of the node that computes it writes its value into the run's
  dims array; tensors sized by it are allocated at the bound (:meth:`DimTable.at_bound`).
  Where nothing bounds it (Range over run-time values), its bound is a *capacity*, a dim
  ``<name>.cap`` the runtime chooses: a run whose value exceeds it fails its check, and the
  runtime runs it again with the capacity grown (runtime/dim_binding.py).

Shape rules reach the table of the graph being built through :meth:`DimTable.active`
(a context variable), so ``ops/*`` infer rules keep their signature.

>>> table = DimTable(); seq = table.declare("seq", "ids", 1)
>>> with table.active():
...     table.unify(Dim("seq"), Dim("mask_seq"), "node 'add' broadcasts them")
Dim('seq')
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from tensorc.errors import InputError, ShapeError
from tensorc.ir.arith import never_decreases
from tensorc.ir.dims import (
    ACTIVE, Dim, DimLike, bounds, decide, dim_from_json, dim_to_json, dim_var, evaluate,
    substitute_dims,
)

_SYMBOLS = {"==": "eq", ">=": "ge", "<=": "le"}


@dataclass(frozen=True)
class Constraint:
    """``lhs op rhs`` that must hold at run time, and why."""

    lhs: DimLike
    op: str
    rhs: DimLike
    reason: str

    def names(self) -> tuple[str, ...]:
        found = set()
        for side in (self.lhs, self.rhs):
            if isinstance(side, Dim):
                found.update(side.names)
        return tuple(sorted(found))

    def holds(self, values: Mapping[str, int]) -> bool:
        a, b = evaluate(self.lhs, values), evaluate(self.rhs, values)
        return {"==": a == b, ">=": a >= b, "<=": a <= b}[self.op]

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"

    def to_json(self) -> dict:
        return {"constraint": str(self), "reason": self.reason}


@dataclass
class DimTable:
    """The symbolic dims of one graph (see the module's docstring)."""

    ranges: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    origins: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    substitutions: dict[str, DimLike] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    # the node being converted, named in the reasons of the constraints it adds
    site: str = ""
    # lower bounds that recorded constraints imply (H >= 3 once a 3-wide window must fit):
    # a run breaking them is refused, so decisions may rely on them
    implied: dict[str, int] = field(default_factory=dict)
    # data-dependent dims: name -> (its upper bound over the input dims, the node computing it)
    data: dict[str, tuple[DimLike, str]] = field(default_factory=dict)
    # capacities: the dims the runtime sets as the bounds of unbounded data-dependent dims
    capacities: list[str] = field(default_factory=list)

    # declaring --------------------------------------------------------------------------------
    def declare(self, name: str, input: str, axis: int, lo: int = 1,
                hi: int | None = None) -> Dim:
        """Dim ``name``, carried by dim ``axis`` of graph input ``input``."""
        self.origins.setdefault(name, [])
        if (input, axis) not in self.origins[name]:
            self.origins[name].append((input, axis))
        if name not in self.ranges:
            self.ranges[name] = (lo, hi)
        return Dim(name)

    def declare_data(self, stem: str, bound: DimLike | None, origin: str) -> Dim:
        """A fresh data-dependent dim ``<stem>_<k>.n`` in [0, bound]: the size of an output of
        node ``origin`` that its kernel computes at run time. ``bound`` may be an expression
        of the input dims (and of other data-dependent dims: their bounds replace them);
        None: nothing bounds it, and a capacity ``<stem>_<k>.cap`` stands for the bound.

        >>> table.declare_data("nonzero", Dim("H") * 4, "nz")
        Dim('nonzero_0.n')
        """
        if bound is None:
            k = 0
            while f"{stem}_{k}.n" in self.ranges:
                k += 1
            capacity = f"{stem}_{k}.cap"
            self.ranges[capacity] = (0, None)
            self.capacities.append(capacity)
            bound = Dim(capacity)
        bound = self.at_bound(self.resolve(bound))
        if not isinstance(bound, int) and not never_decreases(bound.expr):
            raise ShapeError(f"{origin}: the bound {bound} of its output size must not "
                             f"decrease as the input dims grow")
        k = 0
        while f"{stem}_{k}.n" in self.ranges:
            k += 1
        name = f"{stem}_{k}.n"
        hi = bound if isinstance(bound, int) else bounds(bound)[1]
        self.ranges[name] = (0, hi)
        self.data[name] = (bound, origin)
        return Dim(name)

    def at_bound(self, d: DimLike) -> DimLike:
        """``d`` with each data-dependent dim replaced by its bound: the size to allocate
        (sizes never decrease as dims grow, so the bound's size holds every run's)."""
        if not self.data or not isinstance(d, Dim) or not set(d.names) & set(self.data):
            return d
        return substitute_dims(d, {n: b for n, (b, _) in self.data.items()})

    def is_data_dependent(self, d: DimLike) -> bool:
        """Whether ``d`` involves a data-dependent dim."""
        return isinstance(d, Dim) and bool(set(d.names) & set(self.data))

    def narrow(self, name: str, lo: int, hi: int | None) -> None:
        """Set the range the user gives for ``name`` (``dim_ranges``); it replaces the
        default, so (0, None) admits empty tensors."""
        if hi is not None and hi < lo:
            raise ShapeError(f"dim_ranges[{name!r}] is ({lo}, {hi}): the range is empty")
        self.ranges[name] = (lo, hi)

    # reading ----------------------------------------------------------------------------------
    @property
    def symbols(self) -> list[str]:
        """The dim names still free (not unified into another), in declaration order."""
        return [n for n in self.ranges if n not in self.substitutions]

    def is_symbolic(self) -> bool:
        return bool(self.symbols)

    def bounds(self) -> dict:
        """Var -> (lo, hi) for tensorc.ir.arith, of every declared dim (with the lower
        bounds the recorded constraints imply)."""
        return {dim_var(name): (max(lo, self.implied.get(name, lo)), hi)
                for name, (lo, hi) in self.ranges.items()}

    def resolve(self, d: DimLike) -> DimLike:
        """``d`` with the unified dims replaced by their representatives."""
        for _ in range(len(self.substitutions) + 1):
            if not isinstance(d, Dim) or not any(n in self.substitutions for n in d.names):
                return d
            d = substitute_dims(d, self.substitutions)
        return d

    def resolve_shape(self, shape: Sequence[DimLike]) -> tuple[DimLike, ...]:
        return tuple(self.resolve(d) for d in shape)

    def resolve_value(self, value: Any) -> Any:
        """An attribute value (nests of tuples, lists) with its dims resolved."""
        if isinstance(value, Dim):
            return self.resolve(value)
        if isinstance(value, tuple):
            return tuple(self.resolve_value(v) for v in value)
        if isinstance(value, list):
            return [self.resolve_value(v) for v in value]
        return value

    # unifying and requiring -------------------------------------------------------------------
    def unify(self, a: DimLike, b: DimLike, reason: str) -> DimLike:
        """Make ``a`` and ``b`` one dim (the graph needs them equal): return the
        representative and record ``a == b`` as a run-time constraint. Raises ShapeError
        where the ranges say they can never be equal."""
        a, b = self.resolve(a), self.resolve(b)
        if a == b:
            return a
        if decide("eq", a, b) is False:
            raise ShapeError(f"{reason}, so dims {a} and {b} must be equal, but they never "
                             f"are ({self._range_text(a)}; {self._range_text(b)})")
        if not any(c.op == "==" and {c.lhs, c.rhs} == {a, b} for c in self.constraints):
            self.constraints.append(Constraint(a, "==", b, self._at(reason)))
        keep, drop = self._representative(a, b)
        if drop is not None:
            name = drop.expr.name
            self.substitutions[name] = keep
            if isinstance(keep, int):
                self.ranges[name] = (keep, keep)
            elif keep.is_name:
                lo1, hi1 = self.ranges.get(name, (0, None))
                lo2, hi2 = self.ranges.get(keep.expr.name, (0, None))
                his = [h for h in (hi1, hi2) if h is not None]
                self.ranges[keep.expr.name] = (max(lo1, lo2), min(his) if his else None)
        return keep

    def _representative(self, a: DimLike, b: DimLike) -> tuple[DimLike, Dim | None]:
        """(the dim kept, the dim name replaced by it, or None where neither is a name that
        can be replaced: then both stay, and only the constraint ties them)."""
        order = list(self.ranges)
        if self.is_data_dependent(a) or self.is_data_dependent(b):
            return a, None      # a data-dependent dim keeps its name: its kernel writes it
        names = [d for d in (a, b) if isinstance(d, Dim) and d.is_name]
        if len(names) == 2:  # the dim declared first stays
            first = min(names, key=lambda d: order.index(d.expr.name)
                        if d.expr.name in order else len(order))
            return first, (b if first is a else a)
        if len(names) == 1:
            name, other = (a, b) if names[0] is a else (b, a)
            if not (isinstance(other, Dim) and name.expr.name in other.names):
                return other, name
            return name, None  # min(seq, 64) == seq: keep the plain name
        return a, None

    def require(self, lhs: DimLike, op: str, rhs: DimLike, reason: str) -> None:
        """Record that ``lhs op rhs`` must hold: nothing where the ranges prove it, a
        ShapeError where they refute it, a run-time constraint otherwise."""
        lhs, rhs = self.resolve(lhs), self.resolve(rhs)
        decided = decide(_SYMBOLS[op], lhs, rhs)
        if decided is True:
            return
        if op == "==" and decided is None:  # an equality unifies (a name becomes the other)
            self.unify(lhs, rhs, reason)
            return
        if decided is False:
            raise ShapeError(f"{reason}: it needs {lhs} {op} {rhs}, which never holds "
                             f"({self._range_text(lhs)}; {self._range_text(rhs)})")
        constraint = Constraint(lhs, op, rhs, self._at(reason))
        if not any((c.lhs, c.op, c.rhs) == (lhs, op, rhs) for c in self.constraints):
            self.constraints.append(constraint)
            if op == ">=":
                self._imply_lower_bound(lhs - rhs)

    def _imply_lower_bound(self, diff: DimLike) -> None:
        """Where ``diff >= 0`` involves one dim and grows with it (sums, positive multiples,
        floor divisions by positive constants: window sizes), the least value of the dim
        that satisfies it, found by bisection, becomes an implied lower bound."""
        if not isinstance(diff, Dim) or len(diff.names) != 1 or not never_decreases(diff.expr):
            return
        (name,) = diff.names
        lo, hi = self.bounds()[dim_var(name)]
        if evaluate(diff, {name: lo}) >= 0:
            return
        top = hi if hi is not None else lo + (1 << 40)
        if evaluate(diff, {name: top}) < 0:
            return  # never satisfied in range: check() refuses every run
        while lo < top:
            mid = (lo + top) // 2
            lo, top = (lo, mid) if evaluate(diff, {name: mid}) >= 0 else (mid + 1, top)
        self.implied[name] = lo

    def _at(self, reason: str) -> str:
        return f"{self.site}: {reason}" if self.site else reason

    @contextlib.contextmanager
    def active(self) -> Iterator[DimTable]:
        """Make this the table shape rules read ranges from and record constraints in."""
        token = ACTIVE.set(self)
        try:
            yield self
        finally:
            ACTIVE.reset(token)

    # run time ---------------------------------------------------------------------------------
    def values_of(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Each dim name's value, read off the input shapes of one run."""
        values = {}
        for name, places in self.origins.items():
            for input, axis in places:
                if input in shapes and axis < len(shapes[input]):
                    values.setdefault(name, int(shapes[input][axis]))
        return values

    def check(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Check the ranges and constraints for one run's input shapes; return the dims'
        values. Raises InputError naming the input, the dim and the broken constraint.

        >>> table.check({"ids": (2, 600)})    # doctest: +SKIP
        InputError: input 'ids' dim 1 (seq) is 600, outside its range [1, 512]
        """
        values = self.values_of(shapes)
        for name, places in self.origins.items():
            for input, axis in places:  # one name on two inputs: both must agree
                if input in shapes and axis < len(shapes[input]) and \
                        int(shapes[input][axis]) != values[name]:
                    first = self._where(name)
                    raise InputError(f"input {input!r} dim {axis} ({name}) is "
                                     f"{shapes[input][axis]}, but {first} is {values[name]}; "
                                     f"the model declares them the same dim {name!r}")
        for name, (lo, hi) in self.ranges.items():
            value = values.get(name)
            if value is not None and (value < lo or (hi is not None and value > hi)):
                raise InputError(f"{self._where(name)} is {value}, outside its range "
                                 f"[{lo}, {'inf' if hi is None else hi}]"
                                 + self._range_fix(name))
        for constraint in self.constraints:
            if all(n in values for n in constraint.names()) and not constraint.holds(values):
                given = ", ".join(f"{self._where(n)} is {values[n]}" for n in constraint.names())
                raise InputError(f"{given}: the model needs {constraint} ({constraint.reason})")
        return values

    def _where(self, name: str) -> str:
        places = self.origins.get(name)
        if not places:
            return f"dim {name}"
        input, axis = places[0]
        return f"input {input!r} dim {axis} ({name})"

    @staticmethod
    def _range_fix(name: str) -> str:
        return f"; compile with a wider dim_ranges[{name!r}] to accept it"

    def _range_text(self, d: DimLike) -> str:
        if not isinstance(d, Dim):
            return f"{d} is constant"
        return ", ".join(f"{n} in {self.describe_range(n)}" for n in d.names)

    def describe_range(self, name: str) -> str:
        lo, hi = self.ranges.get(name, (0, None))
        return f"[{lo}, {'inf' if hi is None else hi}]"

    # reports ----------------------------------------------------------------------------------
    def describe(self) -> list[str]:
        """Readable lines: each free dim, its range and where it comes from; unified dims;
        run-time constraints."""
        lines = []
        for name in self.symbols:
            places = ", ".join(f"{i}[{a}]" for i, a in self.origins.get(name, []))
            if name in self.data:
                bound, origin = self.data[name]
                places = f"node {origin!r} at run time, at most {bound}"
            elif name in self.capacities:
                places = "the runtime: the room for a data-dependent dim, grown on demand"
            lines.append(f"{name} in {self.describe_range(name)}"
                         + (f" (from {places})" if places else ""))
        for name, keep in self.substitutions.items():
            lines.append(f"{name} = {keep} (unified)")
        for constraint in self.constraints:
            lines.append(f"checked at run time: {constraint} ({constraint.reason})")
        return lines

    def to_json(self) -> dict:
        return {
            "symbols": [{"name": n, "range": [self.ranges[n][0], self.ranges[n][1]],
                         "inputs": [[i, a] for i, a in self.origins.get(n, [])],
                         **({"computed_by": self.data[n][1], "bound": str(self.data[n][0])}
                            if n in self.data else {})}
                        for n in self.symbols],
            "unified": {n: str(k) for n, k in self.substitutions.items()},
            "constraints": [c.to_json() for c in self.constraints],
        }

    def state(self) -> dict:
        """Everything a saved module needs to bind and check its dims, as JSON data
        (:meth:`from_state` reads it back)."""
        return {
            "ranges": {n: [lo, hi] for n, (lo, hi) in self.ranges.items()},
            "origins": {n: [[i, a] for i, a in places] for n, places in self.origins.items()},
            "substitutions": {n: dim_to_json(d) for n, d in self.substitutions.items()},
            "constraints": [{"lhs": dim_to_json(c.lhs), "op": c.op, "rhs": dim_to_json(c.rhs),
                             "reason": c.reason} for c in self.constraints],
            "implied": dict(self.implied),
            "data": {n: [dim_to_json(b), origin] for n, (b, origin) in self.data.items()},
            "capacities": list(self.capacities),
        }

    @staticmethod
    def from_state(state: dict) -> DimTable:
        """The table :meth:`state` describes; a ValueError where it is malformed."""
        try:
            ranges = {str(n): (int(lo), None if hi is None else int(hi))
                      for n, (lo, hi) in state["ranges"].items()}
            origins = {str(n): [(str(i), int(a)) for i, a in places]
                       for n, places in state["origins"].items()}
            substitutions = {str(n): dim_from_json(d)
                             for n, d in state["substitutions"].items()}
            constraints = []
            for c in state["constraints"]:
                if c["op"] not in _SYMBOLS:
                    raise ValueError(f"constraint op {c['op']!r}")
                constraints.append(Constraint(dim_from_json(c["lhs"]), c["op"],
                                              dim_from_json(c["rhs"]), str(c["reason"])))
            implied = {str(n): int(v) for n, v in state["implied"].items()}
            data = {str(n): (dim_from_json(b), str(origin))
                    for n, (b, origin) in state.get("data", {}).items()}
            capacities = [str(n) for n in state.get("capacities", [])]
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"malformed dim table: {error}") from None
        return DimTable(ranges, origins, substitutions, constraints, "", implied, data,
                        capacities)

    def copy(self) -> DimTable:
        return DimTable(dict(self.ranges), {k: list(v) for k, v in self.origins.items()},
                        dict(self.substitutions), list(self.constraints), self.site,
                        dict(self.implied), dict(self.data), list(self.capacities))


def active_table() -> DimTable | None:
    """The table shape rules record in now (None outside an import)."""
    return ACTIVE.get()

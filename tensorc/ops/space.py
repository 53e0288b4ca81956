"""Search spaces: the named choices a schedule is a function of.

A schedule template declares its knobs as data (a :class:`SearchSpace`) and builds the
schedule from one :class:`Config`, a value per knob. The heuristic's choice is the space's
default; the autotuner searches the same space and never edits op code. A config the space
rejects (an unknown knob, a value outside the knob's choices, a broken constraint) is never
built.

>>> space = SearchSpace([Knob("tile_f", (4, 8, 16), 16), Knob("unroll", (False, True), True)])
>>> space.default()
Config(tile_f=16, unroll=True)
>>> space.validate({"tile_f": 8, "unroll": False})["tile_f"]
8
"""
from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from tensorc.errors import ScheduleError


class InvalidConfigError(ScheduleError):
    """A config that its search space rejects: it names the knob and the legal values."""


@dataclass(frozen=True)
class Knob:
    """One named choice: its legal values (JSON scalars) and the heuristic's default."""

    name: str
    choices: tuple
    default: Any
    doc: str = ""

    def __post_init__(self):
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.choices:
            raise ValueError(f"knob {self.name} has no choices")
        if self.default not in self.choices:
            raise ValueError(f"knob {self.name}: default {self.default!r} is not among its "
                             f"choices {self.choices}")


class Config(Mapping):
    """A value per knob; immutable and hashable, so configs can key dicts and sets."""

    __slots__ = ("_values", "_hash")

    def __init__(self, values: Mapping[str, Any] | None = None, **kwargs):
        self._values = dict(values or {}, **kwargs)
        self._hash = None

    def __getitem__(self, key: str):
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(sorted(self._values.items(), key=lambda kv: kv[0])))
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, Mapping) and dict(self) == dict(other)

    def replace(self, **changes) -> Config:
        return Config(self._values, **changes)

    def to_json(self) -> str:
        return json.dumps(self._values, sort_keys=True)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"


# A constraint returns None for a legal config, else the reason it is not.
Constraint = Callable[[Config], "str | None"]


class SearchSpace:
    """Knobs with their choices, and constraints between them.

    >>> space = SearchSpace([Knob("a", (1, 2, 4), 4), Knob("b", (1, 2, 4), 1)],
    ...                     [lambda c: "a*b > 4" if c["a"] * c["b"] > 4 else None])
    >>> len(list(space.configs()))
    6
    """

    def __init__(self, knobs: list[Knob] | tuple[Knob, ...] = (),
                 constraints: list[Constraint] | tuple[Constraint, ...] = (), name: str = "",
                 conditions: Mapping[str, tuple[str, Any]] | None = None):
        self.knobs: dict[str, Knob] = {}
        for knob in knobs:
            if knob.name in self.knobs:
                raise ValueError(f"knob {knob.name} declared twice")
            self.knobs[knob.name] = knob
        self.constraints = list(constraints)
        self.name = name
        # knob -> (knob, value): a knob that matters only where another has that value (an
        # algorithm's own knobs); elsewhere it keeps its default, so that no two configs
        # build the same schedule
        self.conditions = dict(conditions or {})
        default = Config({k.name: k.default for k in knobs})
        reason = self.violation(default)
        if reason is not None:
            raise ValueError(f"search space {name}: the default config is illegal: {reason}")

    def __len__(self) -> int:
        """The number of knob combinations (before constraints)."""
        return math.prod(len(k.choices) for k in self.knobs.values())

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k.name}={list(k.choices)}" for k in self.knobs.values())
        return f"SearchSpace({self.name}: {knobs})"

    def default(self) -> Config:
        return Config({k.name: k.default for k in self.knobs.values()})

    def pinned(self, **values) -> SearchSpace:
        """This space with the named knobs fixed to ``values`` (one choice each); knobs it
        does not have are ignored. The configs it yields are legal in this space too."""
        knobs = [Knob(k.name, (values[k.name],), values[k.name], k.doc) if k.name in values
                 else k for k in self.knobs.values()]
        return SearchSpace(knobs, self.constraints, self.name, self.conditions)

    def active(self, config: Mapping[str, Any], name: str) -> bool:
        """Whether knob ``name`` matters in ``config`` (its condition holds, or it has none)."""
        parent, value = self.conditions.get(name, (None, None))
        return parent is None or config[parent] == value

    def normalized(self, config: Mapping[str, Any]) -> Config:
        """``config`` with the knobs that do not matter in it at their defaults."""
        return Config({n: v if self.active(config, n) else self.knobs[n].default
                       for n, v in config.items()})

    def violation(self, config: Mapping[str, Any]) -> str | None:
        """Why ``config`` is illegal in this space, or None."""
        unknown = sorted(set(config) - set(self.knobs))
        if unknown:
            return (f"unknown knob(s) {unknown}; this space has {sorted(self.knobs)}")
        missing = sorted(set(self.knobs) - set(config))
        if missing:
            return f"no value for knob(s) {missing}"
        for name, knob in self.knobs.items():
            if config[name] not in knob.choices:
                return (f"knob {name}={config[name]!r} is not one of {list(knob.choices)}")
            if not self.active(config, name) and config[name] != knob.default:
                parent, value = self.conditions[name]
                return (f"knob {name} applies where {parent}={value!r} only; elsewhere it "
                        f"keeps its default {knob.default!r}")
        for constraint in self.constraints:
            reason = constraint(Config(config))
            if reason is not None:
                return reason
        return None

    def validate(self, config: Mapping[str, Any]) -> Config:
        """``config`` as a Config, or InvalidConfigError saying why it is illegal."""
        reason = self.violation(config)
        if reason is not None:
            where = f" of {self.name}" if self.name else ""
            raise InvalidConfigError(f"illegal schedule config{where}: {reason}")
        return Config(config)

    def is_valid(self, config: Mapping[str, Any]) -> bool:
        return self.violation(config) is None

    def configs(self) -> Iterator[Config]:
        """Every legal config, in knob order (small spaces only: it enumerates them all)."""
        names = list(self.knobs)
        for values in itertools.product(*(self.knobs[n].choices for n in names)):
            config = Config(dict(zip(names, values)))
            if self.violation(config) is None:
                yield config

    def sample(self, rng: random.Random, tries: int = 1000) -> Config:
        """A random legal config (uniform over knob values, rejecting illegal ones)."""
        for _ in range(tries):
            config = self.normalized({n: rng.choice(k.choices) for n, k in self.knobs.items()})
            if self.violation(config) is None:
                return config
        return self.default()

    def mutate(self, config: Config, rng: random.Random, knobs: int = 1,
               tries: int = 100) -> Config:
        """``config`` with ``knobs`` knob values changed at random (a legal result, or
        ``config`` itself when none was found)."""
        names = [n for n, k in self.knobs.items()
                 if len(k.choices) > 1 and self.active(config, n)]
        if not names:
            return config
        for _ in range(tries):
            changed = dict(config)
            for name in rng.sample(names, min(knobs, len(names))):
                others = [v for v in self.knobs[name].choices if v != config[name]]
                changed[name] = rng.choice(others)
            changed = self.normalized(changed)
            if self.violation(changed) is None:
                return changed
        return config

    def neighbours(self, config: Config) -> list[Config]:
        """The legal configs that differ from ``config`` in one knob's value, knob by knob.

        >>> SearchSpace([Knob("a", (1, 2, 4), 4), Knob("b", (1, 2), 1)]).neighbours(
        ...     Config(a=4, b=1))
        [Config(a=1, b=1), Config(a=2, b=1), Config(a=4, b=2)]
        """
        found = []
        for name, knob in self.knobs.items():
            if not self.active(config, name):
                continue
            for value in knob.choices:
                if value != config[name]:
                    changed = self.normalized(config.replace(**{name: value}))
                    if self.violation(changed) is None:
                        found.append(changed)
        return found

    def crossover(self, a: Config, b: Config, rng: random.Random, tries: int = 20) -> Config:
        """A legal config taking each knob's value from ``a`` or ``b`` (or ``a`` itself)."""
        for _ in range(tries):
            child = self.normalized({n: (a[n] if rng.random() < 0.5 else b[n])
                                     for n in self.knobs})
            if self.violation(child) is None:
                return child
        return a


EMPTY = SearchSpace(name="no knobs")


def divisors(n: int, limit: int | None = None) -> tuple[int, ...]:
    """The divisors of ``n`` (up to ``limit``), ascending: the usual choices of a split."""
    found = [d for d in range(1, (limit or n) + 1) if n % d == 0]
    return tuple(found)

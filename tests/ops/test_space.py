"""Search spaces: knobs, defaults, validation, enumeration and the random moves the tuner
uses."""
from __future__ import annotations

import random

import pytest

from tensorc.ops.space import Config, InvalidConfigError, Knob, SearchSpace, divisors


def _space() -> SearchSpace:
    return SearchSpace([Knob("tile", (1, 2, 4, 8), 4), Knob("order", ("a", "b"), "a")],
                       [lambda c: "tile 8 needs order b" if c["tile"] == 8 and
                        c["order"] != "b" else None], name="demo")


def test_default_and_validate():
    space = _space()
    assert space.default() == Config(tile=4, order="a")
    assert space.validate({"tile": 8, "order": "b"}) == {"tile": 8, "order": "b"}
    for bad, words in [({"tile": 3, "order": "a"}, "tile=3 is not one of"),
                       ({"tile": 8, "order": "a"}, "tile 8 needs order b"),
                       ({"tile": 1}, "no value for knob(s) ['order']"),
                       ({"tile": 1, "order": "a", "x": 1}, "unknown knob(s) ['x']")]:
        with pytest.raises(InvalidConfigError, match="demo") as info:
            space.validate(bad)
        assert words in str(info.value)


def test_enumeration_respects_constraints():
    configs = list(_space().configs())
    assert len(_space()) == 8
    assert len(configs) == 7
    assert Config(tile=8, order="a") not in configs


def test_pinned_knobs_take_one_value_and_keep_the_constraints():
    space = _space().pinned(order="b", missing=3)
    assert space.knobs["order"].choices == ("b",) and space.default() == Config(tile=4, order="b")
    configs = list(space.configs())
    assert configs == [Config(tile=t, order="b") for t in (1, 2, 4, 8)]
    assert all(_space().is_valid(c) for c in configs)
    assert not space.is_valid(Config(tile=4, order="a"))


def test_random_moves_stay_legal():
    space, rng = _space(), random.Random(0)
    seen = set()
    for _ in range(200):
        c = space.sample(rng)
        m = space.mutate(c, rng)
        x = space.crossover(c, m, rng)
        for config in (c, m, x):
            assert space.is_valid(config)
        assert m != c
        seen.add(c)
    assert len(seen) == 7


def test_config_is_hashable_and_json():
    a, b = Config(x=1, y="z"), Config({"y": "z", "x": 1})
    assert a == b and hash(a) == hash(b)
    assert a.to_json() == '{"x": 1, "y": "z"}'
    assert a.replace(x=2)["x"] == 2


def test_default_must_be_legal():
    with pytest.raises(ValueError):
        Knob("k", (1, 2), 3)
    with pytest.raises(ValueError):
        SearchSpace([Knob("k", (1, 2), 1)], [lambda c: "never" if c["k"] == 1 else None])


def test_divisors():
    assert divisors(12) == (1, 2, 3, 4, 6, 12)
    assert divisors(12, 4) == (1, 2, 3, 4)


def test_neighbours_change_one_knob_and_keep_to_the_constraints():
    space = _space()
    near = space.neighbours(space.default())            # tile=4, order=a
    assert near == [Config(tile=1, order="a"), Config(tile=2, order="a"),
                    Config(tile=4, order="b")]          # tile=8 with order a is illegal
    assert all(space.is_valid(c) for c in near)

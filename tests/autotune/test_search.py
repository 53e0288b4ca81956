"""The search's choices: what it measures first, what it passes over, what it picks."""
from __future__ import annotations

import numpy as np

from tensorc.autotune.cost_model import CostModel
from tensorc.autotune.search import EvolutionarySearch, RandomSearch, TaskState
from tensorc.ops.space import Config, Knob, SearchSpace


def _space() -> SearchSpace:
    return SearchSpace([Knob("a", tuple(range(10)), 0), Knob("b", (0, 1), 0),
                        Knob("c", tuple(range(10)), 0)])


class _FirstFeature(CostModel):
    """A trained model that scores a config by its first feature."""

    @property
    def trained(self) -> bool:
        return True

    def predict(self, features):
        return np.asarray(features)[:, 0]


def test_the_first_batch_is_the_default_and_its_one_knob_neighbours():
    space = _space()
    state = TaskState(None, space)
    batch = EvolutionarySearch(CostModel(), seed=0).propose(state, 8)
    assert batch[0] == space.default()
    assert set(batch[1:]) <= set(space.neighbours(space.default()))
    assert len(set(batch)) == 8
    # random search stays random: the baseline the guided search is compared with
    batch = RandomSearch(seed=0).propose(TaskState(None, space), 8)
    assert batch[0] == space.default()
    assert len(set(batch[1:]) - set(space.neighbours(space.default()))) >= 5


def test_configs_the_model_cannot_tell_apart_are_measured_once():
    # b lowers alike (no feature of its own): measuring a config's twin samples only noise
    space = SearchSpace([Knob("a", tuple(range(10)), 0), Knob("b", (0, 1), 0)])
    state = TaskState(None, space)
    state.features = {c: np.array([c["a"], 0.0], np.float32) for c in space.configs()}
    state.record(Config(a=0, b=0), 1e-3)
    state.record(Config(a=9, b=0), 1e-4)
    batch = EvolutionarySearch(_FirstFeature(), seed=0, epsilon=0.0).propose(state, 3)
    assert [c["a"] for c in batch] == [8, 7, 6]
    # once nothing else is left, the twins are measured too (the space is exhausted)
    for c in space.configs():
        if c["b"] == 0 and c not in state.measured:
            state.record(c, 1e-3)
    batch = EvolutionarySearch(_FirstFeature(), seed=0, epsilon=0.0).propose(state, 20)
    assert sorted(c["a"] for c in batch) == list(range(10))
    assert all(c["b"] == 1 for c in batch)


def test_top_reads_the_fastest_among_the_first_trials():
    space = _space()
    state = TaskState(None, space)
    configs = [Config(a=k, b=0, c=0) for k in range(5)]
    for config, latency in zip(configs, [5e-3, 4e-3, None, 1e-3, 2e-3]):
        state.record(config, latency)
    assert state.top(2) == [configs[3], configs[4]]
    assert state.top(3, trials=3) == [configs[1], configs[0]]     # the failure left out


def _stalled(weight: float, latency: float, trials: int) -> TaskState:
    """A task whose best latency has not moved for ``trials`` trials."""
    from types import SimpleNamespace
    state = TaskState(SimpleNamespace(weight=weight, default_latency=latency), _space())
    state.measured = {Config(a=k % 10, b=k // 100, c=k // 10 % 10): latency
                      for k in range(trials)}
    state.history = [latency] * trials
    return state


def test_a_stalled_task_yields_its_turns_as_its_trials_grow():
    from tensorc.autotune.search import TaskScheduler
    scheduler = TaskScheduler(batch=8)
    heavy, light = _stalled(1, 2e-3, 16), _stalled(1, 1e-3, 16)
    assert scheduler.next_task([heavy, light]) is heavy       # the same trials: the heavier
    # give the next batch to whichever is picked, the best latencies standing still: the
    # trials split about as the latencies do, not all to the heavier task
    for _ in range(40):
        state = scheduler.next_task([heavy, light])
        for _ in range(8):
            state.history.append(state.history[-1])
    assert 1.5 < heavy.trials / light.trials < 2.5
    # a task that is still improving keeps its turns
    light.history[-16:] = list(np.linspace(2e-3, 1e-3, 16))
    assert scheduler.next_task([heavy, light]) is light

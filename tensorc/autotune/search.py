"""Search: which configs to measure next, and for which task.

:class:`EvolutionarySearch` breeds a population from the task's fastest measured configs
(mutation and crossover of knob values through the ``SearchSpace``) and random samples,
scores it with the cost model for a few generations, and proposes the batch's best-scored
unmeasured configs, with a fraction ``epsilon`` of random unmeasured ones (exploration).
Spaces small enough to enumerate are scored whole. A config whose features equal those of
one measured or already proposed is passed over while others are left: the model cannot
tell the two apart (they are most often the same program, two knob values that lower
alike), and measuring it again would only sample the same timing noise. Before the model
is trained it proposes the default and its one-knob neighbours (the heuristic's choice is
usually near the best, and what each knob does around it is what the model first needs),
then random configs. :class:`RandomSearch` proposes the default, then random configs.

:class:`TaskScheduler` gives the next batch to the task with the largest expected gain in
end-to-end latency: weight x best latency x the improvement still expected (large while a
task is barely explored, then the recent rate of improvement, zero once its space is
exhausted).
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

import numpy as np

from tensorc.autotune.cost_model import CostModel
from tensorc.ops.space import Config, SearchSpace

ENUMERATE_LIMIT = 256       # spaces with at most this many knob combinations are scored whole


@dataclass
class TaskState:
    """What the tuner knows about one task."""

    task: object                                   # task.Task
    space: SearchSpace
    measured: dict = field(default_factory=dict)   # Config -> latency (None: failed)
    traces: dict = field(default_factory=dict)     # Config -> trace
    features: dict = field(default_factory=dict)   # Config -> feature vector (None: failed)
    errors: int = 0
    history: list = field(default_factory=list)    # best latency after each trial
    default_latency: float | None = None           # the default config, as the runner saw it
    # (default, best, best's config): the default and the search's fastest configs timed
    # again side by side, the default's median and the fastest of the others'
    confirmed: tuple | None = None
    exhausted: bool = False
    expected: list | None = None                   # the unscheduled program's outputs
    inputs: list | None = None

    @property
    def trials(self) -> int:
        return len(self.history)

    @property
    def best(self) -> tuple[Config | None, float | None]:
        done = [(lat, c) for c, lat in self.measured.items() if lat]
        if not done:
            return None, None
        lat, config = min(done, key=lambda x: x[0])
        return config, lat

    @property
    def best_latency(self) -> float | None:
        return self.best[1]

    def top(self, count: int, trials: int | None = None) -> list[Config]:
        """The ``count`` configs measured fastest (failures left out), fastest first; among
        the first ``trials`` measurements only, when given (``measured`` keeps the order in
        which they were taken)."""
        taken = list(self.measured.items())[:trials]
        done = sorted(((lat, k) for k, (_, lat) in enumerate(taken) if lat))
        return [taken[k][0] for _, k in done[:count]]

    def record(self, config: Config, latency: float | None, trace=None, features=None
               ) -> None:
        self.measured[config] = latency
        if trace is not None:
            self.traces[config] = trace
        if features is not None:
            self.features[config] = features
        if latency is None:
            self.errors += 1
        if config == self.space.default() and latency:
            self.default_latency = latency
        best = self.best_latency
        self.history.append(best if best is not None else math.inf)

    def featurize(self, config: Config) -> np.ndarray | None:
        """The config's feature vector, lowering it here once (None if it fails to lower)."""
        if config not in self.features:
            try:
                self.features[config] = self.task.features(self.task.schedule(config))
            except Exception:       # noqa: BLE001  (a config that does not lower scores last)
                self.features[config] = None
        return self.features[config]


class EvolutionarySearch:
    """Cost-model-guided evolutionary search with epsilon-greedy exploration."""

    def __init__(self, model: CostModel, seed: int = 0, population: int = 48,
                 generations: int = 3, epsilon: float = 0.2, parents: int = 6):
        self.model = model
        self.rng = random.Random(seed)
        self.population = population
        self.generations = generations
        self.epsilon = epsilon
        self.parents = parents

    def _unmeasured(self, state: TaskState, configs) -> list[Config]:
        seen, out = set(), []
        for c in configs:
            if c not in state.measured and c not in seen:
                seen.add(c)
                out.append(c)
        return out

    def _random(self, state: TaskState, count: int, exclude: set) -> list[Config]:
        space = state.space
        if len(space) <= ENUMERATE_LIMIT:
            pool = [c for c in space.configs() if c not in state.measured and c not in exclude]
            self.rng.shuffle(pool)
            return pool[:count]
        out: list[Config] = []
        chosen: set[Config] = set()     # (a list's `in` made this quadratic in count)
        for _ in range(count * 20):
            c = space.sample(self.rng)
            if c not in state.measured and c not in exclude and c not in chosen:
                out.append(c)
                chosen.add(c)
                if len(out) == count:
                    break
        return out

    def _first(self, state: TaskState, count: int, exclude: set) -> list[Config]:
        """What to measure before the model is trained: the default's one-knob neighbours
        (in a random order, as many as fit), then random configs."""
        near = [c for c in state.space.neighbours(state.space.default())
                if c not in state.measured and c not in exclude]
        self.rng.shuffle(near)
        out = near[:count]
        return out + self._random(state, count - len(out), exclude | set(out))

    def _score(self, state: TaskState, configs: list[Config]) -> list[float]:
        feats, keep = [], []
        for c in configs:
            f = state.featurize(c)
            if f is not None:
                feats.append(f)
                keep.append(c)
        scores = dict(zip(keep, self.model.predict(np.stack(feats)))) if feats else {}
        return [float(scores.get(c, -np.inf)) for c in configs]

    def _evolve(self, state: TaskState) -> list[tuple[float, Config]]:
        space = state.space
        if len(space) <= ENUMERATE_LIMIT:
            pool = self._unmeasured(state, space.configs())
            return sorted(zip(self._score(state, pool), pool), key=lambda x: -x[0])
        ranked = sorted(((lat, c) for c, lat in state.measured.items() if lat),
                        key=lambda x: x[0])
        parents = [c for _, c in ranked[:self.parents]] or [space.default()]
        population = [space.sample(self.rng) for _ in range(self.population // 2)]
        scored: dict[Config, float] = {}
        for _ in range(self.generations):
            children = list(population)
            while len(children) < self.population:
                if self.rng.random() < 0.5 and len(parents) > 1:
                    a, b = self.rng.sample(parents, 2)
                    child = space.crossover(a, b, self.rng)
                    if self.rng.random() < 0.5:
                        child = space.mutate(child, self.rng)
                else:
                    child = space.mutate(self.rng.choice(parents), self.rng,
                                         knobs=self.rng.choice((1, 1, 2)))
                children.append(child)
            fresh = [c for c in self._unmeasured(state, children) if c not in scored]
            scored.update(zip(fresh, self._score(state, fresh)))
            best = sorted(scored.items(), key=lambda x: -x[1])
            population = [c for c, _ in best[:self.population // 2]]
            parents = population[:self.parents] + parents[:2]
        return sorted(((s, c) for c, s in scored.items()), key=lambda x: -x[0])

    def propose(self, state: TaskState, batch: int) -> list[Config]:
        """Up to ``batch`` unmeasured legal configs (the default first); [] once the space is
        exhausted."""
        out: list[Config] = []
        default = state.space.default()
        if default not in state.measured:
            out.append(default)
        if not self.model.trained:
            out += self._first(state, batch - len(out), set(out))
        else:
            greedy = max(0, batch - len(out) - int(round(batch * self.epsilon)))
            seen = {state.features[c].tobytes() for c in state.measured
                    if state.features.get(c) is not None}
            for _, c in self._evolve(state):
                if greedy <= 0:
                    break
                features = state.featurize(c)
                key = features.tobytes() if features is not None else None
                if c not in out and key not in seen:
                    out.append(c)
                    seen.add(key)
                    greedy -= 1
            out += self._random(state, batch - len(out), set(out))
        if not out:
            state.exhausted = True
        return out[:batch]


class RandomSearch(EvolutionarySearch):
    """Random unmeasured configs (the default first): the baseline the guided search beats."""

    def __init__(self, seed: int = 0):
        super().__init__(CostModel(seed), seed)

    def _first(self, state: TaskState, count: int, exclude: set) -> list[Config]:
        return self._random(state, count, exclude)


class TaskScheduler:
    """Picks the task whose next batch promises the largest end-to-end gain: its weight x
    best latency x the fraction the next batch may still take off. That fraction is the
    recent improvement, or, where a task has stopped improving, a floor that shrinks as its
    trials grow (a new candidate beats the n measured before it about once in n): without
    the shrinking, the heaviest stalled task took every batch (ResNet-10, 12 minutes: 832
    of 3213 trials on one 3x3 conv for 1.03x, while a 1x1 conv at 1.14x after 24 trials got
    no more)."""

    def __init__(self, batch: int, window: int | None = None, floor: float = 0.02):
        self.batch = batch
        self.window = window or 2 * batch
        self.floor = floor

    def expected_gain(self, state: TaskState) -> float:
        if state.exhausted:
            return 0.0
        weight = state.task.weight
        best = state.best_latency or state.task.default_latency or 1e-3
        left = len(state.space) - len(state.measured)
        if left <= 0:
            return 0.0
        if state.trials < self.window:
            fraction = 0.5          # barely explored: optimistic
        else:
            before = state.history[-self.window]
            recent = (before - state.history[-1]) / before if math.isfinite(before) else 0.5
            share_left = left / max(1, len(state.space))
            stalled = self.floor * min(1.0, share_left * 4) * self.window / state.trials
            fraction = max(recent, stalled)
        return weight * best * fraction

    def next_task(self, states: list[TaskState]) -> TaskState | None:
        live = [s for s in states if self.expected_gain(s) > 0]
        if not live:
            return None
        return max(live, key=self.expected_gain)


def config_key(config) -> str:
    return json.dumps(dict(config), sort_keys=True)

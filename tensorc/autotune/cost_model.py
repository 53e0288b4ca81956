"""The cost model: XGBoost ranks a task's candidates from their loop-IR features.

Labels are throughputs normalized per task (the task's best measured latency divided by the
candidate's: 1.0 is the best seen, failures 0), so tasks of very different sizes train one
model. The objective is ``rank:pairwise`` with one query group per task (only the order of a
task's candidates matters to the search) or ``reg:squarederror`` on the same labels. The
model is refit from every measurement after each measured batch and can start from a saved
model (``load``), which it uses until it has data of its own.

>>> model = XGBoostCostModel()
>>> model.update(features, latencies, groups)       # arrays of measured candidates
>>> model.predict(candidate_features)               # higher is faster
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from tensorc.errors import TensorcError

MIN_TRAINING = 8        # measurements before the model ranks anything


class CostModel:
    """Scores candidates: higher means expected faster. The base class knows nothing (random
    scores), which is what random search uses."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    @property
    def trained(self) -> bool:
        return False

    def update(self, features: np.ndarray, latencies: Sequence[float | None],
               groups: Sequence[str]) -> None:
        pass

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self.rng.random(len(features))


def normalized_throughput(latencies: Sequence[float | None], groups: Sequence[str]
                          ) -> np.ndarray:
    """Each candidate's best latency of its group / its latency (failures 0)."""
    best: dict[str, float] = {}
    for lat, g in zip(latencies, groups):
        if lat:
            best[g] = min(best.get(g, lat), lat)
    return np.array([best[g] / lat if lat else 0.0 for lat, g in zip(latencies, groups)],
                    np.float32)


class XGBoostCostModel(CostModel):
    """Gradient-boosted trees over :mod:`features` vectors."""

    def __init__(self, objective: str = "rank:pairwise", rounds: int = 60, seed: int = 0,
                 threads: int = 1):
        super().__init__(seed)
        if objective not in ("rank:pairwise", "reg:squarederror"):
            raise TensorcError(f"unknown cost model objective {objective!r}: use "
                               f"rank:pairwise or reg:squarederror")
        self.objective = objective
        self.rounds = rounds
        self.seed = seed
        self.threads = threads
        self.booster = None
        self.samples = 0

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def _params(self) -> dict:
        params = {"objective": self.objective, "max_depth": 6, "eta": 0.2,
                  "min_child_weight": 1, "subsample": 1.0, "lambda": 1.0,
                  "nthread": self.threads, "seed": self.seed, "verbosity": 0}
        if self.objective == "rank:pairwise":
            params["eval_metric"] = "ndcg"
        return params

    def update(self, features, latencies, groups) -> None:
        """Refit from all measurements so far (``features[i]`` measured ``latencies[i]``
        seconds or failed (None); ``groups[i]`` names its task)."""
        import xgboost as xgb  # most of a second to import: measure workers never need it
        features = np.asarray(features, np.float32)
        if len(features) < MIN_TRAINING:
            return
        labels = normalized_throughput(latencies, groups)
        order = np.argsort(np.asarray(groups, dtype=object).astype(str), kind="stable")
        features, labels = features[order], labels[order]
        sorted_groups = [groups[i] for i in order]
        dtrain = xgb.DMatrix(features, label=labels)
        if self.objective == "rank:pairwise":
            sizes = []
            for k, g in enumerate(sorted_groups):
                if k == 0 or g != sorted_groups[k - 1]:
                    sizes.append(0)
                sizes[-1] += 1
            dtrain.set_group(sizes)
        else:
            # throughput-weighted: the fast candidates' errors count most
            dtrain.set_weight(np.maximum(labels, 0.05))
        self.booster = xgb.train(self._params(), dtrain, num_boost_round=self.rounds)
        self.samples = len(features)

    def predict(self, features) -> np.ndarray:
        import xgboost as xgb  # most of a second to import: measure workers never need it
        features = np.asarray(features, np.float32)
        if self.booster is None:
            return super().predict(features)
        trained_on = self.booster.num_features()
        if features.ndim == 2 and features.shape[1] != trained_on:
            raise TensorcError(f"the cost model was trained on {trained_on} features per "
                               f"candidate, and these have {features.shape[1]} (a model saved "
                               f"by another tensorc version?): tune without it, or retrain it")
        return self.booster.predict(xgb.DMatrix(features))

    def save(self, path: str | Path) -> None:
        if self.booster is None:
            raise TensorcError("the cost model has not been trained: nothing to save")
        self.booster.save_model(str(path))

    def load(self, path: str | Path) -> XGBoostCostModel:
        import xgboost as xgb  # most of a second to import: measure workers never need it
        try:
            booster = xgb.Booster()
            booster.load_model(str(path))
        except (xgb.core.XGBoostError, OSError) as exc:
            raise TensorcError(f"cannot load the cost model {path}: {exc}") from None
        self.booster = booster
        return self


def pairwise_accuracy(scores: Sequence[float], latencies: Sequence[float]) -> float:
    """The fraction of candidate pairs with different latencies whose scores order them
    right (higher score, lower latency)."""
    right = total = 0
    n = len(scores)
    for i in range(n):
        for j in range(i + 1, n):
            if latencies[i] == latencies[j]:
                continue
            total += 1
            faster = latencies[i] < latencies[j]
            if (scores[i] > scores[j]) == faster and scores[i] != scores[j]:
                right += 1
    return right / total if total else 1.0


def top_k_score(scores: Sequence[float], latencies: Sequence[float], k: int) -> float:
    """Best measured latency overall / best latency among the model's top-k picks (1.0: the
    model's picks include the fastest)."""
    order = np.argsort(-np.asarray(scores))[:k]
    return float(min(latencies) / min(latencies[i] for i in order))

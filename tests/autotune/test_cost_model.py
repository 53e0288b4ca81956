"""The XGBoost cost model on synthetic data: it learns an order, saves and loads."""
from __future__ import annotations

import numpy as np
import pytest

from tensorc.autotune.cost_model import XGBoostCostModel, normalized_throughput, \
    pairwise_accuracy, top_k_score
from tensorc.errors import TensorcError


def _synthetic(rng, tasks: int, per_task: int):
    feats, lats, groups = [], [], []
    for t in range(tasks):
        x = rng.random((per_task, 6)).astype("float32")
        # latency grows with feature 0, falls with feature 1, scaled per task
        lat = (1.0 + 3 * x[:, 0] - 2 * x[:, 1] + 2.5) * (t + 1) * 1e-4
        feats.append(x)
        lats += list(lat)
        groups += [f"task{t}"] * per_task
    return np.concatenate(feats), lats, groups


@pytest.mark.parametrize("objective", ["rank:pairwise", "reg:squarederror"])
def test_model_ranks_held_out_candidates(objective, tmp_path):
    rng = np.random.default_rng(0)
    feats, lats, groups = _synthetic(rng, 4, 60)
    model = XGBoostCostModel(objective=objective)
    assert not model.trained
    model.update(feats, lats, groups)
    assert model.trained
    test_x, test_lat, _ = _synthetic(rng, 1, 40)
    scores = model.predict(test_x)
    assert pairwise_accuracy(scores, test_lat) > 0.8
    assert top_k_score(scores, test_lat, 5) > 0.9
    path = tmp_path / "model.json"
    model.save(path)
    again = XGBoostCostModel(objective=objective).load(path)
    np.testing.assert_allclose(again.predict(test_x), scores, rtol=1e-6)


def test_labels_are_throughput_per_task_and_failures_zero():
    labels = normalized_throughput([2.0, 1.0, None, 10.0], ["a", "a", "a", "b"])
    np.testing.assert_allclose(labels, [0.5, 1.0, 0.0, 1.0])


def test_untrained_model_gives_random_scores_and_pairwise_accuracy_is_exact():
    model = XGBoostCostModel()
    model.update(np.zeros((3, 4)), [1.0, 2.0, 3.0], ["a"] * 3)     # too few: stays untrained
    assert not model.trained
    assert pairwise_accuracy([3, 2, 1], [1.0, 2.0, 3.0]) == 1.0
    assert pairwise_accuracy([1, 2, 3], [1.0, 2.0, 3.0]) == 0.0


def test_a_model_trained_on_other_features_says_so(tmp_path):
    rng = np.random.default_rng(1)
    feats, lats, groups = _synthetic(rng, 2, 40)
    model = XGBoostCostModel()
    model.update(feats, lats, groups)
    path = tmp_path / "model.json"
    model.save(path)
    again = XGBoostCostModel().load(path)
    with pytest.raises(TensorcError, match="trained on 6 features per candidate, and these "
                                           "have 7"):
        again.predict(np.zeros((3, 7), np.float32))

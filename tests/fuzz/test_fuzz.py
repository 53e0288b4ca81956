"""A short fuzzing run (part of ``make test``): mutated seed models either fail with a
TensorcError or give onnxruntime's answer; ``make fuzz`` runs the long campaign."""
from __future__ import annotations

import random

import numpy as np

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.harness import FAILURES, Worker, check_model
from fuzz.mutate import mutate
from fuzz.seeds import seed_models

SEEDS = seed_models()


@pytest.fixture(scope="module")
def worker():
    w = Worker(timeout=60)
    yield w
    w.close()


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_matches_onnxruntime(name):
    """Each seed compiles and matches onnxruntime: mutants start from working models."""
    result = check_model(SEEDS[name].SerializeToString())
    assert result["outcome"] == "match", result


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SEEDS)), rng=st.randoms(use_true_random=False))
def test_mutants_keep_the_contract(worker, name: str, rng: random.Random):
    mutant, done = mutate(SEEDS[name], rng)
    result = worker.check(mutant.SerializeToString())
    assert result["outcome"] not in FAILURES, (name, done, result)


def test_outcomes_that_are_no_rejection():
    """What onnxruntime fails on for its own reasons is not counted as a model tensorc should
    refuse: an opset it has no kernel for (a documented leniency), an input too large to
    feed (nothing compared)."""
    from onnx import helper

    from fuzz.seeds import _model
    n = helper.make_node
    concat = _model("c", [n("Concat", ["x", "x"], ["y"], axis=0, name="concat")],
                    [("x", 1, [2, 3])], [("y", 1)], opset=1)
    result = check_model(concat.SerializeToString())
    assert result["outcome"] == "documented", result
    assert "no kernel for the op at the model's opset" in result["detail"]
    wide = _model("w", [n("Relu", ["x"], ["y"], name="relu")], [("x", 1, [5000])], [("y", 1)])
    assert check_model(wide.SerializeToString())["outcome"] == "unchecked"
    empty = _model("e", [n("Relu", ["x"], ["y"], name="relu")], [("x", 1, [0, 3])],
                   [("y", 1)])
    assert check_model(empty.SerializeToString())["outcome"] == "match"


def test_documented_leniencies_are_classified_as_such():
    from onnx import helper

    from fuzz.seeds import _model
    n = helper.make_node
    pad = _model("p", [n("Pad", ["x", "p"], ["y"], mode="reflect", name="pad")],
                 [("x", 1, [2, 1])], [("y", 1)], [("p", np.array([0, 1, 0, 1], np.int64))])
    result = check_model(pad.SerializeToString())
    assert result["outcome"] == "documented" and "Pad mode=reflect" in result["detail"]
    pool = _model("m", [n("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], name="pool")],
                  [("x", 1, [1, 0, 4, 4])], [("y", 1)])
    result = check_model(pool.SerializeToString())
    assert result["outcome"] == "documented" and "zero-size tensors" in result["detail"]


def test_half_precision_outputs_compare_within_their_precision():
    from fuzz.harness import _same
    want = {"y": np.array([0.3, 1.0, 2.0], np.float16)}
    close = {"y": (want["y"].astype(np.float32) + [4.9e-4, 9.7e-4, 0]).astype(np.float16)}
    assert _same(want, close) is None
    assert _same(want, {"y": np.array([0.31, 1.0, 2.0], np.float16)}) is not None

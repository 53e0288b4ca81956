"""A short fuzzing run (part of ``make test``): mutated seed models either fail with a
TensorcError or give onnxruntime's answer; ``make fuzz`` runs the long campaign."""
from __future__ import annotations

import random

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

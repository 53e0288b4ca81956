"""Measurement survives candidates that crash, hang, fail or compute the wrong answer."""
from __future__ import annotations

import pytest

from tensorc.autotune.measure import Candidate, LocalExecutor, MeasureOptions, measure
from tensorc.autotune.space import extract_tasks


@pytest.fixture(scope="module")
def matmul_task(tiny_matmul):
    (task,) = extract_tasks(tiny_matmul, measure=False)
    return task


def test_crashing_and_hanging_candidates_are_recorded_and_tuning_goes_on(matmul_task):
    task = matmul_task
    default = task.space().default()
    options = MeasureOptions(build_timeout=4, run_timeout=3, repeats=3,
                             min_repeat_seconds=0.001, num_threads=1)
    hooks = ["run_crash", "run_hang", "build_crash", "build_hang", "build_error",
             "wrong_answer", "run_oom", None]
    with LocalExecutor(build_workers=2) as executor:
        results = measure(executor, [Candidate(task, default, h) for h in hooks], options)
        # the workers that died or were killed are replaced: a second round works
        (again,) = measure(executor, [Candidate(task, default)], options)
    errors = [r.error for r in results]
    assert errors == ["crash", "run_timeout", "crash", "build_timeout", "build_error",
                      "wrong_answer", "run_error", None]
    assert "SIGSEGV" in results[0].message
    assert "out of memory" in results[6].message
    good = results[-1]
    assert good.latency and good.latency > 0 and good.trace and good.features is not None
    assert again.error is None and again.latency > 0

"""Measurement survives candidates that crash, hang, fail or compute the wrong answer."""
from __future__ import annotations

import pytest

from tensorc.autotune.measure import Candidate, LocalExecutor, MeasureOptions, measure, retime
from tensorc.autotune.task import extract_tasks


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


class _Counting(LocalExecutor):
    """A local executor that remembers what it was asked to build and in what order it ran
    the jobs (by their entry points' object code)."""

    def __init__(self):
        super().__init__(build_workers=1)
        self.built, self.ran = 0, []

    def build(self, candidates, options):
        self.built += len(candidates)
        return super().build(candidates, options)

    def run(self, jobs, options):
        self.ran.append([job.object_code for job in jobs])
        return super().run(jobs, options)


def test_retime_builds_once_and_runs_the_candidates_in_turn(matmul_task):
    task = matmul_task
    space = task.space()
    configs = [space.default(), next(c for c in space.configs() if c != space.default())]
    options = MeasureOptions(repeats=2, min_repeat_seconds=0.001, num_threads=1)
    candidates = [Candidate(task, c) for c in configs] + \
        [Candidate(task, configs[0], "build_error")]
    with _Counting() as executor:
        timed = retime(executor, candidates, options, rounds=3)
    assert executor.built == 3                         # once each, not once a round
    assert [len(runs) for runs in timed] == [3, 3, 3]
    assert all(r.error is None and r.latency > 0 for runs in timed[:2] for r in runs)
    assert all(r.error == "build_error" for r in timed[2])
    # each round runs both, starting one later: neither always runs first
    first, second = executor.ran[0]
    assert executor.ran == [[first, second], [second, first], [first, second]]

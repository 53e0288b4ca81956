"""The tuning log: round trip, torn lines, resume without re-measuring, apply-best at
compile time for the same target and version only."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import tensorc
from tensorc.autotune.measure import MeasureOptions
from tensorc.autotune.records import TuningLog, TuningLogNote, make_record
from tensorc.autotune.search import RandomSearch
from tensorc.autotune.task import extract_tasks
from tensorc.autotune.tuner import Tuner


@pytest.fixture(scope="module")
def conv_tasks(tiny_conv):
    return extract_tasks(tiny_conv, measure=False)


def _write(log, task, config, latency=None, error=None, **changes):
    record = make_record(task, config, [], latency, error)
    record.update(changes)
    log.append(record)
    return record


def test_round_trip_skips_a_torn_last_line(tmp_path, conv_tasks):
    task = conv_tasks[0]
    log = TuningLog(tmp_path / "t.jsonl")
    first = _write(log, task, task.space().default(), latency=1e-3)
    _write(log, task, task.space().default(), error="crash")
    with open(log.path, "a") as f:
        f.write('{"workload": "abc", "conf')           # a kill in mid-write
    records = list(log.records())
    assert len(records) == 2
    assert records[0] == json.loads(json.dumps(first))
    assert records[1]["error"] == "crash" and records[1]["latency"] is None
    assert records[0]["target"] == task.target and "-mattr=" in task.target


def test_compile_applies_the_best_record_of_this_target_and_version(tmp_path, tiny_conv,
                                                                    conv_tasks):
    conv = next(t for t in conv_tasks if t.ops[0] == "conv")
    space = conv.space()
    configs = list(space.configs())
    slow, fast = configs[0], configs[-1]
    assert fast != space.default()
    log = TuningLog(tmp_path / "t.jsonl")
    _write(log, conv, slow, latency=2e-3)
    _write(log, conv, fast, latency=1e-3)
    _write(log, conv, slow, latency=1e-5, target="llvm -mcpu=other")    # other machine
    _write(log, conv, slow, latency=1e-5, tensorc="0.0.1")              # other version
    _write(log, conv, slow, error="crash")
    best = log.best_configs(tensorc.Target.host())
    assert best.best[conv.workload]["config"] == dict(fast)
    assert best.other_records == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = tensorc.compile(tiny_conv, tuning_log=log.path)
    notes = [w for w in caught if issubclass(w.category, TuningLogNote)]
    assert len(notes) == 1      # one note, not one per kernel
    # every other kernel with knobs has no record: the softmax where it has a default to tune
    # from (rows of 12 on AVX2, not on AVX-512: rows shorter than a vector, no knobs), and on
    # AVX2 the layout transforms around the convs (8 channels fill a block of 8 there, not
    # AVX-512's 16); a kernel without knobs is not counted
    tunable = [t for t in conv_tasks if len(t.space()) > 1]
    assert conv in tunable
    if len(tunable) > 1:
        assert f"{len(tunable) - 1} of {len(tunable)} kernels" in str(notes[0].message)
    else:
        assert "no usable record" not in str(notes[0].message)
    assert "2 records of another target or tensorc version" in str(notes[0].message)
    assert mod.info["tuning"]["tuned_kernels"] == 1
    x = np.random.default_rng(0).standard_normal((1, 8, 12, 12)).astype("float32")
    plain = tensorc.compile(tiny_conv)
    np.testing.assert_allclose(mod.run({"x": x})["y"], plain.run({"x": x})["y"],
                               rtol=1e-4, atol=1e-5)


def test_a_record_that_no_longer_fits_its_space_falls_back_to_the_default(tmp_path,
                                                                          tiny_conv,
                                                                          conv_tasks):
    conv = next(t for t in conv_tasks if t.ops[0] == "conv")
    log = TuningLog(tmp_path / "t.jsonl")
    _write(log, conv, {"filter_tile": 7777, "parallel": True}, latency=1e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = tensorc.compile(tiny_conv, tuning_log=log.path)
    assert mod.info["tuning"]["rejected_configs"] == 1
    assert mod.info["tuning"]["tuned_kernels"] == 0
    assert any("no longer fit" in str(w.message) for w in caught)


def test_a_record_missing_a_knob_takes_its_default(tmp_path, tiny_conv, conv_tasks):
    """A log written before a knob joined a space (the restructure made single-value knobs
    explicit) still applies: the missing knob takes the value the default schedule picks."""
    conv = next(t for t in conv_tasks if t.ops[0] == "conv")
    space = conv.space()
    default = space.default()
    fast = next(c for c in space.configs() if c != default)
    dropped = next(k for k in fast if fast[k] == default[k])
    old = {k: v for k, v in fast.items() if k != dropped}
    log = TuningLog(tmp_path / "t.jsonl")
    _write(log, conv, old, latency=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = tensorc.compile(tiny_conv, tuning_log=log.path)
    assert mod.info["tuning"]["tuned_kernels"] == 1
    assert mod.info["tuning"]["rejected_configs"] == 0
    assert dict(conv.schedule(space.validate({**default, **old})).attrs["config"]) == dict(fast)
    x = np.random.default_rng(0).standard_normal((1, 8, 12, 12)).astype("float32")
    np.testing.assert_allclose(mod.run({"x": x})["y"], tensorc.compile(tiny_conv).run(
        {"x": x})["y"], rtol=1e-4, atol=1e-5)


def test_confirmed_records_win_over_lucky_single_measurements(tmp_path, conv_tasks):
    """A run's confirmation re-times its best config beside the default; a compile takes the
    faster of those two, even where the best's search measurement was lower than both."""
    conv = next(t for t in conv_tasks if t.ops[0] == "conv")
    space = conv.space()
    lucky = next(c for c in space.configs() if c != space.default())
    log = TuningLog(tmp_path / "t.jsonl")
    _write(log, conv, space.default(), latency=2e-3)
    _write(log, conv, lucky, latency=1e-3)                    # a lucky sample
    assert log.best_configs(tensorc.Target.host()).best[conv.workload]["config"] == dict(lucky)
    log.append(make_record(conv, space.default(), [], 1.8e-3, confirmed=True))
    log.append(make_record(conv, lucky, [], 1.9e-3, confirmed=True))
    best = log.best_configs(tensorc.Target.host()).best[conv.workload]
    assert best["config"] == dict(space.default()) and best["confirmed"]


def test_records_of_another_thread_count_are_not_applied(tmp_path, tiny_conv, conv_tasks):
    """A config's speed depends on the threads it runs on (one block of column panels is
    fast on one thread and idles a second): a compile takes the records timed on its own
    thread count, and records that do not say (older logs)."""
    conv = next(t for t in conv_tasks if t.ops[0] == "conv")
    configs = list(conv.space().configs())
    log = TuningLog(tmp_path / "t.jsonl")
    _write(log, conv, configs[0], latency=2e-3, threads=2)
    _write(log, conv, configs[-1], latency=1e-3, threads=1)
    on_two = log.best_configs(tensorc.Target.host(), threads=2)
    assert on_two.best[conv.workload]["config"] == dict(configs[0])
    assert on_two.other_threads == 1
    assert log.best_configs(tensorc.Target.host(), threads=1).best[conv.workload][
        "config"] == dict(configs[-1])
    assert log.best_configs(tensorc.Target.host()).best[conv.workload]["config"] == \
        dict(configs[-1])                                # no thread count asked: any
    assert [r["threads"] for r in log.matching(conv.target, threads=2)] == [2]

    only_one = TuningLog(tmp_path / "one.jsonl")
    _write(only_one, conv, configs[-1], latency=1e-3, threads=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = tensorc.compile(tiny_conv, tuning_log=only_one.path, num_threads=2)
    (note,) = [str(w.message) for w in caught if issubclass(w.category, TuningLogNote)]
    assert "1 records timed on another thread count were not applied" in note
    assert "--threads 2" in note
    assert mod.info["tuning"]["tuned_kernels"] == 0
    assert mod.info["tuning"]["other_thread_count_records"] == 1


def test_cold_cache_records_win_and_resume_keeps_the_modes_apart(tmp_path, conv_tasks):
    """Latencies timed after a cache flush per call (``tune --cold-cache``) are not
    comparable with hot ones: a compile applies a workload's cold records before its hot ones
    however fast, and a resumed run takes only the records of its own mode."""
    conv = next(t for t in conv_tasks if t.ops[0] == "conv")
    configs = list(conv.space().configs())
    log = TuningLog(tmp_path / "t.jsonl")
    _write(log, conv, configs[0], latency=1e-4)                    # hot, faster
    log.append(make_record(conv, configs[-1], [], 5e-4, cold=True))
    best = log.best_configs(tensorc.Target.host()).best[conv.workload]
    assert best["config"] == dict(configs[-1]) and best["cold"]
    assert [r["config"] for r in log.matching(conv.target, cold=True)] == [dict(configs[-1])]
    assert [r["config"] for r in log.matching(conv.target, cold=False)] == [dict(configs[0])]
    assert len(log.matching(conv.target)) == 2
    for cold, latency in ((False, 1e-4), (True, 5e-4)):
        tuner = Tuner([conv], log.path, executor=object(), search="random",
                      options=MeasureOptions(num_threads=2, flush_cache=cold))
        assert tuner.resume() == 1
        assert tuner.states[0].best_latency == latency


def test_a_missing_log_is_an_error_that_names_it(tmp_path, tiny_conv):
    with pytest.raises(tensorc.TensorcError, match="does not exist"):
        tensorc.compile(tiny_conv, tuning_log=tmp_path / "none.jsonl")


def test_resume_measures_nothing_twice(tmp_path, conv_tasks):
    task = next(t for t in conv_tasks if t.ops[0] == "conv")
    log = TuningLog(tmp_path / "t.jsonl")
    measured = list(task.space().configs())[:3]
    for k, c in enumerate(measured):
        _write(log, task, c, latency=(k + 1) * 1e-4)
    # (timed on two threads, so that the whole space is searched: see the parallel knob)
    tuner = Tuner([task], log.path, executor=object(), search="random",    # never measures
                  options=MeasureOptions(num_threads=2))
    assert tuner.resume() == 3
    state = tuner.states[0]
    assert state.best_latency == 1e-4
    # asked for the whole space (its size depends on the target: a flat conv on AVX-512,
    # a blocked one, of many more configs, on AVX2), it proposes every config but those three
    size = len(list(task.space().configs()))
    proposed = RandomSearch(seed=1).propose(state, size)
    assert proposed and not set(proposed) & set(measured)
    assert len(proposed) == size - 3

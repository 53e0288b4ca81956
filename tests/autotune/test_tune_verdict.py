"""tune's end-to-end figures (issue 38): a log recommended only when the tuned model is
faster beyond the noise, --plot drawing the confirmed figures, --time bounding the whole run,
--time 0s refused, an interrupted run saying that the log is kept and --resume continues."""
from __future__ import annotations

import time

import pytest

import tensorc
from tensorc.autotune.records import TuningLog
from tensorc.autotune.result import TaskResult, TuneResult
from tensorc.autotune.tuner import Tuner
from tensorc.autotune.verdict import Verdict
from tensorc.cli.main import main
from tensorc.cli.tune import plot_series


def _result(verdict: Verdict | None) -> TuneResult:
    # the search measured the default at 2.0 ms, then a config at 1.0 ms (a lucky single
    # measurement); timed again side by side: 2.0 against 1.9 ms
    task = TaskResult("k0_conv", "conv 3x3", 1, 10**6, 2, 0, 2.0e-3, 1.9e-3, {"a": 1},
                      [2.0e-3, 1.0e-3], confirmed=True)
    e2e = {}
    if verdict is not None:
        e2e = {"threads": 1, "default_ms": verdict.default_ms, "tuned_ms": verdict.tuned_ms,
               "verdict": verdict.to_json(), "verdict_text": verdict.words()}
    return TuneResult([task], 2, 1.0, "t.jsonl", e2e)


def test_the_log_is_recommended_only_beyond_the_noise() -> None:
    noise = _result(Verdict(10.0, 10.2, 0.98, 0.90, 1.05, 30, True)).table()
    assert "the difference is within noise: 0.98x" in noise
    assert "gives no gain beyond the noise end to end" in noise
    assert "--tuning-log" not in noise                  # no recommendation
    slower = _result(Verdict(10.0, 15.9, 0.63, 0.60, 0.66, 30, True)).table()
    assert "tuned slower: 0.63x" in slower and "makes the model slower" in slower
    assert "--tuning-log" not in slower
    faster = _result(Verdict(10.0, 8.0, 1.25, 1.20, 1.30, 30, True)).table()
    assert "tuned 1.25x faster" in faster
    assert "t.jsonl makes the model faster: tensorc compile --tuning-log t.jsonl" in faster
    assert "not timed end to end" in _result(None).table()


def test_plot_shows_the_confirmed_speedup() -> None:
    """The search's curve reaches 2.0x on a lucky measurement; the table's (confirmed) figure
    is 1.05x, and that is what the plot marks."""
    (entry,) = plot_series(_result(None))
    assert entry["search"] == [1.0, 2.0]
    assert entry["confirmed"] == pytest.approx(2.0 / 1.9)
    pytest.importorskip("matplotlib")
    from tensorc.cli.tune import plot_speedups
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        plot_speedups(_result(Verdict(10.0, 10.2, 0.98, 0.90, 1.05, 30, True)),
                      f"{folder}/p.png")


def test_time_zero_is_refused_at_once(tiny_matmul, tmp_path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("0s", "0", "-5m"):
        with pytest.raises(SystemExit) as exit_:
            main(["tune", str(tiny_matmul), f"--time={value}", "--log", str(tmp_path / "t")])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "expected a duration > 0 such as 90s, 20m or 1h" in err
        assert "does not exist" not in err
    with pytest.raises(tensorc.TensorcError, match="time budget must be positive"):
        tensorc.tune(tiny_matmul, time_budget=0, log=tmp_path / "t.jsonl")


def test_the_time_budget_bounds_the_whole_run(tiny_matmul, tmp_path) -> None:
    """--time 60s ran 99 s: the search had the whole budget, extraction, confirmation and
    the end-to-end timing came on top."""
    budget = 15.0
    lines: list[str] = []
    start = time.monotonic()
    result = tensorc.tune(tiny_matmul, time_budget=budget, log=tmp_path / "t.jsonl",
                          threads=1, batch=4, progress=lines.append)
    elapsed = time.monotonic() - start
    assert elapsed < budget + 2.5, (elapsed, lines)
    assert result.trials >= 1 and result.seconds == pytest.approx(elapsed, abs=0.5)
    if result.end_to_end:       # (skipped where a slow batch left no time for it)
        assert result.end_to_end["verdict"]["pairs"] >= 5
    else:
        assert any("the time budget is spent" in line for line in lines)
    with pytest.raises(tensorc.TensorcError, match="leaves no time to search: extracting"):
        tensorc.tune(tiny_matmul, time_budget=1.0, log=tmp_path / "u.jsonl", threads=1)


def test_an_interrupted_tune_keeps_the_log_and_says_how_to_resume(
        tiny_matmul, tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    measure = Tuner._measure
    calls = []

    def interrupted_after_one_batch(self, state, configs):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        measure(self, state, configs)

    monkeypatch.setattr(Tuner, "_measure", interrupted_after_one_batch)
    log = tmp_path / "t.jsonl"
    args = ["tune", str(tiny_matmul), "--trials", "8", "--batch", "4", "--threads", "1",
            "--log", str(log), "--no-end-to-end"]
    assert main(args) == 130
    err = capsys.readouterr().err
    assert f"interrupted: {log} keeps every measurement taken so far" in err
    assert "with --resume added to continue" in err
    assert f"tensorc compile {tiny_matmul} --tuning-log {log}" in err
    assert len([r for r in TuningLog(log).records() if not r.get("confirmed")]) == 4
    monkeypatch.setattr(Tuner, "_measure", measure)
    assert main([*args, "--resume"]) == 0
    assert "resumed 4 measurements" in capsys.readouterr().out
    with pytest.raises(KeyboardInterrupt) as interrupt:      # the Python API says it too
        calls.clear()
        monkeypatch.setattr(Tuner, "_measure", interrupted_after_one_batch)
        tensorc.tune(tiny_matmul, trials=8, batch=4, threads=1, log=tmp_path / "p.jsonl",
                     end_to_end=False)
    assert "keeps them all: resume=True" in "".join(interrupt.value.__notes__)

"""The end-to-end verdict of a model tuned over symbolic dims: the tuned and untuned symbolic
modules timed alternating at each tuning shape (:func:`verdict.compare_alternating`), and the
tuned configs that make it slower at one dropped.

One set of kernels serves every shape, so a config that wins at the shapes its kernel was
timed at in isolation may still lose inside the model at one of them. At a shape where no
tuned kernel runs its own schedule (each runs its small-dims variant there, which no config
changes) both modules run the same kernels, and nothing is timed. Where the tuned module is
slower at a shape (the 95% interval of the ratio default / tuned below 1), the kernels of
both modules are profiled there and each tuned kernel slower than its default is dropped (a
``slower_at_a_shape`` record: no compile applies its config again); the tuned module is
compiled again and timed again at every shape. Where it still loses, or no kernel shows the
loss, every tuned config is dropped: the log then applies none, and the model is the untuned
one.

>>> e2e = compare_symbolic_end_to_end(model, None, None, shapes, target, "tune.jsonl", 2,
...                                   tasks)
>>> [(row["shape"], row["verdict_text"]) for row in e2e["shapes"]]
[('batch=1,seq=9', 'tuned 1.08x faster (...)'), ('batch=4,seq=128', '...')]
"""
from __future__ import annotations

import time
import warnings
from typing import Callable, Mapping, Sequence

import numpy as np

from tensorc.autotune.records import TuningLog
from tensorc.autotune.shapes import feeds_at, format_shape
from tensorc.autotune.task import runs_own_schedule
from tensorc.autotune.verdict import NOISE_FLOOR, Verdict, compare_alternating
from tensorc.compiler.llvm import compile_model
from tensorc.runtime.module import default_threads
from tensorc.target import Target

ROUNDS = 2          # times the tuned module is compiled and timed before every config goes


def geomean(values: Sequence[float]) -> float:
    """The geometric mean (of latencies: each at least a nanosecond, an empty tensor's
    kernel timing at about nothing)."""
    return float(np.exp(np.mean(np.log(np.maximum(values, 1e-9)))))


def loses(verdict: Verdict) -> bool:
    """Tuned slower than default at one shape, beyond the noise (by any amount)."""
    return verdict.high < 1.0


def compare_symbolic_end_to_end(model, input_shapes, dim_ranges, shapes: list[dict],
                                target: Target, log, threads: int | None, tasks,
                                deadline: float | None = None,
                                say: Callable[[str], None] | None = None) -> dict:
    """The symbolic module compiled with default and with tuned schedules, timed alternating
    at each of ``shapes`` (each shape gets an equal share of the time left before
    ``deadline``); tuned configs that lose dropped (see the module's docstring). Returns the
    rows per shape (``shapes``), the geometric means of both sides' medians, the overall
    verdict (``faster`` at some shape and ``slower`` at none) and the dropped workloads."""
    say = say or (lambda _m: None)
    threads_used = threads or default_threads()
    by_workload = {t.workload: t for t in tasks}

    def build(configs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile_model(model, target, input_shapes, threads, configs,
                                 symbolic=True, dim_ranges=dim_ranges)

    default = build(None)
    feeds = [feeds_at(default.inputs, values, seed=0) for values in shapes]
    dropped: list[str] = []
    rows: list[dict] = []
    applied: set = set()
    tuning = None
    for attempt in range(ROUNDS):
        configs = TuningLog(log).best_configs(target, threads=threads_used)
        tuned = build(configs)
        tuning = tuned.info.get("tuning")
        applied = _tuned_workloads(configs, by_workload)
        if not applied:
            rows = []
            break
        # the shapes where some tuned kernel runs its own schedule
        differ = [any(runs_own_schedule(by_workload[w], values) for w in applied)
                  for values in shapes]
        rows, losing = _time_shapes(default, tuned, shapes, feeds, differ, deadline)
        if not losing:
            break
        culprits = _losing_kernels(default, tuned, [feeds[k] for k in losing], applied,
                                   by_workload)
        if attempt == ROUNDS - 1 or not culprits:
            culprits = applied      # no kernel shows it, or it still loses: none applies
        at = ", ".join(format_shape(shapes[k]) for k in losing)
        say(f"the tuned model is slower at {at}: dropping the tuned configs of "
            f"{len(culprits)} kernel{'s' if len(culprits) > 1 else ''}")
        _drop(log, configs, culprits, at)
        dropped.extend(sorted(culprits))
        if culprits == applied:
            applied = set()
            rows = [dict(row, dropped=True) for row in rows]
            break
    out = {"threads": threads or 0, "shapes": rows, "dropped": dropped,
           "applied_kernels": len(applied), "tuning": tuning, "onnxruntime_ms": None}
    timed = [r for r in rows if not r.get("same_kernels")]
    if timed and applied:
        out["default_ms"] = geomean([r["default_ms"] for r in timed])
        out["tuned_ms"] = geomean([r["tuned_ms"] for r in timed])
        faster = any(r["verdict"]["faster"] for r in timed)
        slower = any(r["loses"] for r in rows)
        out["verdict"] = {"faster": faster and not slower, "slower": slower}
    else:
        out["verdict"] = {"faster": False, "slower": False}
    return out


def _tuned_workloads(configs, by_workload: dict) -> set:
    """The workloads the log gives a config other than their default (a confirmed default
    applies too, and changes nothing)."""
    return {w for w in configs.applied if w in by_workload and
            dict(by_workload[w].space().default()) != configs.best[w]["config"]}


def _time_shapes(default, tuned, shapes: list[dict], feeds: list[dict], differ: list[bool],
                 deadline: float | None) -> tuple[list[dict], list[int]]:
    """Rows of the two modules timed alternating at each shape where they ``differ``, and
    the shapes where tuned loses."""
    rows, losing = [], []
    left = sum(differ)
    for k, (values, feed) in enumerate(zip(shapes, feeds)):
        if not differ[k]:
            rows.append({"shape": format_shape(values), "same_kernels": True,
                         "loses": False})
            continue
        share = None
        if deadline is not None:
            share = time.monotonic() + max(0.0, deadline - time.monotonic()) / left
        left -= 1
        verdict = compare_alternating(lambda f=feed: default.run(f),
                                      lambda f=feed: tuned.run(f), share)
        lost = loses(verdict)
        rows.append({"shape": format_shape(values), "default_ms": verdict.default_ms,
                     "tuned_ms": verdict.tuned_ms, "verdict": verdict.to_json(),
                     "verdict_text": verdict.words(), "loses": lost})
        if lost:
            losing.append(k)
    return rows, losing


def _kernel_seconds(module, feeds: Mapping) -> dict[str, float]:
    """Each kernel's time (summed over its calls) inside the module's entry, at ``feeds``."""
    profile = module.profile(feeds, seconds=0.3, min_runs=5)
    seconds: dict[str, float] = {}
    for kernel in profile.kernels:
        seconds[kernel.info.name] = seconds.get(kernel.info.name, 0.0) + kernel.seconds
    return seconds


def _losing_kernels(default, tuned, feeds: list[dict], applied: set,
                    by_workload: dict) -> set:
    """The applied workloads whose tuned kernel takes longer than its default one inside the
    model (by more than the noise floor) at any of ``feeds``."""
    culprits = set()
    for feed in feeds:
        before, after = _kernel_seconds(default, feed), _kernel_seconds(tuned, feed)
        for workload in applied:
            task = by_workload.get(workload)
            if task is None or task.name not in before or task.name not in after:
                continue
            if after[task.name] > before[task.name] * (1 + NOISE_FLOOR):
                culprits.add(workload)
    return culprits


def _drop(log, configs, workloads: set, where: str) -> None:
    """Log each workload's applied config as ``slower_at_a_shape`` (its applied record with
    that error): no compile applies it again."""
    tuning_log = TuningLog(log)
    for workload in sorted(workloads):
        record = configs.best.get(workload)
        if record is None:
            continue
        dropped = {k: v for k, v in record.items() if k not in ("relative", "gflops")}
        dropped.update(latency=None, error="slower_at_a_shape", confirmed=True,
                       message=f"dropped: the tuned model was slower end to end at {where}",
                       timestamp=time.time())
        tuning_log.append(dropped)

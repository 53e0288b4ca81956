"""The tuner: tasks -> scheduler -> search -> measurement -> log, until the budget is spent.

A model whose input dims stay symbolic (no ``input_shapes``, or some dims left open) is tuned
as ``tensorc.compile`` builds it, one kernel per workload for every shape: each candidate is
built once over the symbolic dims and timed at every tuning shape (``tune_shapes``, or a
default set across each dim's range, ``autotune.shapes``), scored by the geometric mean of
its times. The confirmation times the fastest beside the default at every shape and rejects
a config slower than the default at any of them; the end-to-end verdict compares the tuned
and untuned symbolic modules at each shape and drops the tuned configs of a kernel that
loses at one (records of error class ``slower_at_a_shape``), so the log never makes the
model slower at a tuning shape.

>>> result = tune("resnet.onnx", {"input": (1, 3, 224, 224)}, trials=200, log="tune.jsonl")
>>> print(result.table())
>>> mod = tensorc.compile("resnet.onnx", tuning_log="tune.jsonl")
>>> tune("bert.onnx", trials=200, tune_shapes=[{"batch": 1, "seq": 9}, {"batch": 4, "seq": 128}])
"""
from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from tensorc.autotune.cluster import DaskExecutor
from tensorc.autotune.cost_model import CostModel, XGBoostCostModel
from tensorc.autotune.measure import (
    Candidate, Executor, LocalExecutor, MeasureOptions, measure, retime,
)
from tensorc.autotune.records import TRANSIENT_ERRORS, TuningLog, make_record, tensorc_version
from tensorc.autotune.result import TaskResult, TuneResult
from tensorc.autotune.search import (
    EvolutionarySearch, RandomSearch, TaskScheduler, TaskState,
)
from tensorc.autotune.shapes import format_shape, open_dims
from tensorc.autotune.symbolic_verdict import compare_symbolic_end_to_end, geomean
from tensorc.autotune.task import Task, extract_symbolic_tasks, extract_tasks
from tensorc.autotune.verdict import compare_alternating
from tensorc.compiler.llvm import compile_model
from tensorc.errors import TensorcError
from tensorc.frontend.model import import_model, with_input_values
from tensorc.ops.space import Config, SearchSpace
from tensorc.reference import onnxruntime_session, random_inputs, run_session
from tensorc.runtime.module import default_threads
from tensorc.target import Target

Progress = Callable[[str], None]


def _searched_space(space: SearchSpace, threads: int) -> SearchSpace:
    """The part of a task's space that measurements on ``threads`` threads can tell apart:
    timed on one thread, the ``parallel`` knob only adds noise, and a config that won with
    it off by chance ran a kernel on one thread in a 2-thread model (ResNet tuned on one
    thread: 7.1 -> 8.7 ms at two), so there it keeps its default (also each other
    algorithm's, ``<algorithm>.parallel``)."""
    parallel = {k: knob.default for k, knob in space.knobs.items()
                if k == "parallel" or k.endswith(".parallel")}
    if threads == 1 and parallel:
        return space.pinned(**parallel)
    return space


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``20m``, ``1.5h``."""
    units = {"s": 1, "m": 60, "h": 3600}
    text = text.strip().lower()
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise TensorcError(f"cannot read the duration {text!r}: use e.g. 90s, 20m, 1h") from None


CONFIRM_ROUNDS = 3      # times a task's best and default configs are timed again at the end
CONFIRM_TOP = 3         # how many of a task's fastest-measured configs are timed again


class Tuner:
    """Tunes a list of tasks through an executor; see :func:`tune`."""

    def __init__(self, tasks: Sequence[Task], log: str | Path | None = None,
                 executor: Executor | None = None, options: MeasureOptions | None = None,
                 model: CostModel | None = None, search: str = "xgboost", batch: int = 8,
                 seed: int = 0, progress: Progress | None = None, build_workers: int = 2):
        if not tasks:
            raise TensorcError("nothing to tune: the model has no kernels")
        self.tasks = list(tasks)
        self.log = TuningLog(log) if log is not None else None
        self.options = options or MeasureOptions()
        self._own_executor = executor is None
        self.executor = executor or LocalExecutor(build_workers)
        if search == "random":
            self.model = CostModel(seed)
            self.search = RandomSearch(seed)
        elif search == "xgboost":
            self.model = model or XGBoostCostModel(seed=seed)
            self.search = EvolutionarySearch(self.model, seed)
        else:
            raise TensorcError(f"unknown search {search!r}: use xgboost or random")
        self.batch = batch
        self.scheduler = TaskScheduler(batch)
        self.progress = progress
        self.threads = self.options.num_threads or default_threads()   # timed on
        self.states = [TaskState(t, _searched_space(t.space(), self.threads))
                       for t in self.tasks]
        self.trials = 0
        self.errors = 0
        self.resumed = 0
        self._pace = 0.0        # seconds per measurement in the last batch

    def close(self) -> None:
        if self._own_executor:
            self.executor.close()

    # resuming -----------------------------------------------------------------------------
    def resume(self) -> int:
        """Take the log's records of these tasks (same target, this tensorc version) as
        measured; returns how many."""
        if self.log is None:
            return 0
        by_workload = {s.task.workload: s for s in self.states}
        target = self.tasks[0].target
        count = 0
        for r in self.log.matching(target, tensorc_version(), self.threads,
                                   self.options.flush_cache):
            state = by_workload.get(r["workload"])
            if state is None:
                continue
            if r.get("shapes", []) != [format_shape(v) for v in state.task.shapes]:
                continue        # timed at other tuning shapes: not comparable
            if r.get("error") in TRANSIENT_ERRORS or r.get("confirmed"):
                continue        # (a confirmation is no trial of the search)
            config = Config(r["config"])
            if not state.space.is_valid(config) or config in state.measured:
                continue
            state.record(config, r["latency"] if r.get("error") is None else None,
                         r.get("trace"))
            count += 1
        self.resumed = count
        if count and self.model.trained is False:
            self._refit()
        return count

    # the loop -----------------------------------------------------------------------------
    def _refit(self) -> None:
        feats, lats, groups = [], [], []
        for state in self.states:
            for config, lat in state.measured.items():
                f = state.featurize(config) if lat else state.features.get(config)
                if f is None:
                    if lat is None:
                        continue
                    f = state.featurize(config)
                    if f is None:
                        continue
                feats.append(f)
                lats.append(lat)
                groups.append(state.task.workload)
        if feats:
            self.model.update(np.stack(feats), lats, groups)

    def _measure(self, state: TaskState, configs: list[Config]) -> None:
        task = state.task
        if state.inputs is None:
            state.inputs = task.inputs(seed=0)
            state.expected = task.reference(state.inputs)
        want_outputs = state.expected is None
        results = measure(self.executor, [Candidate(task, c) for c in configs], self.options,
                          {task.workload: state.inputs}, {task.workload: state.expected},
                          return_outputs=want_outputs)
        for r in results:
            if want_outputs and r.outputs is not None and r.config == state.space.default():
                state.expected = r.outputs     # no numpy reference: the default's output
            state.record(r.config, r.latency, r.trace, r.features)
            self.trials += 1
            if r.error:
                self.errors += 1
            if self.log is not None:
                self.log.append(make_record(task, r.config, r.trace, r.latency, r.error,
                                            r.message, r.build_seconds, r.run_seconds,
                                            r.host, threads=self.threads,
                                            cold=self.options.flush_cache,
                                            latencies=r.latencies))

    def run(self, trials: int | None = None, seconds: float | None = None,
            deadline: float | None = None, reserve: float = 0.0) -> TuneResult:
        """Measure until ``trials`` measurements or ``seconds`` have been spent (or every
        task's space is exhausted), then confirm the picks. ``deadline`` (time.monotonic())
        ends the whole run, confirmation included: the search stops early enough to leave
        the confirmation its estimated time plus ``reserve`` seconds (what the caller does
        after, e.g. the end-to-end timing)."""
        if trials is None and seconds is None and deadline is None:
            raise TensorcError("give a budget: trials= or seconds=")
        start = time.monotonic()
        if seconds is not None:
            deadline = start + seconds if deadline is None else min(deadline, start + seconds)
        done = 0
        while True:
            if trials is not None and done >= trials:
                break
            if deadline is not None and \
                    time.monotonic() + self._confirm_estimate() + reserve >= deadline:
                break
            state = self.scheduler.next_task(self.states)
            if state is None:
                break
            batch = self.batch if trials is None else min(self.batch, trials - done)
            configs = self.search.propose(state, batch)
            if not configs:
                continue
            batch_start = time.monotonic()
            self._measure(state, configs)
            self._pace = (time.monotonic() - batch_start) / len(configs)
            done += len(configs)
            self._refit()
            if self.progress:
                self.progress(self._progress_line(state, done, trials, deadline, start))
        self.confirm(deadline=None if deadline is None else deadline - reserve)
        return self.result(time.monotonic() - start)

    def _confirm_estimate(self) -> float:
        """Seconds the confirmation will take: each task tried so far has CONFIRM_TOP + 1
        configs built and timed, about a trial each at the last batch's pace (the first
        batch also starts the worker processes)."""
        tried = sum(1 for s in self.states if s.trials)
        return self._pace * (CONFIRM_TOP + 1) * tried

    def confirm(self, rounds: int = CONFIRM_ROUNDS, top: int = CONFIRM_TOP,
                deadline: float | None = None) -> None:
        """Time each task's ``top`` fastest-measured configs again beside its default,
        alternating (:func:`measure.retime`), ``rounds`` times each; the default's median
        and the fastest of the others' become the task's default and tuned latencies, and
        that config its tuned one. Each was measured once during the search, and the best of
        hundreds of noisy measurements is biased low (as is any one measurement taken while
        the machine was busy: the tuning benchmark once saw a default at 1.6x its later
        timings), so the table of default against tuned would claim speed-ups that are not
        there; and where several configs run within the noise of each other, which of them
        measured fastest is luck, so the runners-up are timed too. The medians are logged
        as confirmed records, which a compile prefers (so a default that turns out faster is
        what the model gets); they are no trials of the search, and --resume skips them.
        Past ``deadline``, the tasks left are not confirmed (their table rows say so)."""
        for state in self.states:
            if deadline is not None and time.monotonic() >= deadline:
                if self.progress and state.trials:
                    self.progress(f"not confirming {state.task.name}: the time is spent")
                continue
            default = state.space.default()
            picks = [c for c in state.top(top) if c != default]
            if not picks or state.default_latency is None:
                continue
            if self.progress:
                self.progress(f"confirming {state.task.name}: its {len(picks)} fastest "
                              "configs against the default, side by side")
            configs = [default, *picks]
            timed = retime(self.executor, [Candidate(state.task, c) for c in configs],
                           self.options, rounds, {state.task.workload: state.inputs},
                           {state.task.workload: state.expected})
            if state.task.shapes:
                self._confirm_at_shapes(state, configs, timed)
                continue
            medians = [statistics.median(r.latency for r in runs)
                       if all(r.error is None for r in runs) else None for runs in timed]
            confirmed = [(m, k) for k, m in enumerate(medians) if k and m is not None]
            if medians[0] is None or not confirmed:
                continue
            best, k = min(confirmed)
            state.confirmed = (medians[0], best, configs[k])
            if self.log is not None:
                for c, latency in zip(configs, medians):
                    if latency is not None:
                        self.log.append(make_record(state.task, c, state.traces.get(c),
                                                    latency, host=timed[0][0].host,
                                                    confirmed=True, threads=self.threads,
                                                    cold=self.options.flush_cache))

    def _confirm_at_shapes(self, state: TaskState, configs: list[Config], timed) -> None:
        """:meth:`confirm` for a kernel over symbolic dims: the median at each tuning shape
        of each config's rounds; a pick slower than the default at any shape is rejected
        (logged as ``slower_at_a_shape``, so no compile applies it), and the one with the
        least geometric mean of the others is the task's tuned config where it beats the
        default's."""
        task = state.task
        medians: list[list[float] | None] = []
        for runs in timed:
            ok = all(r.error is None and r.latencies for r in runs)
            medians.append([statistics.median(r.latencies[i] for r in runs)
                            for i in range(len(task.shapes))] if ok else None)
        base = medians[0]
        if base is None:
            return
        default_mean = geomean(base)
        kept, lost = [], []
        for k in range(1, len(configs)):
            at = medians[k]
            if at is None:
                continue
            worse = [i for i, (t, d) in enumerate(zip(at, base)) if t > d]
            if worse:
                lost.append((k, worse))
            else:
                kept.append((geomean(at), k))
        if kept:
            mean, k = min(kept)
            state.confirmed = (default_mean, mean, configs[k])
        else:           # (result() keeps the default where it is as fast)
            state.confirmed = (default_mean, default_mean, configs[0])
        if self.log is None:
            return
        host = timed[0][0].host
        common = dict(host=host, confirmed=True, threads=self.threads,
                      cold=self.options.flush_cache)
        self.log.append(make_record(task, configs[0], state.traces.get(configs[0]),
                                    default_mean, latencies=base, relative=1.0, **common))
        for mean, k in kept:
            self.log.append(make_record(task, configs[k], state.traces.get(configs[k]), mean,
                                        latencies=medians[k], relative=mean / default_mean,
                                        **common))
        for k, worse in lost:
            where = "; ".join(f"{format_shape(task.shapes[i])}: {medians[k][i] * 1e6:.2f} us "
                              f"against {base[i] * 1e6:.2f} us" for i in worse)
            self.log.append(make_record(task, configs[k], state.traces.get(configs[k]),
                                        error="slower_at_a_shape",
                                        message=f"slower than the default at {where}",
                                        latencies=medians[k], **common))

    def _progress_line(self, state: TaskState, done: int, trials, deadline, start) -> str:
        index = self.states.index(state) + 1
        best = state.best_latency
        gflops = state.task.flops / best / 1e9 if best else 0.0
        speedup = (state.default_latency / best) if best and state.default_latency else 1.0
        elapsed = time.monotonic() - start
        if deadline is not None:
            left = f"{max(0.0, deadline - time.monotonic()):.0f}s left"
        else:
            rate = elapsed / max(done, 1)
            left = f"~{rate * (trials - done):.0f}s left"
        budget = f"{done}/{trials}" if trials is not None else f"{done}"
        return (f"[{budget} trials] task {index}/{len(self.states)} {state.task.name} "
                f"({state.trials} trials): best {gflops:.2f} GFLOP/s, {speedup:.2f}x; "
                f"errors {self.errors}; {left}")

    def result(self, seconds: float = 0.0) -> TuneResult:
        tasks = []
        for s in self.states:
            config, best = s.best
            t = s.task
            default = s.default_latency or t.default_latency
            kept = False
            if s.confirmed is not None:
                default, best, config = s.confirmed
                if best >= default:     # timed side by side, the default won: it stays
                    best, config, kept = default, s.space.default(), True
            elif t.shapes and s.trials:
                # over symbolic dims only confirmed configs apply (records.best_configs)
                best, config, kept = default, s.space.default(), True
            tasks.append(TaskResult(t.name, t.description, t.weight, t.flops, s.trials,
                                    s.errors, default, best,
                                    dict(config) if config is not None else None,
                                    list(s.history), kept, s.confirmed is not None))
        return TuneResult(tasks, self.trials, seconds,
                          str(self.log.path) if self.log is not None else "")


def tune(model, input_shapes: Mapping[str, Sequence[int]] | None = None,
         target: str | Target = "llvm", trials: int | None = None,
         time_budget: float | str | None = None, log: str | Path = "tune.jsonl",
         resume: bool = False, threads: int | None = None, search: str = "xgboost",
         batch: int = 8, build_workers: int = 2, end_to_end: bool = True,
         options: MeasureOptions | None = None, executor: Executor | None = None,
         progress: Progress | None = None, seed: int = 0, cluster=None,
         input_values: Mapping[str, object] | None = None,
         tune_shapes: Sequence[Mapping[str, int]] | None = None,
         dim_ranges: Mapping[str, tuple] | None = None) -> TuneResult:
    """Tune the kernels of an ONNX model for ``target`` (this CPU) within ``trials``
    measurements or ``time_budget`` (seconds, or "20m": the wall-clock time of the whole
    run, task extraction and the end-to-end verdict included); every measurement is appended
    to ``log``, which ``tensorc.compile(..., tuning_log=log)`` applies. ``resume`` continues
    from the log without measuring anything twice; ``threads`` is the thread count kernels
    are timed (and the model run) with. ``cluster`` (a Dask scheduler address such as
    ``"tcp://scheduler:8786"``, a ``distributed.Client`` or a ``LocalCluster``) sends builds
    and measurements to the cluster's workers instead of this machine's processes (needs
    ``pip install 'tensorc[cluster]'``). ``input_values`` fixes inputs to values as in
    ``tensorc.compile`` (then give the same values to ``compile`` with the log).
    ``end_to_end`` times the model with default and with tuned schedules at the end
    (:mod:`tensorc.autotune.verdict`): ``result.end_to_end["verdict"]`` says whether the log
    makes it faster beyond the noise. An interrupt (Ctrl-C) keeps the log, which
    ``resume=True`` continues.

    Input dims that ``input_shapes`` leaves open stay symbolic (in ``dim_ranges``), as
    ``tensorc.compile`` keeps them, and the kernels are tuned at ``tune_shapes`` (dicts of
    every open dim's value, e.g. ``[{"batch": 1, "seq": 9}, {"batch": 4, "seq": 128}]``;
    by default a few across each dim's range: ``autotune.shapes.default_shapes``); compile
    with the same ``dim_ranges`` and the log. The end-to-end verdict is taken at each shape
    (``result.end_to_end["shapes"]``), and the configs of a kernel that loses at one are
    dropped from the log.

    >>> result = tensorc.tune("model.onnx", trials=64, log="tune.jsonl")
    >>> print(result.table())
    """
    started = time.monotonic()
    if trials is None and time_budget is None:
        raise TensorcError("give a tuning budget: trials=N or time_budget='20m'")
    if cluster is not None and executor is not None:
        raise TensorcError("give a cluster or an executor, not both")
    seconds = parse_duration(time_budget) if isinstance(time_budget, str) else time_budget
    if seconds is not None and not seconds > 0:
        raise TensorcError(f"the time budget must be positive, not {time_budget!r}: e.g. "
                           f"90s, 20m, 1h")
    deadline = None if seconds is None else started + seconds
    tgt = Target.from_string(target)
    model = with_input_values(model, input_values)
    options = options or MeasureOptions()
    if threads is not None:
        options.num_threads = threads
    say = progress or (lambda _m: None)
    own_executor = None
    if cluster is not None:         # first: an unreachable cluster fails before any work
        executor = own_executor = DaskExecutor(cluster)
        say(f"measuring on the {executor.describe()}")
    try:
        say("extracting tasks (compiling and profiling the model once)")
        shapes: list = []
        if _symbolic_dims(model, input_shapes, tgt, tune_shapes, dim_ranges):
            tasks, shapes = extract_symbolic_tasks(model, tune_shapes, tgt, input_shapes,
                                                   dim_ranges, True, threads)
            say(f"tuning over symbolic dims at {len(shapes)} shapes: "
                f"{'; '.join(format_shape(v) for v in shapes)}")
            if not tasks:
                raise TensorcError(
                    "nothing to tune at these shapes: at each, every kernel's dims are at "
                    "most 8, where the model runs kernels scheduled for small dims, which "
                    "no config changes; tune at larger shapes (tune_shapes=, --tune-shape)")
        else:
            tasks = extract_tasks(model, input_shapes, tgt, measure=True,
                                  num_threads=threads)
        extracted = time.monotonic() - started
        say(f"{len(tasks)} distinct kernels; search spaces of "
            f"{', '.join(str(len(t.space())) for t in tasks)} configs")
        # the end-to-end verdict compiles the model twice (about what extraction took) and
        # times it for at least a few blocks (at each tuning shape)
        reserve = 2 * extracted + 2.0 * max(1, len(shapes)) if end_to_end else 0.0
        if deadline is not None and time.monotonic() + reserve >= deadline:
            raise TensorcError(
                f"the time budget of {seconds:g} s leaves no time to search: extracting the "
                f"model's kernels took {extracted:.1f} s"
                + (f" and the end-to-end verdict needs about {reserve:.0f} s more"
                   if end_to_end else "")
                + f"; give at least {extracted + reserve + 30:.0f} s (or a trial count)")
        if not resume and Path(log).exists() and Path(log).stat().st_size:
            say(f"appending to {log} (its records are not reused without --resume)")
        tuner = Tuner(tasks, log, executor, options, search=search, batch=batch, seed=seed,
                      progress=progress, build_workers=build_workers)
        try:
            if resume:
                n = tuner.resume()
                say(f"resumed {n} measurements from {log}")
            result = tuner.run(trials, deadline=deadline, reserve=reserve)
        except KeyboardInterrupt as interrupt:
            interrupt.add_note(f"tuning interrupted after {tuner.trials} measurements; {log} "
                               f"keeps them all: resume=True (tensorc tune --resume) continues "
                               f"the search")
            raise
        finally:
            tuner.close()
    finally:
        if own_executor is not None:
            own_executor.close()
    if end_to_end and not any(t.trials for t in result.tasks):
        say("no kernel was measured: no end-to-end comparison")
    elif end_to_end and deadline is not None and time.monotonic() + reserve / 2 > deadline:
        say("not timing the model end to end: the time budget is spent (a batch of "
            "measurements ran long)")
    elif end_to_end and shapes:
        say("timing the model end to end at each tuning shape: default and tuned "
            "alternating until their medians settle")
        result.end_to_end = compare_symbolic_end_to_end(
            model, input_shapes, dim_ranges, shapes, tgt, log, threads, tasks, deadline, say)
    elif end_to_end:
        say("timing the model end to end: default and tuned alternating until their "
            "medians settle")
        result.end_to_end = compare_end_to_end(model, input_shapes, tgt, log, threads,
                                               deadline)
    result.shapes = [format_shape(v) for v in shapes]
    result.seconds = time.monotonic() - started
    return result


def _symbolic_dims(model, input_shapes, target: Target, tune_shapes, dim_ranges) -> list:
    """The open dims of ``model`` with ``input_shapes`` bound (as ``compile`` on ``target``
    keeps them; [] where every dim is bound: the static path, as it always was)."""
    if target.kind != "llvm":
        raise TensorcError(f"the autotuner tunes CPU (llvm) kernels; {target} is not one")
    if not tune_shapes and not dim_ranges:
        try:
            import_model(model, input_shapes)       # every dim bound: the static path
            return []
        except TensorcError:
            pass
    _, graph = import_model(model, input_shapes, None, dim_ranges, symbolic=True)
    names = open_dims(graph)
    if tune_shapes and not names:
        raise TensorcError("tune_shapes (--tune-shape) names dims, but the model has no "
                           "symbolic input dims (or input_shapes binds them all): tune "
                           "without them")
    return names


def compare_end_to_end(model, input_shapes, target: Target, log, threads: int | None,
                       deadline: float | None = None) -> dict:
    """The model compiled with default and with tuned schedules, timed alternating until
    their medians settle (or ``deadline`` passes): medians, and the verdict whether tuned is
    faster beyond the noise (:func:`verdict.compare_alternating`); onnxruntime's median
    beside them, when installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = compile_model(model, target, input_shapes, threads)
        configs = TuningLog(log).best_configs(target, threads=threads or default_threads())
        tuned = compile_model(model, target, input_shapes, threads, configs)
    feeds = random_inputs(default.inputs, seed=0)
    verdict = compare_alternating(lambda: default.run(feeds), lambda: tuned.run(feeds),
                                  deadline)
    out = {"threads": threads or 0, "default_ms": verdict.default_ms,
           "tuned_ms": verdict.tuned_ms, "verdict": verdict.to_json(),
           "verdict_text": verdict.words(), "tuning": tuned.info.get("tuning")}
    out["onnxruntime_ms"] = None
    if deadline is not None and time.monotonic() >= deadline:
        return out              # (onnxruntime's figure is for scale only: not past the time)
    try:
        session = onnxruntime_session(model if not isinstance(model, Path) else str(model),
                                      threads)
        out["onnxruntime_ms"] = _median_seconds(lambda: run_session(session, feeds)) * 1e3
    except Exception:           # noqa: BLE001  (onnxruntime is optional)
        pass
    return out


def _median_seconds(fn, samples: int = 9) -> float:
    """The median of a few timed calls after a warm-up (onnxruntime's figure, for scale)."""
    fn()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)

"""The tuner: tasks -> scheduler -> search -> measurement -> log, until the budget is spent.

>>> result = tune("resnet.onnx", {"input": (1, 3, 224, 224)}, trials=200, log="tune.jsonl")
>>> print(result.table())
>>> mod = tensorc.compile("resnet.onnx", tuning_log="tune.jsonl")
"""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tensorc.autotune.cost_model import CostModel, XGBoostCostModel
from tensorc.autotune.measure import (
    Candidate, Executor, LocalExecutor, MeasureOptions, measure, retime,
)
from tensorc.autotune.records import TRANSIENT_ERRORS, TuningLog, make_record, tensorc_version
from tensorc.autotune.search import (
    EvolutionarySearch, RandomSearch, TaskScheduler, TaskState,
)
from tensorc.autotune.space import Task, extract_tasks
from tensorc.errors import TensorcError
from tensorc.ops.space import Config, SearchSpace
from tensorc.runtime.module import default_threads
from tensorc.target import Target

Progress = Callable[[str], None]


@dataclass
class TaskResult:
    name: str
    description: str
    weight: int
    flops: int
    trials: int
    errors: int
    default_latency: float | None
    best_latency: float | None
    best_config: dict | None
    curve: list[float]          # best latency after each trial
    # the search's best config timed slower than the default beside it: the model keeps the
    # default (a compile prefers the faster confirmed record), and so does this result
    kept_default: bool = False

    @property
    def speedup(self) -> float:
        if not self.default_latency or not self.best_latency:
            return 1.0
        return self.default_latency / self.best_latency

    def gflops(self, latency: float | None) -> float:
        return self.flops / latency / 1e9 if latency else 0.0


def _searched_space(space: SearchSpace, threads: int) -> SearchSpace:
    """The part of a task's space that measurements on ``threads`` threads can tell apart:
    timed on one thread, the ``parallel`` knob only adds noise, and a config that won with
    it off by chance ran a kernel on one thread in a 2-thread model (ResNet tuned on one
    thread: 7.1 -> 8.7 ms at two), so there it keeps its default."""
    if threads == 1 and "parallel" in space.knobs:
        return space.pinned(parallel=space.knobs["parallel"].default)
    return space


@dataclass
class TuneResult:
    tasks: list[TaskResult]
    trials: int
    seconds: float
    log: str
    end_to_end: dict = field(default_factory=dict)     # default_ms, tuned_ms, onnxruntime_ms

    def table(self) -> str:
        header = ["task", "ops", "weight", "trials", "errors", "default ms", "tuned ms",
                  "GFLOP/s", "speed-up", "applied"]
        rows = []
        for t in self.tasks:
            rows.append([t.name, t.description[:34], str(t.weight), str(t.trials),
                         str(t.errors), _ms(t.default_latency), _ms(t.best_latency),
                         f"{t.gflops(t.best_latency):.1f}", f"{t.speedup:.2f}x",
                         "default" if t.kept_default or t.best_config is None else "tuned"])
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(r, widths)))
                 for r in [header, ["-" * w for w in widths], *rows]]
        weighted_default = sum(t.weight * (t.default_latency or 0) for t in self.tasks)
        weighted_best = sum(t.weight * (t.best_latency or t.default_latency or 0)
                            for t in self.tasks)
        lines.append(f"{self.trials} trials in {self.seconds:.0f} s; kernel time (weighted "
                     f"sum) {weighted_default * 1e3:.3f} -> {weighted_best * 1e3:.3f} ms")
        e2e = self.end_to_end
        if e2e:
            text = (f"end to end ({e2e.get('threads', 0) or 'all'} threads): default "
                    f"{e2e['default_ms']:.3f} ms, tuned {e2e['tuned_ms']:.3f} ms "
                    f"({e2e['default_ms'] / e2e['tuned_ms']:.2f}x)")
            if e2e.get("onnxruntime_ms"):
                text += f", onnxruntime {e2e['onnxruntime_ms']:.3f} ms"
            lines.append(text)
        lines.append(f"log: {self.log} (tensorc compile --tuning-log {self.log})")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"trials": self.trials, "seconds": self.seconds, "log": self.log,
                "end_to_end": self.end_to_end,
                "tasks": [{"name": t.name, "ops": t.description, "weight": t.weight,
                           "flops": t.flops, "trials": t.trials, "errors": t.errors,
                           "default_ms": _ms_value(t.default_latency),
                           "tuned_ms": _ms_value(t.best_latency),
                           "gflops": t.gflops(t.best_latency), "speedup": t.speedup,
                           "config": t.best_config, "kept_default": t.kept_default}
                          for t in self.tasks]}

    def plot(self, path: str | Path) -> None:
        """Best-so-far latency against trials, one line per task (needs matplotlib)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise TensorcError("--plot needs matplotlib: pip install 'tensorc[plot]'") from None
        fig, ax = plt.subplots(figsize=(8, 5))
        for t in self.tasks:
            if t.curve and t.default_latency:
                ys = [t.default_latency / c if math.isfinite(c) else 0 for c in t.curve]
                ax.plot(range(1, len(ys) + 1), ys, label=t.name[:30])
        ax.set_xlabel("trials of the task")
        ax.set_ylabel("speed-up of the best so far over the default")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(str(path), dpi=110)
        plt.close(fig)


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.4f}" if seconds else "-"


def _ms_value(seconds: float | None) -> float | None:
    return seconds * 1e3 if seconds else None


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
            import numpy as np
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
                                            cold=self.options.flush_cache))

    def run(self, trials: int | None = None, seconds: float | None = None) -> TuneResult:
        """Measure until ``trials`` measurements or ``seconds`` have been spent (or every
        task's space is exhausted)."""
        if trials is None and seconds is None:
            raise TensorcError("give a budget: trials= or seconds=")
        start = time.monotonic()
        done = 0
        while True:
            if trials is not None and done >= trials:
                break
            if seconds is not None and time.monotonic() - start >= seconds:
                break
            state = self.scheduler.next_task(self.states)
            if state is None:
                break
            batch = self.batch if trials is None else min(self.batch, trials - done)
            configs = self.search.propose(state, batch)
            if not configs:
                continue
            self._measure(state, configs)
            done += len(configs)
            self._refit()
            if self.progress:
                self.progress(self._progress_line(state, done, trials, seconds, start))
        self.confirm()
        return self.result(time.monotonic() - start)

    def confirm(self, rounds: int = CONFIRM_ROUNDS, top: int = CONFIRM_TOP) -> None:
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
        what the model gets); they are no trials of the search, and --resume skips them."""
        for state in self.states:
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

    def _progress_line(self, state: TaskState, done: int, trials, seconds, start) -> str:
        index = self.states.index(state) + 1
        best = state.best_latency
        gflops = state.task.flops / best / 1e9 if best else 0.0
        speedup = (state.default_latency / best) if best and state.default_latency else 1.0
        elapsed = time.monotonic() - start
        if seconds is not None:
            left = f"{max(0.0, seconds - elapsed):.0f}s left"
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
            tasks.append(TaskResult(t.name, t.description, t.weight, t.flops, s.trials,
                                    s.errors, default, best,
                                    dict(config) if config is not None else None,
                                    list(s.history), kept))
        return TuneResult(tasks, self.trials, seconds,
                          str(self.log.path) if self.log is not None else "")


def tune(model, input_shapes: Mapping[str, Sequence[int]] | None = None,
         target: str | Target = "llvm", trials: int | None = None,
         time_budget: float | str | None = None, log: str | Path = "tune.jsonl",
         resume: bool = False, threads: int | None = None, search: str = "xgboost",
         batch: int = 8, build_workers: int = 2, end_to_end: bool = True,
         options: MeasureOptions | None = None, executor: Executor | None = None,
         progress: Progress | None = None, seed: int = 0, cluster=None) -> TuneResult:
    """Tune the kernels of an ONNX model for ``target`` (this CPU) within ``trials``
    measurements or ``time_budget`` (seconds, or "20m"); every measurement is appended to
    ``log``, which ``tensorc.compile(..., tuning_log=log)`` applies. ``resume`` continues
    from the log without measuring anything twice; ``threads`` is the thread count kernels
    are timed (and the model run) with. ``cluster`` (a Dask scheduler address such as
    ``"tcp://scheduler:8786"``, a ``distributed.Client`` or a ``LocalCluster``) sends builds
    and measurements to the cluster's workers instead of this machine's processes (needs
    ``pip install 'tensorc[cluster]'``).

    >>> result = tensorc.tune("model.onnx", trials=64, log="tune.jsonl")
    >>> print(result.table())
    """
    if trials is None and time_budget is None:
        raise TensorcError("give a tuning budget: trials=N or time_budget='20m'")
    if cluster is not None and executor is not None:
        raise TensorcError("give a cluster or an executor, not both")
    seconds = parse_duration(time_budget) if isinstance(time_budget, str) else time_budget
    tgt = Target.from_string(target)
    options = options or MeasureOptions()
    if threads is not None:
        options.num_threads = threads
    say = progress or (lambda _m: None)
    own_executor = None
    if cluster is not None:         # first: an unreachable cluster fails before any work
        from tensorc.autotune.cluster import DaskExecutor
        executor = own_executor = DaskExecutor(cluster)
        say(f"measuring on the {executor.describe()}")
    try:
        say("extracting tasks (compiling and profiling the model once)")
        tasks = extract_tasks(model, input_shapes, tgt, measure=True, num_threads=threads)
        say(f"{len(tasks)} distinct kernels; search spaces of "
            f"{', '.join(str(len(t.space())) for t in tasks)} configs")
        if not resume and Path(log).exists() and Path(log).stat().st_size:
            say(f"appending to {log} (its records are not reused without --resume)")
        tuner = Tuner(tasks, log, executor, options, search=search, batch=batch, seed=seed,
                      progress=progress, build_workers=build_workers)
        try:
            if resume:
                n = tuner.resume()
                say(f"resumed {n} measurements from {log}")
            result = tuner.run(trials, seconds)
        finally:
            tuner.close()
    finally:
        if own_executor is not None:
            own_executor.close()
    if end_to_end:
        say("timing the model end to end: default vs tuned")
        result.end_to_end = compare_end_to_end(model, input_shapes, tgt, log, threads)
    return result


def compare_end_to_end(model, input_shapes, target: Target, log, threads: int | None,
                       seconds: float = 1.0) -> dict:
    """Median latency of the model compiled with default and with tuned schedules (and of
    onnxruntime, when installed)."""
    import warnings

    import tensorc
    from tensorc.reference import random_inputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = tensorc.compile(model, target, input_shapes, num_threads=threads)
        tuned = tensorc.compile(model, target, input_shapes, tuning_log=log,
                                num_threads=threads)
    feeds = random_inputs(default.inputs, seed=0)
    out = {"threads": threads or 0, "default_ms": _time(default.run, feeds, seconds) * 1e3,
           "tuned_ms": _time(tuned.run, feeds, seconds) * 1e3,
           "tuning": tuned.info.get("tuning")}
    try:
        from tensorc.reference import onnxruntime_session, run_session
        session = onnxruntime_session(model if not isinstance(model, Path) else str(model),
                                      threads)
        out["onnxruntime_ms"] = _time(lambda f: run_session(session, f), feeds, seconds) * 1e3
    except Exception:           # noqa: BLE001  (onnxruntime is optional)
        out["onnxruntime_ms"] = None
    return out


def _time(fn, feeds, seconds: float) -> float:
    for _ in range(3):
        fn(feeds)
    samples, spent = [], 0.0
    while len(samples) < 10 or spent < seconds:
        t0 = time.perf_counter()
        fn(feeds)
        samples.append(time.perf_counter() - t0)
        spent += samples[-1]
    return statistics.median(samples)


def result_json(result: TuneResult) -> str:
    return json.dumps(result.to_json(), indent=2)


# ---------------------------------------------------------------------------------------------
# the ``tensorc tune`` command

def add_tune_parser(commands, subcommand, add_input_shape) -> None:
    """Register ``tensorc tune`` (``subcommand`` and ``add_input_shape`` are cli.py's
    helpers)."""
    p = subcommand(
        commands, "tune", "tune a model's kernels for this CPU",
        "Search each distinct kernel's schedule space, measuring candidates in separate "
        "processes (a crashing or hanging candidate is recorded and skipped), guided by an "
        "XGBoost cost model. Every measurement is appended to the log; 'tensorc compile "
        "--tuning-log LOG' applies the fastest, and --resume continues a stopped run.",
        """\
examples:
  tensorc tune models/resnet.onnx --trials 300 --log resnet.jsonl
  tensorc tune models/resnet.onnx --time 20m --log resnet.jsonl --resume --threads 2
  tensorc tune models/resnet.onnx --trials 2000 --cluster tcp://scheduler:8786
  tensorc compile models/resnet.onnx -o resnet.tcz --tuning-log resnet.jsonl
""")
    p.add_argument("model", help="the ONNX model file")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--trials", type=int, metavar="N", help="measurements in all")
    budget.add_argument("--time", metavar="T", help="time budget: 90s, 20m, 1h")
    p.add_argument("--log", default="tune.jsonl", metavar="FILE",
                   help="the tuning log to append to (default: %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the log's measurements without repeating them")
    p.add_argument("--threads", type=int, metavar="N",
                   help="threads kernels are timed with (default: all cores)")
    p.add_argument("--search", choices=("xgboost", "random"), default="xgboost",
                   help="cost-model-guided evolutionary search or random (default: "
                   "%(default)s)")
    p.add_argument("--batch", type=int, default=8, metavar="N",
                   help="candidates measured per round (default: %(default)s)")
    p.add_argument("--build-workers", type=int, default=2, metavar="N",
                   help="builder processes (default: %(default)s)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="build and measure on the workers of a Dask cluster, e.g. "
                   "tcp://scheduler:8786 (needs pip install 'tensorc[cluster]')")
    add_input_shape(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--plot", metavar="PNG", help="draw best-so-far speed-up against trials")
    p.add_argument("--no-end-to-end", action="store_true",
                   help="skip timing the whole model default vs tuned at the end")
    p.add_argument("--cold-cache", action="store_true",
                   help="time each call of a candidate after flushing the caches, as a "
                   "kernel finds its weights inside a model (slower tuning; its records "
                   "are applied before hot-cache ones)")
    p.set_defaults(handler=cmd_tune)


def cmd_tune(args) -> int:
    import sys

    from tensorc.cli import _require_file, _shape_dict
    model = _require_file(args.model, "model")
    if args.trials is not None and args.trials < 1:
        raise TensorcError("--trials must be at least 1")
    tty = sys.stderr.isatty()

    def progress(message: str) -> None:
        if args.json:
            print(message, file=sys.stderr, flush=True)
        elif tty and message.startswith("["):
            print("\r" + message[:150].ljust(150), end="", file=sys.stderr, flush=True)
        else:
            print(message, flush=True)

    result = tune(str(model), _shape_dict(args.input_shape), "llvm", args.trials,
                  args.time, args.log, args.resume, args.threads, args.search, args.batch,
                  args.build_workers, not args.no_end_to_end, progress=progress,
                  cluster=args.cluster, options=MeasureOptions(flush_cache=args.cold_cache))
    if tty:
        print(file=sys.stderr)
    if args.plot:
        result.plot(args.plot)
    print(result_json(result) if args.json else result.table())
    return 0

"""Measurement: build candidates in worker processes, time them in another one.

A candidate is a task and a config. Builders schedule, lower and compile it (LLVM object
code) in a pool of worker processes; a runner process loads the object code, checks its
output against the unscheduled program's, and times it. Every process is a plain
``python -m tensorc.autotune.measure`` child that talks over its pipes (autotune/worker.py),
so whatever a candidate does (segfault, illegal instruction, infinite loop, exhausting
memory) ends that child only: the measurement is recorded with its error class and tuning
goes on with a fresh one.

Error classes: ``build_error``, ``build_timeout``, ``run_error``, ``run_timeout``, ``crash``
(the process died of a signal), ``wrong_answer``; on a cluster also ``target_mismatch`` (the
worker's CPU is not the tuning target's) and ``worker_lost`` (the worker died under it).

Timing: warm-up calls, then ``repeats`` repeats of as many calls as make ``min_repeat_seconds``,
the median time per call; or, with ``flush_cache``, ``repeats`` single calls each after a
cache flush (cold caches, as a kernel of a model finds its weights).

A kernel over symbolic dims (a task with tuning shapes, ``Task.shapes``) is built once, its
dims left symbolic as the model's kernel has them, and run at each tuning shape with that
shape's dim values and arrays: checked and timed at each, its latency the geometric mean of
the shapes' (``RunResult.latencies`` keeps each).

:class:`Executor` is the interface the tuner measures through; :class:`LocalExecutor` (process
pools on this machine) is the default, and other executors (a cluster's workers) implement
the same two methods (``cluster.DaskExecutor``: Dask workers on other machines, which run
each candidate through the same child processes, :func:`build_in` and :func:`run_in`).

>>> with LocalExecutor(build_workers=2) as ex:
...     [r] = measure(ex, [Candidate(task, task.space().default())], MeasureOptions())
>>> r.latency, r.error
(0.000123, None)
"""
from __future__ import annotations

import ctypes
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tensorc.autotune.worker import Worker, serve
from tensorc.codegen.llvm.codegen import LLVMCodegen
from tensorc.compiler.object_cache import cached_emit_object
from tensorc.ir.dims import Dim, evaluate
from tensorc.ir.loop import KernelCall, PrimFunc
from tensorc.ops.space import Config
from tensorc.runtime.cpu import NativeLibrary

# the test hooks a candidate may carry: a failure the measurement must survive
INJECTIONS = ("build_error", "build_crash", "build_hang", "run_error", "run_crash", "run_hang",
              "run_oom", "wrong_answer")


@dataclass
class MeasureOptions:
    build_timeout: float = 60.0         # seconds per candidate's build
    run_timeout: float = 20.0           # seconds per candidate's run (check + timing)
    warmup: int = 2                     # calls before timing
    repeats: int = 5                    # timed repeats; the median per-call time is reported
    min_repeat_seconds: float = 0.005   # each repeat runs at least this long
    flush_cache: bool = False           # overwrite a large buffer before each timed call
    num_threads: int = 0                # threads the kernel runs on (0: all cores)
    rtol: float = 1e-3
    atol: float = 1e-4


@dataclass
class Candidate:
    task: Any                           # task.Task
    config: Config
    inject: str | None = None           # a test hook, one of INJECTIONS


@dataclass
class BuildResult:
    object_code: bytes | None = None
    entry: str = ""
    params: list = field(default_factory=list)      # (shape, dtype) per parameter
    trace: list | None = None
    features: np.ndarray | None = None
    error: str | None = None
    message: str = ""
    seconds: float = 0.0
    # over symbolic dims: (name, value as a Dim of the graph's dims) of each dim the kernel
    # takes, in its order (the params' shapes are Dims of these names)
    dims: list = field(default_factory=list)


@dataclass
class RunJob:
    object_code: bytes
    entry: str
    params: list
    inputs: list[np.ndarray]
    expected: list[np.ndarray] | None
    options: MeasureOptions
    inject: str | None = None
    return_outputs: bool = False
    target: str = ""                    # the task's target string: where it may be timed
    # over symbolic dims: per tuning shape, (the kernel's dim values, its params' shapes);
    # then ``inputs`` and ``expected`` hold one list per shape
    shapes: list | None = None


@dataclass
class RunResult:
    latency: float | None = None
    error: str | None = None
    message: str = ""
    seconds: float = 0.0
    outputs: list | None = None
    host: str | None = None             # the machine that timed it
    latencies: list | None = None       # over symbolic dims: at each tuning shape


@dataclass
class MeasureResult:
    candidate: Candidate
    latency: float | None
    error: str | None
    message: str
    trace: list | None
    features: np.ndarray | None
    build_seconds: float
    run_seconds: float
    outputs: list | None = None
    host: str | None = None
    latencies: list | None = None       # over symbolic dims: at each tuning shape

    @property
    def config(self) -> Config:
        return self.candidate.config


# ---------------------------------------------------------------------------------------------
# the executor interface

class Executor:
    """Builds and runs candidates somewhere; never raises for a bad candidate."""

    def build(self, candidates: Sequence[Candidate], options: MeasureOptions
              ) -> list[BuildResult]:
        raise NotImplementedError

    def run(self, jobs: Sequence[RunJob], options: MeasureOptions) -> list[RunResult]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LocalExecutor(Executor):
    """``build_workers`` builder processes (builds run in parallel) and one runner process
    (runs one at a time, so timings do not disturb each other)."""

    def __init__(self, build_workers: int = 2, memory_limit: int | None = None):
        self.build_workers = max(1, build_workers)
        self._builders = [Worker() for _ in range(self.build_workers)]
        self._runner = Worker(memory_limit)
        self._free = list(self._builders)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.build_workers)

    def _take(self) -> Worker:
        with self._lock:
            return self._free.pop()

    def _give(self, worker: Worker) -> None:
        with self._lock:
            self._free.append(worker)

    def _build_one(self, candidate: Candidate, options: MeasureOptions) -> BuildResult:
        worker = self._take()
        try:
            return build_in(worker, candidate, options)
        finally:
            self._give(worker)

    def build(self, candidates, options):
        return list(self._pool.map(lambda c: self._build_one(c, options), candidates))

    def run(self, jobs, options):
        host = socket.gethostname()
        results = []
        for job in jobs:
            result = run_in(self._runner, job, options)
            result.host = host
            results.append(result)
        return results

    def close(self):
        self._pool.shutdown(wait=True)
        for worker in [*self._builders, self._runner]:
            worker.stop()


def build_in(worker: Worker, candidate: Candidate, options: MeasureOptions) -> BuildResult:
    """Build ``candidate`` in the child process ``worker``; a failure is the result's error."""
    start = time.perf_counter()
    status, value = worker.call("build", candidate, options.build_timeout)
    if status == "ok":
        return value
    error = {"timeout": "build_timeout", "crash": "crash"}.get(status, "build_error")
    return BuildResult(error=error, message=value, seconds=time.perf_counter() - start)


def run_in(worker: Worker, job: RunJob, options: MeasureOptions) -> RunResult:
    """Check and time ``job`` in the child process ``worker``; a failure is the result's
    error."""
    start = time.perf_counter()
    status, value = worker.call("run", job, options.run_timeout)
    if status == "ok":
        return value
    error = {"timeout": "run_timeout", "crash": "crash"}.get(status, "run_error")
    return RunResult(error=error, message=value, seconds=time.perf_counter() - start)


def _run_jobs(candidates: Sequence[Candidate], builds: list, options: MeasureOptions,
              inputs: dict | None, expected: dict | None, return_outputs: bool
              ) -> tuple[list[RunJob], list[int]]:
    """The run jobs of the candidates that built, and their positions; ``inputs`` and
    ``expected`` map a task's workload to its seeded inputs and the unscheduled program's
    outputs (computed here when not given)."""
    inputs = {} if inputs is None else inputs
    expected = {} if expected is None else expected
    jobs, where = [], []
    for k, (cand, built) in enumerate(zip(candidates, builds)):
        if built.error is not None:
            continue
        task = cand.task
        if task.workload not in inputs:
            inputs[task.workload] = task.inputs(seed=0)
        if task.workload not in expected:
            expected[task.workload] = task.reference(inputs[task.workload])
        # a config that picks another layout of the weights reads them repacked
        jobs.append(RunJob(built.object_code, built.entry, built.params,
                           task.inputs_for(cand.config, inputs[task.workload]),
                           expected[task.workload], options,
                           cand.inject, return_outputs, task.target,
                           _shape_plans(task.shapes, built) if task.shapes else None))
        where.append(k)
    return jobs, where


def _shape_plans(shapes: Sequence[dict], built: BuildResult) -> list:
    """Per tuning shape (graph dim values), the values of the kernel's dims and the shapes
    of its parameters there."""
    plans = []
    for values in shapes:
        own = {name: evaluate(d, values) for name, d in built.dims}
        plans.append(([own[name] for name, _ in built.dims],
                      [tuple(evaluate(d, own) for d in shape) for shape, _ in built.params]))
    return plans


def measure(executor: Executor, candidates: Sequence[Candidate], options: MeasureOptions,
            inputs: dict | None = None, expected: dict | None = None,
            return_outputs: bool = False) -> list[MeasureResult]:
    """Build and run ``candidates``; ``inputs`` and ``expected`` map a task's workload to its
    seeded inputs and the unscheduled program's outputs (computed here when not given)."""
    builds = executor.build(candidates, options)
    jobs, where = _run_jobs(candidates, builds, options, inputs, expected, return_outputs)
    runs = dict(zip(where, executor.run(jobs, options)))
    results = []
    for k, (cand, built) in enumerate(zip(candidates, builds)):
        run = runs.get(k)
        if run is None:
            results.append(MeasureResult(cand, None, built.error, built.message, built.trace,
                                         built.features, built.seconds, 0.0))
        else:
            results.append(MeasureResult(cand, run.latency, run.error, run.message,
                                         built.trace, built.features, built.seconds,
                                         run.seconds, run.outputs, run.host, run.latencies))
    return results


def retime(executor: Executor, candidates: Sequence[Candidate], options: MeasureOptions,
           rounds: int, inputs: dict | None = None, expected: dict | None = None
           ) -> list[list[RunResult]]:
    """Time ``candidates`` again side by side: each is built once, then all of them are run
    in turn, ``rounds`` times over (each round starting one candidate later), so that
    whatever else loads the machine meanwhile falls on all of them alike. Returns each
    candidate's runs, one per round (a failed build: its error in every round).

    The best of hundreds of single noisy measurements is biased low; this is how the tuner
    confirms its picks against the default, and how ``benchmarks/tuning.py`` compares two
    searches' picks.

    >>> runs = retime(executor, [Candidate(task, c1), Candidate(task, c2)], options, 3)
    >>> [[r.latency for r in rs] for rs in runs]
    [[0.00121, 0.00119, 0.00120], [0.00131, 0.00128, 0.00130]]
    """
    builds = executor.build(candidates, options)
    timed = [[RunResult(error=built.error, message=built.message)] * rounds for built in builds]
    jobs, where = _run_jobs(candidates, builds, options, inputs, expected, False)
    for r in range(rounds if jobs else 0):
        shift = r % len(jobs)
        order = list(range(shift, len(jobs))) + list(range(shift))
        for j, run in zip(order, executor.run([jobs[j] for j in order], options)):
            timed[where[j]][r] = run
    return timed


def _worker_main(memory_limit: int) -> None:
    serve({"build": _build, "run": _run}, memory_limit)


def _segfault() -> None:
    ctypes.string_at(0)


def _build(candidate: Candidate) -> BuildResult:
    """Schedule, lower and compile one candidate (in a builder process)."""
    start = time.perf_counter()
    inject = candidate.inject
    if inject == "build_error":
        raise RuntimeError("injected build error")
    if inject == "build_crash":
        _segfault()
    if inject == "build_hang":
        while True:
            time.sleep(1)
    task = candidate.task
    target = task.get_target()
    func = task.schedule(candidate.config)
    features = task.features(func)
    cg = LLVMCodegen(target)
    cg.add_kernel(func)
    entry = f"{func.name}_entry"
    # over symbolic dims, the entry reads the kernel's dims from its dims array and passes
    # them on: one object serves every tuning shape
    cg.add_entry(PrimFunc(entry, func.params,
                          KernelCall(func.name, [(p, 0) for p in func.params], list(func.dims)),
                          dims=list(func.dims)))
    obj = cached_emit_object(str(cg.module), target)      # a candidate built before: no LLVM
    own = func.attrs.get("dim_values", {})
    dims = [(v.name, own.get(v.name, Dim(v.name))) for v in func.dims]
    params = [(tuple(d if isinstance(d, int) else Dim.of(d) for d in p.shape), p.dtype)
              for p in func.params]
    return BuildResult(obj, entry, params, func.attrs.get("trace"), features, None, "",
                       time.perf_counter() - start, dims)


def _run(job: RunJob) -> RunResult:
    """Check and time one built candidate (in the runner process); over symbolic dims, at
    each tuning shape, its latency the geometric mean of theirs."""
    start = time.perf_counter()
    library = NativeLibrary(job.object_code)
    fn = library.entry(job.entry)
    if job.shapes is None:
        result = _run_at(job, fn, job.inputs, job.expected, job.params, None)
        result.seconds = time.perf_counter() - start
        return result
    latencies, outputs = [], []
    for k, (dims, shapes) in enumerate(job.shapes):
        params = [(shape, dtype) for shape, (_, dtype) in zip(shapes, job.params)]
        expected = job.expected[k] if job.expected is not None else None
        result = _run_at(job, fn, job.inputs[k], expected, params, dims)
        if result.error is not None:
            result.message = f"at tuning shape {k + 1}: {result.message}"
            result.seconds = time.perf_counter() - start
            return result
        latencies.append(result.latency)
        outputs.append(result.outputs)
    # (an empty tensor's kernel times at about nothing: a floor keeps the mean finite)
    mean = float(np.exp(np.mean(np.log(np.maximum(latencies, 1e-9)))))
    return RunResult(mean, None, "", time.perf_counter() - start,
                     outputs if job.return_outputs else None, latencies=latencies)


def _run_at(job: RunJob, fn, inputs: list, expected: list | None, params: list,
            dims: list[int] | None) -> RunResult:
    """Check and time the candidate on ``inputs`` (and, over symbolic dims, the kernel's
    dim values ``dims``)."""
    start = time.perf_counter()
    options = job.options
    inputs = [np.ascontiguousarray(a) for a in inputs]
    outputs = [np.full(shape, np.nan, dtype) if np.dtype(dtype).kind == "f"
               else np.zeros(shape, dtype) for shape, dtype in params[len(inputs):]]
    arrays = [*inputs, *outputs]
    pointers = [a.ctypes.data for a in arrays]
    if dims is not None:
        values = np.array(dims, np.int64)
        pointers.append(values.ctypes.data)
    ptrs = (ctypes.c_void_p * len(pointers))(*pointers)
    threads = int(options.num_threads)

    def call() -> None:
        status = fn(ptrs, threads, None)
        if status:
            raise RuntimeError(f"the kernel failed a runtime check (status {status})")

    if job.inject == "run_crash":
        _segfault()
    if job.inject == "run_hang":
        while True:
            pass
    if job.inject == "run_oom":
        hog = np.empty(1 << 46, np.uint8)     # more than any machine maps: MemoryError
        del hog
    if job.inject == "run_error":
        raise RuntimeError("injected run error")
    call()
    if job.inject == "wrong_answer":
        outputs[0].reshape(-1)[0] += 1.0
    if expected is not None:
        for k, (got, want) in enumerate(zip(outputs, expected)):
            if not _close(got, want, options):
                bad = np.abs(got.astype(np.float64) - want.astype(np.float64))
                return RunResult(error="wrong_answer", message=f"output {k} differs from the "
                                 f"unscheduled program's (max abs diff {np.nanmax(bad):.3g})",
                                 seconds=time.perf_counter() - start)
    flush = np.empty(1 << 23, np.float64) if options.flush_cache else None   # 64 MB
    for _ in range(options.warmup):
        call()
    t0 = time.perf_counter()
    call()
    once = max(time.perf_counter() - t0, 1e-7)
    # with a flush, every timed call finds the caches holding none of its data, as a kernel
    # of a model finds its weights (the model's other kernels ran in between)
    number = max(1, int(options.min_repeat_seconds / once) + 1) \
        if once < options.min_repeat_seconds and flush is None else 1
    samples = []
    for _ in range(options.repeats):
        if flush is not None:
            flush.fill(1.0)
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        samples.append((time.perf_counter() - t0) / number)
    return RunResult(float(np.median(samples)), None, "", time.perf_counter() - start,
                     [o.copy() for o in outputs] if job.return_outputs else None)


def _close(got: np.ndarray, want: np.ndarray, options: MeasureOptions) -> bool:
    if got.shape != want.shape:
        return False
    if got.dtype.kind not in "fc":
        return bool(np.array_equal(got, want))
    g, w = got.astype(np.float64), want.astype(np.float64)
    scale = float(np.nanmax(np.abs(w))) if w.size and np.isfinite(w).any() else 1.0
    tol = options.atol * max(1.0, scale)
    return bool(np.allclose(g, w, rtol=options.rtol, atol=tol, equal_nan=True))


if __name__ == "__main__" and len(sys.argv) >= 2 and sys.argv[1] == "--worker":
    # run the importable module's copy, so that what it pickles names tensorc.autotune.measure
    import tensorc.autotune.measure as _module
    _module._worker_main(int(sys.argv[2]) if len(sys.argv) > 2 else 0)

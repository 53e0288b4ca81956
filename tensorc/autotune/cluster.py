"""Tuning on a Dask cluster: builds and measurements as Dask tasks on other machines.

:class:`DaskExecutor` implements the tuner's :class:`~tensorc.autotune.measure.Executor`
with an existing Dask distributed cluster (``dask scheduler`` on one machine, ``dask worker
tcp://host:8786 --nthreads 1 --resources measure=1`` on each machine of a fleet of identical
ones) instead of a home-made RPC tracker. Each build and each measurement is one task.

Inside a worker the candidate runs in the same child processes as on one machine
(:func:`~tensorc.autotune.measure.build_in`, :func:`~tensorc.autotune.measure.run_in`), so a
candidate that segfaults or hangs ends a child, never the Dask worker. Measurements stay
honest:

- one at a time per machine: a measurement holds the machine's lock file (``flock``, which
  the kernel lets go of when its holder dies) while it runs, and asks for one ``measure``
  resource when the workers advertise it;
- a worker whose CPU name or features differ from the tuning target's refuses to measure
  (the error class ``target_mismatch``), and the executor stops sending it measurements;
- every result names the host that timed it (the log's ``host`` field).

A worker that dies mid-task loses only its tasks in flight: Dask runs them again on another
worker (up to ``distributed.scheduler.allowed-failures`` times), after which the candidate is
recorded as ``worker_lost``; the tuner goes on with the workers left.

``distributed`` is an optional dependency (``pip install 'tensorc[cluster]'``), imported only
here and only when a cluster is used.

>>> with DaskExecutor("tcp://scheduler:8786") as ex:
...     result = tensorc.tune("model.onnx", trials=500, executor=ex)
"""
from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Sequence

from tensorc.autotune.measure import (
    BuildResult, Candidate, Executor, MeasureOptions, RunJob, RunResult, build_in, run_in,
)
from tensorc.autotune.worker import Worker
from tensorc.errors import TensorcError
from tensorc.target import Target

MEASURE_RESOURCE = "measure"
# how long the executor waits without any task finishing, beyond the build or run timeout,
# before it gives the tasks still out up as lost (a cluster left with no worker that may run
# them)
STALL_GRACE = 120.0
WORKER_WAIT = 60.0          # how long a batch waits for a cluster with no worker to get one


def import_distributed():
    """The ``distributed`` module, or a TensorcError that says how to install it."""
    try:
        import distributed
    except ImportError:
        raise TensorcError("tuning on a cluster needs Dask distributed, an optional "
                           "dependency: pip install 'tensorc[cluster]'") from None
    return distributed


# ---------------------------------------------------------------------------------------------
# what runs on a worker

_children_lock = threading.Lock()
_idle_children: dict[str, list[Worker]] = {"build": [], "run": []}


def _take_child(kind: str) -> Worker:
    with _children_lock:
        if _idle_children[kind]:
            return _idle_children[kind].pop()
    return Worker()


def _give_child(kind: str, child: Worker) -> None:
    with _children_lock:
        _idle_children[kind].append(child)


def _enabled_features(text: str) -> set[str]:
    return {f[1:] for f in text.split(",") if f.startswith("+")}


def target_mismatch(target: str) -> str | None:
    """Why this machine cannot time kernels for ``target`` (a task's target string such as
    ``llvm -mcpu=znver3 -mattr=+avx2,...``), or None when its CPU name and features are the
    target's."""
    host = Target.host()
    options = dict(word[1:].split("=", 1) for word in target.split()[1:]
                   if word.startswith("-") and "=" in word)
    where = socket.gethostname()
    mcpu = options.get("mcpu", host.mcpu)
    if mcpu != host.mcpu:
        return f"host {where} has a {host.mcpu} CPU; the tuning target is a {mcpu}"
    if "mattr" in options:
        want, have = _enabled_features(options["mattr"]), _enabled_features(host.features)
        if want != have:
            missing = ", ".join(sorted(want - have)) or "none"
            extra = ", ".join(sorted(have - want)) or "none"
            return (f"host {where} ({host.mcpu}) lacks the target's features {missing} and "
                    f"has {extra} that the target has not")
    return None


class _MachineLock:
    """One measurement at a time on this machine, whatever process or user measures: an
    exclusive ``flock`` on a file in the temporary directory, released by the kernel when
    its holder dies."""

    def __init__(self, path: str | None = None):
        self.path = path or os.path.join(tempfile.gettempdir(), "tensorc-measure.lock")
        self.fd: int | None = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o666)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def build_on_worker(candidate: Candidate, options: MeasureOptions) -> BuildResult:
    """A Dask task: build ``candidate`` in a child process of this worker."""
    child = _take_child("build")
    try:
        return build_in(child, candidate, options)
    finally:
        _give_child("build", child)


def measure_on_worker(job: RunJob, options: MeasureOptions) -> RunResult:
    """A Dask task: check that this machine is the job's target, then time the job in a
    child process of this worker while holding the machine's measurement lock."""
    host = socket.gethostname()
    if job.target:
        why = target_mismatch(job.target)
        if why is not None:
            return RunResult(error="target_mismatch", message=why, host=host)
    child = _take_child("run")
    try:
        with _MachineLock():
            result = run_in(child, job, options)
    finally:
        _give_child("run", child)
    result.host = host
    return result


# ---------------------------------------------------------------------------------------------
# the executor, on the tuning machine

class DaskExecutor(Executor):
    """Builds and measures candidates on the workers of a Dask cluster.

    ``cluster`` is a scheduler address (``tcp://scheduler:8786``), a ``distributed.Client``
    or a cluster object (``distributed.LocalCluster``). Builds go to any worker; each
    measurement goes to a worker whose CPU is the target's, asks for one ``measure``
    resource when the workers advertise that resource, and holds its machine's lock.

    >>> with DaskExecutor("tcp://scheduler:8786") as ex:
    ...     result = tensorc.tune("model.onnx", trials=500, executor=ex)
    """

    def __init__(self, cluster: Any, connect_timeout: float = 30.0):
        distributed = import_distributed()
        self._distributed = distributed
        self._own_client = not isinstance(cluster, distributed.Client)
        if not self._own_client:
            self.client = cluster
            self.address = cluster.scheduler.address if cluster.scheduler else str(cluster)
        else:
            self.address = getattr(cluster, "scheduler_address", cluster)
            try:
                self.client = distributed.Client(cluster, timeout=connect_timeout)
            except (OSError, TimeoutError, ValueError) as exc:
                raise TensorcError(
                    f"cannot reach the Dask scheduler at {self.address}: {exc}; start one "
                    f"with 'dask scheduler' and workers with 'dask worker "
                    f"tcp://HOST:8786 --nthreads 1 --resources measure=1'") from None
        self._fit: dict[tuple[str, str], str | None] = {}   # (worker, target) -> refusal

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    # which workers may measure ---------------------------------------------------------------
    def workers(self) -> dict[str, dict]:
        """The scheduler's workers: address -> info (``host``, ``resources``, ...)."""
        return dict(self.client.scheduler_info(n_workers=-1)["workers"])

    def _require_workers(self) -> None:
        """Wait a while for a worker where the cluster has none; a TensorcError after that."""
        if self.workers():
            return
        try:
            self.client.wait_for_workers(1, timeout=WORKER_WAIT)
        except (TimeoutError, self._distributed.TimeoutError):
            raise TensorcError(
                f"the Dask cluster at {self.address} has no workers (waited "
                f"{WORKER_WAIT:g} s): start some with 'dask worker {self.address} --nthreads "
                f"1 --resources measure=1'; the tuning log keeps what was measured "
                f"(--resume continues)") from None

    def describe(self) -> str:
        workers = self.workers()
        hosts = {info.get("host") for info in workers.values()}
        return (f"Dask cluster at {self.address}: {len(workers)} workers on {len(hosts)} "
                f"hosts")

    def _refusals(self, target: str) -> dict[str, str | None]:
        """Each live worker's reason not to measure for ``target`` (None: it may)."""
        workers = self.workers()
        new = [w for w in workers if (w, target) not in self._fit]
        if new:
            try:
                answers = self.client.run(target_mismatch, target, workers=new,
                                          on_error="return")
            except Exception as exc:    # noqa: BLE001  (a worker that left: asked again later)
                answers = {w: exc for w in new}
            for w, why in answers.items():
                if isinstance(why, BaseException):
                    continue
                self._fit[(w, target)] = why
        return {w: self._fit.get((w, target)) for w in workers if (w, target) in self._fit}

    def _measure_placement(self, target: str) -> dict:
        """``client.submit`` keyword arguments that send a measurement for ``target`` to a
        machine that may time it."""
        refusals = self._refusals(target)
        fit = [w for w, why in refusals.items() if why is None]
        if refusals and not fit:
            reasons = sorted({why for why in refusals.values()})
            raise TensorcError(f"no worker of the Dask cluster at {self.address} has the "
                               f"tuning target's CPU ({target}): {'; '.join(reasons)}; tune "
                               f"for the workers' CPU or add workers of this one")
        placement: dict = {"pure": False}
        workers = self.workers()
        if any(MEASURE_RESOURCE in (info.get("resources") or {}) for info in workers.values()):
            placement["resources"] = {MEASURE_RESOURCE: 1}
        if len(fit) < len(refusals):
            # hosts, not addresses: a worker restarted on a fit host keeps qualifying
            hosts = {workers[w]["host"] for w in fit if w in workers}
            placement["workers"] = sorted(hosts)
            placement["allow_other_workers"] = False
        return placement

    # the two methods of the interface --------------------------------------------------------
    def build(self, candidates: Sequence[Candidate], options: MeasureOptions
              ) -> list[BuildResult]:
        self._require_workers()
        futures = [self.client.submit(build_on_worker, c, options, pure=False,
                                      key=f"tensorc-build-{uuid.uuid4().hex}")
                   for c in candidates]
        return self._collect(futures, options.build_timeout,
                             lambda error, message: BuildResult(error=error, message=message),
                             "build_error")

    def run(self, jobs: Sequence[RunJob], options: MeasureOptions) -> list[RunResult]:
        self._require_workers()
        placements: dict[str, dict] = {}
        futures = []
        for job in jobs:
            if job.target not in placements:
                placements[job.target] = self._measure_placement(job.target)
            futures.append(self.client.submit(measure_on_worker, job, options,
                                              key=f"tensorc-measure-{uuid.uuid4().hex}",
                                              **placements[job.target]))
        return self._collect(futures, options.run_timeout,
                             lambda error, message: RunResult(error=error, message=message),
                             "run_error")

    def _collect(self, futures: list, timeout: float, failed: Callable[[str, str], Any],
                 error_class: str) -> list:
        """The futures' results in order; a task that raised, whose workers kept dying, or
        that no worker took up in time becomes a failed result."""
        distributed = self._distributed
        results: list = [None] * len(futures)
        pending = {f.key: (k, f) for k, f in enumerate(futures)}
        last_progress = time.monotonic()
        while pending:
            try:
                done, _ = distributed.wait([f for _, f in pending.values()], timeout=2.0,
                                           return_when="FIRST_COMPLETED")
            except (TimeoutError, distributed.TimeoutError):
                done = set()
            if done:
                last_progress = time.monotonic()
            for future in done:
                k, _ = pending.pop(future.key)
                results[k] = self._outcome(future, failed, error_class)
            if pending and time.monotonic() - last_progress > timeout + STALL_GRACE:
                if not self.workers():
                    for _, future in pending.values():
                        future.cancel()
                    self._require_workers()     # raises unless a worker turned up
                for k, future in pending.values():
                    future.cancel()
                    results[k] = failed("worker_lost", f"no worker of {self.address} "
                                        f"finished the task within {timeout + STALL_GRACE:g} s")
                pending.clear()
        return results

    def _outcome(self, future, failed: Callable[[str, str], Any], error_class: str):
        distributed = self._distributed
        try:
            return future.result()
        except distributed.KilledWorker as exc:
            return failed("worker_lost", f"the workers running it died ({exc})"[:400])
        except distributed.client.FutureCancelledError as exc:
            return failed("worker_lost", f"the task was cancelled ({exc})"[:400])
        except Exception as exc:        # noqa: BLE001  (the candidate's error)
            return failed(error_class, f"{type(exc).__name__}: {exc}"[:400])

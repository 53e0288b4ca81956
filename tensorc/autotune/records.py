"""The tuning log: JSON lines, one record per measurement, appended and flushed one at a time.

A record names the workload (its key's hash and a readable description), the target string
(CPU name and features), the tensorc version, the config and the schedule trace it produced,
and either the median latency or the error class of the failed measurement, and the host that
timed it (``host``; None in logs written before it was recorded), its thread count
(``threads``) and, for a cold-cache measurement, ``cold``. An interrupted
run loses at most the record in flight (a torn last line is skipped when the log is read);
``tune --resume`` reads the log back and measures nothing twice; ``tensorc.compile(...,
tuning_log=...)`` applies the fastest valid record per workload for the same target and
tensorc version.

A kernel over symbolic dims (tuned at several shapes) has records that name the shapes
(``shapes``, ``batch=1,seq=7`` each) and give the latency at each (``shape_latencies``), its
``latency`` their geometric mean. Only its confirmed records apply: the default and the picks
timed again side by side at every shape, a pick's ``relative`` latency (its geometric mean
over the default's) ranking them; a pick slower than the default at any shape gets the error
class ``slower_at_a_shape`` instead (as does a config the end-to-end verdict drops), and a
config with such a record is never applied, whatever its other records say.

>>> log = TuningLog("tune.jsonl")
>>> log.append(make_record(task, config, trace, latency=1.2e-3))
>>> best = log.best_configs(Target.host())      # what compile applies
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from tensorc.autotune.shapes import format_shape
from tensorc.errors import TensorcError
from tensorc.target import Target
from tensorc.version import __version__

ERROR_CLASSES = ("build_error", "build_timeout", "run_error", "run_timeout", "crash",
                 "wrong_answer", "invalid_config", "target_mismatch", "worker_lost",
                 "slower_at_a_shape")
# failures that say nothing about the config (a cluster worker of another CPU refused it, or
# died under it): ``tune --resume`` measures such configs again
TRANSIENT_ERRORS = ("target_mismatch", "worker_lost")


class TuningLogNote(UserWarning):
    """One note per compile about what a tuning log did (kernels left at their defaults,
    records of another target or tensorc version that were not applied)."""


def tensorc_version() -> str:
    return __version__


def workload_hash(key: tuple) -> str:
    """A short stable name of a workload key (the log's ``workload`` field)."""
    return hashlib.sha1(repr(key).encode()).hexdigest()[:16]


def target_string(target: Target) -> str:
    """The target with its CPU name and features: records are applied only to equal ones."""
    text = str(target)
    if target.kind == "llvm" and "-mcpu=" not in text and target.mcpu:
        text += f" -mcpu={target.mcpu}"
    if target.features:
        text += f" -mattr={target.features}"
    return text


def make_record(task, config: Mapping, trace: list | None, latency: float | None = None,
                error: str | None = None, message: str = "", build_seconds: float = 0.0,
                run_seconds: float = 0.0, host: str | None = None,
                confirmed: bool = False, threads: int | None = None,
                cold: bool = False, latencies: list | None = None,
                relative: float | None = None) -> dict:
    """One measurement of ``task`` (a ``task.Task``) as a log record. ``confirmed``: the
    median of the config timed again beside the task's default at the end of a run (the
    tuner's confirmation), which a compile prefers to the search's single measurements.
    ``threads``: how many threads the kernel was timed on (a config's speed depends on it: a
    matmul whose column panels form one block is fast on one thread and has nothing for a
    second one to do). ``cold``: timed after a cache flush per call (``MeasureOptions.
    flush_cache``), so not comparable with a hot measurement. Over symbolic dims (``task.shapes``),
    ``latencies`` gives the latency at each tuning shape, and ``relative`` a confirmed
    record's geometric mean over the default's, timed beside it."""
    if (latency is None) == (error is None):
        raise ValueError("a record has a latency or an error class, not both or neither")
    if error is not None and error not in ERROR_CLASSES:
        raise ValueError(f"unknown error class {error!r}")
    record = {
        "workload": task.workload,
        "task": task.name,
        "desc": task.description,
        "target": task.target,
        "tensorc": tensorc_version(),
        "config": dict(config),
        "trace": trace,
        "latency": latency,
        "gflops": (task.flops / latency / 1e9) if latency and task.flops else None,
        "error": error,
        "message": message[:500],
        "build_s": round(build_seconds, 4),
        "run_s": round(run_seconds, 4),
        "host": host,
        "timestamp": time.time(),
    }
    if confirmed:
        record["confirmed"] = True
    if threads is not None:
        record["threads"] = int(threads)
    if cold:
        record["cold"] = True
    shapes = getattr(task, "shapes", ())
    if shapes:
        record["shapes"] = [format_shape(v) for v in shapes]
        record["shape_latencies"] = latencies
        if relative is not None:
            record["relative"] = relative
    return record


class TuningLog:
    """A JSON-lines file of measurement records."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def append(self, record: dict) -> None:
        """Write one record and flush it to the file before returning."""
        line = json.dumps(record, sort_keys=True) + "\n"
        with open(self.path, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def records(self) -> Iterator[dict]:
        """Every complete record (a torn or corrupt line, as a kill leaves, is skipped)."""
        if not self.path.exists():
            return
        try:
            text = self.path.read_text()
        except OSError as exc:
            raise TensorcError(f"cannot read the tuning log {self.path}: "
                               f"{exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise TensorcError(f"{self.path} is not a tuning log (not UTF-8 text): give the "
                               f"JSON-lines file 'tensorc tune --log' wrote") from None
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "workload" in record and "config" in record:
                yield record

    def matching(self, target: str, version: str | None = None,
                 threads: int | None = None, cold: bool | None = None) -> list[dict]:
        """The records for ``target`` (a target string), this tensorc version and, if given,
        timed on ``threads`` threads (records that do not say are taken) and with cold caches
        or not (``cold``)."""
        version = version or tensorc_version()
        return [r for r in self.records()
                if r.get("target") == target and r.get("tensorc") == version and
                _same_threads(r, threads) and (cold is None or bool(r.get("cold")) == cold)]

    def best_configs(self, target: Target | str, threads: int | None = None) -> BestConfigs:
        """The fastest valid record per workload for ``target``, this tensorc version and
        ``threads`` (when given: records timed on another thread count are not applied);
        where a workload has confirmed records (a run's best config and its default timed
        again side by side), the fastest of those: the search's fastest single measurement
        may have been a lucky one, and the default may be the faster of the two. Records
        timed with cold caches (``tune --cold-cache``) win over hot ones: their latencies are
        not comparable, and the cold ones are nearer what the kernel meets in its model."""
        tgt = target_string(Target.from_string(target))
        version = tensorc_version()
        if not self.path.exists():
            raise TensorcError(f"tuning log {self.path} does not exist: run 'tensorc tune' "
                               f"to write one, or compile without it")
        best: dict[str, dict] = {}
        other = other_threads = 0
        usable, slower = [], set()
        for r in self.records():
            if r.get("target") != tgt or r.get("tensorc") != version:
                other += 1
                continue
            if not _same_threads(r, threads):
                other_threads += 1
                continue
            if r.get("error") == "slower_at_a_shape":
                slower.add((r["workload"], _config_key(r)))
            usable.append(r)
        for r in usable:
            if r.get("error") is not None or not r.get("latency"):
                continue
            # a symbolic kernel's config applies only once timed beside the default at
            # every tuning shape, and never where it lost at one
            if r.get("shapes") and (not r.get("confirmed") or
                                    (r["workload"], _config_key(r)) in slower):
                continue
            seen = best.get(r["workload"])
            if seen is None or _rank(r) < _rank(seen):
                best[r["workload"]] = r
        return BestConfigs(str(self.path), best, other, other_threads=other_threads,
                           threads=threads)


def _rank(record: dict) -> tuple:
    """The order of a workload's records for applying: cold-cache ones, then confirmed ones,
    then the fastest (over symbolic dims, relative to the default timed beside it: runs at
    other tuning shapes have other latencies)."""
    return not record.get("cold"), not record.get("confirmed"), \
        record.get("relative", record["latency"])


def _config_key(record: dict) -> str:
    return json.dumps(record["config"], sort_keys=True)


def _same_threads(record: dict, threads: int | None) -> bool:
    """Whether ``record`` was timed on ``threads`` threads (None: any; a record from before
    logs said counts as the same)."""
    return threads is None or record.get("threads") in (None, threads)


@dataclass
class BestConfigs:
    """Tuned configs by workload, as ``compiler.pipeline.build_kernels`` asks for them;
    counts what it applied for the one note a compile gives."""

    log: str
    best: dict[str, dict]
    other_records: int = 0          # records of another target or tensorc version
    applied: set = field(default_factory=set)
    other_threads: int = 0          # records timed on another thread count
    threads: int | None = None      # the thread count the configs were chosen for
    missing: set = field(default_factory=set)
    rejected: set = field(default_factory=set)

    def config_for(self, key: tuple) -> dict | None:
        workload = workload_hash(key)
        record = self.best.get(workload)
        if record is None:
            self.missing.add(workload)
            return None
        self.applied.add(workload)
        return record["config"]

    def untunable(self, key: tuple) -> None:
        """A kernel whose schedule has no knobs: neither tuned nor missing a record."""
        self.missing.discard(workload_hash(key))

    def reject(self, key: tuple) -> None:
        workload = workload_hash(key)
        self.applied.discard(workload)
        self.rejected.add(workload)

    def summary(self) -> dict:
        return {"log": self.log, "tuned_kernels": len(self.applied),
                "default_kernels": len(self.missing) + len(self.rejected),
                "rejected_configs": len(self.rejected),
                "other_target_or_version_records": self.other_records,
                "other_thread_count_records": self.other_threads}

    def note(self) -> str | None:
        """One sentence on what was not applied, or None when every kernel was tuned."""
        parts = []
        if self.missing or self.rejected:
            n = len(self.missing) + len(self.rejected)
            parts.append(f"{n} of {n + len(self.applied)} kernels have no usable record and "
                         f"use the default schedule")
        if self.rejected:
            parts.append(f"{len(self.rejected)} recorded configs no longer fit their search "
                         f"space")
        if self.other_records:
            parts.append(f"{self.other_records} records of another target or tensorc "
                         f"version were not applied")
        if self.other_threads:
            parts.append(f"{self.other_threads} records timed on another thread count were "
                         f"not applied (this module runs on {self.threads}; tune with "
                         f"--threads {self.threads})")
        if not parts:
            return None
        return f"tuning log {self.log}: " + "; ".join(parts)

    def warn(self) -> None:
        text = self.note()
        if text:
            warnings.warn(text, TuningLogNote, stacklevel=3)


def measured_keys(records, workload: str) -> set:
    """The configs of ``workload`` measured in ``records`` (any outcome), as JSON strings."""
    return {json.dumps(r["config"], sort_keys=True) for r in records
            if r["workload"] == workload}

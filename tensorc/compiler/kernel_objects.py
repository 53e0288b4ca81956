"""Each distinct kernel of a model compiled to an object of its own, on every idle core,
through the on-disk kernel cache.

A model's kernels are independent once fused: each is scheduled, lowered, emitted as an LLVM
module of its own (``LLVMCodegen(state="declare")``: it uses the run's state that the entry's
module defines) and compiled to object code by a pool of forked worker processes (one per idle
core, :func:`idle_cpus`; none when only one is idle), the largest kernels first. The runtime
links the objects with the entry's (runtime/cpu.py). A kernel's cache key is known before it is
scheduled (:func:`kernel_key`: its workload key, the tuned config or none, the target,
tensorc's source and LLVM's version), so a warm compile skips scheduling, lowering, the loop
passes and LLVM for it, and a model sharing a kernel with one compiled before reuses its
object. The exported symbol is named by that key, so the same object serves every model.

A worker that dies (an LLVM assertion) or raises takes nothing down: the kernels it had not
returned are built again in this process, each LLVM run in a forked child that retries
without the SLP vectorizer (``objects.emit_object``), which also raises the real error of a
kernel that cannot be scheduled.

>>> jobs, kernels = kernel_jobs(graph, groups, configs=None, target=target)
>>> objects = build_objects(graph, jobs, target, CompileTimes(), store=None)
"""
from __future__ import annotations

import json
import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

from tensorc.codegen.llvm.codegen import LLVMCodegen
from tensorc.codegen.llvm.objects import emit_object, emit_object_here
from tensorc.compiler.kernel import Kernel, repackable, schedule_group, workload_key
from tensorc.compiler.object_cache import ObjectCache, kernel_key
from tensorc.compiler.pipeline import Progress, empty_at_every_run
from tensorc.compiler.timing import CompileTimes
from tensorc.compiler.variants import kernel_meta, small_dims_variants
from tensorc.ir.graph import Graph
from tensorc.ops.cost import node_flops
from tensorc.ops.space import InvalidConfigError
from tensorc.passes.graph.fuse import FusedGroup
from tensorc.target import Target


@dataclass
class KernelJob:
    """One distinct kernel to build: its group (the first with its workload), names, key."""
    group: FusedGroup
    workload: tuple
    config: dict | None            # the tuned config, or None for the template's default
    name: str                      # k3_conv_relu: what reports call it
    symbol: str                    # the exported function: named by the cache key
    key: str                       # the kernel cache key


@dataclass
class KernelBuild:
    """A built kernel: its object code, what the tuning log learns of it, where time went."""
    obj: bytes
    tunable: bool                  # its schedule has knobs
    rejected: bool = False         # its tuned config no longer fits the space
    phases: dict = field(default_factory=dict)
    seconds: float = 0.0           # its Python-side and LLVM seconds
    meta: dict = field(default_factory=dict)    # over symbolic dims: compiler/variants.py


def kernel_jobs(graph: Graph, groups: list[FusedGroup], configs, target: Target
                ) -> tuple[list[KernelJob], list[Kernel]]:
    """The distinct kernels to build (in order of first use) and every kernel call of the
    model; ``configs`` (``autotune.records.BestConfigs`` or None) gives tuned configs."""
    jobs: dict[tuple, KernelJob] = {}
    kernels: list[Kernel] = []
    # views move no data, and an empty output needs no kernel
    for group in (g for g in groups if not g.view and not empty_at_every_run(g.output.type.size)):
        workload = workload_key(group, graph)
        job = jobs.get(workload)
        if job is None:
            config = configs.config_for(workload) if configs is not None else None
            if config is not None and not repackable(group, graph, target, config):
                configs.reject(workload)    # it repacks weights that are no constant
                config = None
            key = kernel_key(workload, config, target)
            job = KernelJob(group, workload, config, f"k{len(jobs)}_{group.name}",
                            f"tensorc_kernel_{key[:24]}", key)
            jobs[workload] = job
        kernels.append(Kernel(None, group, workload, job.name, job.symbol))
    return list(jobs.values()), kernels


def build_kernel(job: KernelJob, graph: Graph, target: Target, isolate: bool = True
                 ) -> KernelBuild:
    """Schedule, lower, emit and compile one kernel. ``isolate``: run LLVM in a forked child
    (see the module docstring); a worker, itself a child, runs it in place."""
    times = CompileTimes()
    start = time.perf_counter()
    rejected = False
    with graph.dims.active():      # (symbolic dims: decided by their ranges)
        try:
            func = schedule_group(job.group, graph, target, job.symbol, job.config, times)
        except InvalidConfigError:      # the space changed since the log was written
            if job.config is None:
                raise
            rejected = True
            func = schedule_group(job.group, graph, target, job.symbol, None, times)
        variants = small_dims_variants(job.group, graph, target, func, times)
    with times.phase("LLVM IR emission"):
        cg = LLVMCodegen(target, job.symbol, state="declare")
        for f in [*(f for _, f in variants), func]:
            cg.add_kernel(f, internal=False)
        llvm_ir = str(cg.module)
    emit = emit_object if isolate else emit_object_here
    obj = emit(llvm_ir, target, times.add, pass_level(job.group))
    return KernelBuild(obj, bool(func.attrs["config"]), rejected, times.phases,
                       time.perf_counter() - start, kernel_meta(func, variants))


# Kernels that only move data: their loops are a load and a store per vector, which LLVM's O2
# pipeline vectorizes as O3 does; O3 unrolls them further, and on a 4x32x32 transpose its code
# generator then took 0.65 s where O2's code took 0.05 s (bert's head split and merge).
MOVEMENT_OPS = frozenset({"transpose", "layout_transform", "concat", "slice", "gather",
                          "resize_axis", "pad", "copy", "reshape"})


def pass_level(group: FusedGroup) -> int:
    """The LLVM pipeline (speed level) that builds ``group``'s kernel: O2 for a kernel that
    only moves data (MOVEMENT_OPS), O3 for the rest."""
    return 2 if all(node.op in MOVEMENT_OPS for node in group.nodes) else 3


# (graph, jobs, target) for the pool's workers, which fork with it: nothing is pickled to them
# but a job's index
_WORK: tuple | None = None


def _build_in_worker(index: int) -> KernelBuild:
    graph, jobs, target = _WORK
    return build_kernel(jobs[index], graph, target, isolate=False)


def usable_cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not Linux
        return os.cpu_count() or 1


def idle_cpus() -> int:
    """The usable cores that no other runnable process holds right now (this one counted
    idle). Forking workers onto busy cores buys no parallel time, only their start-up and
    copy-on-write costs: with two test processes on a 2-core machine, a pool cost a tiny
    model 0.2 s of a 0.3-0.5 s compile."""
    cpus = usable_cpus()
    running = runnable_processes()
    return cpus if running is None else max(1, min(cpus, cpus + 1 - running))


def runnable_processes() -> int | None:
    """How many processes (threads) of the machine are runnable now, this one included; None
    where the system does not say (not Linux)."""
    try:
        with open("/proc/loadavg") as f:          # "0.51 0.62 0.70 2/612 4242"
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def build_objects(graph: Graph, jobs: list[KernelJob], target: Target, times: CompileTimes,
                  store: ObjectCache | None, configs=None, progress: Progress | None = None
                  ) -> tuple[list[bytes], list[dict], list[bool]]:
    """The object code of each job, in order, its call meta (compiler/variants.py) and
    whether its tuned config was rejected (its template's default built instead):
    from ``store`` where it holds the kernel, else built (on every usable core) and stored.
    ``configs`` hears which kernels were untunable or had their tuned config rejected;
    ``times`` gets every kernel's phases (summed over the workers) and the wall time of the
    parallel build."""
    builds: list[KernelBuild | None] = [None] * len(jobs)
    if store is not None:
        with times.phase("kernel cache"):
            for k, job in enumerate(jobs):
                builds[k] = _from_cache(store.get(job.key))
    todo = [k for k, build in enumerate(builds) if build is None]
    if progress and todo:
        progress(f"building {len(todo)} of {len(jobs)} distinct kernels "
                 f"({len(jobs) - len(todo)} from the cache)")
    # the largest kernels first, so that no worker starts a long one last
    todo.sort(key=lambda k: -sum(node_flops(n) for n in jobs[k].group.nodes))
    start = time.perf_counter()
    report = _BuildProgress(progress, len(todo), start)
    built, workers = _build_in_pool(graph, jobs, todo, target, report) if len(todo) > 1 \
        else ({}, 1)
    for k in todo:
        if k not in built:          # a worker failed on it, or there was no pool
            built[k] = build_kernel(jobs[k], graph, target, isolate=True)
            report.done(jobs[k].name)
    times.parallel = (workers, time.perf_counter() - start)
    for k, build in built.items():
        builds[k] = build
        for phase, seconds in build.phases.items():
            times.add(phase, seconds)
        times.kernels[jobs[k].name] = build.seconds
        if store is not None:
            with times.phase("kernel cache"):
                store.put(jobs[k].key, _cache_entry(build))
    if configs is not None:
        for job, build in zip(jobs, builds):
            if build.rejected:
                configs.reject(job.workload)
            if not build.tunable:
                configs.untunable(job.workload)   # no knobs: nothing a log could hold for it
    return [build.obj for build in builds], [build.meta for build in builds], \
        [build.rejected for build in builds]


PROGRESS_SECONDS = 3.0      # the LLVM build says how far it is at most this often


class _BuildProgress:
    """'built 5 of 16 kernels (4.1 s)' while the kernels build (LLVM takes seconds per large
    kernel, and a model of many was silent for 8-20 s), every PROGRESS_SECONDS at most
    (also while none finishes), and once when all are built."""

    def __init__(self, progress: Progress | None, total: int, start: float):
        self.progress, self.total, self.start = progress, total, start
        self.count, self.said = 0, start

    def tick(self) -> None:
        now = time.perf_counter()
        if self.progress and now - self.said >= PROGRESS_SECONDS:
            self.said = now
            self.progress(f"building: {self.count} of {self.total} kernels built "
                          f"({now - self.start:.1f} s)")

    def done(self, name: str) -> None:
        self.count += 1
        now = time.perf_counter()
        if self.progress and (self.count == self.total or now - self.said >= PROGRESS_SECONDS):
            self.said = now
            self.progress(f"built {self.count} of {self.total} kernels "
                          f"({now - self.start:.1f} s; last: {name})")


def _build_in_pool(graph: Graph, jobs: list[KernelJob], todo: list[int], target: Target,
                   report: _BuildProgress) -> tuple[dict[int, KernelBuild], int]:
    """The builds the pool's workers finished (the ones they failed on are left out), and
    how many workers it had (1: no pool)."""
    global _WORK
    workers = min(len(todo), idle_cpus())
    # a daemonic process (a multiprocessing.Pool's worker) may not start processes
    if workers < 2 or multiprocessing.current_process().daemon:
        return {}, 1
    built: dict[int, KernelBuild] = {}
    _WORK = (graph, jobs, target)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) \
                as pool:
            futures = {pool.submit(_build_in_worker, k): k for k in todo}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, max(PROGRESS_SECONDS, 0.2), FIRST_COMPLETED)
                if not finished:
                    report.tick()       # a long kernel: still say that the build goes on
                for future in finished:
                    try:
                        built[futures[future]] = future.result()
                    except Exception:   # noqa: BLE001 (built again here, naming the error)
                        continue
                    report.done(jobs[futures[future]].name)
    except (OSError, AssertionError, RuntimeError):
        pass        # no processes to be had (limits, a sandbox): what was built is kept
    finally:
        _WORK = None
    return built, workers


# A cache entry: one JSON line (what the tuning log learns of the kernel), then the object
def _cache_entry(build: KernelBuild) -> bytes:
    meta = {"tunable": build.tunable, "rejected": build.rejected, "calls": build.meta}
    return json.dumps(meta).encode() + b"\n" + build.obj


def _from_cache(entry: bytes | None) -> KernelBuild | None:
    if entry is None:
        return None
    line, _, obj = entry.partition(b"\n")
    try:
        meta = json.loads(line)
        return KernelBuild(obj, bool(meta["tunable"]), bool(meta["rejected"]),
                           meta=dict(meta.get("calls") or {}))
    except (ValueError, KeyError, TypeError):
        return None

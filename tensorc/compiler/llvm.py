"""The CPU back end: after the shared stages (compiler/pipeline.py), one LLVM function per
distinct kernel and one entry function that calls them all over the caller's arrays, the
constant pool and a static arena; LLVM's optimizer and code generator make the object code of
a :class:`tensorc.runtime.module.Module`.

A compile (:func:`compile_llvm_module`) builds each distinct kernel as an object of its own,
on every core and through the kernel cache (compiler/kernel_objects.py), and the entry as one
more; ``tensorc inspect`` and the IR snapshots (:func:`compile_graph`) see the same kernels as
one module:

    Lowered -> make_entry -> LLVM IR (codegen/llvm/) -> object code -> Module

>>> compiled = compile_graph(graph, Target.from_string("llvm"))
>>> print(optimized_llvm_ir(compiled, target))   # what `tensorc inspect --stage llvm` shows
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from tensorc.codegen.llvm.codegen import LLVMCodegen
from tensorc.codegen.llvm.objects import emit_object_here, optimize_module
from tensorc.compiler.collector import fewer_collections
from tensorc.compiler.kernel import Kernel, apply_layout, inlined_scalar
from tensorc.compiler.kernel_objects import build_objects, kernel_jobs
from tensorc.compiler.object_cache import cached_emit_object, default_cache
from tensorc.compiler.pipeline import (
    Lowered, Progress, input_signature, kernel_infos, lower_graph, optimize_graph,
    output_signature,
)
from tensorc.compiler.timing import CompileTimes
from tensorc.compiler.variants import call_forms
from tensorc.errors import TensorcError
from tensorc.frontend.model import import_model
from tensorc.ir.dims import as_expr, dim_var, dims_in, is_symbolic
from tensorc.ir.graph import Graph
from tensorc.ir.loop import (
    Buffer, IfThenElse, KernelCall, PrimFunc, Stmt, format_func, seq,
)
from tensorc.passes.graph.fuse import fuse
from tensorc.passes.graph.plan_memory import MemoryPlan, plan_memory
from tensorc.runtime.module import Module
from tensorc.target import Target

ENTRY = "tensorc_entry"


@dataclass
class Compiled(Lowered):
    entry: PrimFunc
    llvm_ir: str


def make_entry(graph: Graph, kernels: list[Kernel], plan: MemoryPlan) -> PrimFunc:
    """The entry function: one call per kernel, with pointers into the caller's arrays, the
    constant pool and the arena."""
    inputs = [Buffer(f"input{k}", v.type.shape, v.type.dtype) for k, v in
              enumerate(graph.inputs)]
    outputs = [Buffer(f"output{k}", v.type.shape, v.type.dtype) for k, v in
               enumerate(graph.outputs)]
    pool = Buffer("const_pool", (plan.const_pool.nbytes,), "uint8")
    arena = Buffer("arena", (plan.arena_size,), "uint8")
    # symbolic dims: the entry reads their values, in name order, from the int64 array after
    # its buffer pointers, and passes each kernel those it uses
    names = sorted(graph.dims.symbols)
    dims = [dim_var(name) for name in names]
    # a data-dependent dim's kernel writes its value into its slot of that array, and the
    # entry reads it again after the call
    dims_array = Buffer("dims", (len(names),), "int64")
    by_kind = {"input": inputs, "output": outputs}
    calls = []
    pending = set(graph.dims.data)        # data-dependent dims no call has written yet
    for kernel in kernels:
        group = kernel.group
        writes = [n for node in group.nodes for n in node.attrs.get("writes", ())]
        _check_written(kernel, pending, writes)
        pending -= set(writes)
        args = []
        values = [v for v in group.inputs if not inlined_scalar(v, graph)]
        for v in [*values, group.output]:
            place = plan.places[v]
            offset = as_expr(place.offset) if is_symbolic(place.offset) else place.offset
            if place.kind == "const":
                args.append((pool, offset))
            elif place.kind == "arena":
                args.append((arena, offset))
            else:
                args.append((by_kind[place.kind][place.index], offset))
        args += [(dims_array, 8 * names.index(n)) for n in writes]
        updates = [dim_var(n) for n in writes]
        call: Stmt | None = None
        # over symbolic dims: the kernel's calls, the first whose condition holds
        for condition, symbol, values in reversed(kernel.calls or
                                                  [(None, kernel.symbol, [])]):
            this = KernelCall(symbol, args, list(values), updates)
            call = this if call is None else IfThenElse(condition, this, call)
        calls.append(call)
    attrs = {"dims_array": dims_array} if graph.dims.data else {}
    return PrimFunc(ENTRY, [*inputs, *outputs, pool, arena], seq(*calls) if calls else seq(),
                    attrs, dims=dims)


def _check_written(kernel: Kernel, pending: set, writes: list[str]) -> None:
    """A kernel sized by a data-dependent dim must run after the kernel that writes it (the
    converters give it a data edge from that kernel); else it would read a stale value."""
    if not pending:
        return
    used = {n for v in [*kernel.group.inputs, kernel.group.output] for d in v.type.shape
            if is_symbolic(d) for n in d.names}
    used.update(n for node in kernel.group.nodes for d in dims_in(node.attrs.values())
                for n in d.names)      # a dim_values node's values, a topk's k
    early = sorted((used & pending) - set(writes))
    if early:
        raise TensorcError(f"kernel {kernel.name} reads the data-dependent dims "
                           f"{', '.join(early)} before the kernel that computes them runs "
                           f"(a bug in tensorc: their converter must give it a data edge)")


@fewer_collections()
def compile_graph(graph: Graph, target: Target, progress: Progress | None = None,
                  configs=None, times: CompileTimes | None = None) -> Compiled:
    """Compile an imported graph to LLVM IR; the outputs keep the names they have now.
    ``configs``: tuned schedule configs by workload (see ``pipeline.build_kernels``);
    ``times`` collects the seconds of each phase."""
    times = times if times is not None else CompileTimes()
    start = time.perf_counter()
    lowered = lower_graph(graph, target, progress, configs, times)
    entry = make_entry(lowered.graph, lowered.kernels, lowered.plan)
    llvm_ir = emit_llvm_ir(lowered, entry, target, times)
    if progress:
        progress(f"lowered {len(distinct_funcs(lowered))} distinct kernels for "
                 f"{len(lowered.kernels)} groups in {time.perf_counter() - start:.1f}s; "
                 f"running LLVM")
    return Compiled(**vars(lowered), entry=entry, llvm_ir=llvm_ir)


def distinct_funcs(lowered: Lowered) -> list[PrimFunc]:
    """Each distinct kernel's PrimFunc once, in the order of first use."""
    return list({f.name: f for k in lowered.kernels for f in k.funcs()}.values())


def emit_llvm_ir(lowered: Lowered, entry: PrimFunc, target: Target,
                 times: CompileTimes) -> str:
    """The module's LLVM IR text: each distinct kernel, then the entry function."""
    cg = LLVMCodegen(target, lowered.graph.name)
    for func in distinct_funcs(lowered):
        with times.phase("LLVM IR emission", func.name):
            cg.add_kernel(func)
    with times.phase("LLVM IR emission"):
        cg.add_entry(entry)
        return str(cg.module)


def optimized_llvm_ir(compiled: Compiled, target: Target) -> str:
    mod, _ = optimize_module(compiled.llvm_ir, target)
    return str(mod)


@fewer_collections()
def compile_llvm_module(proto, graph: Graph, target: Target, start: float,
                        num_threads: int | None = None, progress: Progress | None = None,
                        configs=None, times: CompileTimes | None = None,
                        cache: bool = True) -> Module:
    """``tensorc.compile(..., target="llvm")``: the Module of an imported graph; ``configs``
    (a ``records.BestConfigs``) gives tuned schedules by workload. ``times`` collects the
    seconds of each phase; the Module keeps it as ``compile_times``. ``cache``: read and
    write the on-disk kernel cache.

    Each distinct kernel becomes an object of its own, built on every core or read from the
    cache (compiler/kernel_objects.py); the entry function is one more object."""
    times = times if times is not None else CompileTimes()
    output_names = [v.name for v in graph.outputs]
    # symbolic dims: comparisons decided by their ranges (the kernels' builds activate the
    # table themselves, in their workers)
    with graph.dims.active():
        graph = optimize_graph(graph, target, times)
        with times.phase("fusion"):
            groups = fuse(graph)
        jobs, kernels = kernel_jobs(graph, groups, configs, target)
        store = default_cache() if cache else None
        objects, metas, rejected = build_objects(graph, jobs, target, times, store, configs,
                                                 progress)
        # a tuned config that picks another layout of a kernel's weights: each of its
        # groups' constants repacked for it (the kernels were built for that layout)
        applied = {job.workload: job.config for job, no in zip(jobs, rejected)
                   if job.config is not None and not no}
        for kernel in kernels:
            if kernel.key in applied:
                apply_layout(kernel.group, graph, target, applied[kernel.key])
        with times.phase("memory plan"):
            plan = plan_memory(graph, groups)
    meta_of = {job.workload: meta for job, meta in zip(jobs, metas)}
    for kernel in kernels:
        kernel.calls = call_forms(kernel.symbol, meta_of[kernel.key])
    lowered = Lowered(graph, groups, kernels, plan, output_names)
    entry = make_entry(graph, kernels, plan)
    with times.phase("LLVM IR emission"):
        cg = LLVMCodegen(target, graph.name, state="define")
        for job, meta in zip(jobs, metas):
            buffers = len(_call_args(job, graph))
            for _, symbol, values in call_forms(job.symbol, meta) or [(None, job.symbol, [])]:
                cg.declare_kernel(symbol, buffers, len(values))
        cg.add_entry(entry)
        entry_ir = str(cg.module)
    if progress:
        progress("compiling the entry function")
    entry_obj = cached_emit_object(entry_ir, target, times.add, cache, _emit_entry)
    info = {"kernels": len(jobs), "groups": len(groups),
            "compile_seconds": round(time.perf_counter() - start, 3)}
    if configs is not None:
        info["tuning"] = configs.summary()
        note = configs.note()
        if note and progress:
            progress(note)
        elif note:
            configs.warn()
    # the source model is serialized when the module is first saved or checked: seconds for
    # a model with large weights, which a compile that is never saved should not pay
    with times.phase("module creation"):
        mod = Module([entry_obj, *objects], ENTRY, input_signature(lowered),
                     output_signature(lowered), plan.const_pool, plan.arena_size,
                     str(target), proto.SerializeToString, info, kernel_infos(lowered),
                     target.features, graph.dims)
    if num_threads is not None:
        mod.num_threads = num_threads
    mod.compile_times = times.finish()
    return mod


def _emit_entry(llvm_ir: str, target: Target, on_phase=None) -> bytes:
    """The entry function's object, built in this process: a forked child (the guard against
    an LLVM assertion, objects.emit_object) costs 25 ms or more to start from a large process
    such as a test runner, about what LLVM takes for a small model's entry, and the entry
    has no loops: the SLP vectorizer (the assertion seen) is left off for it."""
    return emit_object_here(llvm_ir, target, on_phase, slp=False)


def _call_args(job, graph: Graph) -> list:
    """The buffers a call of ``job``'s kernel passes: its inputs that are not inlined
    scalars, then its output (as make_entry passes them)."""
    group = job.group
    writes = [n for node in group.nodes for n in node.attrs.get("writes", ())]
    return [v for v in group.inputs if not inlined_scalar(v, graph)] + [group.output] + writes


def compile_model(model, target: Target, input_shapes=None, num_threads: int | None = None,
                  configs=None, cache: bool = True, symbolic: bool = False,
                  dim_ranges=None) -> Module:
    """An ONNX model (path or ModelProto) imported and compiled for a CPU target, for callers
    below the public API (the autotuner); ``configs`` as in :func:`compile_llvm_module`.
    ``symbolic``: dims ``input_shapes`` leaves open stay symbolic (in ``dim_ranges``), as
    ``tensorc.compile`` keeps them."""
    times = CompileTimes()
    start = time.perf_counter()
    with times.phase("import and validation"):
        proto, graph = import_model(model, input_shapes, None, dim_ranges, symbolic=symbolic)
    return compile_llvm_module(proto, graph, target, start, num_threads, None, configs, times,
                               cache)


def inspect_llvm(graph: Graph, target: Target, stage: str) -> str:
    """``tensorc.inspect`` for CPU targets, stage loops (every distinct kernel, then the
    entry function) or llvm (the optimized LLVM IR)."""
    compiled = compile_graph(graph, target)
    if stage == "loops":
        seen, parts = set(), []
        for k in compiled.kernels:
            for f in k.funcs():
                if f.name not in seen:
                    seen.add(f.name)
                    parts.append(format_func(f))
        parts.append(format_func(compiled.entry))
        return "\n".join(parts)
    return optimized_llvm_ir(compiled, target)

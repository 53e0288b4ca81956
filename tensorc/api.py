"""The public functions of tensorc (re-exported by the package): compile, check, tune, inspect.

>>> mod = tensorc.compile("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
>>> print(tensorc.inspect("model.onnx", stage="fused"))
"""
from __future__ import annotations

import hashlib
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tensorc.compiler.timing import CompileTimes
from tensorc.errors import ShapeError, SymbolicDimError, TensorcError
from tensorc.runtime.module import Module, check_num_threads, default_threads
from tensorc.target import Target

# The frontend (onnx, about 0.4 s to import), the compiler (the LLVM codegen, about 0.3 s) and
# the autotuner are imported by the functions that use them, so that loading and running a saved
# module (tensorc.load, `tensorc run`) does not pay for them.

STAGES = ("graph", "fused", "loops", "llvm", "cuda")


def check(model: str | Path | "onnx.ModelProto",  # noqa: F821
          input_shapes: Mapping[str, Sequence[int]] | None = None,
          input_values: Mapping[str, object] | None = None,
          dim_ranges: Mapping[str, tuple[int, int | None]] | None = None
          ) -> "tensorc.frontend.check.CheckReport":  # noqa: F821
    """Report which ops of an ONNX model tensorc supports, without compiling it: unsupported
    ops (with domain, opset and node names), attributes and variants the converters reject,
    symbolic input dims and whether ``input_shapes`` binds them. Dims left unbound stay
    symbolic: the report gives their ranges (narrowed by ``dim_ranges``, e.g.
    ``{"seq": (1, 512), "past": (0, None)}``), the constraints checked at run time and the
    outputs' symbolic shapes. ``input_values`` fixes inputs to values as in :func:`compile`.

    >>> report = tensorc.check("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
    >>> report.supported  # str(report) is the text of ``tensorc check``, to_json() its JSON
    True
    """
    from tensorc.frontend.check import check_model  # start-up cost (top)
    return check_model(model, input_shapes, input_values, dim_ranges)


def compile(model: str | Path | "onnx.ModelProto", target: str | Target = "llvm",  # noqa: F821
            input_shapes: Mapping[str, Sequence[int]] | None = None, tuning_log=None,
            num_threads: int | None = None,
            progress: Callable[[str], None] | None = None,
            input_values: Mapping[str, object] | None = None,
            time_passes: bool = False, cache: bool = True,
            dim_ranges: Mapping[str, tuple] | None = None) -> Module:
    """Compile an ONNX model (path or ModelProto) for ``target``: "llvm" (this CPU; a
    :class:`Module`) or "cuda" / "cuda -arch=sm_90" (NVIDIA GPUs, built with nvcc; a
    :class:`tensorc.runtime.cuda.CudaModule`, which runs where pycuda finds a GPU).

    Symbolic input dims (``dim_param``s, unnamed dims, Paddle's -1) stay symbolic for CPU
    targets: one module runs every shape in their ranges, [1, inf) unless ``dim_ranges``
    narrows them (``{"seq": (1, 512), "past": (0, None)}``). ``input_shapes`` binds them
    instead, e.g. ``{"x": (1, 3, 224, 224)}``: a module specialized to that shape.
    ``input_values`` fixes
    inputs to values at compile time, e.g. ``{"sr": 16000}``: each becomes a constant and
    leaves the module's inputs, so an input that decides a shape or an If branch can be
    compiled.
    ``tuning_log`` (a ``tensorc tune`` log) applies the fastest record of each kernel measured
    on this target with this tensorc version; other kernels keep their default schedule (one
    note says how many).
    The module's ``compile_times`` (a ``tensorc.compiler.timing.CompileTimes``) holds the
    seconds of each phase and the slowest kernels; ``time_passes=True`` also prints its
    report to stderr, as ``tensorc compile --time-passes`` does.
    ``cache``: reuse and store object code in the on-disk cache (``$TENSORC_CACHE_DIR/kernels``,
    else ``$XDG_CACHE_HOME/tensorc/kernels``; an empty ``$TENSORC_CACHE_DIR`` disables it).

    >>> mod = tensorc.compile("resnet.onnx", input_shapes={"input": (1, 3, 224, 224)})
    """
    mod = _compile(model, target, input_shapes, tuning_log, num_threads, progress, input_values,
                   cache, dim_ranges)
    if time_passes:
        print(mod.compile_times.report(), file=sys.stderr, flush=True)
    return mod


def _compile(model, target, input_shapes, tuning_log, num_threads, progress, input_values,
             cache, dim_ranges=None):
    if num_threads is not None:
        check_num_threads(num_threads)
    tgt = Target.from_string(target)
    times = CompileTimes()
    start = time.perf_counter()
    with times.phase("python imports"):
        from tensorc.frontend.model import (  # start-up cost: see the top
            import_model, symbolic_dims_error,
        )
    with times.phase("import and validation"):
        # the CUDA back end compiles one shape: its symbolic dims must be bound
        try:
            proto, graph = import_model(model, input_shapes, input_values, dim_ranges,
                                        symbolic=tgt.kind != "cuda",
                                        loop_kernels=tgt.kind != "cuda")
        except ShapeError as error:
            if tgt.kind == "cuda" and UNBOUND_DIMS in str(error):
                raise cuda_needs_shapes(error) from None
            raise
    if progress:
        progress(f"imported {graph.name}: {len(graph.nodes)} nodes")
    if tgt.kind == "cuda":
        if graph.dims.data:     # sizes written by kernels: the CPU entry's mechanism alone
            nodes = ", ".join(sorted({repr(origin) for _, origin in graph.dims.data.values()}))
            raise TensorcError(f"the CUDA back end does not run ops whose output size depends "
                               f"on the data yet (nodes {nodes}); compile for target 'llvm'")
        if tuning_log is not None:
            raise TensorcError("tuning logs hold CPU (llvm) schedules; compile for cuda "
                               "without tuning_log=")
        with times.phase("python imports"):
            from tensorc.compiler.cuda import compile_cuda_module  # start-up cost (top)
        module = compile_cuda_module(proto, graph, tgt, progress, start, times)
    else:
        configs = None
        if tuning_log is not None:
            from tensorc.autotune.records import TuningLog  # start-up cost (top)
            configs = TuningLog(tuning_log).best_configs(tgt, threads=num_threads or
                                                         default_threads())
        with times.phase("python imports"):
            from tensorc.compiler.llvm import compile_llvm_module  # start-up cost (top)
        try:
            module = compile_llvm_module(proto, graph, tgt, start, num_threads, progress,
                                         configs, times, cache)
        except SymbolicDimError as error:
            raise symbolic_dims_error(error, proto, input_shapes) from None
    module.info.update(_provenance(model, input_shapes, input_values))
    return module


UNBOUND_DIMS = "has inputs with unknown dimensions"    # (the frontend's words for it)


def cuda_needs_shapes(error: ShapeError) -> ShapeError:
    """The frontend's error for unbound input dims, saying why the CUDA back end needs them
    bound and what keeps them symbolic instead."""
    why = ("the CUDA back end compiles one shape (its launch grids are fixed at compile "
           "time), so every symbolic input dim needs a value; or compile for target 'llvm', "
           "which keeps them symbolic")
    error.args = (f"{error}\n{why}",)
    cli = getattr(error, "cli_message", None)
    if cli:
        error.cli_message = f"{cli}\n{why}"
    return error.with_traceback(None)


def _provenance(model, input_shapes, input_values) -> dict:
    """Where a module came from, for ``tensorc info``: the source model's name, absolute path
    (a model given as a file) and SHA-256,
    the shapes and values it was compiled with, and when (UTC)."""
    path = None
    if isinstance(model, (str, Path)):
        data, name = Path(model).read_bytes(), Path(model).name
        path = str(Path(model).resolve())   # what 'run --check-onnxruntime' reads, unchanged
    else:
        data, name = model.SerializeToString(), model.graph.name or "<ModelProto>"
    source = {"model": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    if path is not None:
        source["path"] = path
    if input_shapes:
        source["input_shapes"] = {k: list(v) for k, v in input_shapes.items()}
    if input_values:
        source["input_values"] = {k: v.tolist() if hasattr(v, "tolist") else v
                                  for k, v in input_values.items()}
    return {"source": source,
            "compiled_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def tune(model, input_shapes: Mapping[str, Sequence[int]] | None = None,
         target: str | Target = "llvm", trials: int | None = None, time_budget=None,
         log: str | Path = "tune.jsonl", **kwargs):
    """Tune the model's kernels on this machine (see :func:`tensorc.autotune.tune`); the log
    is what ``compile(..., tuning_log=log)`` applies. ``input_values=`` fixes inputs to values
    as in :func:`compile`. Dims ``input_shapes`` leaves open stay symbolic, as ``compile``
    keeps them (``dim_ranges=`` narrows them): the kernels are tuned at ``tune_shapes=``
    (dicts of every symbolic dim's value; by default a few across each dim's range), and a
    config slower than the default at any of them is never applied.

    >>> result = tensorc.tune("model.onnx", trials=200, log="tune.jsonl")
    >>> mod = tensorc.compile("model.onnx", tuning_log="tune.jsonl")
    >>> tensorc.tune("bert.onnx", trials=200, log="bert.jsonl",
    ...              tune_shapes=[{"batch": 1, "seq": 9}, {"batch": 4, "seq": 128}])
    """
    from tensorc.autotune.tuner import tune as run_tuner  # start-up cost (top)
    return run_tuner(model, input_shapes, target, trials, time_budget, log, **kwargs)


def inspect(model, stage: str = "graph", input_shapes=None, target: str | Target = "llvm",
            input_values=None, dim_ranges=None) -> str:
    """The model's IR after a pipeline stage: graph, fused, loops, llvm (CPU targets) or
    cuda (CUDA C, with ptxas's resources per kernel when nvcc is there; for a CPU target,
    that of the default CUDA architecture). Dims no ``input_shapes`` binds stay symbolic on
    CPU targets, as ``compile`` keeps them."""
    from tensorc.compiler.pipeline import optimize_graph  # start-up cost (top)
    from tensorc.passes.graph.fuse import format_groups, fuse  # start-up cost (top)
    if stage not in STAGES:
        raise TensorcError(f"unknown stage {stage!r}: choose one of {', '.join(STAGES)}")
    tgt = Target.from_string(target)
    from tensorc.frontend.model import import_model  # start-up cost: see the top
    symbolic = tgt.kind != "cuda" and stage != "cuda"
    _, graph = import_model(model, input_shapes, input_values, dim_ranges, symbolic=symbolic,
                            loop_kernels=symbolic)
    # run the pipeline only as far as the stage asked for (symbolic dims decided by their
    # ranges, as compile decides them)
    if stage in ("graph", "fused"):
        with graph.dims.active():
            optimized = optimize_graph(graph, tgt)
            return str(optimized) if stage == "graph" else format_groups(fuse(optimized))
    if stage == "cuda" and tgt.kind != "cuda":
        tgt = Target.from_string("cuda")       # the CUDA C of the default architecture
    if tgt.kind == "cuda":
        from tensorc.compiler.cuda import inspect_cuda  # start-up cost (top)
        return inspect_cuda(graph, tgt, stage)
    from tensorc.compiler.llvm import inspect_llvm  # start-up cost (top)
    return inspect_llvm(graph, tgt, stage)


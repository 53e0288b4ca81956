"""The work of building the kernels of each model of models/symbolic.py, symbolic beside static,
on this process's CPU clock: a figure to trust on a busy machine, where the wall times of
``benchmarks.compile_time --symbolic`` move by 2x from run to run.

For each model, compiled with its dims symbolic and statically at one shape of its sweep
(models.symbolic.SWEEPS, ``--shape`` picks which): the CPU seconds of the Python side
(scheduling, lowering, loop passes, LLVM IR emission of every distinct kernel and its
variants, the least of three runs) and of LLVM (each kernel's module optimized and compiled to
an object at its pass level, the least of three runs each), the lines of LLVM IR emitted and
the bytes of object code, in one process, serially (a compile spreads the kernels over every
core: its wall time is about this work over the cores, plus the entry and the imports).

    python -m benchmarks.symbolic_compile_cost                 # every symbolic model
    python -m benchmarks.symbolic_compile_cost --models gpt_decoder_step --shape 4
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import format_table  # noqa: E402
from benchmarks.shapes import concrete_inputs  # noqa: E402
from models.symbolic import SWEEPS, SYMBOLIC_MODELS  # noqa: E402
from tensorc.codegen.llvm.codegen import LLVMCodegen  # noqa: E402
from tensorc.codegen.llvm.objects import emit_object_here  # noqa: E402
from tensorc.compiler.kernel import schedule_group  # noqa: E402
from tensorc.compiler.kernel_objects import kernel_jobs, pass_level  # noqa: E402
from tensorc.compiler.pipeline import optimize_graph  # noqa: E402
from tensorc.compiler.variants import small_dims_variants  # noqa: E402
from tensorc.frontend.model import import_model  # noqa: E402
from tensorc.passes.graph.fuse import fuse  # noqa: E402
from tensorc.target import Target  # noqa: E402

RUNS = 3


def least_cpu(fn) -> tuple[float, object]:
    """The least CPU seconds of RUNS calls of ``fn``, and its last result."""
    best, result = None, None
    for _ in range(RUNS):
        start = time.process_time()
        result = fn()
        seconds = time.process_time() - start
        best = seconds if best is None else min(best, seconds)
    return best, result


def cost(model, shapes, target: Target) -> dict:
    """Python and LLVM CPU seconds, IR lines and object bytes of ``model``'s kernels."""
    _, graph = import_model(model, shapes, None, None, symbolic=True)
    with graph.dims.active():
        graph = optimize_graph(graph, target)
        jobs, _ = kernel_jobs(graph, fuse(graph), None, target)

    def emit_ir() -> list[tuple[str, int]]:
        modules = []
        with graph.dims.active():
            for job in jobs:
                func = schedule_group(job.group, graph, target, job.symbol, None)
                variants = small_dims_variants(job.group, graph, target, func)
                cg = LLVMCodegen(target, job.symbol, state="declare")
                for f in [*(f for _, f in variants), func]:
                    cg.add_kernel(f, internal=False)
                modules.append((str(cg.module), pass_level(job.group)))
        return modules
    python, modules = least_cpu(emit_ir)
    llvm, size = 0.0, 0
    for text, level in modules:
        seconds, obj = least_cpu(lambda t=text, s=level: emit_object_here(t, target, speed=s))
        llvm, size = llvm + seconds, size + len(obj)
    return {"python": python, "llvm": llvm, "lines": sum(t.count("\n") for t, _ in modules),
            "bytes": size}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(SYMBOLIC_MODELS))
    parser.add_argument("--shape", type=int, default=1,
                        help="the sweep shape the static build takes (index into SWEEPS)")
    args = parser.parse_args(argv)
    target = Target.from_string("llvm")
    rows = []
    for name in args.models:
        model = SYMBOLIC_MODELS[name](0)
        dims = SWEEPS[name][args.shape % len(SWEEPS[name])]
        for label, shapes in (("symbolic", None), ("static", concrete_inputs(model, dims))):
            c = cost(model, shapes, target)
            rows.append([name, label if shapes is None else
                         f"static {' '.join(f'{k}={v}' for k, v in dims.items())}",
                         f"{c['python']:.2f}", f"{c['llvm']:.2f}",
                         f"{c['python'] + c['llvm']:.2f}", str(c["lines"]), str(c["bytes"])])
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(format_table(["model", "build", "python CPU s", "LLVM CPU s", "total CPU s",
                        "LLVM IR lines", "object bytes"], rows))


if __name__ == "__main__":
    main()

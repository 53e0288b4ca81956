"""Compile and load times of the bundled models: cold compile (empty kernel cache), warm
compile (the same cache, a new process), load of the saved artifact, and onnxruntime's
session creation beside them; then the cold compile's phases.

Each compile runs in a new process (``--child``), as a user's would: a cold one in an empty
cache folder, then a warm one reading it; the time is the wall time from the
``tensorc.compile`` call to the returned Module (the import of tensorc excluded; the frontend
and compiler modules a process's first compile imports included). The children may write
Python's bytecode caches (PYTHONDONTWRITEBYTECODE is dropped from their environment, and one
child imports everything first): an installed package has its .pyc files, and compiling
tensorc's sources again in every process would cost some 0.5 s that no user pays. Load is
``tensorc.load`` of the warm compile's artifact (source model included, as ``save`` writes it
by default), the median of five after one, in that process, and so is onnxruntime's
``InferenceSession`` creation (default options, median of three). The cold compile builds its
kernels on every core: its phases add up the seconds of every process (the "kernels wall"
column is the parallel build's wall time), and "cold CPU" is the CPU seconds of the compile
in all its processes (on a machine busy with other work, a steadier figure than the wall
time: on two idle cores the cold compile's wall time is at least half of it).

``--symbolic`` times instead the models of models/symbolic.py (issue 34: a symbolic compile
at most 2x a static one): each compiled with its dims symbolic, and statically at the first
three shapes of its sweep (models.symbolic.SWEEPS; the median shown), every compile cold
(``cache=False``) in a new process.

    python -m benchmarks.compile_time                       # every model in models/
    python -m benchmarks.compile_time --models mlp lenet5 --json
    python -m benchmarks.compile_time --symbolic               # or --symbolic cnn detector
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import models  # noqa: E402
from benchmarks.common import format_table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# the cold compile's phases shown, as (column, phases it adds up)
PHASE_COLUMNS = (
    ("imports", ("python imports",)),
    ("parse", ("import and validation",)),
    ("graph passes", ("graph passes",)),
    ("schedule+lower", ("scheduling", "lowering to loop IR", "loop passes")),
    ("LLVM IR", ("LLVM IR emission",)),
    ("LLVM opt", ("LLVM optimization",)),
    ("object", ("object emission",)),
    ("module", ("memory plan", "kernel cache", "module creation")),
)


def _child(name: str, artifact: str) -> dict:
    """Compile ``name`` (the cache is $TENSORC_CACHE_DIR), save it, time loading it and
    creating an onnxruntime session for it."""
    import onnxruntime as ort

    import tensorc
    path = str(models.path(name))
    cpu = _cpu_seconds()
    start = time.perf_counter()
    mod = tensorc.compile(path, input_shapes=models.input_shapes(name))
    compile_seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu
    times = mod.compile_times
    mod.save(artifact, overwrite=True)
    del mod
    loads, sessions = [], []
    for k in range(6):
        start = time.perf_counter()
        tensorc.load(artifact)
        if k:
            loads.append(time.perf_counter() - start)
    for _ in range(3):
        start = time.perf_counter()
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        sessions.append(time.perf_counter() - start)
    return {"compile": compile_seconds, "cpu": cpu, "phases": times.phases,
            "kernels": times.parallel, "load": statistics.median(loads),
            "ort_session": statistics.median(sessions),
            "artifact_mb": os.path.getsize(artifact) / 1e6}


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the compile's worker
    processes, which it waits for): on a machine shared with other work the wall time grows
    with the load, this much less."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


STATIC_SHAPES = 3      # sweep shapes a symbolic model is compiled statically at


def _symbolic_child(name: str, sweep_index: int) -> dict:
    """Cold compile of symbolic model ``name``: symbolic (``sweep_index`` -1) or static at
    that shape of its sweep."""
    import tensorc
    from models.symbolic import SWEEPS, SYMBOLIC_MODELS
    model = SYMBOLIC_MODELS[name]()
    shapes = None
    if sweep_index >= 0:
        dims = SWEEPS[name][sweep_index]
        shapes = {value.name: tuple(d.dim_value if d.HasField("dim_value") else
                                    dims[d.dim_param]
                                    for d in value.type.tensor_type.shape.dim)
                  for value in model.graph.input}
    start = time.perf_counter()
    tensorc.compile(model, input_shapes=shapes, cache=False)
    return {"compile": time.perf_counter() - start}


def measure_symbolic(name: str) -> dict:
    """A symbolic model's cold compile beside its static ones, each in a new process."""
    def run(index: int, scratch: str) -> float:
        out = subprocess.run([sys.executable, "-m", "benchmarks.compile_time",
                              "--symbolic-child", name, str(index)],
                             env=_environment(Path(scratch)), cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])["compile"]
    with tempfile.TemporaryDirectory(prefix="tensorc-compile-time-") as scratch:
        symbolic = run(-1, scratch)
        static = statistics.median(run(k, scratch) for k in range(STATIC_SHAPES))
    return {"model": name, "symbolic": symbolic, "static": static,
            "ratio": symbolic / static}


def _environment(cache: Path) -> dict:
    env = dict(os.environ, TENSORC_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def write_bytecode() -> None:
    """Import what a compile imports once, so that the timed children find .pyc files."""
    with tempfile.TemporaryDirectory(prefix="tensorc-compile-time-") as scratch:
        subprocess.run([sys.executable, "-c", "import onnxruntime, tensorc.api, "
                        "tensorc.compiler.llvm, tensorc.runtime.load"],
                       env=_environment(Path(scratch)), cwd=ROOT, check=True)


def measure(name: str) -> dict:
    """Cold and warm compile of one model, each in a new process, in a fresh cache folder."""
    with tempfile.TemporaryDirectory(prefix="tensorc-compile-time-") as scratch:
        env = _environment(Path(scratch) / "cache")
        artifact = str(Path(scratch) / f"{name}.tcz")
        runs = []
        for _ in ("cold", "warm"):
            out = subprocess.run([sys.executable, "-m", "benchmarks.compile_time", "--child",
                                  name, artifact], env=env, cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    cold, warm = runs
    return {"model": name, "cold": cold["compile"], "cold_cpu": cold["cpu"],
            "warm": warm["compile"],
            "load": warm["load"], "ort_session": warm["ort_session"],
            "artifact_mb": warm["artifact_mb"], "cold_phases": cold["phases"],
            "cold_kernels": cold["kernels"]}


def _row(result: dict) -> list[str]:
    return [result["model"], f"{result['cold']:.2f} s", f"{result['cold_cpu']:.2f} s",
            f"{result['warm']:.2f} s",
            f"{result['load'] * 1e3:.0f} ms", f"{result['ort_session'] * 1e3:.0f} ms",
            f"{result['artifact_mb']:.1f} MB"]


def _phase_row(result: dict) -> list[str]:
    phases = {}
    for phase, seconds in result["cold_phases"].items():
        phase = "graph passes" if phase.startswith("graph pass ") else phase
        phases[phase] = phases.get(phase, 0.0) + seconds
    row = [result["model"]]
    for _, names in PHASE_COLUMNS:
        row.append(f"{sum(phases.get(name, 0.0) for name in names):.2f}")
    workers, wall = result["cold_kernels"] or (0, 0.0)
    row.append(f"{wall:.2f} s ({workers})")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=sorted(models.MODELS),
                        choices=sorted(models.MODELS), metavar="NAME")
    parser.add_argument("--json", action="store_true", help="one JSON object per model")
    parser.add_argument("--symbolic", nargs="*", metavar="NAME",
                        help="the symbolic models' compiles beside their static compiles "
                             "(all of models/symbolic.py, or these)")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "ARTIFACT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--symbolic-child", nargs=2, metavar=("MODEL", "SHAPE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    if args.symbolic_child:
        print(json.dumps(_symbolic_child(args.symbolic_child[0], int(args.symbolic_child[1]))))
        return 0
    if args.symbolic is not None:
        return _main_symbolic(args.symbolic, args.json)
    if not args.json:
        print("importing once to write bytecode caches ...", file=sys.stderr)
    write_bytecode()
    results = []
    for name in args.models:
        result = measure(name)
        results.append(result)
        if args.json:
            print(json.dumps(result), flush=True)
    if not args.json:
        print(format_table(["model", "cold compile", "cold CPU", "warm compile", "load",
                            "ort session", "artifact"], [_row(r) for r in results]))
        print()
        print("cold compile by phase (seconds; kernel phases summed over the processes "
              "that built them):")
        print(format_table(["model", *(c for c, _ in PHASE_COLUMNS), "kernels wall (procs)"],
                           [_phase_row(r) for r in results]))
    return 0


def _main_symbolic(names: list[str], as_json: bool) -> int:
    from models.symbolic import SYMBOLIC_MODELS
    unknown = sorted(set(names) - set(SYMBOLIC_MODELS))
    if unknown:
        raise SystemExit(f"unknown symbolic models {unknown}; known: {sorted(SYMBOLIC_MODELS)}")
    write_bytecode()
    results = []
    for name in names or SYMBOLIC_MODELS:
        result = measure_symbolic(name)
        results.append(result)
        if as_json:
            print(json.dumps(result), flush=True)
    if not as_json:
        print(format_table(["model", "symbolic compile", f"static (median of {STATIC_SHAPES})",
                            "symbolic / static"],
                           [[r["model"], f"{r['symbolic']:.2f} s", f"{r['static']:.2f} s",
                             f"{r['ratio']:.1f}x"] for r in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

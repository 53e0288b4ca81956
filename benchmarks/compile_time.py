"""Compile and load times of the bundled models: cold compile (empty object cache), warm
compile (the same cache, a new process), load of the saved artifact, and onnxruntime's
session creation beside them, with the phases that took most of the cold compile.

Each compile runs in a new process (``--child``), as a user's would: a cold one in an empty
cache folder, then a warm one reading it; the time is the wall time from the
``tensorc.compile`` call to the returned Module (the import of tensorc excluded; the frontend
and compiler modules a process's first compile imports included). Load is
``tensorc.load`` of the warm compile's artifact, best of three, in that process, and so is
onnxruntime's ``InferenceSession`` creation (default options).

    python -m benchmarks.compile_time                       # every model in models/
    python -m benchmarks.compile_time --models mlp lenet5 --json
"""
from __future__ import annotations

import argparse
import json
import os
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
PHASES_SHOWN = 3         # the slowest phases of the cold compile, named in the table


def _child(name: str, artifact: str) -> dict:
    """Compile ``name`` (the cache is $TENSORC_CACHE_DIR), save it, time loading it and
    creating an onnxruntime session for it."""
    import onnxruntime as ort

    import tensorc
    path = str(models.path(name))
    start = time.perf_counter()
    mod = tensorc.compile(path, input_shapes=models.input_shapes(name))
    compile_seconds = time.perf_counter() - start
    mod.save(artifact, overwrite=True)
    loads, sessions = [], []
    for _ in range(3):
        start = time.perf_counter()
        tensorc.load(artifact)
        loads.append(time.perf_counter() - start)
        start = time.perf_counter()
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        sessions.append(time.perf_counter() - start)
    return {"compile": compile_seconds, "phases": mod.compile_times.phases,
            "load": min(loads), "ort_session": min(sessions),
            "artifact_mb": os.path.getsize(artifact) / 1e6}


def measure(name: str) -> dict:
    """Cold and warm compile of one model, each in a new process, in a fresh cache folder."""
    with tempfile.TemporaryDirectory(prefix="tensorc-compile-time-") as scratch:
        env = dict(os.environ, TENSORC_CACHE_DIR=str(Path(scratch) / "cache"),
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        artifact = str(Path(scratch) / f"{name}.tcz")
        runs = []
        for _ in ("cold", "warm"):
            out = subprocess.run([sys.executable, "-m", "benchmarks.compile_time", "--child",
                                  name, artifact], env=env, cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    cold, warm = runs
    return {"model": name, "cold": cold["compile"], "warm": warm["compile"],
            "load": warm["load"], "ort_session": warm["ort_session"],
            "artifact_mb": warm["artifact_mb"], "cold_phases": cold["phases"]}


def _row(result: dict) -> list[str]:
    phases = sorted(result["cold_phases"].items(), key=lambda item: -item[1])[:PHASES_SHOWN]
    return [result["model"], f"{result['cold']:.2f} s", f"{result['warm']:.2f} s",
            f"{result['load'] * 1e3:.0f} ms", f"{result['ort_session'] * 1e3:.0f} ms",
            f"{result['artifact_mb']:.1f} MB",
            ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=sorted(models.MODELS),
                        choices=sorted(models.MODELS), metavar="NAME")
    parser.add_argument("--json", action="store_true", help="one JSON object per model")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "ARTIFACT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    results = []
    for name in args.models:
        result = measure(name)
        results.append(result)
        if args.json:
            print(json.dumps(result), flush=True)
    if not args.json:
        print(format_table(["model", "cold compile", "warm compile", "load",
                            "ort session", "artifact", "slowest phases (cold)"],
                           [_row(r) for r in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Tuning throughput on a Dask cluster: trials per minute with 1 and with 2 local workers.

For each worker count, start a ``distributed.LocalCluster`` of that many worker processes
(one thread each, ``measure=1`` resource each, as the README deploys them), warm it up (the
workers start their build and run child processes), then time the tuner over a fixed number
of trials of a small MLP (three matmul tasks). Random search with a fixed seed, so every run
measures the same configs; optionally the local process pool (``--local``) for reference.

    python -m benchmarks.cluster_tuning --trials 48 --workers 1 2 --local

All workers here share one machine: their measurements take turns on the machine's lock, so
what a second worker adds is parallel builds (on a fleet each host also measures in
parallel). On a shared 2-core machine the figures are noisy: repeat before trusting them.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def mlp_model():
    """x (32x128) -> matmul -> relu -> matmul -> relu -> matmul: three tasks of 36 configs."""
    rng = np.random.default_rng(0)
    weights = {"w1": rng.standard_normal((128, 256)).astype("float32") * 0.1,
               "w2": rng.standard_normal((256, 128)).astype("float32") * 0.1,
               "w3": rng.standard_normal((128, 64)).astype("float32") * 0.1}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("Relu", ["m1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
             helper.make_node("Relu", ["m2"], ["r2"]),
             helper.make_node("MatMul", ["r2", "w3"], ["y"])]
    graph = helper.make_graph(
        nodes, "bench_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (32, 128))],
        [helper.make_empty_tensor_value_info("y")],
        initializer=[numpy_helper.from_array(a, n) for n, a in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def time_tuner(tasks, executor, trials: int, batch: int, options) -> dict:
    from tensorc.autotune.records import TuningLog
    from tensorc.autotune.tuner import Tuner
    with tempfile.TemporaryDirectory() as tmp:
        warm = Tuner(tasks, Path(tmp) / "warm.jsonl", executor, options, search="random",
                     batch=batch, seed=1)
        warm.run(trials=batch)
        tuner = Tuner(tasks, Path(tmp) / "tune.jsonl", executor, options, search="random",
                      batch=batch, seed=0)
        start = time.perf_counter()
        result = tuner.run(trials=trials)
        seconds = time.perf_counter() - start
        records = list(TuningLog(Path(tmp) / "tune.jsonl").records())
    return {"trials": result.trials, "seconds": round(seconds, 2),
            "errors": sum(t.errors for t in result.tasks),
            "trials_per_minute": round(result.trials / seconds * 60, 1),
            # per candidate, as the workers saw them: what parallel workers can overlap
            "build_s": round(float(np.mean([r["build_s"] for r in records])), 3),
            "run_s": round(float(np.mean([r["run_s"] for r in records])), 3)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=48)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--local", action="store_true",
                        help="also time the local process pool (2 builders, 1 runner)")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = parser.parse_args(argv)

    import distributed

    from tensorc.autotune.cluster import DaskExecutor
    from tensorc.autotune.measure import LocalExecutor, MeasureOptions
    from tensorc.autotune.task import extract_tasks

    tasks = extract_tasks(mlp_model(), measure=False)
    options = MeasureOptions(repeats=3, min_repeat_seconds=0.005, num_threads=1)
    rows = {}
    if args.local:
        with LocalExecutor(build_workers=2) as executor:
            rows["local pool"] = time_tuner(tasks, executor, args.trials, args.batch, options)
        print(f"local pool: {rows['local pool']}", flush=True)
    for n in args.workers:
        with distributed.LocalCluster(n_workers=n, processes=True, threads_per_worker=1,
                                      resources={"measure": 1}, dashboard_address=None,
                                      silence_logs=logging.ERROR) as cluster, \
                DaskExecutor(cluster) as executor:
            name = f"{n} dask worker{'s' if n > 1 else ''}"
            rows[name] = time_tuner(tasks, executor, args.trials, args.batch, options)
        print(f"{name}: {rows[name]}", flush=True)
    print()
    print(f"{'executor':16} {'trials':>6} {'seconds':>8} {'errors':>6} {'trials/min':>10} "
          f"{'build s':>8} {'run s':>8}")
    for name, row in rows.items():
        print(f"{name:16} {row['trials']:6d} {row['seconds']:8.1f} {row['errors']:6d} "
              f"{row['trials_per_minute']:10.1f} {row['build_s']:8.3f} {row['run_s']:8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

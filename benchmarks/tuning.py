"""The autotuner's search against random search at equal trials, on six kernels.

For each kernel (a 3x3 conv, a 1x1 conv, a depthwise conv, a stride-2 conv, a transformer
matmul, an attention softmax), tune its task twice with the same trial budget: XGBoost-guided
evolutionary search and random search. Print the best latency so far at a few trial counts
side by side, the trials each needed to reach random search's final best, and write the
curves as JSON (and a plot with --plot).

    python -m benchmarks.tuning --trials 64 --threads 1
    python -m benchmarks.tuning --trials 32 --kernels conv3x3 matmul --json out.json

Timings on a shared machine are noisy: repeat the run before trusting a difference of a few
percent. Where a kernel's search space is smaller than the budget, both searches end up
measuring all of it.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(name, nodes, inputs, output, weights):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info(output)],
        initializer=[numpy_helper.from_array(a, n) for n, a in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _conv(name, c, f, hw, k, stride=1, groups=1):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((f, c // groups, k, k)) * 0.1).astype("float32")
    b = rng.standard_normal(f).astype("float32")
    pad = k // 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[pad] * 4,
                              strides=[stride, stride], group=groups),
             helper.make_node("Relu", ["c"], ["y"])]
    return _model(name, nodes, [("x", (1, c, hw, hw))], "y", {"w": w, "b": b})


def _matmul(name, m, k, n):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) * 0.05).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["y"])]
    return _model(name, nodes, [("x", (m, k))], "y", {"w": w, "b": b})


def _softmax(name, shape):
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    return _model(name, nodes, [("x", shape)], "y", {})


KERNELS = {
    "conv3x3": lambda: _conv("conv3x3", 64, 64, 28, 3),
    "conv1x1": lambda: _conv("conv1x1", 128, 128, 28, 1),
    "depthwise": lambda: _conv("depthwise", 128, 128, 28, 3, groups=128),
    "conv_s2": lambda: _conv("conv_s2", 64, 128, 56, 3, stride=2),
    "matmul": lambda: _matmul("matmul", 128, 768, 768),
    "softmax": lambda: _softmax("softmax", (1, 12, 128, 128)),
}


def tune_task(task, search: str, trials: int, threads: int, batch: int, seed: int):
    from tensorc.autotune.measure import MeasureOptions
    from tensorc.autotune.tuner import Tuner
    options = MeasureOptions(num_threads=threads)
    tuner = Tuner([task], None, options=options, search=search, batch=batch, seed=seed)
    try:
        result = tuner.run(trials=trials)
    finally:
        tuner.close()
    (t,) = result.tasks
    curve = [c if math.isfinite(c) else None for c in t.curve]
    # "best": as the search saw it (comparable with the curves); "default" and "tuned": the
    # two configs timed again side by side at the end (the tuner's confirmation)
    return {"curve": curve, "best": min((c for c in curve if c), default=None),
            "default": t.default_latency, "tuned": t.best_latency, "config": t.best_config,
            "errors": t.errors}


def trials_to_reach(curve, target):
    for k, c in enumerate(curve, 1):
        if c is not None and c <= target * 1.0001:
            return k
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernels", nargs="+", choices=list(KERNELS), default=list(KERNELS))
    parser.add_argument("--json", metavar="FILE", help="write the curves here")
    parser.add_argument("--plot", metavar="PNG", help="draw best-so-far curves side by side")
    args = parser.parse_args(argv)

    from tensorc.autotune.space import extract_tasks
    rows, out = [], {}
    for name in args.kernels:
        tasks = extract_tasks(KERNELS[name](), measure=False)
        task = max(tasks, key=lambda t: t.flops)
        start = time.perf_counter()
        guided = tune_task(task, "xgboost", args.trials, args.threads, args.batch, args.seed)
        rand = tune_task(task, "random", args.trials, args.threads, args.batch, args.seed)
        out[name] = {"task": task.description, "space": len(task.space()),
                     "flops": task.flops, "xgboost": guided, "random": rand,
                     "seconds": time.perf_counter() - start}
        reach = trials_to_reach(guided["curve"], rand["best"])
        checkpoints = [k for k in (8, 16, 32, 64, 128, 256, 512) if k <= args.trials]
        cells = []
        for k in checkpoints:
            g = guided["curve"][min(k, len(guided["curve"])) - 1]
            r = rand["curve"][min(k, len(rand["curve"])) - 1]
            cells.append(f"@{k}: {g * 1e3:.4f}/{r * 1e3:.4f}")
        rows.append(f"{name:10s} {task.description:32s} space {len(task.space()):4d}  "
                    f"default {guided['default'] * 1e3:.4f} ms (tuned, timed beside it: "
                    f"{guided['tuned'] * 1e3:.4f})  "
                    f"best xgb {guided['best'] * 1e3:.4f} / random {rand['best'] * 1e3:.4f} ms"
                    f"  xgb reaches random's best at trial {reach}  " + "  ".join(cells))
        print(rows[-1], flush=True)
    print(f"\n(best-so-far latency in ms, xgboost/random, {args.trials} trials each, "
          f"{args.threads} thread(s); a shared machine: figures are noisy)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(2, 3, figsize=(12, 7))
        for ax, (name, data) in zip(axes.flat, out.items()):
            for search in ("xgboost", "random"):
                curve = [c * 1e3 if c else None for c in data[search]["curve"]]
                ax.plot(range(1, len(curve) + 1), curve, label=search)
            ax.set_title(f"{name} ({data['space']} configs)")
            ax.set_xlabel("trials")
            ax.set_ylabel("best ms")
            ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())

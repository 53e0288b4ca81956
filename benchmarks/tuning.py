"""The autotuner's search against random search at equal trials, on six kernels.

For each kernel (a 3x3 conv, a 1x1 conv, a depthwise conv, a stride-2 conv, a transformer
matmul, an attention softmax), tune its task twice with the same trial budget: XGBoost-guided
evolutionary search and random search. Print the best latency so far at a few trial counts
side by side (the raw curves, as each search measured them), then the same question decided
on re-timed latencies, and write both as JSON (and the curves as a plot with --plot).

    python -m benchmarks.tuning --trials 512 --threads 1
    python -m benchmarks.tuning --trials 32 --kernels conv3x3 matmul --json out.json

Why re-time: every trial is one noisy measurement, and a search's best-so-far is the minimum
of them, biased low by more the more it measured; random search's best of 512 beats the same
config's typical timing by about the noise of the machine. So the configs that matter are
timed again, side by side in one runner process, alternating, ``--rounds`` times each
(``measure.retime``, as the tuner confirms its picks): what each search would deliver after k
trials, which is what the tuner delivers after a run of k trials (the fastest re-timed of its
``CONFIRM_TOP`` fastest-measured configs). The guided search reaches random search's result
at trial k when its pick at k runs, re-timed, no slower than random search's final pick plus
the noise band: twice the standard error of the difference of the two medians, estimated
from the spread (interquartile range) of each one's re-timings.

Where a kernel's search space is smaller than the budget, both searches end up measuring all
of it, and only how soon the guided one found the best matters.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
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
    """Tune ``task`` with ``search``; the raw curve, the tuner's own confirmation, and every
    trial's config in the order measured (to find the search's picks after k trials)."""
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
    # tuner's own confirmation at the end of the run
    return {"curve": curve, "best": min((c for c in curve if c), default=None),
            "default": t.default_latency, "tuned": t.best_latency, "config": t.best_config,
            "errors": t.errors, "state": tuner.states[0]}


def trials_to_reach(curve, target):
    for k, c in enumerate(curve, 1):
        if c is not None and c <= target * 1.0001:
            return k
    return None


def relative_error(latencies) -> float:
    """The standard error of the median of ``latencies``, relative to it: 1.2533 sigma /
    sqrt(n), sigma estimated robustly as the interquartile range / 1.349."""
    q1, _, q3 = statistics.quantiles(latencies, n=4)
    median = statistics.median(latencies)
    return 1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(latencies)) / median


def retime_picks(task, runs: dict, threads: int, rounds: int, top: int) -> dict:
    """Time again, side by side, every config that was one of a search's ``top`` fastest
    measured after some trial, and decide each search's pick after each trial on those
    timings. ``runs`` maps a search's name to its ``tune_task`` result."""
    from tensorc.autotune.measure import Candidate, LocalExecutor, MeasureOptions, retime
    orders = {name: list(run["state"].measured) for name, run in runs.items()}
    tops = {name: [run["state"].top(top, k) for k in range(1, len(orders[name]) + 1)]
            for name, run in runs.items()}
    configs = list(dict.fromkeys([task.space().default()] + [
        c for found in tops.values() for picks in found for c in picks]))
    with LocalExecutor(build_workers=2) as executor:
        timed = retime(executor, [Candidate(task, c) for c in configs],
                       MeasureOptions(num_threads=threads), rounds)
    stats = {}
    for c, results in zip(configs, timed):
        latencies = [r.latency for r in results if r.error is None]
        if len(latencies) >= 4:
            stats[c] = (statistics.median(latencies), relative_error(latencies))
    picks = {name: [_fastest(candidates, stats) for candidates in found]
             for name, found in tops.items()}
    return {"configs": len(configs), "stats": stats, "picks": picks,
            "default": stats.get(task.space().default())}


def _fastest(configs, stats: dict):
    """The config of ``configs`` with the fastest re-timed median (None: none was timed)."""
    timed = [(stats[c][0], k) for k, c in enumerate(configs) if c in stats]
    return configs[min(timed)[1]] if timed else None


def picked(retimed: dict, search: str, trials: int) -> float:
    """The re-timed median of ``search``'s pick after ``trials`` trials (or its last)."""
    found = retimed["picks"][search]
    return retimed["stats"][found[min(trials, len(found)) - 1]][0]


def decide(retimed: dict, limit: int) -> dict:
    """Whether and when the guided search's pick comes within the noise band of random
    search's final pick (``limit``: the trial count it must do it within)."""
    stats, picks = retimed["stats"], retimed["picks"]
    target = picks["random"][-1]
    target_ms, target_error = stats[target]
    reach, band_at_limit = None, None
    for k, pick in enumerate(picks["xgboost"], 1):
        if pick is None:
            continue
        latency, error = stats[pick]
        band = 2 * math.sqrt(error ** 2 + target_error ** 2)
        if k == min(limit, len(picks["xgboost"])):
            band_at_limit = band
        if reach is None and (pick == target or latency <= target_ms * (1 + band)):
            reach = k
    at_limit = picks["xgboost"][min(limit, len(picks["xgboost"])) - 1]
    return {"target": target, "target_ms": target_ms * 1e3, "reach": reach,
            "xgb_at_limit": at_limit, "xgb_at_limit_ms": stats[at_limit][0] * 1e3,
            "band": band_at_limit,
            "reached": at_limit == target or
            stats[at_limit][0] <= target_ms * (1 + band_at_limit)}


def _ms(seconds) -> str:
    return f"{seconds * 1e3:.4f}" if seconds else "-"


def main(argv=None) -> int:
    from tensorc.autotune.tuner import CONFIRM_TOP
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--within", type=int, default=128,
                        help="the trials the guided search has to reach random search's "
                        "final result (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=10,
                        help="times each candidate is re-timed (default: %(default)s)")
    parser.add_argument("--kernels", nargs="+", choices=list(KERNELS), default=list(KERNELS))
    parser.add_argument("--json", metavar="FILE", help="write the curves and timings here")
    parser.add_argument("--plot", metavar="PNG", help="draw best-so-far curves side by side")
    args = parser.parse_args(argv)

    from tensorc.autotune.task import extract_tasks
    rows, retimed_rows, out = [], [], {}
    checkpoints = [k for k in (8, 16, 32, 64, 128, 256, 512) if k <= args.trials]
    for name in args.kernels:
        tasks = extract_tasks(KERNELS[name](), measure=False)
        task = max(tasks, key=lambda t: t.flops)
        start = time.perf_counter()
        runs = {search: tune_task(task, search, args.trials, args.threads, args.batch,
                                  args.seed) for search in ("xgboost", "random")}
        guided, rand = runs["xgboost"], runs["random"]
        retimed = retime_picks(task, runs, args.threads, args.rounds, CONFIRM_TOP)
        verdict = decide(retimed, args.within)
        stats, picks = retimed["stats"], retimed["picks"]
        reach = trials_to_reach(guided["curve"], rand["best"])
        cells = []
        for k in checkpoints:
            g = guided["curve"][min(k, len(guided["curve"])) - 1]
            r = rand["curve"][min(k, len(rand["curve"])) - 1]
            cells.append(f"@{k}: {g * 1e3:.4f}/{r * 1e3:.4f}")
        rows.append(f"{name:10s} {task.description:32s} space {len(guided['state'].space):4d}  "
                    f"best xgb {guided['best'] * 1e3:.4f} / random {rand['best'] * 1e3:.4f} "
                    f"ms  xgb reaches random's best at trial {reach}  " + "  ".join(cells))
        print(rows[-1], flush=True)

        measured_best = rand["state"].top(1)[0]
        retimed_cells = [f"@{k}: {picked(retimed, 'xgboost', k) * 1e3:.4f}/"
                         f"{picked(retimed, 'random', k) * 1e3:.4f}" for k in checkpoints]
        retimed_rows.append(
            f"{name:10s} default {_ms(retimed['default'][0])}  xgb@{args.within} "
            f"{verdict['xgb_at_limit_ms']:.4f}  xgb@{args.trials} "
            f"{picked(retimed, 'xgboost', args.trials) * 1e3:.4f}  random@{args.trials} "
            f"{verdict['target_ms']:.4f} (its measured best {_ms(stats[measured_best][0])})  "
            f"band {verdict['band'] * 100:.2f}%  "
            f"{'REACHED' if verdict['reached'] else 'not reached'} at {args.within}, first "
            f"at trial {verdict['reach']}  ({retimed['configs']} configs)  "
            + "  ".join(retimed_cells))
        print(retimed_rows[-1], flush=True)
        out[name] = {
            "task": task.description, "space": len(task.space()), "flops": task.flops,
            "seconds": time.perf_counter() - start,
            **{search: {"curve": run["curve"], "best": run["best"], "errors": run["errors"],
                        "confirmed_default": run["default"], "confirmed_tuned": run["tuned"],
                        "config": run["config"],
                        "picks_ms": [stats[c][0] * 1e3 if c else None
                                     for c in picks[search]]}
               for search, run in runs.items()},
            "retimed": {"rounds": args.rounds, "configs": retimed["configs"],
                        "default_ms": retimed["default"][0] * 1e3 if retimed["default"]
                        else None,
                        "random_final_ms": verdict["target_ms"],
                        "random_final_config": dict(verdict["target"]),
                        "random_measured_best_ms": stats[measured_best][0] * 1e3,
                        "xgboost_within_ms": verdict["xgb_at_limit_ms"],
                        "xgboost_within_config": dict(verdict["xgb_at_limit"]),
                        "band": verdict["band"], "reached": verdict["reached"],
                        "first_trial": verdict["reach"]}}
    reached = sum(d["retimed"]["reached"] for d in out.values())
    print(f"\nraw: best-so-far latency in ms as each search measured it, xgboost/random, "
          f"{args.trials} trials each, {args.threads} thread(s)")
    print("\n".join(rows))
    print(f"\nre-timed: each search's pick after k trials (the fastest of its {CONFIRM_TOP} "
          f"fastest-measured configs), all timed again side by side, {args.rounds} rounds, "
          f"medians in ms; band: 2 standard errors of the difference of the two medians")
    print("\n".join(retimed_rows))
    print(f"\nthe guided search's pick after {args.within} trials is within the noise band of "
          f"random search's after {args.trials} on {reached} of {len(out)} kernels")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(2, 3, figsize=(12, 7))
        for ax, (name, data) in zip(axes.flat, out.items()):
            for search, color in (("xgboost", "C0"), ("random", "C1")):
                curve = [c * 1e3 if c else None for c in data[search]["curve"]]
                ax.plot(range(1, len(curve) + 1), curve, color=color, label=search)
                ax.plot(range(1, len(curve) + 1), data[search]["picks_ms"], color=color,
                        linestyle=":", label=f"{search}, re-timed pick")
            ax.set_title(f"{name} ({data['space']} configs)")
            ax.set_xlabel("trials")
            ax.set_ylabel("best ms")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())

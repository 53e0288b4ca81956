"""Offline evaluation of the cost model on a tuning log: leave one task out.

For each task of the model with measurements in the log, train the XGBoost model on every
other task's measurements, score the held-out task's measured configs, and report
- top-1 and top-5 score: best latency overall / best latency among the model's top-k picks
  (1.0: the model's picks include the fastest config);
- pairwise ranking accuracy: the share of config pairs the model orders right.

    python -m benchmarks.cost_model_eval models/resnet.onnx tune.jsonl
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("log")
    parser.add_argument("--objective", default="rank:pairwise",
                        choices=("rank:pairwise", "reg:squarederror"))
    args = parser.parse_args(argv)

    from tensorc.autotune.cost_model import XGBoostCostModel, pairwise_accuracy, top_k_score
    from tensorc.autotune.features import extract_features
    from tensorc.autotune.records import TuningLog
    from tensorc.autotune.task import extract_tasks
    from tensorc.ops.space import Config
    tasks = {t.workload: t for t in extract_tasks(args.model, measure=False)}
    data: dict[str, list] = {}
    for r in TuningLog(args.log).records():
        task = tasks.get(r["workload"])
        if task is None or r.get("error") is not None or not r.get("latency"):
            continue
        try:
            feats = extract_features(task.schedule(Config(r["config"])))
        except Exception:       # noqa: BLE001  (a config that no longer lowers)
            continue
        data.setdefault(r["workload"], []).append((feats, r["latency"]))
    usable = {w: rows for w, rows in data.items() if len(rows) >= 5}
    if len(usable) < 2:
        print("need at least two tasks with five or more measurements each")
        return 1
    results = []
    for held, rows in usable.items():
        feats, lats, groups = [], [], []
        for w, other in usable.items():
            if w == held:
                continue
            for f, lat in other:
                feats.append(f)
                lats.append(lat)
                groups.append(w)
        model = XGBoostCostModel(args.objective)
        model.update(np.stack(feats), lats, groups)
        x = np.stack([f for f, _ in rows])
        y = [lat for _, lat in rows]
        scores = model.predict(x)
        results.append((tasks[held].name, len(rows), top_k_score(scores, y, 1),
                        top_k_score(scores, y, 5), pairwise_accuracy(scores, y)))
        print(f"{results[-1][0]:36s} n={len(rows):4d}  top-1 {results[-1][2]:.3f}  "
              f"top-5 {results[-1][3]:.3f}  pairwise {results[-1][4]:.3f}")
    mean = np.mean([r[2:] for r in results], axis=0)
    print(f"{'mean':36s}          top-1 {mean[0]:.3f}  top-5 {mean[1]:.3f}  "
          f"pairwise {mean[2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

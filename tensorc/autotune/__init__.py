"""The autotuner: search each kernel's schedule space, measured in isolated processes and
guided by an XGBoost cost model over loop-IR features; results go to a JSON-lines log that
``tensorc.compile(..., tuning_log=...)`` applies. ``tensorc tune`` is its command
(``tensorc/cli/tune.py``).

>>> tasks = tensorc.autotune.extract_tasks("model.onnx")
>>> result = tensorc.autotune.tune("model.onnx", trials=200, log="tune.jsonl")
"""
from tensorc.autotune.task import extract_tasks
from tensorc.autotune.tuner import tune

__all__ = ["extract_tasks", "tune"]

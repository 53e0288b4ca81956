"""The autotuner: search each kernel's schedule space, measured in isolated processes and
guided by an XGBoost cost model over loop-IR features; results go to a JSON-lines log that
``tensorc.compile(..., tuning_log=...)`` applies. ``tensorc tune`` is its command
(``tensorc/cli/tune.py``). A model over symbolic dims is tuned at several shapes at once
(``autotune/shapes.py``).

>>> tasks = tensorc.autotune.extract_tasks("model.onnx")
>>> tasks, shapes = tensorc.autotune.extract_symbolic_tasks("bert.onnx")
>>> result = tensorc.autotune.tune("model.onnx", trials=200, log="tune.jsonl")
"""
from tensorc.autotune.task import extract_symbolic_tasks, extract_tasks
from tensorc.autotune.tuner import tune

__all__ = ["extract_symbolic_tasks", "extract_tasks", "tune"]

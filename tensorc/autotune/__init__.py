"""The autotuner: search each kernel's schedule space, measured in isolated processes and
guided by an XGBoost cost model over loop-IR features; results go to a JSON-lines log that
``tensorc.compile(..., tuning_log=...)`` applies.

>>> tasks = tensorc.autotune.extract_tasks("model.onnx")
>>> result = tensorc.tune("model.onnx", trials=200, log="tune.jsonl")
"""
from tensorc.autotune.records import TuningLog, TuningLogNote
from tensorc.autotune.space import Task, extract_tasks
from tensorc.autotune.tuner import TuneResult, Tuner, tune

__all__ = ["extract_tasks", "tune", "Task", "Tuner", "TuneResult", "TuningLog",
           "TuningLogNote"]

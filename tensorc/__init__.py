"""tensorc: compile ONNX models into fast native code.

>>> import tensorc
>>> mod = tensorc.compile("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
>>> out = mod.run({"x": x})
>>> mod.save("model.tcz"); mod = tensorc.load("model.tcz")
"""
from tensorc.api import STAGES, check, compile, inspect, tune
from tensorc.errors import (
    ArtifactError, InputError, ModelLoadError, ScheduleError, ShapeError, TensorcError,
    UnsupportedOpError,
)
from tensorc.runtime.load import load
from tensorc.runtime.module import Module
from tensorc.target import Target
from tensorc.version import __version__  # noqa: F401  (tensorc.__version__)

__all__ = ["compile", "check", "tune", "load", "inspect", "Module", "Target", "TensorcError",
           "UnsupportedOpError", "ModelLoadError", "ShapeError", "InputError",
           "ArtifactError", "ScheduleError", "STAGES"]

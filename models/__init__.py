"""Test models built with onnx.helper and seeded random weights.

Each module has ``build() -> onnx.ModelProto`` and writes models/<name>.onnx when run as a
script. The small ones (mlp, lenet5) are checked in; the others are generated on first use.

>>> import models
>>> sorted(models.MODELS)  # doctest: +NORMALIZE_WHITESPACE
['aspp', 'aspp_mid', 'audio', 'bert', 'bert_base', 'detector', 'efficientnet', 'gpt2',
 'inception', 'lenet5', 'lstm', 'mlp', 'mobilenetv2', 'resnet', 'resnet50', 'squeezenet', 'vit',
 'yolo']
>>> model = models.load("mlp")
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx

MODELS_DIR = Path(__file__).resolve().parent
# Imported lazily, so that `python -m models.<name>` does not import its own module twice.
_NAMES = ("mlp", "lenet5", "resnet", "resnet50", "mobilenetv2", "bert", "bert_base", "gpt2",
          "detector", "lstm", "squeezenet", "inception", "efficientnet", "yolo", "audio", "vit",
          "aspp", "aspp_mid")
# Models whose .onnx is generated (gitignored) rather than checked in; rebuilt when their
# script or a shared builder is newer than the file, so a stale copy is never used.
GENERATED = frozenset(_NAMES) - {"mlp", "lenet5"}
_SHARED = ("_builder.py", "transformer.py")
# mlp, lenet5, resnet and bert are the examples tensorc ships: their builders live there
EXAMPLES_DIR = MODELS_DIR.parent / "tensorc" / "examples"


def _module(name: str) -> ModuleType:
    if name not in _NAMES:
        known = ", ".join(sorted(_NAMES))
        raise KeyError(f"unknown model {name!r}; known models: {known}")
    return importlib.import_module(f"models.{name}")


def _lazy_build(name: str) -> Callable[..., onnx.ModelProto]:
    def build(*args, **kwargs) -> onnx.ModelProto:
        return _module(name).build(*args, **kwargs)

    build.__name__ = f"build_{name}"
    build.__doc__ = f"Build the {name} model (see models/{name}.py)."
    return build


MODELS: dict[str, Callable[..., onnx.ModelProto]] = {name: _lazy_build(name) for name in _NAMES}


def path(name: str) -> Path:
    """The model's .onnx file, built and written first if it is missing (or stale, for a
    generated model).

    >>> path("mlp").name
    'mlp.onnx'
    """
    module = _module(name)
    file = MODELS_DIR / f"{name}.onnx"
    # its script, the shared builders, and the other scripts it names in DEPENDS
    sources = [Path(module.__file__)] + [MODELS_DIR / shared for shared in
                                         (*_SHARED, *getattr(module, "DEPENDS", ()))]
    sources += EXAMPLES_DIR.glob("*.py")    # the builders the example models moved to
    newest = max(source.stat().st_mtime for source in sources)
    stale = name in GENERATED and file.exists() and file.stat().st_mtime < newest
    if not file.exists() or stale:
        tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")  # parallel test workers
        onnx.save(module.build(), tmp)
        tmp.replace(file)
    return file


def load(name: str) -> onnx.ModelProto:
    """The model as a ModelProto, read from models/<name>.onnx (built there if missing)."""
    return onnx.load(path(name))


def input_shapes(name: str) -> dict[str, tuple[int, ...]] | None:
    """Concrete shapes to bind the model's symbolic input dims to, or None if it has none.

    >>> input_shapes("resnet")
    {'input': (1, 3, 224, 224)}
    """
    return _module(name).INPUT_SHAPES


def example_inputs(name: str, seed: int = 0) -> dict[str, np.ndarray] | None:
    """The model's own example feeds, in the ranges it expects (token ids inside the
    vocabulary, a 0/1 attention mask, images in [0, 1]), or None if its script has none.

    >>> example_inputs("gpt2")["input_ids"].shape
    (1, 32)
    >>> example_inputs("mlp") is None
    True
    """
    make = getattr(_module(name), "example_inputs", None)
    return make(seed) if make is not None else None

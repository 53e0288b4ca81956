"""What CPU modules (runtime/module.py) and CUDA modules (runtime/cuda.py) have in common: the
signature, the constants, the checks of a run's feeds, the error of a failed index check, and
writing the artifact.

>>> isinstance(tensorc.load("model.tcz"), CompiledModule)
True
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from tensorc.errors import KernelRuntimeError
from tensorc.runtime import artifact
from tensorc.runtime.signature import Signature, check_feeds, describe


def index_out_of_range(nodes: Sequence[tuple[str, str]], kernel: str, index: int | None,
                       size: int | None) -> KernelRuntimeError:
    """The error for a run stopped by a failed index check (CPU and GPU alike): ``nodes``
    are the (name, op) pairs of the failing kernel's nodes, of which the gathers and
    scatters are named."""
    sizes = [(node, op) for node, op in nodes if op == "value_dim"]
    if sizes:       # a run-time size (TopK's k) out of its range (ops/value_dim.py)
        where = ", ".join(repr(node) for node, _ in sizes)
        bound = f"[0, {size - 1}]" if size else "its range"
        # the kernel checks a negative value moved down by size, to fail the check
        given = index + size if index is not None and size and index < 0 else index
        return KernelRuntimeError(
            f"the run stopped: node {where} was given the size {given}, outside {bound}; "
            f"check the inputs fed to the model")
    checked = [(node, op) for node, op in nodes if op.startswith(("gather", "scatter"))] \
        or list(nodes)
    where = ", ".join(f"{node!r} ({op})" for node, op in checked) or kernel
    rule = ("the axis is empty, so no index is valid" if size == 0 else
            f"indices must lie in [{-size}, {size})" if size else
            "indices must lie in [-size, size)")
    return KernelRuntimeError(
        f"the run stopped: node {where} read the index {index}, out of range for an axis "
        f"of size {size}: {rule}; check the index inputs fed to the model")


class CompiledModule:
    """A compiled model's signature, constants and provenance; subclasses run it on a device
    (``run``, ``profile``) and say what their artifact holds (``save``)."""

    # where the compile's time went (a tensorc.compiler.timing.CompileTimes), set by
    # tensorc.compile; None on a loaded module
    compile_times = None

    def __init__(self, inputs: Signature, outputs: Signature, const_pool: np.ndarray,
                 target: str, source_onnx: bytes | None = None, info: dict | None = None):
        self.inputs: Signature = [(n, tuple(s), d) for n, s, d in inputs]
        self.outputs: Signature = [(n, tuple(s), d) for n, s, d in outputs]
        self.const_pool = const_pool
        self.target = target
        self.source_onnx = source_onnx
        self.info = info or {}

    @property
    def input_names(self) -> list[str]:
        return [n for n, _, _ in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [n for n, _, _ in self.outputs]

    def _check_feeds_slowly(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        return check_feeds(self.inputs, feeds)

    @staticmethod
    def _describe(sig: Signature) -> str:
        return describe(sig)

    def _write(self, path: str | Path, header: dict, sections: dict[str, bytes],
               overwrite: bool, include_source: bool) -> None:
        """Write the artifact, with the source ONNX model unless it is left out."""
        if self.source_onnx is not None and include_source:
            sections["onnx"] = self.source_onnx
        artifact.write(path, header, sections, overwrite=overwrite)

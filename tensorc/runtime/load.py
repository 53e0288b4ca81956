"""``tensorc.load``: a saved module, CPU or CUDA by what its artifact holds.

>>> mod = tensorc.load("model.tcz")          # a Module, or a CudaModule
"""
from __future__ import annotations

from pathlib import Path

from tensorc.runtime import artifact
from tensorc.runtime.base import CompiledModule
from tensorc.runtime.cuda import load_cuda
from tensorc.runtime.module import load_cpu


def load(path: str | Path) -> CompiledModule:
    """Load a module saved with :meth:`Module.save`; nothing is compiled again. The whole
    file's checksum, the format and tensorc versions, the header's fields and the CPU features
    the code needs are checked before any code is linked."""
    header, sections = artifact.read(path)
    if artifact.kind(header) == "cuda":
        # the CUDA module takes its sections as bytes (its constants go to the device anyway)
        return load_cuda(path, header, {name: bytes(data) for name, data in sections.items()})
    return load_cpu(path, header, sections)

"""Helpers for CUDA tests without a GPU: run generated CUDA C on the CPU emulator, find nvcc.

>>> [[c]] = emulate([(func, [a, b])])        # func: a lowered, optimized PrimFunc; c returned
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pytest

from helpers_kernels import poisoned
from tensorc.codegen.cuda import CudaCodegen
from tensorc.codegen.cuda_emulator import build_emulator
from tensorc.codegen.nvcc import find_nvcc
from tensorc.compiler.cuda import to_device
from tensorc.ir.loop import PrimFunc
from tensorc.passes.loop.split_kernels import workspace_layout
from tensorc.runtime.cuda_device import kernel_sync_flags
from tensorc.target import Target

CUDA = Target.from_string("cuda")

needs_nvcc = pytest.mark.skipif(find_nvcc() is None,
                                reason="nvcc not found (install the CUDA toolkit or set "
                                       "CUDA_HOME): CUDA builds are not checked")


def emulate(cases: Sequence[tuple[PrimFunc, Sequence[np.ndarray]]],
            target: Target = CUDA) -> list[list[np.ndarray]]:
    """Run each (optimized PrimFunc, inputs) on the CPU emulator, all kernels built in one
    source; returns each case's outputs (the parameters after its inputs)."""
    devices = [to_device(func, target) for func, _ in cases]
    cg = CudaCodegen(target)
    for dev in devices:
        for kernel in dev.kernels:
            cg.add_kernel(kernel)
    source = cg.source()
    lib = build_emulator(source, kernel_sync_flags(source))
    results = []
    for dev, (func, inputs) in zip(devices, cases):
        arrays = [np.ascontiguousarray(a) for a in inputs]
        outputs = [poisoned(b.shape, b.dtype) for b in func.params[len(inputs):]]
        memory = {id(b): a for b, a in zip(func.params, [*arrays, *outputs])}
        layout = workspace_layout(dev.workspace)
        workspace = np.zeros(sum(-(-b.nbytes // 256) * 256 for b in dev.workspace) + 256,
                             np.uint8)
        for buf, offset in layout.items():
            memory[id(buf)] = workspace[offset:offset + buf.nbytes]
        for kernel in dev.kernels:
            pointers = [memory[id(b)].ctypes.data for b in kernel.params]
            lib.launch(kernel.name, kernel.attrs["grid"], kernel.attrs["block"], pointers)
        results.append(outputs)
    return results

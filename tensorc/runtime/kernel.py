"""Build single kernels into callables: for tests, examples and the autotuner's measurements.

>>> kernel = build_kernel(optimize(lower(sch, [A, B, C], "mm")))
>>> kernel(a, b, c)      # numpy arrays, in parameter order; c is written
"""
from __future__ import annotations

import ctypes

import numpy as np

from tensorc.codegen.llvm.codegen import LLVMCodegen
from tensorc.codegen.llvm.objects import emit_object
from tensorc.errors import InputError, KernelRuntimeError, TensorcError
from tensorc.ir.loop import KernelCall, PrimFunc
from tensorc.runtime.cpu import NativeLibrary
from tensorc.target import Target, missing_cpu_features


class Kernel:
    """A compiled PrimFunc; call it with one contiguous numpy array per parameter."""

    def __init__(self, func: PrimFunc, library: NativeLibrary, entry_name: str):
        self.func = func
        self._library = library
        self._entry = library.entry(entry_name)

    def __call__(self, *arrays: np.ndarray, num_threads: int = 0) -> None:
        params = self.func.params
        if len(arrays) != len(params):
            raise InputError(f"{self.func.name} takes {len(params)} arrays, got {len(arrays)}")
        for buf, arr in zip(params, arrays):
            if not isinstance(arr, np.ndarray):
                raise InputError(f"{self.func.name}: parameter {buf.name} needs a contiguous "
                                 f"{buf.dtype}{list(buf.shape)} numpy array, got "
                                 f"{type(arr).__name__}")
            if tuple(arr.shape) != buf.shape or arr.dtype != np.dtype(buf.dtype) \
                    or not arr.flags.c_contiguous:
                layout = "" if arr.flags.c_contiguous else "non-contiguous "
                raise InputError(f"{self.func.name}: parameter {buf.name} needs a contiguous "
                                 f"{buf.dtype}{list(buf.shape)} array, got {layout}"
                                 f"{arr.dtype}{list(arr.shape)}")
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        status = self._entry(ptrs, num_threads, None)
        if status:
            raise KernelRuntimeError(f"{self.func.name} failed a runtime check (status "
                                     f"{status})")


def build_kernel(func: PrimFunc, target: Target | str | None = None) -> Kernel:
    """Compile one (optimized, flattened) PrimFunc for this machine's CPU, to run here: a
    target whose CPU features this machine lacks is refused (its code would die of SIGILL);
    ``llvm_ir`` or ``emit_object`` compile for any target without running."""
    target = Target.host() if target is None else Target.from_string(target)
    missing = missing_cpu_features(str(target), target.features)
    if missing:
        raise TensorcError(f"{func.name} was built for {target} ({target.features}), which "
                           f"needs CPU features this machine lacks: {', '.join(missing)}; "
                           f"build it for target 'llvm' (this machine) to run it here")
    cg = LLVMCodegen(target)
    cg.add_kernel(func)
    entry_name = f"{func.name}_entry"
    cg.add_entry(PrimFunc(entry_name, func.params,
                          KernelCall(func.name, [(p, 0) for p in func.params])))
    return Kernel(func, NativeLibrary(emit_object(str(cg.module), target)), entry_name)


def llvm_ir(func: PrimFunc, target: Target | None = None) -> str:
    cg = LLVMCodegen(target or Target.host())
    cg.add_kernel(func, internal=False)
    return str(cg.module)

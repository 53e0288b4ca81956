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
from tensorc.ir.dims import Dim, evaluate
from tensorc.ir import expr as E
from tensorc.ir.loop import KernelCall, PrimFunc
from tensorc.runtime.cpu import NativeLibrary
from tensorc.target import Target, missing_cpu_features


class Kernel:
    """A compiled PrimFunc; call it with one contiguous numpy array per parameter. A kernel
    over symbolic dims reads their values off the arrays' shapes (or ``dims=``, by name, for
    a dim that no parameter's shape holds alone)."""

    def __init__(self, func: PrimFunc, library: NativeLibrary, entry_name: str):
        self.func = func
        self._library = library
        self._entry = library.entry(entry_name)

    def __call__(self, *arrays: np.ndarray, num_threads: int = 0,
                 dims: dict[str, int] | None = None) -> None:
        params = self.func.params
        if len(arrays) != len(params):
            raise InputError(f"{self.func.name} takes {len(params)} arrays, got {len(arrays)}")
        values = self._bind_dims(arrays, dict(dims or {}))
        for buf, arr in zip(params, arrays):
            if not isinstance(arr, np.ndarray):
                raise InputError(f"{self.func.name}: parameter {buf.name} needs a contiguous "
                                 f"{buf.dtype}{list(buf.shape)} numpy array, got "
                                 f"{type(arr).__name__}")
            shape = tuple(evaluate(Dim.of(d) if isinstance(d, E.Expr) else d, values)
                          for d in buf.shape)
            if tuple(arr.shape) != shape or arr.dtype != np.dtype(buf.dtype) \
                    or not arr.flags.c_contiguous:
                layout = "" if arr.flags.c_contiguous else "non-contiguous "
                raise InputError(f"{self.func.name}: parameter {buf.name} needs a contiguous "
                                 f"{buf.dtype}{list(shape)} array, got {layout}"
                                 f"{arr.dtype}{list(arr.shape)}")
        pointers = [a.ctypes.data for a in arrays]
        if self.func.dims:
            dim_values = np.array([values[v.name] for v in self.func.dims], dtype=np.int64)
            pointers.append(dim_values.ctypes.data)
        ptrs = (ctypes.c_void_p * len(pointers))(*pointers)
        status = self._entry(ptrs, num_threads, None)
        if status:
            raise KernelRuntimeError(f"{self.func.name} failed a runtime check (status "
                                     f"{status})")


    def _bind_dims(self, arrays, values: dict[str, int]) -> dict[str, int]:
        for buf, arr in zip(self.func.params, arrays):
            for d, n in zip(buf.shape, getattr(arr, "shape", ())):
                if isinstance(d, E.Var):
                    values.setdefault(d.name, int(n))
        missing = [v.name for v in self.func.dims if v.name not in values]
        if missing:
            raise InputError(f"{self.func.name}: no parameter's shape gives the value of dim "
                             f"{', '.join(missing)}; pass dims={{name: value}}")
        return values


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
                          KernelCall(func.name, [(p, 0) for p in func.params], list(func.dims)),
                          dims=list(func.dims)))
    return Kernel(func, NativeLibrary(emit_object(str(cg.module), target)), entry_name)


def llvm_ir(func: PrimFunc, target: Target | None = None) -> str:
    cg = LLVMCodegen(target or Target.host())
    cg.add_kernel(func, internal=False)
    return str(cg.module)

"""Shared helpers for kernel tests: compile a lowered PrimFunc and run it on numpy arrays.

>>> outputs = run_func(lower(sch, [A, B, C], "add"), [a, b])   # C is allocated and returned
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tensorc.runtime.kernel import Kernel, build_kernel
from tensorc.ir.loop import PrimFunc
from tensorc.ir.lower import lower
from tensorc.ir.schedule import Schedule
from tensorc.ir.te import Tensor
from tensorc.passes.loop import optimize


def compile_func(func: PrimFunc) -> Kernel:
    """Optimize (simplify, flatten) and compile ``func`` for the host CPU."""
    return build_kernel(optimize(func))


def poisoned(shape: Sequence[int], dtype: str) -> np.ndarray:
    """An output array filled with a value no kernel computes, so unwritten elements show."""
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype=dtype)
    if np.dtype(dtype).kind == "b":
        return np.zeros(shape, dtype=dtype)
    return np.full(shape, np.iinfo(dtype).min + 7, dtype=dtype)


def run_kernel(kernel: Kernel, inputs: Sequence[np.ndarray], num_threads: int = 0
               ) -> list[np.ndarray]:
    """Call ``kernel`` on ``inputs``; the remaining parameters are outputs, allocated here."""
    params = kernel.func.params
    if len(inputs) > len(params):
        raise ValueError(f"{kernel.func.name} takes {len(params)} arrays, got {len(inputs)} "
                         f"inputs")
    outputs = [poisoned(b.shape, b.dtype) for b in params[len(inputs):]]
    kernel(*[np.ascontiguousarray(a) for a in inputs], *outputs, num_threads=num_threads)
    return outputs


def run_func(func: PrimFunc, inputs: Sequence[np.ndarray], num_threads: int = 0
             ) -> list[np.ndarray]:
    """Compile ``func`` and run it: ``inputs`` fill its first parameters, the rest are
    outputs, returned in parameter order."""
    return run_kernel(compile_func(func), inputs, num_threads)


def run_schedule(sch: Schedule, args: Sequence[Tensor], inputs: Sequence[np.ndarray],
                 name: str = "kernel") -> list[np.ndarray]:
    """Lower ``sch`` over ``args`` (inputs first, then outputs), compile and run it."""
    return run_func(lower(sch, args, name), inputs)


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: str = "float32",
                 low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """Uniform random values of ``dtype`` in [low, high) (integers: [low, high))."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(low), int(high), size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)

"""Shared helpers for kernel tests: compile a lowered PrimFunc and run it on numpy arrays.

>>> outputs = run_func(lower(sch, [A, B, C], "add"), [a, b])   # C is allocated and returned
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tensorc.runtime.kernel import Kernel, build_kernel
from tensorc.ir.loop import PrimFunc
from tensorc.ir.lower import lower
from tensorc.ir import te
from tensorc.ir.schedule import Schedule, create_schedule
from tensorc.ir.te import Tensor, dim_var
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


def symbolic_tiled_matmul(rows: int, depth, columns: int, parallel: bool) -> PrimFunc:
    """C[M, columns] = A[M, depth] @ B[depth, columns] over a symbolic M (``depth`` an int or
    a dim), optimized: register tiles of ``rows`` rows (unrolled) by 8 lanes, so the rows'
    tail is one copy of the tile per remainder of M (passes/loop/symbolic_tails.py)."""
    m = dim_var("M")
    a = te.placeholder((m, depth), name="A")
    b = te.placeholder((depth, columns), name="B")
    k = te.reduce_axis(depth, "k")
    c = te.compute((m, columns), lambda i, j: te.sum_(a[i, k] * b[k, j], axis=k), name="C")
    s = create_schedule([c])
    cl = s.cache_write(c, "local")
    i, j = s[c].op_axis
    io, ii = s[c].split(i, rows)
    jo, ji = s[c].split(j, 8)
    s[c].reorder(io, jo, ii, ji)
    s[c].vectorize(ji)
    if parallel:
        s[c].parallel(io)
    s[cl].compute_at(s[c], jo)
    ci, cj = s[cl].op_axis
    s[cl].reorder(s[cl].reduce_axis[0], ci, cj)
    s[cl].vectorize(cj)
    s[cl].unroll(ci)
    return optimize(lower(s, [a, b, c], "mm"))

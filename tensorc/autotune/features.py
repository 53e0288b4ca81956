"""Features of a candidate, read off its lowered loop IR, as a fixed-length vector.

Per store: its arithmetic by type (float add/sub, mul, div, min/max, math intrinsics,
compare/select, integer index arithmetic, casts), the loops around it (depth, how many times
it runs, the product of vectorized, unrolled and parallel extents, innermost and outermost
extents), and the buffers it touches (bytes, unique bytes, stride along the innermost loop,
reuse, cache lines; separately for local scratch and global memory), its arithmetic intensity,
and the innermost ``LEVELS`` loops one by one: each's extent and the bytes the loops from it
inwards touch. The last are what tells loop orders apart: two orders of the same loops have
the same totals, extents and innermost strides, and differ in what stays in cache between
iterations of the loops in between (a conv's taps inside or outside its channel loop).
A kernel's vector is the ``STORES`` stores that run most (by executed operations), each's
features, then totals over every store (and the cache lines its prefetches ask for).
Counts enter as log2(1 + x), so the model sees ratios. A kernel over symbolic dims is read at
one value of its dims (``dims``: the tuner's largest tuning shape of the task), its loop
extents and buffer sizes evaluated there.

>>> vec = extract_features(task.schedule(config))
>>> vec.shape == (FEATURE_LENGTH,)
True
"""
from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    CACHE_LINE, Allocate, For, IfThenElse, Prefetch, PrimFunc, Seq, Store, itemsize,
)

STORES = 3          # the most expensive stores described one by one
LEVELS = 5          # the innermost loops around a store described one by one

STORE_FEATURES = (
    "float_addsub", "float_mul", "float_div", "float_minmax", "float_math", "compare_select",
    "int_ops", "casts", "loads",
    "depth", "executions", "vector_lanes", "unrolled", "parallel", "innermost_extent",
    "outermost_extent", "serial_inner_product", "guarded",
    "global_bytes", "global_unique_bytes", "global_cache_lines", "local_bytes",
    "local_unique_bytes", "stride_1", "stride_0", "stride_large", "max_reuse",
    "store_stride_1", "arith_intensity", "ops_total",
    *(f"level{k}_{what}" for k in range(1, LEVELS + 1) for what in ("extent", "bytes")),
)
SUMMARY_FEATURES = ("stores", "flops", "global_unique_bytes", "local_bytes_allocated",
                    "parallel_extent", "vectorized_stores", "intensity", "prefetched_lines")
FEATURE_LENGTH = STORES * len(STORE_FEATURES) + len(SUMMARY_FEATURES)
FEATURE_NAMES = tuple(f"s{k}.{n}" for k in range(STORES) for n in STORE_FEATURES) + \
    tuple(f"sum.{n}" for n in SUMMARY_FEATURES)

_FLOAT_CLASS = {"add": "float_addsub", "sub": "float_addsub", "mul": "float_mul",
                "div": "float_div", "min": "float_minmax", "max": "float_minmax",
                "pow": "float_math", "floordiv": "float_div", "floormod": "float_div"}


@dataclass
class _Loop:
    var: E.Var
    extent: int
    kind: str


# the values of a symbolic kernel's dims while its features are read (extract_features)
_DIMS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("feature_dims",
                                                                   default=None)


def _at_dims(e: E.Expr) -> E.Expr:
    values = _DIMS.get()
    if not values:
        return e
    mapping = {v: E.const(values[v.name]) for v in E.free_vars(e) if v.name in values}
    return arith.simplify(E.substitute(e, mapping)) if mapping else e


def _const_extent(e: E.Expr) -> int:
    value = arith.as_const_int(_at_dims(e))
    return value if value is not None and value > 0 else 1


def _size(buffer) -> int:
    """A buffer's elements (over symbolic dims, at the dims' values; else one tile's
    worth, a bound no access exceeds in the features)."""
    size = buffer.size
    if isinstance(size, int):
        return size
    value = arith.as_const_int(_at_dims(size))
    return value if value is not None else 1 << 30


def _count_ops(value: E.Expr, counts: dict) -> None:
    for node in E.walk(value):
        if isinstance(node, E.Binary):
            if E.is_float(node.dtype):
                counts[_FLOAT_CLASS.get(node.op, "float_math")] += 1
            else:
                counts["int_ops"] += 1
        elif isinstance(node, E.Call):
            counts["float_math"] += 1
        elif isinstance(node, (E.Compare, E.Select, E.Logical)):
            counts["compare_select"] += 1
        elif isinstance(node, E.Cast):
            counts["casts"] += 1
        elif isinstance(node, E.Load):
            counts["loads"] += 1


def _access(buffer, index: E.Expr, loops: list[_Loop]) -> dict:
    """What one access of ``buffer`` at (flattened) ``index`` does inside ``loops``."""
    size = itemsize(buffer.dtype)
    used = E.free_vars(index)
    unique = 1
    for loop in loops:
        if loop.var in used:
            unique *= loop.extent
    unique = min(unique, _size(buffer))
    stride = None
    if loops:
        inner = loops[-1].var
        if inner in used:
            found = arith.linear_coeff(index, inner)
            stride = abs(found[1]) if found is not None else CACHE_LINE
        else:
            stride = 0
    contiguous = stride is not None and stride <= 1
    lines = math.ceil(unique * size / CACHE_LINE) if contiguous else unique
    executions = math.prod(loop.extent for loop in loops)
    levels, touched = [], 1
    for loop in reversed(loops[-LEVELS:]):
        if loop.var in used:
            touched *= loop.extent
        levels.append(min(touched, _size(buffer)) * size)
    return {"scope": buffer.scope, "bytes": executions * size, "unique": unique * size,
            "lines": lines, "stride": stride, "reuse": executions / max(unique, 1),
            "levels": levels}


def _store_features(store: Store, loops: list[_Loop], guarded: bool) -> dict:
    counts = dict.fromkeys(STORE_FEATURES, 0.0)
    _count_ops(store.value, counts)
    for index in store.indices:
        for node in E.walk(index):
            if isinstance(node, E.Binary):
                counts["int_ops"] += 1
    executions = math.prod(loop.extent for loop in loops)
    kinds = [loop.kind for loop in loops]
    counts["depth"] = len(loops)
    counts["executions"] = executions
    counts["vector_lanes"] = math.prod(loop.extent for loop in loops
                                       if loop.kind == "vectorized")
    counts["unrolled"] = math.prod(loop.extent for loop in loops if loop.kind == "unrolled")
    counts["parallel"] = math.prod(loop.extent for loop in loops if loop.kind == "parallel")
    counts["innermost_extent"] = loops[-1].extent if loops else 1
    counts["outermost_extent"] = loops[0].extent if loops else 1
    serial_inner = 1
    for loop in reversed(loops):
        if loop.kind == "parallel":
            break
        serial_inner *= loop.extent
    counts["serial_inner_product"] = serial_inner
    counts["guarded"] = 1.0 if guarded else 0.0
    del kinds
    accesses = [_access(load.source, load.indices[0] if len(load.indices) == 1
                        else load.indices[-1], loops)
                for load in E.walk(store.value) if isinstance(load, E.Load)]
    target = _access(store.buffer, store.indices[0] if len(store.indices) == 1
                     else store.indices[-1], loops)
    for a in [*accesses, target]:
        if a["scope"] == "local":
            counts["local_bytes"] += a["bytes"]
            counts["local_unique_bytes"] += a["unique"]
        else:
            counts["global_bytes"] += a["bytes"]
            counts["global_unique_bytes"] += a["unique"]
            counts["global_cache_lines"] += a["lines"]
        if a["stride"] == 1:
            counts["stride_1"] += 1
        elif a["stride"] == 0:
            counts["stride_0"] += 1
        else:
            counts["stride_large"] += 1
        counts["max_reuse"] = max(counts["max_reuse"], a["reuse"])
        for k, touched in enumerate(a["levels"], 1):
            counts[f"level{k}_bytes"] += touched
    for k, loop in enumerate(reversed(loops[-LEVELS:]), 1):
        counts[f"level{k}_extent"] = loop.extent
    counts["store_stride_1"] = 1.0 if target["stride"] == 1 else 0.0
    arithmetic = sum(counts[k] for k in ("float_addsub", "float_mul", "float_div",
                                         "float_minmax", "float_math"))
    for key in ("float_addsub", "float_mul", "float_div", "float_minmax", "float_math",
                "compare_select", "int_ops", "casts", "loads"):
        counts[key] *= executions
    counts["ops_total"] = arithmetic * executions
    counts["arith_intensity"] = counts["ops_total"] / max(1.0, counts["global_unique_bytes"])
    return counts


def store_features(func: PrimFunc) -> list[dict]:
    """The raw (not log-scaled) features of every store of ``func``, in program order."""
    found: list[dict] = []
    loops: list[_Loop] = []

    def visit(stmt, guarded: bool) -> None:
        if isinstance(stmt, For):
            loops.append(_Loop(stmt.var, _const_extent(stmt.extent), stmt.kind))
            visit(stmt.body, guarded)
            loops.pop()
        elif isinstance(stmt, Store):
            found.append(_store_features(stmt, loops, guarded))
        elif isinstance(stmt, IfThenElse):
            visit(stmt.then_case, True)
            if stmt.else_case is not None:
                visit(stmt.else_case, True)
        elif isinstance(stmt, (Seq, Allocate)):
            for child in stmt.children():
                visit(child, guarded)
        else:
            for child in stmt.children():
                visit(child, guarded)

    visit(func.body, False)
    return found


def _prefetched_lines(func: PrimFunc) -> int:
    """Cache lines that the kernel's Prefetch statements ask for in one call."""
    total = 0

    def visit(stmt, times: int) -> None:
        nonlocal total
        if isinstance(stmt, For):
            visit(stmt.body, times * _const_extent(stmt.extent))
        elif isinstance(stmt, Prefetch):
            total += times * -(-stmt.nbytes // CACHE_LINE)
        else:
            for child in stmt.children():
                visit(child, times)
    visit(func.body, 1)
    return total


def _local_bytes(func: PrimFunc) -> int:
    total = 0
    stack = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, Allocate) and s.buffer.scope == "local":
            nbytes = s.buffer.nbytes
            total += nbytes if isinstance(nbytes, int) else \
                (arith.as_const_int(_at_dims(nbytes)) or 0)
        stack.extend(s.children())
    return total


def extract_features(func: PrimFunc, dims: Mapping[str, int] | None = None) -> np.ndarray:
    """The fixed-length feature vector (``FEATURE_LENGTH`` float32) of a lowered kernel;
    over symbolic dims, read where they take the values ``dims`` (by name)."""
    token = _DIMS.set(dict(dims or {}))
    try:
        return _vector(func)
    finally:
        _DIMS.reset(token)


def _vector(func: PrimFunc) -> np.ndarray:
    stores = store_features(func)
    ranked = sorted(stores, key=lambda s: -(s["ops_total"] + s["executions"]))
    vec = np.zeros(FEATURE_LENGTH, np.float64)
    width = len(STORE_FEATURES)
    for k, s in enumerate(ranked[:STORES]):
        vec[k * width:(k + 1) * width] = [s[n] for n in STORE_FEATURES]
    flops = sum(s["ops_total"] for s in stores)
    unique = sum(s["global_unique_bytes"] for s in stores)
    summary = [len(stores), flops, unique, _local_bytes(func),
               max((s["parallel"] for s in stores), default=0),
               sum(1 for s in stores if s["vector_lanes"] > 1), flops / max(unique, 1.0),
               _prefetched_lines(func)]
    vec[STORES * width:] = summary
    return np.log2(1.0 + np.maximum(vec, 0.0)).astype(np.float32)

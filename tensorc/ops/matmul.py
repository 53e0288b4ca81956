"""matmul: numpy.matmul semantics for operands of rank >= 2 (batch dims broadcast).

The frontend turns 1-D operands into 2-D with a reshape, so the core op never sees them.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import broadcast_shapes, expect_arity, expect_same_dtype
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

matmul = define("matmul", Pattern.OUT_ELEMWISE_FUSABLE)


@matmul.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("matmul", input_types, 2)
    a, b = input_types
    dtype = expect_same_dtype("matmul", input_types)
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: operands must have rank >= 2 (reshape vectors first), "
                         f"got {a} and {b}")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: inner dimensions differ: input 0 {a} has {a.shape[-1]} "
                         f"columns, input 1 {b} has {b.shape[-2]} rows")
    batch = broadcast_shapes("matmul (batch dims)", [TensorType(a.shape[:-2], dtype),
                                                      TensorType(b.shape[:-2], dtype)])
    return [TensorType(batch + (a.shape[-2], b.shape[-1]), dtype)]


@matmul.reference
def _reference(attrs: dict, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [np.matmul(a, b)]


@matmul.compute
def _matmul_compute(attrs: dict, a: te.Tensor, b: te.Tensor) -> te.Tensor:
    *batch_a, m, k = a.shape
    *batch_b, _, n = b.shape
    batch = tuple(np.broadcast_shapes(tuple(batch_a), tuple(batch_b)))
    nb = len(batch)
    r = te.reduce_axis(k, "k")

    def body(*idx):
        bi, i, j = idx[:nb], idx[nb], idx[nb + 1]
        ai = [E.const(0) if d == 1 else bi[nb - len(batch_a) + q]
              for q, d in enumerate(batch_a)]
        bj = [E.const(0) if d == 1 else bi[nb - len(batch_b) + q]
              for q, d in enumerate(batch_b)]
        return te.sum_(E.cast(acc, a[(*ai, i, r)]) * E.cast(acc, b[(*bj, r, j)]), axis=r)
    names = [f"b{q}" for q in range(nb)] + ["i", "j"]
    acc = te.accumulator_dtype(a.dtype)
    if acc == a.dtype:
        return te.compute((*batch, m, n), body, name="matmul", axis_names=names)
    # half precision: accumulate in float32, round once
    total = te.compute((*batch, m, n), body, name="matmul_acc", tag="anchor:matmul_acc",
                       axis_names=names)
    return te.compute(total.shape, lambda *o: E.cast(a.dtype, total[o]), name="matmul")


MICRO_ROWS = 4          # rows of the output tile (unrolled)
MICRO_VECTORS = 2       # vectors across the tile's columns: 4 x 2 accumulators in registers


def _matmul_space(target: Target, out: te.Tensor, mm: te.Tensor, attrs: dict) -> SearchSpace:
    """rows x vectors: the register tile; parallel: tiles on threads."""
    m = out.shape[-2]
    rows = tuple(r for r in (1, 2, 3, 4, 6, 8) if r <= m) or (1,)
    return SearchSpace([
        Knob("rows", rows, min(MICRO_ROWS, max(rows)), "rows of the register tile"),
        Knob("vectors", (1, 2, 3), MICRO_VECTORS, "column vectors of the register tile"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
    ], name="matmul")


@matmul.schedule(space=_matmul_space)
def _matmul_schedule(target: Target, sch: Schedule, out: te.Tensor, mm: te.Tensor,
                     attrs: dict, config) -> None:
    """Register-tiled GEMM: each (i.o, j.o) tile of the output is accumulated in a local
    rows x (vectors * lanes) block, k outermost inside the tile, the tile's rows
    unrolled and its columns vectorized; tiles run in parallel."""
    if not mm.op.reduce_axis:      # a rounding stage: tile the accumulation under it
        mm = mm.op.input_tensors()[0]
    lanes = target.vector_lanes(out.dtype)
    if out is mm:
        compute_tensor = sch.cache_write(mm, "local")
    else:
        compute_tensor = mm
    outer = sch[out]
    *batch, i, j = outer.op_axis
    m, n = out.shape[-2:]
    vectors = config["vectors"]
    cols = lanes * vectors if n >= lanes * vectors else (lanes if n >= lanes else n)
    rows = min(config["rows"], m)
    io, jo, ii, ji = outer.tile(i, j, rows, cols)
    outer.vectorize(ji)
    fused = outer.fuse(*batch, io, jo)
    if config["parallel"] and out.shape and \
            np.prod(out.shape) * mm.op.reduce_axis[0].extent >= 1 << 16:
        outer.parallel(fused)
    inner = sch[compute_tensor]
    inner.compute_at(outer, fused)
    *cb, ci, cj = inner.op_axis
    (ck,) = inner.reduce_axis
    inner.reorder(*cb, ck, ci, cj)
    inner.unroll(ci)
    inner.vectorize(cj)

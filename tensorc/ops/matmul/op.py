"""matmul: numpy.matmul semantics for operands of rank >= 2 (batch dims broadcast).

The frontend turns 1-D operands into 2-D with a reshape, so the core op never sees them.

A constant right operand ``B[K, N]`` is repacked at compile time (``passes/graph/
alter_layout.py``) into column panels ``[ceil(N/nr), K, nr]`` with attrs ``b_panel=nr`` and
``n=N`` (``tile.py``); the schedule's ``vectors`` knob picks the panel width (nr = vectors x
lanes): the layout pass's by default, another repacks B. The CPU schedule is the GEMM
template: its knobs in ``space.py``, the BLIS-style loops around the register-tile
micro-kernel in ``schedule.py``.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.dims import may_equal
from tensorc.ir.types import TensorType
from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.schedule import schedule_gemm
from tensorc.ops.matmul.space import gemm_space
from tensorc.ops.matmul.tile import PANEL_VECTOR_CHOICES, pack_b_panels, unpack_b_panels
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import (
    broadcast_shapes, expect_arity, expect_same_dtype, unify_dims,
)
from tensorc.ops.space import SearchSpace
from tensorc.ops.weight_layouts import WeightLayouts
from tensorc.target import Target

matmul = define("matmul", Pattern.OUT_ELEMWISE_FUSABLE)


@matmul.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("matmul", input_types, 2)
    a, b = input_types
    dtype = expect_same_dtype("matmul", input_types)
    if attrs.get("b_panel"):        # B packed into column panels [N/nr, K, nr]
        if b.ndim != 3 or b.shape[2] != attrs["b_panel"] or a.shape[-1] != b.shape[1]:
            raise ShapeError(f"matmul: packed operand {b} does not match {a} and panel "
                             f"width {attrs['b_panel']}")
        return [TensorType(a.shape[:-1] + (attrs["n"],), dtype)]
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: operands must have rank >= 2 (reshape vectors first), "
                         f"got {a} and {b}")
    if not may_equal(a.shape[-1], b.shape[-2]):
        raise ShapeError(f"matmul: inner dimensions differ: input 0 {a} has {a.shape[-1]} "
                         f"columns, input 1 {b} has {b.shape[-2]} rows")
    if a.shape[-1] != b.shape[-2]:  # symbolic: the graph needs them equal
        unify_dims(a.shape[-1], b.shape[-2], f"matmul multiplies input 0 {a} by input 1 {b}")
    batch = broadcast_shapes("matmul (batch dims)", [TensorType(a.shape[:-2], dtype),
                                                      TensorType(b.shape[:-2], dtype)])
    return [TensorType(batch + (a.shape[-2], b.shape[-1]), dtype)]


@matmul.reference
def _reference(attrs: dict, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    if attrs.get("b_panel"):
        b = unpack_b_panels(b, attrs["n"])
    return [np.matmul(a, b)]


@matmul.layouts
def _matmul_layouts(attrs: dict, input_types: list[TensorType], target: Target | None
                    ) -> WeightLayouts | None:
    """A packed B's panel widths: the register tile's column vectors (``vectors``), each with
    B repacked into panels that wide; none wider than B (one vector where B is narrower)."""
    nr = attrs.get("b_panel")
    if not nr or target is None or target.kind != "llvm":
        return None
    a, b = input_types
    lanes, n = target.vector_lanes(a.dtype), attrs["n"]
    if nr % lanes:
        return None
    current = nr // lanes
    values = [current] + [v for v in PANEL_VECTOR_CHOICES
                          if v != current and v * lanes <= max(lanes, n)]

    def panels(v: int) -> TensorType:
        return TensorType((-(-n // (v * lanes)), b.shape[1], v * lanes), b.dtype)
    return WeightLayouts(
        "vectors", current, {v: {**attrs, "b_panel": v * lanes} for v in values},
        {v: panels(v) for v in values},
        lambda array, v: pack_b_panels(unpack_b_panels(array, n), v * lanes), new_knob=False)


@matmul.compute
def _matmul_compute(attrs: dict, a: te.Tensor, b: te.Tensor) -> te.Tensor:
    *batch_a, m, k = a.shape
    nr = attrs.get("b_panel")
    if nr:
        batch_b, n = [], attrs["n"]
    else:
        *batch_b, _, n = b.shape
    batch = _broadcast_batch(batch_a, batch_b)
    nb = len(batch)
    r = te.reduce_axis(k, "k")

    def body(*idx):
        bi, i, j = idx[:nb], idx[nb], idx[nb + 1]
        ai = [E.const(0) if d == 1 else bi[nb - len(batch_a) + q]
              for q, d in enumerate(batch_a)]
        bj = [E.const(0) if d == 1 else bi[nb - len(batch_b) + q]
              for q, d in enumerate(batch_b)]
        b_load = b[(j // nr, r, j % nr)] if nr else b[(*bj, r, j)]
        return te.sum_(E.cast(acc, a[(*ai, i, r)]) * E.cast(acc, b_load), axis=r)
    names = [f"b{q}" for q in range(nb)] + ["i", "j"]
    acc = te.accumulator_dtype(a.dtype)
    if acc == a.dtype:
        return te.compute((*batch, m, n), body, name="matmul", axis_names=names)
    # half precision: accumulate in float32, round once
    total = te.compute((*batch, m, n), body, name="matmul_acc", tag="anchor:matmul_acc",
                       axis_names=names)
    return te.compute(total.shape, lambda *o: E.cast(a.dtype, total[o]), name="matmul")


def _broadcast_batch(a: list, b: list) -> tuple:
    """The batch dims of a matmul's operands, broadcast (a symbolic dim meets only 1 or
    itself: the frontend unified or checked the rest)."""
    return te.broadcast_shape(tuple(a), tuple(b))


def _matmul_space(target: Target, out: te.Tensor, mm: te.Tensor, attrs: dict) -> SearchSpace:
    return gemm_space(target, Gemm.of_matmul(out, mm, attrs), out.dtype)


@matmul.schedule(space=_matmul_space, symbolic=True)
def _matmul_schedule(target: Target, sch: Schedule, out: te.Tensor, mm: te.Tensor,
                     attrs: dict, config) -> None:
    schedule_gemm(target, sch, out, mm, Gemm.of_matmul(out, mm, attrs), config)

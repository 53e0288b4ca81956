"""conv_transpose: N-D grouped transposed convolution (1 to 3 spatial dims), NCHW, no bias.

attrs: strides, pads (ONNX order: all begins, then all ends; cropped from the full output),
dilations, groups, output_padding (extra elements at the end of each spatial dim).
Inputs x[N, C, *S] and w[C, F/groups, *K]; output [N, F, *O] with
O = strides * (S - 1) + output_padding + (K - 1) * dilations + 1 - pad_begin - pad_end.

The kernel is a direct convolution of the flipped kernel over the input spread out by the
strides (zeros between elements) and padded, so that it reuses the conv loop structure.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.dims import Dim
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import clamp, schedule_injective, schedule_reduction
from tensorc.ops.shape_rules import expect_arity, expect_same_dtype, require_dims
from tensorc.target import Target

conv_transpose = define("conv_transpose", Pattern.REDUCTION)


def full_spatial(attrs: dict, x_shape: tuple[int, ...], w_shape: tuple[int, ...]
                 ) -> tuple[int, ...]:
    """The output size per spatial dim before the pads are cropped."""
    spatial = len(x_shape) - 2
    return tuple(attrs["strides"][d] * (x_shape[2 + d] - 1) + attrs["output_padding"][d]
                 + (w_shape[2 + d] - 1) * attrs["dilations"][d] + 1 for d in range(spatial))


def output_spatial(attrs: dict, x_shape: tuple[int, ...], w_shape: tuple[int, ...]
                   ) -> tuple[int, ...]:
    spatial = len(x_shape) - 2
    pads = attrs["pads"]
    return tuple(size - pads[d] - pads[d + spatial]
                 for d, size in enumerate(full_spatial(attrs, x_shape, w_shape)))


@conv_transpose.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("conv_transpose", input_types, 2)
    x, w = input_types
    dtype = expect_same_dtype("conv_transpose", input_types)
    spatial = x.ndim - 2
    if not 1 <= spatial <= 3 or w.ndim != x.ndim:
        raise ShapeError(f"conv_transpose: expects x[N,C,*S] and w[C,F/groups,*K] of equal "
                         f"rank with 1 to 3 spatial dims, got x {x} and w {w}")
    for name, size in (("strides", spatial), ("dilations", spatial),
                       ("output_padding", spatial), ("pads", 2 * spatial)):
        values = attrs[name]
        if len(values) != size or min(values) < (1 if name in ("strides", "dilations") else 0):
            raise ShapeError(f"conv_transpose: {name} {tuple(values)} must be {size} "
                             f"{'positive' if name in ('strides', 'dilations') else 'non-negative'}"
                             f" ints for x {x}")
    groups = attrs["groups"]
    if groups < 1 or x.shape[1] % groups or w.shape[0] != x.shape[1]:
        raise ShapeError(f"conv_transpose: w {w} must have one row per input channel of x {x}, "
                         f"and groups={groups} must divide them")
    out = output_spatial(attrs, x.shape, w.shape)
    for size in out:
        if isinstance(size, Dim):       # a run-time size: checked when the dims are bound
            require_dims(size, ">=", 1, f"conv_transpose: pads {tuple(attrs['pads'])} leave "
                         f"an output of x {x} and w {w}")
    if any(isinstance(size, int) and size < 1 for size in out):
        raise ShapeError(f"conv_transpose: pads {tuple(attrs['pads'])} crop the whole output "
                         f"of x {x} and w {w}")
    return [TensorType((x.shape[0], w.shape[1] * groups) + out, dtype)]


@conv_transpose.reference
def _reference(attrs: dict, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    spatial, groups = x.ndim - 2, attrs["groups"]
    n, channels = x.shape[:2]
    per_group, kernel = w.shape[1], w.shape[2:]
    full = full_spatial(attrs, x.shape, w.shape)
    strides, dilations, pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    acc = np.zeros((n, groups, per_group) + full, dtype=np.float64)
    xg = x.reshape((n, groups, channels // groups) + x.shape[2:]).astype(np.float64)
    wg = w.reshape((groups, channels // groups, per_group) + kernel).astype(np.float64)
    # every kernel offset scatters the whole input, spread by the strides
    for offset in np.ndindex(*kernel):
        contribution = np.einsum("ngc...,gcf->ngf...", xg, wg[(Ellipsis,) + offset])
        index = tuple(slice(k * d, k * d + (size - 1) * s + 1, s) for k, d, s, size in
                      zip(offset, dilations, strides, x.shape[2:]))
        acc[(slice(None),) * 3 + index] += contribution
    crop = tuple(slice(pads[d], full[d] - pads[d + spatial]) for d in range(spatial))
    y = acc[(slice(None),) * 3 + crop]
    return [y.reshape((n, groups * per_group) + y.shape[3:]).astype(x.dtype)]


@conv_transpose.compute
def _compute(attrs: dict, x: te.Tensor, w: te.Tensor) -> te.Tensor:
    spatial, groups = x.ndim - 2, attrs["groups"]
    strides, dilations, pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    kernel, per_group = w.shape[2:], w.shape[1]
    in_per_group = x.shape[1] // groups
    out = output_spatial(attrs, x.shape, w.shape)
    # y[o] = sum_k u[o + k * d] * w[K - 1 - k], where u is x spread by the strides and shifted
    # by (K - 1) * d - pad_begin
    shift = [(kernel[d] - 1) * dilations[d] - pads[d] for d in range(spatial)]
    spread_shape = x.shape[:2] + tuple(out[d] + (kernel[d] - 1) * dilations[d]
                                       for d in range(spatial))

    def spread(n, c, *q):
        conds, src = [], []
        for d in range(spatial):
            rel = q[d] - shift[d]
            reach = (x.shape[2 + d] - 1) * strides[d] + 1     # (an expression at run time)
            conds += [E.Compare("ge", rel, E.const(0)),
                      E.Compare("lt", rel, E.const(reach) if isinstance(reach, int) else reach)]
            if strides[d] > 1:
                conds.append(E.eq(rel % strides[d], 0))
            src.append(clamp(rel // strides[d] if strides[d] > 1 else rel, x.shape[2 + d]))
        return E.select(E.all_of(*conds), x[(n, c, *src)], E.Const(0, x.dtype))
    u = te.compute(spread_shape, spread, name="spread", tag="spread")
    rc = te.reduce_axis(in_per_group, "rc")
    rk = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(kernel)]

    def body(n, f, *o):
        c = (f // per_group) * in_per_group + rc.var if groups > 1 else rc.var
        pos = [o[d] + rk[d].var * dilations[d] for d in range(spatial)]
        flipped = [E.const(kernel[d] - 1) - rk[d].var for d in range(spatial)]
        fw = f % per_group if groups > 1 else f
        return te.sum_(u[(n, c, *pos)] * w[(c, fw, *flipped)], axis=[rc, *rk])
    return te.compute((x.shape[0], per_group * groups, *out), body, name="conv_transpose")


@conv_transpose.schedule
def _schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
              attrs: dict, config) -> None:
    """The spread input is materialized once (vectorized copy); the reduction runs under
    the generic reduction schedule."""
    spread = next(t for t in anchor.op.input_tensors() if t.op.name == "spread")
    sch[spread].compute_root()
    schedule_injective(target, sch, spread)
    schedule_reduction(target, sch, out, anchor)

"""Pointwise convs on the matmul's micro-kernel: a 1x1 conv of one group with no padding is
a plain matrix product, out[n, f, p] = sum(W[f, c] * X[n, c, p]) (strided: X is the input's
every s-th position, copied once). Its weights, packed into panels of a GEMM tile's rows
(kernel_block), are the GEMM's A; the input's channels x positions its B
(``ops/matmul.py``'s ``schedule_gemm``).
"""
from __future__ import annotations

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.schedule import schedule_gemm
from tensorc.ops.matmul.space import ROW_CHOICES, gemm_space
from tensorc.ops.matmul.tile import micro_tile
from tensorc.ops.nn.conv.shapes import unpacked_weight_shape
from tensorc.ops.schedules import materialize_pad
from tensorc.ops.space import SearchSpace
from tensorc.target import Target


def conv_as_matmul(attrs: dict, kernel) -> bool:
    """Whether a conv is a plain matrix product: a 1x1 conv of one group with no padding
    (measured beside the im2col GEMM it replaces in b3159a1)."""
    return attrs["groups"] == 1 and all(k == 1 for k in kernel) and not any(attrs["pads"])


def conv_matmul_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, ...]
                        ) -> te.Tensor:
    """The pointwise conv as a GEMM over flattened positions q: P[n, f, q] = sum over
    channels c of W[f // b, c, .., f % b] * x[n, c, q], then the output is P's rows."""
    n_batch, channels = x.shape[:2]
    block = attrs["kernel_block"]
    filters = unpacked_weight_shape(attrs, w.shape)[0]
    zeros = (0,) * (x.ndim - 2)
    strides = attrs["strides"]
    if any(st > 1 for st in strides):
        x = te.compute((n_batch, channels, *out), lambda n, c, *o: x[(n, c, *[
            o[d] * strides[d] for d in range(len(out))])], name="subsample", tag="subsample")
    rc = te.reduce_axis(channels, "rc")
    acc = te.accumulator_dtype(x.dtype)

    def body(n, f, q):
        # x's positions read as one flat row: (0, .., 0, q) has q's row-major address
        return te.sum_(E.cast(acc, w[(f // block, rc, *zeros, f % block)])
                       * E.cast(acc, x[(n, rc, *zeros[1:], q)]), axis=rc)
    product = te.compute((n_batch, filters, int(np.prod(out))), body, name="conv_matmul",
                         tag="anchor:conv_matmul", axis_names=["n", "f", "q"])

    def result(n, f, *o):
        q = o[0]
        for d in range(1, len(o)):
            q = q * out[d] + o[d]
        return E.cast(x.dtype, product[n, f, q])
    return te.compute((n_batch, filters, *out), result, name="conv")


def matmul_gemm(out: te.Tensor, product: te.Tensor, attrs: dict) -> Gemm:
    """The GEMM a 1x1 conv's group is (see :func:`conv_as_matmul`)."""
    n_batch, filters, positions = product.shape
    return Gemm(filters, positions, product.op.reduce_axis[0].extent, batched=n_batch > 1,
                a_panel=attrs["kernel_block"], itemsize=4 if out.dtype == "float32" else 8,
                packable_b=False)


def filter_panel(target: Target, filters: int) -> int:
    """The weight panel (and GEMM tile) height of a conv on the matmul micro-kernel: all the
    filters where a tile holds them, else the tallest tile that pads the filters with zero
    ones by at most a sixteenth (1000 filters: 14, 1008 computed; 64: 8, not 14 (70) or 12
    (72))."""
    tallest = micro_tile(target)[0]
    if filters <= tallest:
        return filters
    choices = [r for r in ROW_CHOICES if r <= tallest]
    return min(choices, key=lambda r: (-(-filters // r) * r - filters > filters // 16, -r))



def conv_matmul_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                      ) -> SearchSpace:
    """The matmul's knobs for the GEMM the group is."""
    product = conv_t.op.input_tensors()[0]
    return gemm_space(target, matmul_gemm(out, product, attrs), out.dtype)


def schedule_conv_matmul(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                         attrs: dict, config) -> None:
    """The matmul's GEMM: filters the rows, the positions (fused) the columns."""
    inner = conv_t.op.input_tensors()[0]
    st = sch[out]
    n, f, *spatial = st.op_axis
    q = st.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    # (a fused n and f would hide the tile's rows from bounds inference: all filters
    # computed per tile)
    axes = (f, q) if out.shape[0] == 1 else (n, f, q)
    materialize_pad(target, sch, inner)       # a strided conv's subsampled input
    schedule_gemm(target, sch, out, inner, matmul_gemm(out, inner, attrs), config, axes)

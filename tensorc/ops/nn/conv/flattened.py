"""The flattened formulation of stride-1 2-D convs: with the padded input's rows laid end to
end (row pitch Wp), output (y, x) is q = y*Wp + x of a 1-D convolution whose taps are at
ry*Wp + rx. Computing every q, also the Wp - W garbage columns of each row that the epilogue
drops, makes the vectorized axis long (no half-empty vectors at row ends) and its input
reads contiguous (4ce0772). Pointwise convs stay row-wise: flattened, their epilogue becomes
a separate pass over memory, which measured slower.
"""
from __future__ import annotations

import math

from tensorc.errors import TensorcError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.conv.tiles import divisor_at_most
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.schedules import (
    RegisterTileFits, materialize_pad, reduction_depth, schedule_injective, worth_threads,
)
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

FLAT_LANES = 16          # q is computed in whole blocks of this many
# The register tile is F filters x V vectors of q: per tap V input loads and F broadcast
# weights for F*V multiply-adds; 8 x 3 measured fastest (17600c3).
FLAT_TILE_FILTERS = 8
FLAT_TILE_ACCUMULATORS = 24
FLAT_TILE_VECTORS = 4     # at most


def flat_tile(filters: int, block: int, registers: int) -> tuple[int, int]:
    """The flattened conv's default register tile: (filters, vectors of q), its
    accumulators, input vectors and a broadcast weight within ``registers``."""
    rows = divisor_at_most(math.gcd(filters, block), FLAT_TILE_FILTERS)
    vectors = min(FLAT_TILE_VECTORS, FLAT_TILE_ACCUMULATORS // rows)
    while vectors > 1 and not RegisterTileFits(registers).holds(rows, vectors):
        vectors -= 1
    return rows, vectors


def flattened_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, ...],
                      target: Target | None) -> te.Tensor:
    """flat[n, f, q] = sum over (c, ky, kx) of padded[n, c, q + ky*dh*Wp + kx*dw] *
    W[f // b, c, ky, kx, f % b], then out[n, f, y, x] = flat[n, f, y*Wp + x], q padded to
    whole default register tiles of ``target``."""
    if target is None:
        raise TensorcError("the flattened conv pads its rows to the target's register tile: "
                           "compute it with a target (the layout pass packs its weights for "
                           "one)")
    kernel = w.shape[2:-1]
    n_batch, channels, height, width = x.shape
    block = attrs["kernel_block"]
    filters = w.shape[0] * block
    (dh, dw), pads = attrs["dilations"], list(attrs["pads"])
    pitch = width + pads[1] + pads[3]
    # q in whole register tiles of the default (other tiles that divide them: flattened_space)
    span = FLAT_LANES * flat_tile(filters, block, target.vector_registers)[1]
    steps = -(-out[0] * pitch // span) * span
    # zero rows below the padding, so that the last block's garbage columns read in bounds
    last_read = steps - 1 + (kernel[0] - 1) * dh * pitch + (kernel[1] - 1) * dw
    rows = -(-(last_read + 1) // pitch)
    pads[2] += max(0, rows - (height + pads[0] + pads[2]))
    padded = padded_input(x, tuple(pads))
    rc = te.reduce_axis(channels, "rc")
    ry, rx = te.reduce_axis(kernel[0], "ry"), te.reduce_axis(kernel[1], "rx")

    def tap(n, c, k):
        return padded[n, c, k // pitch, k % pitch]

    acc = te.accumulator_dtype(x.dtype)

    def body(n, f, q):
        k = q + ry.var * (dh * pitch) + rx.var * dw
        return te.sum_(E.cast(acc, tap(n, rc.var, k))
                       * E.cast(acc, w[f // block, rc, ry, rx, f % block]), axis=[rc, ry, rx])
    flat = te.compute((n_batch, filters, steps), body, name="conv_flat",
                      tag="anchor:conv_flat", axis_names=["n", "f", "q"])
    return te.compute((n_batch, filters, *out),
                      lambda n, f, y, xx: E.cast(x.dtype, flat[n, f, y * pitch + xx]),
                      name="conv")


# The GEMM formulation: out[n, f, q] = sum_k W[f, k] * P[n, k, q] over output positions q
# and k = (channel, kernel offsets), P the input patches (im2col). Built for the convs whose


def flattened_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                    ) -> SearchSpace:
    """The flattened conv's register tile: ``filter_tile`` filters (a divisor of the weight
    block's) x ``vectors`` vectors of q (those that divide q's extent)."""
    filters, block, flat = out.shape[1], attrs["kernel_block"], conv_t.op.input_tensors()[0]
    registers = target.vector_registers
    rows, vectors = flat_tile(filters, block, registers)
    blocks = flat.shape[-1] // FLAT_LANES
    return SearchSpace([
        Knob("filter_tile", tuple(d for d in range(1, block + 1) if filters % d == 0), rows,
             "filters per register tile"),
        Knob("vectors", tuple(v for v in range(1, FLAT_TILE_VECTORS + 1) if blocks % v == 0),
             vectors, "vectors of q per register tile"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
    ], [RegisterTileFits(registers, "filter_tile", "vectors")], name="conv (flat)")


def schedule_flattened(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                       attrs: dict, config) -> None:
    """The flattened conv: tiles of ``filter_tile`` filters x ``vectors`` vectors of q
    accumulate in registers over (channel, kernel row, kernel column) and run in parallel;
    the padded input is materialized first; the epilogue (bias, activation, residual) reads
    the flat result row by row.

        for (n.f.o.q.o: parallel)
          acc[F, V * lanes] = 0
          for (c, ky, kx): for (f: unrolled) for (v: unrolled) for (l: vectorized)
            acc[f, v, l] += W[f, c, ky, kx] * pad[c, q + ky * pitch + kx]
          flat[f, q] = acc"""
    flat = conv_t.op.input_tensors()[0]
    materialize_pad(target, sch, flat)
    local = sch.cache_write(flat, "local")
    st = sch[flat]
    n, f, q = st.op_axis
    fo, fi = st.split(f, config["filter_tile"])
    qo, qi = st.split(q, FLAT_LANES * config["vectors"])
    st.reorder(n, fo, qo, fi, qi)
    fused = st.fuse(n, fo, qo)
    st.vectorize(qi)
    if config["parallel"] and worth_threads(math.prod(flat.shape), reduction_depth(flat)):
        st.parallel(fused)
    ls = sch[local]
    ls.compute_at(st, fused)
    ln, lf, lq = ls.op_axis
    lv, ll = ls.split(lq, FLAT_LANES)
    # each broadcast weight serves the tile's V input vectors, which stay in registers
    ls.reorder(ln, *ls.reduce_axis, lf, lv, ll)
    ls.unroll(lf)
    ls.unroll(lv)
    ls.vectorize(ll)
    schedule_injective(target, sch, out)

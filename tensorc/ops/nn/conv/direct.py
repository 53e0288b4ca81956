"""The direct conv: out[n, f, *o] summed over (channel, kernel taps), any rank, groups and
weight layout (OIHW or packed in blocks of filters). 2-D convs are vectorized along the output
row, a tile of filters x one vector of columns accumulated in registers; other ranks take the
generic reduction schedule. Depthwise convs compute the same way but schedule as a window
(``conv/depthwise_window.py``)."""
from __future__ import annotations

import math

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ops.nn.conv.shapes import unpacked_weight_shape
from tensorc.ops.nn.conv.tiles import accumulate_in_registers, divisor_at_most
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.schedules import (
    materialize_pad, reduction_depth, schedule_reduction, vector_block, worth_threads,
)
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

FILTER_TILE = 16    # filters accumulated per input vector (unrolled, broadcast weights)


def direct_compute(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, ...]
                   ) -> te.Tensor:
    """out[n, f, *o] = sum over (c, *k) of padded[n, g(f) * C/g + c, *(o*s + k*d)] * W[f, c,
    *k] (W[f // b, c, *k, f % b] packed); half precision accumulates in float32."""
    spatial = x.ndim - 2
    wshape = unpacked_weight_shape(attrs, w.shape)
    filters, per_group = wshape[0], wshape[1]
    kernel = wshape[2:]
    strides, dilations, groups = attrs["strides"], attrs["dilations"], attrs["groups"]
    block = attrs.get("kernel_block", 0)
    padded = padded_input(x, attrs["pads"])
    rc = te.reduce_axis(per_group, "rc")
    rk = [te.reduce_axis(k, "r" + "zyx"[3 - spatial + d]) for d, k in enumerate(kernel)]
    filters_per_group = filters // groups

    acc = te.accumulator_dtype(x.dtype)

    def body(n, f, *o):
        c = (f // filters_per_group) * per_group + rc.var if groups > 1 else rc.var
        pos = [o[d] * strides[d] + rk[d].var * dilations[d] for d in range(spatial)]
        kidx = [r.var for r in rk]
        wv = w[(f // block, rc, *kidx, f % block)] if block else w[(f, rc, *kidx)]
        return te.sum_(E.cast(acc, padded[(n, c, *pos)]) * E.cast(acc, wv), axis=[rc, *rk])
    names = ["n", "f"] + ["zyx"[3 - spatial + d] for d in range(spatial)]
    shape = (x.shape[0], filters, *out)
    if acc == x.dtype:
        return te.compute(shape, body, name="conv", axis_names=names)
    # half precision: accumulate in float32, round once
    total = te.compute(shape, body, name="conv_acc", tag="anchor:conv_acc", axis_names=names)
    return te.compute(shape, lambda *o: E.cast(x.dtype, total[o]), name="conv")


def direct_space(target: Target, out: te.Tensor, conv_t: te.Tensor, attrs: dict
                 ) -> SearchSpace:
    """The register tile: ``filter_tile`` filters x one vector of output columns (a divisor
    of the weight block's filters where packed); ``parallel``: tiles on threads."""
    filters = out.shape[1]
    block = attrs.get("kernel_block", 0) or FILTER_TILE
    limit = block if attrs.get("kernel_block") else FILTER_TILE
    # accumulators + the input vector + a broadcast weight
    default = divisor_at_most(math.gcd(filters, block), min(limit, target.vector_registers - 2))
    tiles = tuple(d for d in range(1, limit + 1) if filters % d == 0) or (1,)
    return SearchSpace([
        Knob("filter_tile", tiles, default, "filters per register tile"),
        Knob("parallel", (True, False), True, "tiles on threads (when large enough)"),
    ], name="conv (direct)")


def schedule_direct(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                    attrs: dict, config) -> None:
    """2-D direct convolution, vectorized along the output row: an output tile of
    ``filter_tile`` filters x one vector of columns is accumulated in registers over
    (channel, kernel row, kernel column); the padded input is materialized once per call;
    (image, filter block, row) tiles run in parallel, so each thread streams its share of the
    weights (splitting input-heavy layers by row instead measured no faster, 5955dee). 1-D
    and 3-D convs take the generic reduction schedule."""
    spatial = len(out.shape) - 2
    if not conv_t.op.reduce_axis:    # half precision: a final stage over the float32 result
        conv_t = conv_t.op.input_tensors()[0]
    if spatial != 2:
        schedule_reduction(target, sch, out, conv_t)
        return
    materialize_pad(target, sch, conv_t)
    lanes = target.vector_lanes(out.dtype)
    block = config["filter_tile"]
    compute_tensor = sch.cache_write(conv_t, "local") if out is conv_t else conv_t
    st = sch[out]
    n, f, y, x = st.op_axis
    xb = vector_block(out.shape[3], lanes)
    fo, fi = st.split(f, block)
    xo, xi = st.split(x, xb)
    st.reorder(n, fo, y, xo, fi, xi)
    fused = st.fuse(n, fo, y)
    st.vectorize(xi)
    if config["parallel"] and worth_threads(math.prod(out.shape), reduction_depth(conv_t)):
        st.parallel(fused)
    accumulate_in_registers(sch, compute_tensor, st, xo)

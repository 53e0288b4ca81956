"""The single pass: each output the maximum (or sum) of its window of the padded input,
scheduled by ``ops/nn/window_schedule.py``; the average pool's divisor, which its other
formulations share."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.dims import Dim
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.nn.pool.shapes import dilations, output_spatial, overhang


def window_positions(attrs: dict, spatial: int, out_index, reduce_axes) -> list[E.Expr]:
    strides, dilation = attrs["strides"], dilations(attrs, spatial)
    return [out_index[d] * strides[d] + reduce_axes[d].var * dilation[d]
            for d in range(spatial)]


def window_compute(kind: str, attrs: dict, x: te.Tensor) -> te.Tensor:
    """max_pool (``kind``) over each window of the padded input, or avg_pool: the window's
    sum (the anchor ``pool_sum``) over its count."""
    spatial = x.ndim - 2
    out = output_spatial(attrs, x.shape)
    if kind == "max_pool":
        lowest = te.min_value(x.dtype).value
        padded = padded_input(x, attrs["pads"], overhang(attrs, x.shape, out), lowest)
        rk = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(attrs["kernel_shape"])]

        def body(n, c, *o):
            pos = window_positions(attrs, spatial, o, rk)
            return te.max_ordered(padded[(n, c, *pos)], axis=rk)
        return te.compute(x.shape[:2] + out, body, name="max_pool")
    pads, kernel = attrs["pads"], attrs["kernel_shape"]
    padded = padded_input(x, pads, overhang(attrs, x.shape, out), 0.0)
    rk = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(kernel)]
    total = te.compute(x.shape[:2] + out, lambda n, c, *o: te.sum_(
        padded[(n, c, *window_positions(attrs, spatial, o, rk))], axis=rk),
        name="pool_sum", tag="anchor:pool_sum")
    return average(attrs, x, out, total)


def average(attrs: dict, x: te.Tensor, out: tuple[int, ...], total: te.Tensor) -> te.Tensor:
    """avg_pool: the window sums ``total`` over each window's count."""
    return te.compute(x.shape[:2] + out, lambda n, c, *o: total[(n, c, *o)] /
                      window_count(attrs, x.shape[2:], x.dtype, o), name="avg_pool")


def window_count(attrs: dict, size: tuple[int, ...], dtype: str, o) -> E.Expr:
    """avg_pool's divisor at output position ``o`` (of an input of spatial ``size``): the
    window's elements inside the input (or inside input + explicit padding, with
    count_include_pad): the k in [0, K) with low <= start + k*dilation < high; in 32-bit
    integers, which vector units have min, max and conversion to float for (64-bit ones are
    scalarized on AVX2, which made this divisor cost more than the window sum)."""
    spatial = len(size)
    pads, strides, kernel = attrs["pads"], attrs["strides"], attrs["kernel_shape"]
    include = bool(attrs["count_include_pad"])
    dilation = dilations(attrs, spatial)
    count = None
    for d in range(spatial):
        start = E.cast("int32", o[d]) * strides[d] - pads[d]
        low = -pads[d] if include else 0
        # (a symbolic size is a 64-bit expression: narrowed as the output index is)
        extent = size[d]
        if not isinstance(extent, int):
            extent = E.cast("int32", extent.expr if isinstance(extent, Dim) else extent)
        high = extent + (pads[d + spatial] if include else 0)
        step = dilation[d]
        first = E.maximum((low - start + step - 1) // step, 0)     # ceil division
        last = E.minimum((high - 1 - start) // step, kernel[d] - 1)
        n = E.maximum(last - first + 1, 0)
        count = n if count is None else count * n
    return E.cast(dtype, E.maximum(count, 1))


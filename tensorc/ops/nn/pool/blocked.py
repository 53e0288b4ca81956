"""2-D max and average pools on blocked tensors (``ops/nn/blocked_layout.py``): each tap a
whole vector of b channels, scheduled by ``ops/nn/window_blocked.py``."""
from __future__ import annotations

from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.nn import blocked_layout
from tensorc.ops.nn.padding import padded_input
from tensorc.ops.nn.pool.shapes import output_spatial, overhang
from tensorc.ops.nn.pool.window import window_count


def blocked_compute(kind: str, attrs: dict, x: te.Tensor) -> te.Tensor:
    """A 2-D ``kind`` pool of a blocked tensor."""
    plain = blocked_layout.plain_type(TensorType(x.shape, x.dtype), attrs["layout_block"]).shape
    out = output_spatial(attrs, plain)
    value = te.min_value(x.dtype).value if kind == "max_pool" else 0.0
    padded = padded_input(x, attrs["pads"], overhang(attrs, plain, out), value, blocked=True)
    return pool_blocked(kind, attrs, padded, out,
                        lambda o: window_count(attrs, plain[2:], x.dtype, o))


def pool_blocked(kind: str, attrs: dict, padded: te.Tensor, out: tuple[int, int],
                 divisor=None) -> te.Tensor:
    """max_pool or avg_pool of a blocked [N, C/b, H, W, b] tensor (``padded``: padded by the
    pool's padding, overhang and value): the window reduction per vector of b channels.
    ``divisor(o)``: avg_pool's window count at output position o."""
    strides, kernel = attrs["strides"], attrs["kernel_shape"]
    dilations = tuple(attrs.get("dilations", (1, 1)))
    ry, rx = te.reduce_axis(kernel[0], "r0"), te.reduce_axis(kernel[1], "r1")
    shape = (*padded.shape[:2], *out, padded.shape[4])

    def tap(n, c, y, xx, lane):
        return padded[n, c, y * strides[0] + ry.var * dilations[0],
                      xx * strides[1] + rx.var * dilations[1], lane]
    if kind == "max_pool":
        return te.compute(shape, lambda *i: te.max_ordered(tap(*i), axis=[ry, rx]),
                          name="max_pool")
    total = te.compute(shape, lambda *i: te.sum_(tap(*i), axis=[ry, rx]),
                       name="pool_sum", tag="anchor:pool_sum")
    return te.compute(shape, lambda n, c, y, xx, lane: total[n, c, y, xx, lane] /
                      divisor((y, xx)), name="avg_pool")

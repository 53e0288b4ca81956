"""im2col{kernel, strides, pads, dilations}: a 2-D conv's input patches, one column per
output position: x[N, C, H, W] -> P[N, C, KH, KW, OH, OW] with P[n, c, i, j, y, x] =
x[n, c, y*sh + i*dh - pt, x*sw + j*dw - pl], zero in the padding. The GEMM reads it as
[N, C*KH*KW, OH*OW] through a reshape, a view. Every axis its own: a kernel over symbolic
dims divides by no run-time width, and the kernel offsets (i, j) are loop variables of
constant range, not a quotient and remainder of a merged axis at every element (the merged
form ran at 3 GB/s).

A conv over symbolic spatial dims runs as this op and a matmul by its OIHW weights as a
[F, C*KH*KW] matrix (passes/graph/lower_for_target.py): the matmul template's symbolic
columns then tile the output positions, whatever their number at run time.
"""
from __future__ import annotations

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import in_range, injective_space, schedule_injective
from tensorc.ops.shape_rules import window_output_size

# Opaque: a kernel of its own. Every input element is read KH*KW times, so a producer fused
# into it (a concat's selects, an upsampling's gathers) would be computed that many times.
im2col = define("im2col", Pattern.OPAQUE)
im2col.schedule(schedule_injective, space=injective_space, symbolic=True)


def _output_size(attrs: dict, h, w) -> tuple:
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilations"]
    top, left, bottom, right = attrs["pads"]
    return (window_output_size(h, kh, sh, dh, top, bottom),
            window_output_size(w, kw, sw, dw, left, right))


@im2col.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    (x,) = input_types
    n, c, h, w = x.shape
    oh, ow = _output_size(attrs, h, w)
    kh, kw = attrs["kernel"]
    return [TensorType((n, c, kh, kw, oh, ow), x.dtype)]


@im2col.reference
def _reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilations"]
    top, left, bottom, right = attrs["pads"]
    oh, ow = _output_size(attrs, h, w)
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    out = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i, j] = padded[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                                     j * dw:j * dw + sw * (ow - 1) + 1:sw]
    return [out]


@im2col.compute
def _compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilations"]
    top, left = attrs["pads"][0], attrs["pads"][1]
    oh, ow = (te.extent_of(d) for d in _output_size(attrs, h, w))

    def body(b, ch, i, j, oy, ox):
        y = oy * sh + i * dh - top
        xx = ox * sw + j * dw - left
        if not any(attrs["pads"]):
            return x[b, ch, y, xx]      # every window inside the input
        inside = E.Logical("and", in_range(y, h), in_range(xx, w))
        safe_y = E.minimum(E.maximum(y, E.const(0)), E.as_expr(h - 1))
        safe_x = E.minimum(E.maximum(xx, E.const(0)), E.as_expr(w - 1))
        return E.select(inside, x[b, ch, safe_y, safe_x], E.Const(0, x.dtype))
    return te.compute((n, c, kh, kw, oh, ow), body, name="im2col")

"""An int8 conv as a GEMM over its patches: ``qconv_patches`` gathers the input's patches as
int32 words of four bytes, ``qconv`` multiplies the packed weights by them.

    qconv_patches(x: u8|s8[N, C, H, W]) {kernel, strides, pads, dilations, pad_value, shift}
        -> int32[N, ceil(C*KH*KW / 4), OH, OW]     (read by qconv as [N, K/4, OH*OW])
    qconv(w: int32[CO, ceil(K/4)], patches) {signed, saturate} -> int32[N, CO, OH*OW]

k runs over (kh, kw, c), channels innermost, as onnxruntime's channels-last im2col does: the
byte pairs that AVX2 sums into int16 (and may saturate) are then the same as its; byte q of
word r holds k = 4r + q, int8 inputs shifted by +128 where ``shift`` (``words.py``); outside
the input a patch holds ``pad_value`` (the input's zero point, shifted alike), past K any
byte (the weights are zero there). ``qconv`` is a GEMM with the weights as its broadcast rows
and the patches' words as its vectors (``dot4_s8u8``, or ``dot4_s8s8_rev`` for unshifted
int8 patches: ``signed``), scheduled by the float GEMM template; the zero-point correction
and requantization follow it as a fused epilogue, as for ``qmatmul``. Dense 2-D convs only
(groups 1): depthwise and grouped int8 convs stay on the float path.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.schedule import schedule_gemm
from tensorc.ops.matmul.space import gemm_space
from tensorc.ops.quantized.qmatmul import MAX_ROWS
from tensorc.ops.quantized.words import AccumulatorTarget, dot4_reference, unpack_words
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import INJECTIVE
from tensorc.ops.shape_rules import expect_arity
from tensorc.ops.space import SearchSpace
from tensorc.target import Target

# an anchor (scheduled as an injective kernel): the elementwise ops before it (a QuantizeLinear)
# stay in their own kernel instead of being recomputed for each of the KH x KW taps
qconv_patches = define("qconv_patches", Pattern.OUT_ELEMWISE_FUSABLE)
qconv = define("qconv", Pattern.OUT_ELEMWISE_FUSABLE)


def _out_size(attrs: dict, h: int, w: int) -> tuple[int, int]:
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilations"]
    top, left, bottom, right = attrs["pads"]
    return ((h + top + bottom - dh * (kh - 1) - 1) // sh + 1,
            (w + left + right - dw * (kw - 1) - 1) // sw + 1)


@qconv_patches.infer
def _patches_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("qconv_patches", input_types, 1)
    (x,) = input_types
    if x.dtype not in ("uint8", "int8") or x.ndim != 4 or not x.is_static:
        raise ShapeError(f"qconv_patches: takes a static uint8/int8 NCHW tensor, got {x}")
    n, c, h, w = x.shape
    oh, ow = _out_size(attrs, h, w)
    k = c * attrs["kernel"][0] * attrs["kernel"][1]
    return [TensorType((n, -(-k // 4), oh, ow), "int32")]


def patches_reference(attrs: dict, x: np.ndarray) -> np.ndarray:
    """The patches as bytes [N, K, P] (uint8 after the shift, ``pad_value`` outside)."""
    u = x.astype(np.int32) + (128 if attrs["shift"] else 0)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilations"]
    top, left, bottom, right = attrs["pads"]
    padded = np.full((n, c, h + top + bottom, w + left + right), attrs["pad_value"], np.int32)
    padded[:, :, top:top + h, left:left + w] = u
    oh, ow = _out_size(attrs, h, w)
    out = np.empty((n, kh, kw, c, oh, ow), np.int32)
    for i in range(kh):
        for j in range(kw):
            out[:, i, j] = padded[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                                  j * dw:j * dw + sw * (ow - 1) + 1:sw]
    return out.reshape(n, kh * kw * c, oh * ow)


@qconv_patches.reference
def _patches_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    p = patches_reference(attrs, x)
    n, k, size = p.shape
    signed = x.dtype == np.int8 and not attrs["shift"]
    padded = np.zeros((n, -(-k // 4) * 4, size), np.int8 if signed else np.uint8)
    padded[:, :k] = p
    words = np.ascontiguousarray(padded.transpose(0, 2, 1)).view(np.int32)
    oh, ow = _out_size(attrs, *x.shape[2:])
    return [np.ascontiguousarray(words.transpose(0, 2, 1)).reshape(n, -1, oh, ow)]


@qconv_patches.compute
def _patches_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilations"]
    top, left = attrs["pads"][0], attrs["pads"][1]
    oh, ow = _out_size(attrs, h, w)
    depth = c * kh * kw
    shift = attrs["shift"]

    def body(b, r, row, col):
        total = None
        for q in range(4):
            k = r * 4 + q
            tap, ci = k // c, k % c
            y = row * sh - top + (tap // kw) * dh
            xx = col * sw - left + (tap % kw) * dw
            inside = E.all_of(E.Compare("ge", y, E.const(0)), E.Compare("lt", y, E.const(h)),
                              E.Compare("ge", xx, E.const(0)), E.Compare("lt", xx, E.const(w)),
                              E.Compare("lt", k, E.const(depth)))
            clamp = (E.minimum(E.maximum(ci, 0), c - 1), E.minimum(E.maximum(y, 0), h - 1),
                     E.minimum(E.maximum(xx, 0), w - 1))
            value = x[(b, *clamp)]
            value = E.cast("int32", E.cast("uint8", value) if x.dtype == "int8" else value)
            if shift:       # +128: the sign bit flipped
                value = E.Binary("bitxor", value, E.const(128, "int32"))
            value = E.select(inside, value, E.const(attrs["pad_value"] & 255, "int32"))
            if q:
                value = E.Binary("shl", value, E.const(8 * q, "int32"))
            total = value if total is None else E.Binary("bitor", total, value)
        return total
    return te.compute((n, -(-depth // 4), oh, ow), body, name="qconv_patches",
                      axis_names=["b", "r", "row", "col"])


qconv_patches.schedule(INJECTIVE["llvm"].apply, space=INJECTIVE["llvm"].space)


@qconv.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("qconv", input_types, 2)
    w, p = input_types
    if w.dtype != "int32" or p.dtype != "int32" or w.ndim != 2 or p.ndim != 3 or \
            w.shape[1] != p.shape[1]:
        raise ShapeError(f"qconv: weight words {w} do not match patches {p}")
    return [TensorType((p.shape[0], w.shape[0], p.shape[2]), "int32")]


@qconv.reference
def _reference(attrs: dict, w: np.ndarray, p: np.ndarray) -> list[np.ndarray]:
    weights = unpack_words(w, 1, w.shape[1] * 4).astype(np.int32)     # [CO, 4*K4]
    u = unpack_words(p, 1, p.shape[1] * 4)      # [N, 4*K4, P] int8
    u = u if attrs["signed"] else u.view(np.uint8)
    u = u.transpose(0, 2, 1)[:, None]       # [N, 1, P, K']
    return [dot4_reference(u, weights[None, :, None, :], attrs["saturate"])]


@qconv.compute
def _compute(attrs: dict, w: te.Tensor, p: te.Tensor) -> te.Tensor:
    r = te.reduce_axis(w.shape[1], "k")
    return te.compute(
        (p.shape[0], w.shape[0], p.shape[2]),
        lambda b, i, j: te.sum_(E.Call("dot4_s8s8_rev" if attrs["signed"] else "dot4_s8u8",
                                       [w[(i, r)], p[(b, r, j)]], "int32"), axis=r),
        name="qconv", axis_names=["b", "i", "j"])


def _gemm(out: te.Tensor, acc: te.Tensor) -> Gemm:
    m, n = te.hint(out.shape[-2]), te.hint(out.shape[-1])
    return Gemm(m, n, acc.op.reduce_axis[0].extent, batched=out.shape[0] > 1, itemsize=4)


def _space(target: Target, out: te.Tensor, acc: te.Tensor, attrs: dict) -> SearchSpace:
    return gemm_space(target, _gemm(out, acc), "int32")


@qconv.schedule(space=_space)
def _schedule(target: Target, sch: Schedule, out: te.Tensor, acc: te.Tensor, attrs: dict,
              config) -> None:
    # the patches' column block copied into panels (as a constant B is packed at compile
    # time): each step of k then reads one contiguous row of the panel
    gemm = _gemm(out, acc)
    config = {**config, "rows": min(config["rows"], MAX_ROWS), "pack_b": not gemm.batched}
    schedule_gemm(AccumulatorTarget.of(target), sch, out, acc, gemm, config)

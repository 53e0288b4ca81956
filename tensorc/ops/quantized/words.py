"""Four int8 values in one int32 word, the operand of the ``dot4_u8s8`` intrinsic.

A quantized kernel reads its activations four consecutive k at a time as one int32 (byte q
holds k = 4r + q) and its weights as words packed the same way at compile time. int8
activations are either read shifted by +128 (``x ^ 0x80`` per byte) into unsigned ones, as
MLAS does on VNNI (the shift is undone by the weight-sum correction the QDQ pass folds into
the bias), or kept signed for ``dot4_s8s8``, which AVX2 computes exactly (see
codegen/llvm/int8_dot.py).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tensorc.ir import expr as E
from tensorc.target import Target

SIGN_BITS = -0x7F7F7F80     # 0x80808080 as an int32: +128 on each byte, mod 256


def word(byte: Callable[[int], E.Expr], shift: bool) -> E.Expr:
    """The int32 word whose byte q is ``byte(q)`` (a uint8 or int8 expression), each byte
    shifted by +128 when ``shift`` (int8 read as uint8)."""
    total = None
    for q in range(4):
        b = byte(q)
        value = E.cast("int32", E.cast("uint8", b) if b.dtype == "int8" else b)
        if q:
            value = E.Binary("shl", value, E.const(8 * q, "int32"))
        total = value if total is None else E.Binary("bitor", total, value)
    if shift:
        total = E.Binary("bitxor", total, E.const(SIGN_BITS, "int32"))
    return total


def pack_words(array: np.ndarray, axis: int) -> np.ndarray:
    """int8 ``array`` with 4 consecutive entries along ``axis`` in one int32 (zeros past the
    end): the axis shrinks to ceil(n / 4) and the words take its place."""
    array = np.moveaxis(np.asarray(array, np.int8), axis, -1)
    n = array.shape[-1]
    padded = np.zeros(array.shape[:-1] + (-(-n // 4) * 4,), np.int8)
    padded[..., :n] = array
    words = np.ascontiguousarray(padded).view(np.int32)     # little-endian: byte q = k 4r+q
    return np.ascontiguousarray(np.moveaxis(words, -1, axis))


def unpack_words(words: np.ndarray, axis: int, n: int) -> np.ndarray:
    """The int8 values of :func:`pack_words`'s ``words`` (``n`` along ``axis``)."""
    w = np.ascontiguousarray(np.moveaxis(words, axis, -1)).view(np.int8)
    return np.moveaxis(w[..., :n], -1, axis)


def dot4_reference(u: np.ndarray, s: np.ndarray, saturate: bool) -> np.ndarray:
    """numpy: ``u`` [..., 4k] (values 0..255) and ``s`` [..., 4k] int8 -> the int32 sum over
    the last axis, each pair (0+1, 2+3 of every four) clamped to int16 first when
    ``saturate`` (AVX2's ``vpmaddubsw``; ``vpdpbusd`` is exact)."""
    p = u.astype(np.int32) * s.astype(np.int32)
    pad = (-p.shape[-1]) % 4
    if pad:
        p = np.concatenate([p, np.zeros(p.shape[:-1] + (pad,), np.int32)], axis=-1)
    pairs = p[..., 0::2] + p[..., 1::2]
    if saturate:
        pairs = np.clip(pairs, -32768, 32767)
    return pairs.sum(axis=-1, dtype=np.int64).astype(np.int32)


class AccumulatorTarget(Target):
    """The target as the GEMM template sees an int8 kernel: its register tile is counted in
    int32 accumulator lanes (8 per AVX2 vector), where the template would take the lanes of
    the group's output (uint8 after requantization: 32, a tile four times too wide)."""

    def vector_lanes(self, dtype: str = "float32") -> int:
        return super().vector_lanes("int32" if dtype in ("uint8", "int8") else dtype)

    @staticmethod
    def of(target: Target) -> AccumulatorTarget:
        return AccumulatorTarget(target.kind, target.mcpu, target.features, target.triple,
                                 target.options)

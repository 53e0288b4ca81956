"""qmatmul: an int8 matmul's int32 accumulator, ``A @ B`` with A uint8 or int8 (read +128
where int8) and B int8 weights packed at compile time.

    qmatmul(a: u8|s8[..., M, K], b: int32[ceil(N/nr), ceil(K/4), nr]) {n, k, b_panel,
            shift, saturate} -> int32[..., M, N]

B holds four consecutive k of a column in each int32 word (``words.py``), in column panels
nr wide as the float matmul's packed B (``ops/matmul/tile.py``). Each step of the reduction
is one ``dot4_u8s8`` of a broadcast word of A and a vector of B's words: ``vpmaddubsw`` +
``vpmaddwd`` on AVX2, ``vpdpbusd`` on VNNI. ``shift`` reads A's bytes with the sign bit
flipped: int8 A as uint8 (+128, the u8 x s8 product), uint8 A as int8 (-128, then
``dot4_s8s8``, exact on AVX2 for weights above -128). ``saturate``: whether the
pairs of products saturate to int16 on the target the graph was built for
(``codegen/llvm/int8_dot.py``); the numpy reference follows it. The zero points and the +128
shift are corrected outside, by an int32 bias the QDQ pass computes; requantization is the
elementwise epilogue after it, which fusion puts into this kernel. The CPU schedule is the
float matmul's GEMM template.
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
from tensorc.ops.matmul.tile import unpack_b_panels
from tensorc.ops.quantized.words import AccumulatorTarget, dot4_reference, unpack_words, word
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import expect_arity
from tensorc.ops.space import SearchSpace
from tensorc.target import Target

qmatmul = define("qmatmul", Pattern.OUT_ELEMWISE_FUSABLE)

# the register tile's rows on AVX2 beside dot4's constant of ones and its int16 pairs
# (6 rows x 2 vectors, the float tile, spills)
MAX_ROWS = 4


@qmatmul.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("qmatmul", input_types, 2)
    a, b = input_types
    if a.dtype not in ("uint8", "int8") or b.dtype != "int32":
        raise ShapeError(f"qmatmul: takes uint8/int8 activations and int32 weight words, got "
                         f"{a.dtype} and {b.dtype}")
    if b.ndim != 3 or b.shape[2] != attrs["b_panel"] or a.shape[-1] != attrs["k"] or \
            b.shape[1] != -(-attrs["k"] // 4):
        raise ShapeError(f"qmatmul: packed weights {b} do not match {a} (k {attrs['k']}, "
                         f"panel {attrs['b_panel']})")
    return [TensorType(a.shape[:-1] + (attrs["n"],), "int32")]


def shift_of(dtype: str, shift: bool) -> int:
    """What reading the bytes with their sign bit flipped (``shift``) adds to each value:
    +128 to an int8 one (read as uint8), -128 to a uint8 one (read as int8)."""
    return 0 if not shift else 128 if dtype == "int8" else -128


def weights_of(attrs: dict, b: np.ndarray) -> np.ndarray:
    """The int8 ``B[K, N]`` that qmatmul's packed ``b`` holds."""
    return unpack_words(unpack_b_panels(b, attrs["n"]), 0, attrs["k"])


@qmatmul.reference
def _reference(attrs: dict, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    w = weights_of(attrs, b)
    u = a.astype(np.int32) + shift_of(a.dtype.name, attrs["shift"])
    # [..., M, 1, K] x [N, K] -> [..., M, N]: the products of each (row, column) in k order
    return [dot4_reference(u[..., :, None, :], w.T, attrs["saturate"]).astype(np.int32)]


@qmatmul.compute
def _compute(attrs: dict, a: te.Tensor, b: te.Tensor) -> te.Tensor:
    *batch, m, k = a.shape
    nr, n, depth = attrs["b_panel"], attrs["n"], attrs["k"]
    shift = attrs["shift"]
    dot = "dot4_s8s8" if (a.dtype == "int8") != shift else "dot4_u8s8"

    def words(*idx):
        *bi, i, r = idx

        def byte(q: int) -> E.Expr:
            kk = r * 4 + q
            if depth % 4:   # past K: any byte of A (B's word is zero there)
                kk = E.minimum(kk, E.const(depth - 1))
            return a[(*bi, i, kk)]
        return word(byte, shift)
    # a stage of its own, inlined: the product then reads A as one tensor, as the GEMM
    # template expects of its first operand
    a_words = te.compute((*batch, m, b.shape[1]), words, name="qmatmul_words")
    r = te.reduce_axis(b.shape[1], "k")

    def body(*idx):
        bi, i, j = idx[:-2], idx[-2], idx[-1]
        return te.sum_(E.Call(dot, [a_words[(*bi, i, r)], b[(j // nr, r, j % nr)]],
                              "int32"), axis=r)
    names = [f"b{q}" for q in range(len(batch))] + ["i", "j"]
    return te.compute((*batch, m, n), body, name="qmatmul", axis_names=names)


def _gemm(out: te.Tensor, acc: te.Tensor, attrs: dict) -> Gemm:
    gemm = Gemm.of_matmul(out, acc, attrs)
    return Gemm(gemm.m, gemm.n, gemm.k, gemm.batched, b_panel=gemm.b_panel, itemsize=4,
                k_blockable=False)


def _space(target: Target, out: te.Tensor, acc: te.Tensor, attrs: dict) -> SearchSpace:
    return gemm_space(target, _gemm(out, acc, attrs), "int32")


@qmatmul.schedule(space=_space, symbolic=True)
def _schedule(target: Target, sch: Schedule, out: te.Tensor, acc: te.Tensor, attrs: dict,
              config) -> None:
    # A is read as words of four bytes: a copy in mr-row panels would scatter them
    config = {**config, "pack_a": False, "rows": min(config["rows"], MAX_ROWS)}
    schedule_gemm(AccumulatorTarget.of(target), sch, out, acc, _gemm(out, acc, attrs), config)

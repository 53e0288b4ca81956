"""The int8 kernels (ops/quantized/): one QDQ conv / matmul / gemm compiled and run, equal to
the integer arithmetic written out in numpy (helpers_int8) and to onnxruntime's int8 session
on every element; the word packing; the byte-pair saturation rule this machine's AVX2 code
follows (u8 x s8 pairs clamp to int16 as vpmaddubsw does, s8 x s8 is exact); the instructions
each target gets (vpmaddubsw on AVX2, vpdpbusd with AVX512-VNNI or AVX-VNNI, compiled for
those CPUs and read, not run)."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from helpers_int8 import QdqCase

import tensorc
from tensorc.ops.quantized.words import dot4_reference, pack_words, unpack_words
from tensorc.target import Target

HOST = Target.host()


def _ort(case: QdqCase) -> np.ndarray:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(case.model().SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {"x": case.x})[0]


def _tensorc(case: QdqCase) -> np.ndarray:
    return tensorc.compile(case.model()).run({"x": case.x})["y"]


def _kernel_ops(case: QdqCase) -> list[str]:
    graph = tensorc.inspect(case.model(), "graph")
    return [line.split("= ")[1].split("(")[0] for line in graph.splitlines() if " = " in line
            and not line.lstrip().startswith("const")]


CASES = [
    QdqCase("conv", "uint8"),
    QdqCase("conv", "int8"),
    QdqCase("conv", "uint8", x_shape=(2, 5, 9, 11), channels=7, stride=2),   # K % 4 != 0
    QdqCase("conv", "int8", x_shape=(1, 16, 8, 8), kernel=1, pad=0, channels=24),
    # one output position (squeeze-and-excite): the scalar register tile
    QdqCase("conv", "uint8", x_shape=(1, 16, 1, 1), kernel=1, pad=0, channels=8),
    QdqCase("conv", "int8", x_shape=(1, 32, 1, 1), kernel=1, pad=0, channels=12),
    # onnxruntime runs these in float (a Relu / Clip between the product and Q is no unit it
    # fuses): 7-bit weights, so that no pair saturates in tensorc's integers either
    QdqCase("conv", "uint8", activation="relu", weight_bound=63),
    QdqCase("conv", "int8", activation="clip", weight_bound=63),
    QdqCase("matmul", "uint8", x_shape=(3, 72), channels=20),
    # batch dims; 7-bit weights: onnxruntime's int8 x int8 matmul over 3-D inputs saturates
    # full-range ones (its result then equals neither the exact nor tensorc's pairwise sum,
    # up to 13 steps apart; tensorc's s8 x s8 product is exact)
    QdqCase("matmul", "int8", x_shape=(2, 5, 37), channels=9, weight_bound=63),
    QdqCase("gemm", "uint8", x_shape=(4, 30), channels=10),
    QdqCase("gemm", "int8", x_shape=(1, 64), channels=33, activation="relu", weight_bound=63),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.kind}-{c.act}-{c.x_shape}"
                         f"{'-' + c.activation if c.activation else ''}")
def test_int8_kernel_equals_the_integer_arithmetic_and_onnxruntime(case):
    got = _tensorc(case)
    np.testing.assert_array_equal(got, case.reference(saturate=not HOST.int8_dot_exact))
    if case.activation:     # float in onnxruntime: its rounding may differ by one step
        np.testing.assert_allclose(got.astype(int), _ort(case).astype(int), rtol=0, atol=1)
    else:
        np.testing.assert_array_equal(got, _ort(case))
    ops = _kernel_ops(case)
    assert ("qconv" if case.kind == "conv" else "qmatmul") in ops
    assert "conv" not in ops and "matmul" not in ops and "dequantize" not in ops


def test_u8_pairs_saturate_as_vpmaddubsw_and_onnxruntime_do():
    """Full-range u8 activations by full-range int8 weights: some byte pairs exceed int16
    (255 x 127 x 2 = 64770). On AVX2 (no VNNI) tensorc clamps each pair to 32767, as
    vpmaddubsw does and as onnxruntime's MLAS does on this machine: equal to the saturating
    reference, unequal to the exact one."""
    case = QdqCase("conv", "uint8", x_shape=(1, 32, 8, 8), channels=16)
    case.x[:] = np.where(np.random.default_rng(3).random(case.x.shape) < 0.7, 255, case.x)
    exact, saturated = case.reference(saturate=False), case.reference(saturate=True)
    assert (exact != saturated).any()       # the inputs do saturate
    got = _tensorc(case)
    np.testing.assert_array_equal(got, saturated if not HOST.int8_dot_exact else exact)
    np.testing.assert_array_equal(got, _ort(case))


def test_s8_activations_are_exact_on_avx2():
    """int8 activations at -128 by weights at +-127: s8 x s8 (|x| times w with x's sign) keeps
    every pair within 2 x 128 x 127 = 32512, so nothing saturates; the +128 shift (u8s8)
    would have."""
    case = QdqCase("conv", "int8", x_shape=(1, 32, 8, 8), channels=16)
    case.x[:] = -128
    np.testing.assert_array_equal(_tensorc(case), case.reference(saturate=False))


def test_7bit_weights_never_saturate():
    """reduce_range's weights (within +-63): the saturating and exact sums agree."""
    case = QdqCase("conv", "uint8", weight_bound=63)
    np.testing.assert_array_equal(case.reference(True), case.reference(False))
    np.testing.assert_array_equal(_tensorc(case), case.reference(False))


def test_dot4_reference_clamps_each_pair():
    u = np.array([255, 255, 1, 2], np.uint8)
    s = np.array([127, 127, -3, 4], np.int8)
    assert dot4_reference(u, s, saturate=True) == 32767 + 5
    assert dot4_reference(u, s, saturate=False) == 64770 + 5


def test_words_hold_four_consecutive_k():
    w = np.arange(-6, 24, dtype=np.int8).reshape(10, 3)      # K = 10: 3 words, 2 bytes pad
    words = pack_words(w, 0)
    assert words.shape == (3, 3) and words.dtype == np.int32
    assert words[0, 0] == int.from_bytes(bytes(np.int8([-6, -3, 0, 3]).view(np.uint8)),
                                         "little", signed=True)
    np.testing.assert_array_equal(unpack_words(words, 0, 10), w)


@pytest.mark.parametrize("target, instruction", [
    ("llvm", "vpmaddubsw"),
    ("llvm -mcpu=znver4 -mattr=+avx512vnni", "vpdpbusd"),
    ("llvm -mcpu=alderlake -mattr=+avxvnni", "{vex}\tvpdpbusd"),
])
def test_each_target_gets_its_int8_instruction(target, instruction):
    """Compiled, not run (this machine has neither VNNI): the kernel's products are the
    target's int8 instruction; on AVX2 each vpmaddubsw is followed by its vpmaddwd."""
    from tensorc.codegen.llvm.objects import optimize_module
    from tensorc.compiler.llvm import compile_graph
    from tensorc.frontend.model import import_model
    tgt = Target.from_string(target)
    if target == "llvm" and "+avx2" not in tgt.features:
        pytest.skip("this machine has no AVX2")
    _, graph = import_model(QdqCase("conv", "uint8", x_shape=(1, 16, 12, 12)).model(), None)
    mod, tm = optimize_module(compile_graph(graph, tgt).llvm_ir, tgt)
    asm = tm.emit_assembly(mod)
    assert instruction in asm
    if instruction == "vpmaddubsw":
        assert asm.count("vpmaddwd") >= asm.count("vpmaddubsw")
    else:
        assert "vpmaddubsw" not in asm


@pytest.mark.parametrize("case", CASES[:4] + CASES[8:10], ids=lambda c: f"{c.kind}-{c.act}")
def test_the_exact_dot_targets_build_equals_the_exact_arithmetic(case, monkeypatch):
    """What a CPU with vpdpbusd builds (int8 activations read +128 shifted, with the weight
    sums' correction; exact byte-pair sums), run here with the exact sums emulated in int32:
    the graph-level arithmetic of those targets checked on a host without them."""
    from tensorc.codegen.llvm import int8_dot
    monkeypatch.setattr(Target, "int8_dot_exact", property(lambda self: True))
    monkeypatch.setattr(int8_dot, "_native", lambda features, width: False)
    got = tensorc.compile(case.model(), cache=False).run({"x": case.x})["y"]
    np.testing.assert_array_equal(got, case.reference(saturate=False))

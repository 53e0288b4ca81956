"""Target strings: what they enable, and every mistake in them a TensorcError that lists the
valid choices (LLVM itself would warn, then abort the process later)."""
from __future__ import annotations

import pytest

import tensorc.target
from tensorc import TensorcError
from tensorc.target import Target, llvm_cpus_and_features, missing_cpu_features


def test_llvm_lists_cpus_and_features() -> None:
    cpus, features = llvm_cpus_and_features()
    assert {"x86-64-v3", "skylake-avx512", Target.host().mcpu} <= cpus
    assert {"avx2", "avx512f", "fma"} <= features


def test_foreign_cpu_gets_its_isa_features() -> None:
    assert Target.from_string("llvm -mcpu=skylake-avx512").vector_bits == 512
    assert Target.from_string("llvm -mcpu=x86-64-v3").vector_bits == 256
    assert Target.from_string("llvm -mcpu=x86-64").vector_bits == 128
    narrowed = Target.from_string("llvm -mcpu=x86-64-v4 -mattr=-avx512f")
    assert "-avx512f" in narrowed.features.split(",") and narrowed.vector_bits == 256


@pytest.mark.parametrize("text,expected", [
    ("llvm -mcpu=bogus", "LLVM knows no CPU 'bogus'; valid CPUs: "),
    ("llvm -mcpu=znver99", "close to it: znver1, znver2, znver3, znver4, znver5"),
    ("llvm -mattr=+bogus", "unknown -mattr feature +bogus; write +name or -name"),
    ("llvm -mattr=avx2", "unknown -mattr feature avx2"),
    ("llvm -mtriple=aarch64-linux-gnu", "tensorc compiles CPU code for the machine it runs on"),
    ("llvm -mcpu=x86-64 -mcpu=x86-64-v2", "-mcpu is given twice"),
    ("llvm mcpu", "cannot read 'mcpu'; llvm options are written -NAME=VALUE"),
    ("cuda -mcpu=sm_80", "unknown option -mcpu; cuda takes -arch=..."),
    ("cuda -arch=sm_10", "unknown CUDA architecture sm_10"),
    ("llvmx", "unknown target 'llvmx'"),
    ("llvm -winograd=yes", "-winograd takes 0 or 1, not 'yes'"),
])
def test_bad_target_strings(text: str, expected: str) -> None:
    with pytest.raises(TensorcError) as info:
        Target.from_string(text)
    assert expected in str(info.value)


def test_target_of_the_wrong_type() -> None:
    with pytest.raises(TensorcError, match="a target is a string"):
        Target.from_string(3)


def test_missing_cpu_features_reads_cpu_names_and_mattr(monkeypatch) -> None:
    avx2_host = frozenset(tensorc.target.CPU_IMPLIED_FEATURES["x86-64-v3"]) | {"sse2"}
    monkeypatch.setattr(tensorc.target, "host_cpu_features", lambda: avx2_host)
    assert missing_cpu_features("llvm -mcpu=x86-64-v4", "") == \
        ["avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"]
    assert missing_cpu_features("llvm -mcpu=x86-64", "+avx2,+avx512f,-avx512bw") == ["avx512f"]
    assert missing_cpu_features("llvm -mcpu=x86-64", "+avx2,+fma") == []


def test_constructor_builds_what_from_string_builds() -> None:
    """Target("llvm") is what a user writes first: it must be the host target, not one with
    no features (which made compile fail on a knob with no legal default)."""
    assert Target("llvm") == Target.from_string("llvm")
    assert Target("llvm").features == Target.host().features
    assert Target("cuda") == Target.from_string("cuda")
    assert Target("llvm -mcpu=x86-64-v3") == Target.from_string("llvm -mcpu=x86-64-v3")
    assert Target("cuda -arch=sm_90").archs == ("sm_90",)
    with pytest.raises(TensorcError, match="unknown target 'tpu'"):
        Target("tpu")


def test_constructed_llvm_target_compiles_lenet5() -> None:
    import numpy as np
    import onnx

    import models
    import tensorc
    from tests.helpers import assert_close, ort_run
    path = models.path("lenet5")
    mod = tensorc.compile(path, target=Target("llvm"))
    name, shape, _ = mod.inputs[0]
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    assert_close(mod.run({name: x}), ort_run(onnx.load(path), {name: x}))

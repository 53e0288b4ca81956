"""Code built for CPU features this machine lacks is refused before it runs (it would die of
SIGILL, taking the process with it): a single kernel at build_kernel, a model compiled here
for another CPU when it runs. On every host, with the host's features pretended narrower;
and on the real host, whichever features it has."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import tensorc
import tensorc.target
from tensorc.runtime.kernel import build_kernel
from tensorc.errors import TensorcError
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.passes.loop import optimize
from tensorc.target import host_cpu_features

AVX512 = ("avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")


def add_kernel():
    a = te.placeholder((64,), "float32", "a")
    b = te.placeholder((64,), "float32", "b")
    c = te.compute((64,), lambda i: a[i] + b[i], name="c")
    return optimize(lower(create_schedule(c), [a, b, c], "vadd"))


def add_model():
    return make_model([helper.make_node("Add", ["x", "x"], ["y"])],
                      [tensor_info("x", "float32", (4, 64))], ["y"])


@pytest.fixture
def avx2_host(monkeypatch):
    """This machine seen as an AVX2 CPU without AVX-512 (such as Zen 3)."""
    narrowed = frozenset(f for f in host_cpu_features() if not f.startswith("avx512"))
    monkeypatch.setattr(tensorc.target, "host_cpu_features", lambda: narrowed)


def test_a_kernel_for_avx512_is_refused_on_a_host_without_it(avx2_host):
    with pytest.raises(TensorcError, match="vadd was built for llvm -mcpu=x86-64-v4 .* "
                                           "lacks: " + ", ".join(AVX512) + ";"):
        build_kernel(add_kernel(), "llvm -mcpu=x86-64-v4")
    with pytest.raises(TensorcError, match="lacks: avx512f;"):
        build_kernel(add_kernel(), "llvm -mcpu=x86-64 -mattr=+avx2,+avx512f")


def test_a_model_compiled_for_avx512_runs_nowhere_without_it(avx2_host, tmp_path):
    mod = tensorc.compile(add_model(), target="llvm -mcpu=znver4")
    x = np.ones((4, 64), np.float32)
    with pytest.raises(TensorcError, match="compiled for llvm -mcpu=znver4 and needs CPU "
                                           "features this machine lacks: avx512bw"):
        mod.run({"x": x})
    with pytest.raises(TensorcError, match="lacks: avx512bw"):
        mod.profile({"x": x}, seconds=0.01, min_runs=1)
    mod.save(tmp_path / "zen4.tcz")           # compiled here to be shipped: that works
    with pytest.raises(tensorc.ArtifactError, match="lacks: avx512bw"):
        tensorc.load(tmp_path / "zen4.tcz")


def _on_this_host(features: str):
    has = all(f[1:] in host_cpu_features() for f in features.split(","))
    return pytest.param(features, id=f"{features}-{'present' if has else 'absent'}-here")


@pytest.mark.parametrize("features", [_on_this_host("+avx512f"), _on_this_host("+avx2,+fma")])
def test_a_kernel_for_cpu_features_runs_where_the_host_has_them(features):
    """On this machine, unpatched: a kernel built for features it has runs and adds up; one
    built for features it lacks is refused, naming them."""
    missing = sorted(f[1:] for f in features.split(",") if f[1:] not in host_cpu_features())
    target = f"llvm -mcpu=x86-64 -mattr={features}"
    if missing:
        with pytest.raises(TensorcError, match=f"lacks: {', '.join(missing)};"):
            build_kernel(add_kernel(), target)
        return
    kernel = build_kernel(add_kernel(), target)
    a, b = np.arange(64, dtype=np.float32), np.full(64, 0.5, np.float32)
    c = np.full(64, np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + 0.5)

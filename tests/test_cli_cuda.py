"""The ``tensorc`` command with CUDA targets: inspect the CUDA C and its ptxas resources,
compile an artifact with nvcc, and the errors (an unknown architecture, running without a
GPU, a CPU-only stage)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers_cuda import needs_nvcc

import models
import tensorc
from tensorc.cli.main import main
from tensorc.codegen.nvcc import find_nvcc

MLP = str(models.path("mlp"))


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: "), err
    assert "Traceback" not in err
    return err


def test_inspect_prints_the_cuda_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", MLP, "--target", "cuda", "--stage", "cuda"]) == 0
    out = capsys.readouterr().out
    assert 'extern "C" __global__ void __launch_bounds__(' in out
    assert "#include <cuda_fp16.h>" in out
    assert "// launch plan: " in out and "<<<" in out
    if find_nvcc() is not None:
        assert "// ptxas resources per kernel" in out and "regs" in out and "sm_80" in out
    else:
        assert "not measured (nvcc not found" in out


def test_inspect_loops_shows_device_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", MLP, "--target", "cuda -arch=sm_90", "--stage", "loops"]) == 0
    out = capsys.readouterr().out
    assert "blockIdx.x" in out and "threadIdx.x" in out and "// grid " in out


def test_stages_and_targets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", MLP, "--target", "cuda", "--stage", "llvm"]) == 2
    assert "stage llvm is the CPU's; for target cuda -arch=sm_80 inspect stage cuda" in \
        _error(capsys)
    assert main(["inspect", MLP, "--stage", "cuda"]) == 0      # the default architecture
    assert "__global__" in capsys.readouterr().out


def test_unknown_architecture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", MLP, "--target", "cuda -arch=sm_70", "-o",
                 str(tmp_path / "m.tcz")]) == 2
    assert "unknown CUDA architecture sm_70 in 'cuda -arch=sm_70': use one of sm_80, sm_89, " \
           "sm_90" in _error(capsys)


@needs_nvcc
def test_compile_for_a_gpu_then_run_without_one(tmp_path: Path, monkeypatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mlp.tcz"
    assert main(["compile", MLP, "--target", "cuda -arch=sm_90", "-o", str(out)]) == 0
    assert "running nvcc for sm_90" in capsys.readouterr().out
    module = tensorc.load(out)
    assert module.target == "cuda -arch=sm_90" and module.fatbin
    monkeypatch.setitem(sys.modules, "pycuda", None)       # no pycuda, as on this machine
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    assert main(["run", str(out)]) == 2
    assert "running a CUDA module needs pycuda and an NVIDIA GPU" in _error(capsys)


def test_compiling_for_cuda_without_nvcc(tmp_path: Path, monkeypatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import tensorc.codegen.nvcc as nvcc
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: None)
    assert main(["compile", MLP, "--target", "cuda", "-o", str(tmp_path / "m.tcz")]) == 2
    assert "nvcc (the CUDA compiler) was not found on PATH, in $CUDA_HOME/bin, $CUDA_PATH/bin " \
           "or /usr/local/cuda*/bin: install the CUDA toolkit or set CUDA_HOME" in _error(capsys)


def test_nvcc_is_found_through_cuda_home(tmp_path: Path, monkeypatch) -> None:
    import tensorc.codegen.nvcc as nvcc
    fake = tmp_path / "toolkit" / "bin" / "nvcc"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "toolkit"))
    assert nvcc.find_nvcc() == str(fake)


@needs_nvcc
def test_nvcc_errors_are_reported() -> None:
    from tensorc.codegen.nvcc import build_fatbin
    with pytest.raises(tensorc.TensorcError, match="(?s)nvcc failed to compile the generated CUDA "
                                                   "source .*undefined"):
        build_fatbin('extern "C" __global__ void k() { undefined_name(); }', ("sm_80",))


def test_ptxas_resources_are_parsed() -> None:
    from tensorc.codegen.nvcc import KernelResources, parse_ptxas
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k0_fused_conv' for 'sm_80'
ptxas info    : Function properties for k0_fused_conv
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 72 registers, used 1 barriers, 12416 bytes smem, 392 bytes cmem[0]
ptxas info    : Compiling entry function 'k1_fused_add' for 'sm_90'
ptxas info    : Function properties for k1_fused_add
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 368 bytes cmem[0]
"""
    assert parse_ptxas(log) == {
        "k0_fused_conv": {"sm_80": KernelResources(72, 12416, 16, 8, 4, 1)},
        "k1_fused_add": {"sm_90": KernelResources(12, 0, 0, 0, 0, 0)}}


def _without_pycuda(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pycuda", None)       # no pycuda, as on this machine
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)


@needs_nvcc
def test_profile_a_cuda_module_without_a_gpu(tmp_path: Path, monkeypatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _without_pycuda(monkeypatch)
    # an ONNX model: refused before compiling, so no time is spent on a module that cannot run
    assert main(["profile", MLP, "--target", "cuda"]) == 2
    err = _error(capsys)
    assert "profiling a CUDA module needs a GPU" in err
    assert "running a CUDA module needs pycuda and an NVIDIA GPU" in err
    assert "compiling" not in err
    out = tmp_path / "mlp.tcz"
    assert main(["compile", MLP, "--target", "cuda -arch=sm_80,sm_90", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["profile", str(out)]) == 2
    assert "profiling a CUDA module needs a GPU" in _error(capsys)
    assert main(["profile", str(out), "--json"]) == 2
    assert "profiling a CUDA module needs a GPU" in json.loads(capsys.readouterr().out)["error"]
    assert main(["profile", str(out), "--threads", "1"]) == 2
    assert "--threads applies to CPU modules" in _error(capsys)


@needs_nvcc
def test_profile_a_cuda_module_per_launch(tmp_path: Path, monkeypatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from tensorc.runtime.cuda_device import EmulatedDevice, PyCudaDevice
    emulated = EmulatedDevice()
    monkeypatch.setattr(PyCudaDevice, "shared", classmethod(lambda cls: emulated))
    assert main(["profile", MLP, "--target", "cuda", "--seconds", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "kernel launches on CPU emulation" in out
    assert "grid" in out and "block" in out and "ms" in out
    module = tensorc.compile(MLP, target="cuda")
    assert all(launch.kernel in out for launch in module.plan.launches)
    assert main(["profile", MLP, "--target", "cuda", "--seconds", "0.05", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "CPU emulation"
    assert len(report["launches"]) == len(module.plan.launches)
    assert {"kernel", "group", "grid", "block", "ms", "share"} <= set(report["launches"][0])
    for flag in (["--threads", "1"], ["--trace", str(tmp_path / "t.json")],
                 ["--peak-gflops", "10", "--bandwidth", "10"]):
        assert main(["profile", MLP, "--target", "cuda", *flag]) == 2
        assert f"{flag[0]} applies to CPU modules" in _error(capsys)

"""The models in models/, compiled for target cuda, without a GPU:

- their CUDA C, executed on the CPU emulator, matches onnxruntime (the CNNs on 64x64 or 75x75
  images, where emulating 224x224 would be slow: their global pooling makes any size valid;
  all but the YOLO-style detector, see NOT_EMULATED);
- nvcc builds every kernel for sm_80 and sm_90 (one nvcc call per model, both architectures)
  and ptxas reports no local-memory spills in any of them.
"""
from __future__ import annotations

import importlib

import numpy as np
import onnx
import pytest
from helpers import ort_run
from helpers_cuda import needs_nvcc

from tensorc.codegen.nvcc import build_fatbin
from tensorc.compiler.cuda import compile_graph_cuda, cuda_module
from tensorc.frontend.onnx import import_onnx
from tensorc.reference import random_inputs
from tensorc.runtime.cuda_device import EmulatedDevice, kernel_sync_flags
from tensorc.target import Target

MODELS = ["mlp", "lenet5", "resnet", "mobilenetv2", "bert", "gpt2", "detector", "lstm",
          "squeezenet", "inception", "efficientnet", "yolo", "audio"]
# emulated on smaller inputs (their shapes otherwise as models/ builds them)
SMALLER = {"resnet": {"input": (1, 3, 64, 64)}, "mobilenetv2": {"input": (1, 3, 64, 64)},
           "squeezenet": {"input": (1, 3, 64, 64)}, "inception": {"input": (1, 3, 75, 75)},
           "efficientnet": {"input": (1, 3, 64, 64)}, "audio": {"waveform": (1, 1, 4000)}}
# built with nvcc but not emulated: the YOLO-style head reshapes to the 52x52 grid of a 416x416
# image, whose emulation would take minutes (its kernels are the CNNs' plus SPP pooling, Resize
# and Concat, each emulated in tests/ops/test_cuda_ops.py)
NOT_EMULATED = {"yolo"}


def model_and_shapes(name: str, shapes: dict | None = None):
    module = importlib.import_module(f"models.{name}")
    model = module.build()
    bound = dict(module.INPUT_SHAPES) if module.INPUT_SHAPES else None
    for input_name, shape in (shapes or {}).items():
        bound[input_name] = shape
        (value,) = [v for v in model.graph.input if v.name == input_name]
        for dim, n in zip(value.type.tensor_type.shape.dim, shape):
            dim.ClearField("dim_param")
            dim.dim_value = n
    onnx.checker.check_model(model)
    return module, model, bound


@pytest.mark.parametrize("name", [m for m in MODELS if m not in NOT_EMULATED])
def test_model_on_emulated_gpu_matches_onnxruntime(name: str) -> None:
    module, model, shapes = model_and_shapes(name, SMALLER.get(name))
    target = Target.from_string("cuda")
    compiled = compile_graph_cuda(import_onnx(model, shapes, loop_kernels=False), target)
    mod = cuda_module(compiled, target, build=False).use_device(EmulatedDevice())
    if hasattr(module, "example_inputs") and name not in SMALLER:
        feeds = module.example_inputs()
    else:
        feeds = random_inputs(mod.inputs, seed=0)
    got = mod.run(feeds)
    want = ort_run(model, feeds)
    assert list(got) == list(want)
    for out_name, expected in want.items():
        np.testing.assert_allclose(got[out_name], expected, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name}: output {out_name}")
    # the launch plan ran every kernel of the source
    assert set(kernel_sync_flags(mod.source)) == set(mod.plan.kernel_names)


@needs_nvcc
@pytest.mark.parametrize("name", MODELS)
def test_every_kernel_builds_with_nvcc_without_spills(name: str) -> None:
    _, model, shapes = model_and_shapes(name)
    target = Target.from_string("cuda -arch=sm_80,sm_90")
    compiled = compile_graph_cuda(import_onnx(model, shapes, loop_kernels=False), target)
    build = build_fatbin(compiled.source, target.archs)
    assert build.fatbin
    kernels = set(kernel_sync_flags(compiled.source))
    assert set(build.resources) == kernels
    for kernel, by_arch in build.resources.items():
        assert set(by_arch) == {"sm_80", "sm_90"}, kernel
        for arch, used in by_arch.items():
            assert used.spill_stores == 0 and used.spill_loads == 0, \
                f"{name}: {kernel} spills on {arch}: {used}"
            assert used.registers <= target.max_registers_per_thread
            assert used.shared_bytes <= target.max_shared_memory_per_block

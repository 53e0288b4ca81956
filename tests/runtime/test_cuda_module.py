"""The CUDA runtime without a GPU: the launch plan, CudaModule on the CPU emulator (inputs in,
outputs out, device arrays through, per-launch profile), save and load, the clear error where
there is no GPU, and the pycuda glue run against a stand-in for ``pycuda.driver`` that
executes the kernels on the emulator (pycuda's documented calls: init, Device,
retain_primary_context, module_from_buffer, get_function, get_global, prepare, prepared_call,
mem_alloc, memcpy_htod / memcpy_dtoh, Event, Context.synchronize); run-time index checks."""
from __future__ import annotations

import ctypes
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from helpers_cuda import needs_nvcc

import models
import tensorc
from tensorc.compiler.cuda import compile_graph_cuda, cuda_module
from tensorc.errors import InputError, TensorcError
from tensorc.frontend.onnx import import_onnx, load_model
from tensorc.runtime.cuda import CudaModule
from tensorc.runtime.cuda_device import EmulatedDevice, PyCudaDevice
from tensorc.runtime.launch_plan import Launch, LaunchPlan, resolve_args
from tensorc.target import Target

CUDA = Target.from_string("cuda")


def mlp_module() -> CudaModule:
    proto, label = load_model(str(models.path("mlp")))
    compiled = compile_graph_cuda(import_onnx(proto, label=label), CUDA)
    return cuda_module(compiled, CUDA, proto.SerializeToString(), build=False)


@pytest.fixture(scope="module")
def mlp():
    mod = mlp_module()
    (name, shape, dtype), = mod.inputs
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    want = tensorc.compile(str(models.path("mlp"))).run({name: x})
    return mod, {name: x}, want


def test_launch_plan_resolves_places_and_round_trips() -> None:
    launch = Launch("k0", (4, 1, 1), (256, 1, 1),
                    [("input", 1, 0), ("const", 0, 128), ("arena", 0, 64), ("output", 0, 0)],
                    "fused_add")
    regions = {"input": [1000, 2000], "output": [3000], "const": [4000], "arena": [5000]}
    assert resolve_args(launch, regions) == [2000, 4128, 5064, 3000]
    plan = LaunchPlan([launch], 4096)
    again = LaunchPlan.from_json(plan.to_json())
    assert again == plan and again.kernel_names == ["k0"]
    assert "k0<<<4x1x1, 256x1x1>>>(input1, const0+128, arena0+64, output0)" in plan.describe()


def test_runs_on_the_emulator_like_the_cpu_module(mlp) -> None:
    mod, feeds, want = mlp
    device = EmulatedDevice()
    got = mod.use_device(device).run(feeds)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    assert device.launches == len(mod.plan.launches)
    assert mod.input_names == ["x"] and mod.output_names == list(want)


def test_device_arrays_pass_through_and_outputs_stay_on_the_device(mlp) -> None:
    mod, feeds, want = mlp
    device = EmulatedDevice()
    mod.use_device(device)
    (name, x), = feeds.items()
    ptr = device.alloc(x.nbytes)
    device.upload(ptr, x)

    class DeviceArray:        # what pycuda's GPUArray, CuPy and PyTorch expose
        __cuda_array_interface__ = {"shape": x.shape, "typestr": "<f4", "data": (ptr, False),
                                    "version": 3, "strides": None}
    got = mod.run({name: DeviceArray()}, device_outputs=True)
    (out_name, out), = got.items()
    np.testing.assert_allclose(np.array(out), want[out_name], rtol=1e-5, atol=1e-6)

    class WrongShape:
        __cuda_array_interface__ = {"shape": (3, 3), "typestr": "<f4", "data": (ptr, False),
                                    "version": 3}
    with pytest.raises(InputError, match=r"input 'x': expected a float32\[1, 784\] device "
                                         r"array, got float32\[3, 3\]"):
        mod.run({name: WrongShape()})


def test_wrong_feeds_are_input_errors(mlp) -> None:
    mod, _, _ = mlp
    mod.use_device(EmulatedDevice())
    with pytest.raises(InputError, match="missing \\['x'\\]"):
        mod.run({})
    with pytest.raises(InputError, match="expected shape \\[1, 784\\], got \\[2, 784\\]"):
        mod.run({"x": np.zeros((2, 784), np.float32)})


def test_profile_times_every_launch(mlp) -> None:
    mod, feeds, _ = mlp
    profile = mod.use_device(EmulatedDevice()).profile(feeds, repeat=2)
    assert [p["kernel"] for p in profile] == [launch.kernel for launch in mod.plan.launches]
    assert all(p["ms"] >= 0 and p["group"] for p in profile)


@pytest.fixture(autouse=True)
def no_shared_gpu(monkeypatch) -> None:
    """Each test finds its own (fake or missing) GPU."""
    monkeypatch.setattr(PyCudaDevice, "_shared", None)


def test_without_a_gpu_running_says_so(monkeypatch, mlp) -> None:
    mod = mlp_module()
    monkeypatch.setitem(sys.modules, "pycuda", None)         # pycuda not installed
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    with pytest.raises(TensorcError, match=r"needs pycuda and an NVIDIA GPU: install the extra "
                                           r"with pip install 'tensorc\[cuda\]'.*CUDA_ROOT"):
        mod.run(mlp[1])
    fake = FakeDriver(gpus=0)
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake)
    with pytest.raises(TensorcError, match="no CUDA GPU found"):
        mod.run(mlp[1])


def test_save_and_load_without_recompiling(tmp_path: Path, mlp, monkeypatch) -> None:
    mod, feeds, want = mlp
    built = CudaModule(mod.source, b"fatbin bytes", mod.plan, mod.inputs, mod.outputs,
                       mod.const_pool, mod.target, mod.source_onnx, mod.info,
                       {"k0": {"sm_80": {"registers": 30}}})
    path = tmp_path / "mlp.tcz"
    built.save(path)
    import tensorc.codegen.nvcc as nvcc
    monkeypatch.setattr(nvcc, "build_fatbin", lambda *a, **k: pytest.fail("recompiled"))
    loaded = tensorc.load(path)
    assert isinstance(loaded, CudaModule)
    assert loaded.fatbin == b"fatbin bytes" and loaded.source == mod.source
    assert loaded.plan == mod.plan and loaded.inputs == mod.inputs
    assert loaded.resources == {"k0": {"sm_80": {"registers": 30}}}
    got = loaded.use_device(EmulatedDevice()).run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    with pytest.raises(TensorcError, match="has no fatbin"):
        mod.save(tmp_path / "emulation-only.tcz")


@needs_nvcc
def test_compile_for_cuda_builds_a_fatbin_and_records_resources(tmp_path: Path) -> None:
    mod = tensorc.compile(str(models.path("lenet5")), target="cuda -arch=sm_90")
    assert isinstance(mod, CudaModule) and mod.target == "cuda -arch=sm_90"
    assert mod.fatbin and set(mod.resources) == set(mod.plan.kernel_names)
    assert all(set(r) == {"sm_90"} and r["sm_90"]["spill_stores"] == 0
               for r in mod.resources.values())
    mod.save(tmp_path / "lenet5.tcz")
    assert tensorc.load(tmp_path / "lenet5.tcz").fatbin == mod.fatbin


# ---------------------------------------------------------------------------------------------
# pycuda's driver API, standing in for a GPU: memory is host memory, kernels run on the
# emulator; it checks the calls the way pycuda would receive them

class FakeDriver(types.ModuleType):
    class Error(Exception):
        pass

    def __init__(self, gpus: int = 1, sources: dict[bytes, str] | None = None):
        super().__init__("pycuda.driver")
        self.gpus, self.sources = gpus, sources or {}
        self.allocations: dict[int, np.ndarray] = {}
        self.calls: list[str] = []
        self.initialized = False
        driver = self

        class Device:
            @staticmethod
            def count() -> int:
                assert driver.initialized, "init() comes first"
                return driver.gpus

            def __init__(self, ordinal: int):
                assert ordinal < driver.gpus

            def name(self) -> str:
                return "Fake GPU"

            def compute_capability(self) -> tuple[int, int]:
                return (8, 0)

            def retain_primary_context(self):
                return types.SimpleNamespace(push=lambda: driver.calls.append("push"),
                                             pop=lambda: None)

        class Event:
            def record(self, stream=None) -> None:
                self.at = len(driver.calls)

            def synchronize(self) -> None:
                pass

            def time_since(self, start) -> float:
                assert isinstance(start, Event)
                return 0.5

        self.Device = Device
        self.Event = Event
        self.Context = types.SimpleNamespace(synchronize=lambda: driver.calls.append("sync"))

    def init(self, flags: int = 0) -> None:
        self.initialized = True

    def module_from_buffer(self, buffer: bytes):
        from tensorc.codegen.cuda_emulator import build_emulator
        from tensorc.runtime.cuda_device import kernel_sync_flags
        source = self.sources[bytes(buffer)]
        emulated = build_emulator(source, kernel_sync_flags(source))
        driver = self

        class Function:
            def __init__(self, name: str):
                self.name, self.format = name, None

            def prepare(self, arg_types: str):
                assert set(arg_types) <= set("P"), arg_types
                self.format = arg_types
                return self

            def prepared_call(self, grid, block, *args, shared_size=0):
                assert self.format is not None, "prepare() comes first"
                struct.pack(self.format, *args)          # what pycuda packs: fails on misuse
                assert len(grid) in (2, 3) and len(block) == 3
                driver.calls.append(f"launch {self.name}")
                emulated.launch(self.name, tuple(grid) + (1,) * (3 - len(grid)), tuple(block),
                                list(args))

        return types.SimpleNamespace(get_function=Function,
                                     get_global=lambda name: (emulated.global_address(name),
                                                              24))

    def mem_alloc(self, nbytes: int):
        raw = np.zeros(nbytes + 256, np.uint8)
        ptr = raw.ctypes.data + (-raw.ctypes.data) % 256
        self.allocations[ptr] = raw
        driver = self

        class Allocation:
            def __int__(self) -> int:
                return ptr

            def free(self) -> None:
                driver.allocations.pop(ptr, None)
        return Allocation()

    def memcpy_htod(self, dest: int, src: np.ndarray) -> None:
        assert src.flags.c_contiguous
        ctypes.memmove(int(dest), src.ctypes.data, src.nbytes)

    def memcpy_dtoh(self, dest: np.ndarray, src: int) -> None:
        ctypes.memmove(dest.ctypes.data, int(src), dest.nbytes)


def test_pycuda_device_runs_the_plan_through_the_driver_api(monkeypatch, mlp) -> None:
    mod, feeds, want = mlp
    fake = FakeDriver(sources={b"FATBIN": mod.source})
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake)
    gpu_mod = CudaModule(mod.source, b"FATBIN", mod.plan, mod.inputs, mod.outputs,
                         mod.const_pool, mod.target)
    got = gpu_mod.run(feeds)               # picks PyCudaDevice: the fake driver
    assert isinstance(gpu_mod.device, PyCudaDevice) and gpu_mod.device.name == "Fake GPU"
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    launches = [c for c in fake.calls if c.startswith("launch")]
    assert launches == [f"launch {launch.kernel}" for launch in mod.plan.launches]
    assert fake.calls[-1] == "sync"
    profile = gpu_mod.profile(feeds, repeat=3)
    assert [p["ms"] for p in profile] == [0.5] * len(mod.plan.launches)
    # constants, arena, input and output buffers: allocated once, reused by every run
    assert len(fake.allocations) == 4
    gpu_mod.run(feeds)
    assert len(fake.allocations) == 4


# ---------------------------------------------------------------------------------------------
# run-time index checks: kernels record the first out-of-range index, the host raises

def _gather_module() -> tuple[CudaModule, object]:
    from helpers import make_model, tensor_info
    from onnx import helper
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1, name="pick")
    model = make_model([node], [tensor_info("x", "float32", [4, 37]),
                                tensor_info("i", "int64", [5])], ["y"])
    proto, label = load_model(model)
    compiled = compile_graph_cuda(import_onnx(proto, label=label), CUDA)
    return cuda_module(compiled, CUDA, build=False), model


def _check_gather_runs(mod: CudaModule, model) -> None:
    from tensorc.errors import KernelRuntimeError
    x = np.random.default_rng(0).standard_normal((4, 37)).astype(np.float32)
    good = {"x": x, "i": np.array([0, 1, -1, 36, -37], np.int64)}
    want = tensorc.compile(model).run(good)["y"]
    np.testing.assert_array_equal(mod.run(good)["y"], want)
    with pytest.raises(KernelRuntimeError) as info:
        mod.run({"x": x, "i": np.array([0, 1, 37, 2, 3], np.int64)})
    assert "node 'pick' (gather) read the index 37, out of range for an axis of size 37: " \
           "indices must lie in [-37, 37)" in str(info.value)
    np.testing.assert_array_equal(mod.run(good)["y"], want)   # the record was cleared


def test_out_of_range_index_stops_a_cuda_run() -> None:
    """CUDA kernels clamped run-time indices silently; they now fail the run as the CPU's
    do (and as onnxruntime does)."""
    mod, model = _gather_module()
    assert "tc_check_index(" in mod.source.split("extern \"C\" __global__", 1)[1]
    assert mod.plan.launches[0].nodes == (("pick", "gather"),)
    _check_gather_runs(mod.use_device(EmulatedDevice()), model)


def test_out_of_range_index_through_the_driver_api(monkeypatch) -> None:
    mod, model = _gather_module()
    fake = FakeDriver(sources={b"FATBIN": mod.source})
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake)
    gpu_mod = CudaModule(mod.source, b"FATBIN", mod.plan, mod.inputs, mod.outputs,
                         mod.const_pool, mod.target)
    gpu_mod.use_device(PyCudaDevice())
    _check_gather_runs(gpu_mod, model)

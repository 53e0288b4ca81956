"""Where a CUDA module's kernels run and its memory lives: :class:`PyCudaDevice`, a real GPU
through pycuda (the optional ``cuda`` extra, imported only when a device is made, so that a
machine without a GPU can compile, save and inspect CUDA modules and gets a clear error only when
it runs one), and :class:`EmulatedDevice`, the module's own CUDA source compiled for the CPU
(codegen/cuda_emulator.py), which is how the launch plan and every kernel are tested without a
GPU. Both load a module's kernels, allocate, copy, launch and time.

>>> mod = cuda_module(compile_graph_cuda(graph, target), target, build=False)
>>> mod.use_device(EmulatedDevice()).run({"x": x})      # no GPU needed
"""
from __future__ import annotations

import atexit
import ctypes
import re
import time
from typing import Any

import numpy as np

from tensorc.codegen.cuda_emulator import build_emulator
from tensorc.errors import TensorcError

# the head of every kernel in a generated source (codegen/cuda.py), with its name
KERNEL_HEAD = re.compile(r'extern "C" __global__ void __launch_bounds__\([\d, ]+\) (\w+)\(')


def nbytes(shape, dtype) -> int:
    """The bytes of an array of ``shape`` and ``dtype``."""
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def kernel_names(source: str) -> list[str]:
    """The kernels of a generated source, in order."""
    return KERNEL_HEAD.findall(source)


class PyCudaDevice:
    """An NVIDIA GPU through pycuda, in its primary context (made current on this thread and
    popped at exit). ``PyCudaDevice.shared()`` is the first GPU, one per process."""

    _shared: PyCudaDevice | None = None

    @classmethod
    def shared(cls) -> PyCudaDevice:
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def __init__(self, ordinal: int = 0):
        try:
            import pycuda.driver as driver
        except ImportError:
            raise TensorcError(
                "running a CUDA module needs pycuda and an NVIDIA GPU: install the extra with "
                "pip install 'tensorc[cuda]' (pycuda builds against the CUDA toolkit: set "
                "CUDA_ROOT to it, e.g. CUDA_ROOT=/usr/local/cuda), or compile for "
                "target='llvm' to run on this CPU") from None
        try:
            driver.init()
            count = driver.Device.count()
        except driver.Error as exc:
            raise TensorcError(f"no usable CUDA driver ({exc}): running a CUDA module needs "
                               f"an NVIDIA GPU and its driver; compile for target='llvm' to "
                               f"run on this CPU") from None
        if count <= ordinal:
            raise TensorcError(f"no CUDA GPU found (the driver sees {count}); running a CUDA "
                               f"module needs one; compile for target='llvm' to run on this "
                               f"CPU")
        self.driver = driver
        self.gpu = driver.Device(ordinal)
        self.name = self.gpu.name()
        self.context = self.gpu.retain_primary_context()
        self.context.push()
        atexit.register(self._release)
        self._allocations: dict[int, Any] = {}

    def _release(self) -> None:
        self._allocations.clear()
        try:
            self.context.pop()
        except Exception:  # noqa: BLE001 - the context may be gone at interpreter exit
            pass

    def load(self, module) -> dict[str, Any]:
        if module.fatbin is None:
            raise TensorcError("this CUDA module has no fatbin to load; compile it with nvcc "
                               "(tensorc.compile(..., target='cuda'))")
        major, minor = self.gpu.compute_capability()
        self.module = self.driver.module_from_buffer(module.fatbin)
        kernels = {}
        for name in module.plan.kernel_names:
            fn = self.module.get_function(name)
            arity = next(len(launch.args) for launch in module.plan.launches
                         if launch.kernel == name)
            fn.prepare("P" * arity)
            kernels[name] = fn
        self.arch = f"sm_{major}{minor}"
        return kernels

    def global_address(self, name: str) -> int:
        """The device address of a global of the module loaded last."""
        return int(self.module.get_global(name)[0])

    def alloc(self, nbytes: int) -> int:
        allocation = self.driver.mem_alloc(nbytes)
        ptr = int(allocation)
        self._allocations[ptr] = allocation
        return ptr

    def free(self, ptr: int) -> None:
        allocation = self._allocations.pop(ptr, None)
        if allocation is not None:
            allocation.free()

    def upload(self, ptr: int, array: np.ndarray) -> None:
        self.driver.memcpy_htod(ptr, np.ascontiguousarray(array))

    def download(self, array: np.ndarray, ptr: int) -> None:
        self.driver.memcpy_dtoh(array, ptr)

    def launch(self, kernel, grid, block, args: list[int]) -> None:
        kernel.prepared_call(tuple(grid), tuple(block), *args)

    def timed_launch(self, kernel, grid, block, args: list[int]) -> float:
        start, end = self.driver.Event(), self.driver.Event()
        start.record()
        kernel.prepared_call(tuple(grid), tuple(block), *args)
        end.record()
        end.synchronize()
        return end.time_since(start)

    def synchronize(self) -> None:
        self.driver.Context.synchronize()

    def wrap(self, ptr: int, shape, dtype):
        import pycuda.gpuarray as gpuarray
        allocation = self._allocations.pop(ptr)
        return gpuarray.GPUArray(shape, np.dtype(dtype), gpudata=allocation)


class EmulatedDevice:
    """A stand-in GPU on the CPU: host memory, and the module's CUDA source compiled by the
    host C++ compiler against the emulation header. Slow, but it runs exactly the kernels
    and the launch plan that a GPU would."""

    name = "CPU emulation"

    def __init__(self):
        self._memory: dict[int, np.ndarray] = {}
        self.launches = 0

    def load(self, module) -> dict[str, Any]:
        self.kernels = build_emulator(module.source, kernel_sync_flags(module.source))
        return {name: name for name in module.plan.kernel_names}

    def global_address(self, name: str) -> int:
        """The address of a global of the kernels loaded last (host memory)."""
        return self.kernels.global_address(name)

    def alloc(self, nbytes: int) -> int:
        raw = np.zeros(nbytes + 256, np.uint8)
        start = (-raw.ctypes.data) % 256
        ptr = raw.ctypes.data + start
        self._memory[ptr] = raw
        return ptr

    def free(self, ptr: int) -> None:
        self._memory.pop(ptr, None)

    def upload(self, ptr: int, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        ctypes.memmove(ptr, array.ctypes.data, array.nbytes)

    def download(self, array: np.ndarray, ptr: int) -> None:
        ctypes.memmove(array.ctypes.data, ptr, array.nbytes)

    def launch(self, kernel: str, grid, block, args: list[int]) -> None:
        self.launches += 1
        self.kernels.launch(kernel, tuple(grid), tuple(block), args)

    def timed_launch(self, kernel: str, grid, block, args: list[int]) -> float:
        start = time.perf_counter()
        self.launch(kernel, grid, block, args)
        return (time.perf_counter() - start) * 1e3

    def synchronize(self) -> None:
        pass

    def wrap(self, ptr: int, shape, dtype) -> np.ndarray:
        """Emulated device memory is host memory: a numpy view of it."""
        raw = self._memory[ptr]
        start = ptr - raw.ctypes.data
        return raw[start:start + nbytes(shape, dtype)].view(dtype).reshape(shape)


def kernel_sync_flags(source: str) -> dict[str, bool]:
    """Each kernel of a generated source, and whether its threads synchronize."""
    heads = list(KERNEL_HEAD.finditer(source))
    flags = {}
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(source)
        body = source[m.end():end]
        flags[m.group(1)] = "__syncthreads" in body or "tc_thread_reduce" in body or \
            "__shfl" in body
    return flags

"""A compiled model for NVIDIA GPUs: the same interface as the CPU Module (run, profile, save,
inputs, outputs; runtime/base.py), running a launch plan on a device (runtime/cuda_device.py:
a GPU through pycuda, made when the module first runs, or the CPU emulation).

>>> mod = tensorc.compile("model.onnx", target="cuda")
>>> out = mod.run({"x": x})                         # on the GPU; numpy in, numpy out
>>> mod.profile({"x": x})[:2]                       # per-launch times, from CUDA events
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from tensorc.errors import ArtifactError, InputError, TensorcError
from tensorc.runtime.base import CompiledModule, index_out_of_range
from tensorc.runtime.cuda_device import PyCudaDevice, kernel_names, nbytes
from tensorc.runtime.launch_plan import LaunchPlan, resolve_args
from tensorc.runtime.signature import Signature, validate_signature

# the device array where kernels record a failed index check (codegen/cuda_prelude.py)
CHECK_RECORD = "tc_index_check"
# device pointers passed through by the caller must allow float4 accesses
DEVICE_ALIGN = 16


class CudaModule(CompiledModule):
    """Kernels (CUDA source and its fatbin), the launch plan, and the constants.

    ``run`` copies numpy inputs to the device and the outputs back; an input that is already
    a device array (anything with ``__cuda_array_interface__``: pycuda's GPUArray, CuPy,
    PyTorch) is passed through, and ``run(feeds, device_outputs=True)`` leaves the outputs on
    the device. Not safe to run from several threads at once (the arena is shared).
    """

    def __init__(self, source: str, fatbin: bytes | None, plan: LaunchPlan,
                 inputs: Signature, outputs: Signature, const_pool: np.ndarray, target: str,
                 source_onnx: bytes | None = None, info: dict | None = None,
                 resources: dict | None = None):
        super().__init__(inputs, outputs, const_pool, target, source_onnx, info)
        self.source = source
        self.fatbin = fatbin
        self.plan = plan
        self.resources = resources or {}      # kernel -> arch -> ptxas figures (JSON)
        self._device = None
        self._kernels: dict[str, Any] = {}
        self._pool_ptr = self._arena_ptr = None

    @property
    def arena_size(self) -> int:
        return self.plan.arena_size

    # devices --------------------------------------------------------------------------------
    def use_device(self, device) -> CudaModule:
        """Run on ``device`` (a PyCudaDevice, an EmulatedDevice); returns self. The weights
        are uploaded here, once; the arena and the input and output buffers are allocated
        once and reused by every run."""
        self._device = device
        self._kernels = device.load(self)
        # where the kernels record a failed index check, if any kernel checks (the prelude
        # defines tc_check_index; sources from before the check have neither)
        self._check_ptr = device.global_address(CHECK_RECORD) \
            if self.source.count("tc_check_index(") > 1 else None
        self._pool_ptr = device.alloc(max(1, self.const_pool.nbytes))
        device.upload(self._pool_ptr, self.const_pool)
        self._arena_ptr = device.alloc(max(1, self.plan.arena_size))
        self._in_ptrs = [device.alloc(max(1, nbytes(s, d))) for _, s, d in self.inputs]
        self._out_ptrs = [device.alloc(max(1, nbytes(s, d))) for _, s, d in self.outputs]
        self._args: dict[tuple, list[list[int]]] = {}
        return self

    @property
    def device(self):
        if self._device is None:
            self.use_device(PyCudaDevice.shared())
        return self._device

    # running --------------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any], device_outputs: bool = False) -> dict[str, Any]:
        """Run one inference; returns a dict output name -> numpy array (or, with
        ``device_outputs``, a device array the caller owns)."""
        device = self.device
        in_ptrs = self._inputs_on_device(feeds)
        out_ptrs = self._out_ptrs
        if device_outputs:
            out_ptrs = [device.alloc(max(1, nbytes(s, d))) for _, s, d in self.outputs]
        for launch, args in zip(self.plan.launches, self._launch_args(in_ptrs, out_ptrs)):
            device.launch(self._kernels[launch.kernel], launch.grid, launch.block, args)
        device.synchronize()
        self._check_indices()
        result = {}
        for (name, shape, dtype), ptr in zip(self.outputs, out_ptrs):
            if device_outputs:
                result[name] = device.wrap(ptr, shape, dtype)
            else:
                array = np.empty(shape, dtype)
                device.download(array, ptr)
                result[name] = array
        return result

    def profile(self, feeds: Mapping[str, Any] | None = None, repeat: int = 10
                ) -> list[dict]:
        """Time every launch with device events (after a warm-up run): one dict per launch
        with kernel, group, grid, block and the median milliseconds over ``repeat`` runs."""
        if feeds is None:
            feeds = {n: np.zeros(s, d) for n, s, d in self.inputs}
        device = self.device
        self.run(feeds)
        all_args = self._launch_args(self._inputs_on_device(feeds), self._out_ptrs)
        samples: list[list[float]] = [[] for _ in self.plan.launches]
        for _ in range(max(1, repeat)):
            for k, (launch, args) in enumerate(zip(self.plan.launches, all_args)):
                samples[k].append(device.timed_launch(self._kernels[launch.kernel],
                                                      launch.grid, launch.block, args))
        return [{"kernel": launch.kernel, "group": launch.group, "grid": launch.grid,
                 "block": launch.block, "ms": float(np.median(times))}
                for launch, times in zip(self.plan.launches, samples)]

    def _check_indices(self) -> None:
        """Raise KernelRuntimeError where a kernel of the run read an index out of range
        (the record is cleared for the next run)."""
        if self._check_ptr is None:
            return
        record = np.zeros(3, np.int64)
        self.device.download(record, self._check_ptr)
        if not record[0]:
            return
        self.device.upload(self._check_ptr, np.zeros(3, np.int64))
        heads = kernel_names(self.source)
        number = int(record[0])
        kernel = heads[number - 1] if 0 < number <= len(heads) else f"#{number}"
        nodes = [n for launch in self.plan.launches if launch.kernel == kernel
                 for n in launch.nodes]
        raise index_out_of_range(list(dict.fromkeys(nodes)), kernel, int(record[1]),
                                 int(record[2]))

    def _launch_args(self, in_ptrs: list[int], out_ptrs: list[int]) -> list[list[int]]:
        """Every launch's argument pointers, resolved once per set of input and output
        buffers."""
        key = (tuple(in_ptrs), tuple(out_ptrs))
        args = self._args.get(key)
        if args is None:
            regions = {"input": in_ptrs, "output": out_ptrs, "const": [self._pool_ptr],
                       "arena": [self._arena_ptr]}
            args = [resolve_args(launch, regions) for launch in self.plan.launches]
            if len(self._args) >= 16:
                self._args.clear()
            self._args[key] = args
        return args

    def _inputs_on_device(self, feeds: Mapping[str, Any]) -> list[int]:
        """Device pointers of the inputs: host arrays are copied into the module's input
        buffers, device arrays are passed through."""
        device = self.device
        if not isinstance(feeds, Mapping):
            raise InputError(f"run() takes a dict of input name -> array, got "
                             f"{type(feeds).__name__}; inputs: {self.input_names}")
        passed = {}
        host = {}
        for name, value in feeds.items():
            interface = getattr(value, "__cuda_array_interface__", None)
            if interface is not None:
                passed[name] = interface
            else:
                host[name] = value
        for name, interface in passed.items():
            self._check_device_array(name, interface)
        stand_in = {n: np.empty(s, d) for n, s, d in self.inputs if n in passed}
        arrays = self._check_feeds_slowly({**host, **stand_in})
        pointers = []
        for (name, _, _), array, buffer in zip(self.inputs, arrays, self._in_ptrs):
            if name in passed:
                pointers.append(int(passed[name]["data"][0]))
            else:
                device.upload(buffer, array)
                pointers.append(buffer)
        return pointers

    def _check_device_array(self, name: str, interface: dict) -> None:
        spec = {n: (s, d) for n, s, d in self.inputs}
        if name not in spec:
            raise InputError(f"feeds do not match the model's inputs: unknown [{name!r}]; the "
                             f"model takes {self._describe(self.inputs)}")
        shape, dtype = spec[name]
        got_shape = tuple(interface.get("shape", ()))
        got_dtype = np.dtype(interface.get("typestr", "|u1"))
        if got_shape != shape or got_dtype != np.dtype(dtype):
            raise InputError(f"input {name!r}: expected a {dtype}{list(shape)} device array, "
                             f"got {got_dtype}{list(got_shape)}")
        strides = interface.get("strides")
        if strides is not None and tuple(strides) != _contiguous_strides(shape, got_dtype):
            raise InputError(f"input {name!r}: the device array is not contiguous; pass a "
                             f"contiguous copy")
        if int(interface["data"][0]) % DEVICE_ALIGN:
            raise InputError(f"input {name!r}: the device array's address is not "
                             f"{DEVICE_ALIGN}-byte aligned; pass a copy that is")

    # saving ---------------------------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False,
             include_source: bool = False) -> None:
        """Write the module (fatbin, CUDA source, launch plan, constants; atomic); see
        :meth:`tensorc.Module.save` for ``overwrite`` and ``include_source``."""
        if self.fatbin is None:
            raise TensorcError("this CUDA module has no fatbin (it was built for emulation "
                               "only); compile it with tensorc.compile(..., target='cuda')")
        header = {"kind": "cuda", "inputs": self.inputs, "outputs": self.outputs,
                  "target": self.target, "info": self.info, "resources": self.resources,
                  "plan": self.plan.to_json()}
        sections = {"fatbin": self.fatbin, "cuda_source": self.source.encode(),
                    "constants": self.const_pool.tobytes()}
        self._write(path, header, sections, overwrite, include_source)

    def __repr__(self) -> str:
        return (f"CudaModule(inputs: {self._describe(self.inputs)}; outputs: "
                f"{self._describe(self.outputs)}; target {self.target}; "
                f"{len(self.plan.launches)} launches)")


def load_cuda(path: str | Path, header: dict, sections: dict[str, bytes]) -> CudaModule:
    """A CudaModule from an artifact's parts (see runtime/load.py)."""
    validate_signature(header, str(path))
    missing = [f"header field {k!r}" for k in ("inputs", "outputs", "target", "plan")
               if k not in header]
    missing += [f"section {s!r}" for s in ("fatbin", "cuda_source", "constants")
                if s not in sections]
    if missing:
        raise ArtifactError(f"{path} is corrupt: it has no {', '.join(missing)}; compile the "
                            f"model again")
    pool = np.frombuffer(sections["constants"], dtype=np.uint8)
    return CudaModule(sections["cuda_source"].decode(), sections["fatbin"],
                      LaunchPlan.from_json(header["plan"]), header["inputs"], header["outputs"],
                      pool, header["target"], sections.get("onnx"), header.get("info"),
                      header.get("resources"))


def _contiguous_strides(shape, dtype: np.dtype) -> tuple[int, ...]:
    out, acc = [], dtype.itemsize
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))

"""A compiled model: run it, save it, load it.

>>> mod = tensorc.compile("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
>>> out = mod.run({"x": x})          # {"logits": array(...)}
>>> mod.save("model.tcz"); mod = tensorc.load("model.tcz")
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import asdict
from pathlib import Path
from typing import Mapping

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy for signatures that use it)
import numpy as np

from tensorc.errors import ArtifactError, InputError, KernelRuntimeError, TensorcError
from tensorc.runtime import artifact
from tensorc.profile import KernelInfo, Profile, build_profile
from tensorc.runtime.cpu import NativeLibrary

Signature = list[tuple[str, tuple[int, ...], str]]


class Module:
    """Native code for a whole model: one call into it per inference.

    Not safe to ``run`` from several threads at once (the arena is shared); use one Module per
    thread.
    """

    def __init__(self, object_code: bytes, entry: str, inputs: Signature, outputs: Signature,
                 const_pool: np.ndarray, arena_size: int, target: str,
                 source_onnx: bytes | None = None, info: dict | None = None,
                 kernels: list | None = None):
        self.object_code = object_code
        self.entry_name = entry
        self.inputs: Signature = [(n, tuple(s), d) for n, s, d in inputs]
        self.outputs: Signature = [(n, tuple(s), d) for n, s, d in outputs]
        self.const_pool = const_pool
        self.arena_size = arena_size
        self.target = target
        self.source_onnx = source_onnx
        self.info = info or {}
        # one entry per kernel call of the entry function, for the profiler (KernelInfo)
        self.kernels = [k if isinstance(k, KernelInfo) else KernelInfo.from_json(k)
                        for k in (kernels or [])]
        self.num_threads = 0          # 0: all cores (OMP_NUM_THREADS when set)
        self._library = NativeLibrary(object_code)
        self._entry = self._library.entry(entry)
        self._arena = _aligned_empty(arena_size)
        self._pool = _aligned_copy(const_pool)
        # per-call data prepared once: pointer slots (pool and arena fixed), dtypes
        self._in_specs = [(n, s, np.dtype(d)) for n, s, d in self.inputs]
        self._out_specs = [(n, s, np.dtype(d)) for n, s, d in self.outputs]
        nargs = len(self.inputs) + len(self.outputs) + 2
        self._args = (ctypes.c_void_p * nargs)()
        self._args[nargs - 2] = self._pool.ctypes.data
        self._args[nargs - 1] = self._arena.ctypes.data

    @property
    def input_names(self) -> list[str]:
        return [n for n, _, _ in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [n for n, _, _ in self.outputs]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one inference; returns a dict output name -> array."""
        arrays = self._check_feeds(feeds)
        args = self._args
        k = 0
        for a in arrays:
            args[k] = a.ctypes.data
            k += 1
        result = {}
        for name, shape, dtype in self._out_specs:
            out = np.empty(shape, dtype)
            args[k] = out.ctypes.data
            k += 1
            result[name] = out
        status = self._entry(args, int(self.num_threads), None)
        if status:
            raise self._check_failed(status)
        return result

    def _check_failed(self, status: int) -> KernelRuntimeError:
        """The error for a run whose kernel call ``status - 1`` failed a runtime check
        (codegen/llvm.py): an index out of range, held in ``tensorc_bad_index``."""
        index, size = (ctypes.c_int64.from_address(a).value if a else None for a in (
            self._library.global_address(f"tensorc_bad_{n}") for n in ("index", "size")))
        info = self.kernels[status - 1] if 0 < status <= len(self.kernels) else None
        if info is None:
            return KernelRuntimeError(f"the run stopped: a runtime check failed (status "
                                      f"{status})")
        checked = [(node, op) for node, op in zip(info.nodes, info.ops)
                   if op.startswith(("gather", "scatter"))] or list(zip(info.nodes, info.ops))
        where = ", ".join(f"{node!r} ({op})" for node, op in checked) or info.name
        return KernelRuntimeError(
            f"the run stopped: node {where} read the index {index}, out of range for an axis "
            f"of size {size}: indices must lie in [{-size if size else '-size'}, "
            f"{size if size else 'size'}); check the index inputs fed to the model")

    def _check_feeds(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        # fast path: a dict of exactly the inputs, as contiguous arrays of the right type
        if type(feeds) is dict and len(feeds) == len(self._in_specs):
            arrays = []
            for name, shape, dtype in self._in_specs:
                arr = feeds.get(name)
                if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape != shape \
                        or not arr.flags.c_contiguous:
                    break
                arrays.append(arr)
            else:
                return arrays
        return self._check_feeds_slowly(feeds)

    def _check_feeds_slowly(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if not isinstance(feeds, Mapping):
            raise InputError(f"run() takes a dict of input name -> array, got "
                             f"{type(feeds).__name__}; inputs: {self.input_names}")
        unknown = sorted(set(feeds) - set(self.input_names))
        missing = [n for n in self.input_names if n not in feeds]
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {missing}")
            if unknown:
                parts.append(f"unknown {unknown}")
            raise InputError(f"feeds do not match the model's inputs: {', '.join(parts)}; "
                             f"the model takes {self._describe(self.inputs)}")
        arrays = []
        for name, shape, dtype in self.inputs:
            value = feeds[name]
            arr = np.asarray(value)
            if arr.dtype != np.dtype(dtype):
                if np.isscalar(value) and arr.shape == shape and \
                        np.can_cast(arr.dtype, dtype, "same_kind"):
                    arr = arr.astype(dtype)
                else:
                    raise InputError(f"input {name!r}: expected {dtype}{list(shape)}, got "
                                     f"{arr.dtype}{list(arr.shape)}; convert it with "
                                     f".astype(np.{dtype})")
            if tuple(arr.shape) != shape:
                raise InputError(f"input {name!r}: expected shape {list(shape)}, got "
                                 f"{list(arr.shape)} ({dtype}); compile again with "
                                 f"input_shapes={{{name!r}: {tuple(arr.shape)}}} for another "
                                 f"shape")
            arrays.append(np.ascontiguousarray(arr))
        return arrays

    def profile(self, feeds: Mapping[str, np.ndarray] | None = None, seconds: float = 1.0,
                min_runs: int = 10, roofline=None, model: str = "") -> Profile:
        """Time every kernel inside the entry function that ``run`` calls: the median over
        repeated runs (at least ``min_runs`` and ``seconds``, after a warm-up) of each kernel,
        beside the median end-to-end latency of uninstrumented runs. ``feeds`` default to
        seeded random inputs; ``roofline`` (a ``runtime.machine.Roofline``) defaults to this
        machine's, measured once and cached.

        >>> print(mod.profile().table(top=10))
        """
        import time

        from tensorc.reference import random_inputs
        from tensorc.runtime.machine import machine_roofline
        if feeds is None:
            feeds = random_inputs(self.inputs, seed=0)
        arrays = self._check_feeds(feeds)
        if not self.kernels:
            raise TensorcError("this module has no kernel table to profile (it was saved by "
                               "an older tensorc): compile the model again")
        threads = self.num_threads or _default_threads()
        if roofline is None:
            roofline = machine_roofline(threads=threads)
        timings = np.zeros(len(self.kernels), dtype=np.int64)
        outputs = [np.empty(s, d) for _, s, d in self._out_specs]
        args = self._args
        for k, a in enumerate([*arrays, *outputs]):
            args[k] = a.ctypes.data

        def call(buffer) -> float:
            start = time.perf_counter()
            status = self._entry(args, int(self.num_threads), buffer)
            elapsed = time.perf_counter() - start
            if status:
                raise self._check_failed(status)
            return elapsed
        for _ in range(3):
            call(None)
        samples, plain = [], []
        spent = 0.0
        while len(samples) < min_runs or spent < seconds:
            timings[:] = 0
            spent += call(timings.ctypes.data)
            samples.append(timings.tolist())
            plain.append(call(None))
            spent += plain[-1]
        return build_profile(self.kernels, samples, plain, roofline, model)

    @staticmethod
    def _describe(sig: Signature) -> str:
        return ", ".join(f"{n}: {d}{list(s)}" for n, s, d in sig)

    # saving ------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the module to ``path`` (object code, constants, signature; atomic)."""
        header = {"entry": self.entry_name, "inputs": self.inputs, "outputs": self.outputs,
                  "arena_size": self.arena_size, "target": self.target, "info": self.info,
                  "kernels": [asdict(k) for k in self.kernels]}
        sections = {"object": self.object_code, "constants": self.const_pool.tobytes()}
        if self.source_onnx is not None:
            sections["onnx"] = self.source_onnx
        artifact.write(path, header, sections)

    def __repr__(self) -> str:
        return (f"Module(inputs: {self._describe(self.inputs)}; outputs: "
                f"{self._describe(self.outputs)}; target {self.target})")


_HEADER_FIELDS = ("entry", "inputs", "outputs", "arena_size", "target")
_SECTIONS = ("object", "constants")


def load(path: str | Path) -> Module:
    """Load a module saved with :meth:`Module.save`; nothing is compiled again."""
    header, sections = artifact.read(path)
    if header.get("kind") == "cuda":     # a CUDA module (runtime/cuda.py)
        from tensorc.runtime.cuda import load_cuda
        return load_cuda(path, header, sections)
    missing = [f"header field {key!r}" for key in _HEADER_FIELDS if key not in header]
    missing += [f"section {name!r}" for name in _SECTIONS if name not in sections]
    if missing:
        raise ArtifactError(f"{path} is corrupt: it has no {', '.join(missing)}; compile the "
                            f"model again")
    pool = np.frombuffer(sections["constants"], dtype=np.uint8)
    return Module(sections["object"], header["entry"], header["inputs"], header["outputs"],
                  pool, header["arena_size"], header["target"], sections.get("onnx"),
                  header.get("info"), header.get("kernels"))


def _default_threads() -> int:
    """What num_threads = 0 means: OMP_NUM_THREADS when set, else every core."""
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return os.cpu_count() or 1


def _aligned_empty(nbytes: int, align: int = 64) -> np.ndarray:
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes]


def _aligned_copy(data: np.ndarray, align: int = 64) -> np.ndarray:
    out = _aligned_empty(data.nbytes, align)
    out[:] = data.reshape(-1).view(np.uint8)
    return out

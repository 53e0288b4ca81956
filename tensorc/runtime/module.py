"""A compiled model: run it, save it, load it.

>>> mod = tensorc.compile("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
>>> out = mod.run({"x": x})          # {"logits": array(...)}
>>> mod.save("model.tcz"); mod = tensorc.load("model.tcz")
"""
from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tensorc.errors import ArtifactError, InputError, KernelRuntimeError, TensorcError
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import dim_from_json, dim_to_json
from tensorc.runtime.dim_binding import DimBinding
from tensorc.runtime.profile import KernelInfo, Profile, build_profile
from tensorc.runtime.base import CompiledModule, index_out_of_range
from tensorc.runtime.cpu import NativeLibrary
from tensorc.runtime.machine import machine_roofline
from tensorc.runtime.signature import (
    Signature, corrupt, format_dims, signature_from_json, signature_to_json,
    validate_signature,
)
from tensorc.target import missing_cpu_features


class Module(CompiledModule):
    """Native code for a whole model: one call into it per inference.

    Not safe to ``run`` from several threads at once (the arena is shared); use one Module per
    thread. ``object_code``: one object, or the objects to link together; ``source_onnx``:
    the model's bytes, a buffer, or a function that makes them when first needed.
    """

    def __init__(self, object_code: bytes | list[bytes], entry: str, inputs: Signature,
                 outputs: Signature, const_pool: np.ndarray, arena_size: int, target: str,
                 source_onnx=None, info: dict | None = None,
                 kernels: list | None = None, cpu_features: str = "",
                 dims: DimTable | None = None):
        super().__init__(inputs, outputs, const_pool, target, source_onnx, info)
        # the objects linked together: the entry's, then each kernel's (one object before)
        self.object_code: list[bytes] = [object_code] if isinstance(object_code, bytes) \
            else list(object_code)
        self.entry_name = entry
        self.arena_size = arena_size
        self.cpu_features = cpu_features   # the LLVM feature string the code was built with
        # one entry per kernel call of the entry function, for the profiler (KernelInfo)
        self.kernels = [k if isinstance(k, KernelInfo) else KernelInfo.from_json(k)
                        for k in (kernels or [])]
        self._num_threads = 0          # 0: all cores (OMP_NUM_THREADS when set)
        self._library = NativeLibrary(object_code)
        # code compiled here for another CPU (to be saved) links, but would die of SIGILL if
        # it ran: run and profile refuse it instead
        missing = missing_cpu_features(target, cpu_features)
        self._entry = _refuse(target, missing) if missing else self._library.entry(entry)
        # symbolic dims (a DimTable): each run reads their values off its inputs, checks
        # them, sizes its outputs and the arena for them, and passes them to the entry
        self.dims = dims if dims is not None and dims.is_symbolic() else None
        self._dim_names = sorted(self.dims.symbols) if self.dims is not None else []
        self._binding = DimBinding(self.dims, self.inputs, self.outputs, arena_size) \
            if self._dim_names else None
        self._arena = _aligned_empty(arena_size if not self._dim_names else 64)
        # a loaded pool is the artifact's mapping, 64-byte aligned there: used in place (the
        # kernels only read it)
        self._pool = const_pool if const_pool.ctypes.data % 64 == 0 else \
            _aligned_copy(const_pool)
        # per-call data prepared once: pointer slots (pool and arena fixed), dtypes
        self._in_specs = [(n, s, np.dtype(d)) for n, s, d in self.inputs]
        self._out_specs = [(n, s, np.dtype(d)) for n, s, d in self.outputs]
        self._in_dtypes = [(n, d) for n, _, d in self._in_specs]
        self._out_dtypes = [(n, d) for n, _, d in self._out_specs]
        nargs = len(self.inputs) + len(self.outputs) + 2
        # a symbolic module's entry takes the dims' values last
        self._args = (ctypes.c_void_p * (nargs + bool(self._dim_names)))()
        self._args[nargs - 2] = self._pool.ctypes.data
        self._args[nargs - 1] = self._arena.ctypes.data
        # a run's input shapes -> (dims' values, output shapes): binding evaluates the dims'
        # expressions and checks every constraint, which costs about as much as the kernels
        # of a small model; a service sees few distinct shapes, so each is bound once
        self._bound: dict[tuple, tuple[np.ndarray, list[tuple[int, ...]], int]] = {}
        self._last: tuple | None = None     # (input shapes, their binding) of the last run
        # what the fast path checks of each input: dtype, rank and its static dims
        self._static_axes = [[(k, d) for k, d in enumerate(s) if isinstance(d, int)]
                             for _, s, _ in self.inputs]

    @property
    def source_onnx(self) -> bytes | None:
        """The source ONNX model. Made when first asked for: a loaded module holds a view of
        the artifact, a compiled one may hold a function that serializes the model (for a
        model with large weights, copying or serializing them would cost more than the rest
        of a load, or seconds of a compile that is never saved)."""
        source = self._source_onnx
        if callable(source):
            source = source()
        if source is not None and not isinstance(source, bytes):
            source = bytes(source)
        self._source_onnx = source
        return source

    @source_onnx.setter
    def source_onnx(self, value) -> None:
        self._source_onnx = value

    @property
    def num_threads(self) -> int:
        """Threads a run uses: 0 means all cores (OMP_NUM_THREADS when set), else 1 to four
        times the cores."""
        return self._num_threads

    @num_threads.setter
    def num_threads(self, value: int) -> None:
        self._num_threads = check_num_threads(value)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one inference; returns a dict output name -> array."""
        if self._dim_names:
            return self._run_symbolic(feeds)
        arrays = self._check_feeds(feeds)
        args = self._args
        k = 0
        for a in arrays:
            args[k] = data_address(a)
            k += 1
        result = {}
        for name, shape, dtype in self._out_specs:
            out = np.empty(shape, dtype)
            args[k] = data_address(out)
            k += 1
            result[name] = out
        status = self._entry(args, int(self.num_threads), None)
        if status:
            raise self._check_failed(status)
        return result

    def arena_bytes(self, shapes: Mapping[str, Sequence[int]] | None = None) -> int:
        """The bytes of intermediate tensors a run takes: the static plan's arena, or for a
        module over symbolic dims, its plan evaluated at the inputs' ``shapes`` (name ->
        shape; an InputError where they break the model's constraints)."""
        if not self._dim_names:
            return self.arena_size
        if shapes is None:
            raise TensorcError(f"this module's dims {', '.join(self._dim_names)} are "
                               f"symbolic: give the input shapes to size its arena at")
        given = []
        for (name, declared, _), static in zip(self.inputs, self._static_axes):
            shape = tuple(shapes[name]) if name in shapes else None
            if shape is None or len(shape) != len(declared) or \
                    any(shape[k] != d for k, d in static):
                raise InputError(f"input {name!r}: expected shape {format_dims(declared)}, "
                                 f"got {None if shape is None else list(shape)}")
            given.append(shape)
        return self._binding.bind(given)[2]

    def _run_symbolic(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        # fast paths: a shape enters self._bound only after every check (its static dims,
        # ranks, ranges, constraints), so on a hit none is repeated; at batch 1 the checks
        # cost more than the kernels. The last run's shapes are compared as a static module
        # compares its own (a service or a decode loop mostly repeats a shape); others are
        # looked up by their shapes.
        last = self._last
        if last is not None and type(feeds) is dict and len(feeds) == len(self._in_specs):
            key, bound = last
            args = self._args
            k = 0
            for (name, dtype), shape in zip(self._in_dtypes, key):
                arr = feeds.get(name)
                if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape != shape \
                        or not arr.flags.c_contiguous:
                    break
                args[k] = data_address(arr)
                k += 1
            else:
                return self._run_bound(bound, k)
        return self._run_looked_up(feeds)

    def _run_looked_up(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        bound = None
        if type(feeds) is dict and len(feeds) == len(self._in_specs):
            arrays, key = [], []
            for name, dtype in self._in_dtypes:
                arr = feeds.get(name)
                if type(arr) is not np.ndarray or arr.dtype != dtype or \
                        not arr.flags.c_contiguous:
                    break
                arrays.append(arr)
                key.append(arr.shape)
            else:
                key = tuple(key)
                bound = self._bound.get(key)
        if bound is None:
            return self._run_symbolic_slowly(feeds)
        self._last = (key, bound)
        args = self._args
        k = 0
        for a in arrays:
            args[k] = data_address(a)
            k += 1
        return self._run_bound(bound, k)

    def _run_bound(self, bound: tuple, k: int) -> dict[str, np.ndarray]:
        """Run with the inputs' addresses in the first ``k`` slots and ``bound``'s dims."""
        _, shapes, dims_address = bound
        args = self._args
        result = {}
        for (name, dtype), shape in zip(self._out_dtypes, shapes):
            out = np.empty(shape, dtype)
            args[k] = data_address(out)
            k += 1
            result[name] = out
        args[k + 2] = dims_address
        status = self._entry(args, self._num_threads, None)
        if status:
            raise self._check_failed(status)
        return result

    def _run_symbolic_slowly(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = self._symbolic_feeds(feeds)
        args, result, dims = self._symbolic_args(arrays)
        status = self._entry(args, int(self.num_threads), None)
        if status and self._binding.capacities and self._binding.grow(*self._bad_values()):
            return self._run_symbolic_slowly(feeds)     # a data-dependent dim outgrew its room
        if status:
            raise self._check_failed(status)
        if self._binding.cut_outputs:       # data-dependent sizes, written by the kernels
            return self._binding.cut(result, dims)
        return result

    def _symbolic_feeds(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        # as _check_feeds, the dims' values left to the binding
        if type(feeds) is dict and len(feeds) == len(self._in_specs):
            arrays = []
            for (name, shape, dtype), static in zip(self._in_specs, self._static_axes):
                arr = feeds.get(name)
                if type(arr) is not np.ndarray or arr.dtype != dtype or \
                        arr.ndim != len(shape) or not arr.flags.c_contiguous or \
                        any(arr.shape[k] != d for k, d in static):
                    break
                arrays.append(arr)
            else:
                return arrays
        return self._check_feeds_slowly(feeds)

    def _symbolic_args(self, arrays: list[np.ndarray]):
        """The entry's arguments for one run over symbolic dims: the inputs (checked by
        _symbolic_feeds), outputs sized for the run's dims, the pool, the arena (grown for
        them) and the dims' values."""
        key = tuple(a.shape for a in arrays)
        bound = self._bound.get(key)
        if bound is None:
            values, shapes, arena = self._binding.bind(list(key))
            if arena > self._arena.nbytes:          # the arena only grows
                self._arena = _aligned_empty(arena)
                self._args[len(arrays) + len(shapes) + 1] = self._arena.ctypes.data
            dims = np.array(values, dtype=np.int64)
            bound = (dims, shapes, dims.ctypes.data)
            # kernels that write data-dependent dims write this array, and capacities
            # grow between runs: such a module binds every run afresh (and never takes
            # run's fast path)
            if not (self._binding.data or self._binding.capacities):
                if len(self._bound) >= _BOUND_SHAPES:
                    self._bound.clear()
                self._bound[key] = bound
                self._last = (key, bound)
        dims, shapes, dims_address = bound
        args = self._args
        k = 0
        for a in arrays:
            args[k] = data_address(a)
            k += 1
        result = {}
        for (name, _, dtype), shape in zip(self._out_specs, shapes):
            out = np.empty(shape, dtype)
            args[k] = data_address(out)
            k += 1
            result[name] = out
        args[k + 2] = dims_address
        return args, result, dims

    def _bad_values(self) -> tuple[int | None, int | None]:
        """The index and size of the last failed check (``tensorc_bad_index``, ``_size``)."""
        index, size = (ctypes.c_int64.from_address(a).value if a else None for a in (
            self._library.global_address(f"tensorc_bad_{n}") for n in ("index", "size")))
        return index, size

    def _check_failed(self, status: int) -> KernelRuntimeError:
        """The error for a run whose kernel call ``status - 1`` failed a runtime check
        (codegen/llvm/codegen.py): an index out of range, held in ``tensorc_bad_index``."""
        index, size = self._bad_values()
        info = self.kernels[status - 1] if 0 < status <= len(self.kernels) else None
        if info is None:
            return KernelRuntimeError(f"the run stopped: a runtime check failed (status "
                                      f"{status})")
        return index_out_of_range(list(zip(info.nodes, info.ops)), info.name, index, size)

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

    def profile(self, feeds: Mapping[str, np.ndarray] | None = None, seconds: float = 1.0,
                min_runs: int = 10, roofline=None, model: str = "") -> Profile:
        """Time every kernel inside the entry function that ``run`` calls: the median over
        repeated runs (at least ``min_runs`` and ``seconds``, after a warm-up) of each kernel,
        beside the median end-to-end latency of uninstrumented runs. ``feeds`` default to
        seeded random inputs; ``roofline`` (a ``runtime.machine.Roofline``) defaults to this
        machine's, measured once and cached.

        >>> print(mod.profile().table(top=10))
        """
        # tensorc.reference imports onnx (about 0.2 s), which running a saved module never needs
        from tensorc.reference import random_inputs
        if feeds is None:
            # (data-dependent dims are no input's: static inputs still give random feeds)
            named = [n for n in self._dim_names if self.dims.origins.get(n)]
            if named:
                raise TensorcError(f"this module's dims {', '.join(named)} are "
                                   f"symbolic: profile it with feeds of the shape to time")
            feeds = random_inputs(self.inputs, seed=0)
        arrays = self._check_feeds(feeds) if not self._dim_names else \
            self._symbolic_feeds(feeds)
        if not self.kernels:
            raise TensorcError("this module has no kernel table to profile (it was saved by "
                               "an older tensorc): compile the model again")
        threads = self.num_threads or default_threads()
        if roofline is None:
            roofline = machine_roofline(threads=threads)
        timings = np.zeros(len(self.kernels), dtype=np.int64)
        if self._dim_names:
            args, keep, dims = self._symbolic_args(arrays)
        else:
            outputs = [np.empty(s, d) for _, s, d in self._out_specs]
            args = self._args
            for k, a in enumerate([*arrays, *outputs]):
                args[k] = data_address(a)

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
        kernels = self.kernels
        if self._dim_names:     # the figures of this run's dims
            values = dict(zip(self._dim_names, dims.tolist()))
            kernels = [k.at(values) for k in kernels]
        return build_profile(kernels, samples, plain, roofline, model)

    # saving ------------------------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False,
             include_source: bool = False) -> None:
        """Write the module to ``path`` (object code, constants, signature), atomically and
        with the user's umask. An existing file that is not a .tcz artifact is kept (an
        ArtifactError says so) unless ``overwrite``; ``include_source=True`` embeds the
        source ONNX model too (as large again as the model; ``tensorc run
        --check-onnxruntime`` then needs no .onnx file, else it reads the file compiled from).

        >>> mod.save("model.tcz", include_source=True)
        """
        # symbolic dims as JSON data (ir/dims.py), with the table that binds and checks them
        header = {"entry": self.entry_name, "inputs": signature_to_json(self.inputs),
                  "outputs": signature_to_json(self.outputs),
                  "arena_size": dim_to_json(self.arena_size), "target": self.target,
                  "cpu_features": self.cpu_features, "info": self.info,
                  "num_threads": self.num_threads,
                  "kernels": [k.to_json() for k in self.kernels]}
        header["objects"] = len(self.object_code)
        if self.dims is not None:
            header["dims"] = self.dims.state()
        sections = {f"object.{k}": obj for k, obj in enumerate(self.object_code)}
        sections["constants"] = self.const_pool
        self._write(path, header, sections, overwrite, include_source)

    def __repr__(self) -> str:
        return (f"Module(inputs: {self._describe(self.inputs)}; outputs: "
                f"{self._describe(self.outputs)}; target {self.target})")


_HEADER_FIELDS = ("entry", "inputs", "outputs", "arena_size", "target", "cpu_features",
                  "objects")
_SECTIONS = ("constants",)
# the largest arena a module may ask for (the compiler refuses bigger plans long before)
MAX_ARENA_BYTES = 1 << 40


def load_cpu(path: str | Path, header: dict, sections: dict[str, bytes]) -> Module:
    """A Module from an artifact's parts (see runtime/load.py): the header's fields and the CPU
    features the code needs are checked before any code is linked."""
    validate_header(header, sections, str(path))
    check_cpu_features(header["target"], header["cpu_features"], str(path))
    pool = np.frombuffer(sections["constants"], dtype=np.uint8)
    objects = [bytes(sections[f"object.{k}"]) for k in range(header["objects"])]
    dims = DimTable.from_state(header["dims"]) if "dims" in header else None
    module = Module(objects, header["entry"], signature_from_json(header["inputs"]),
                    signature_from_json(header["outputs"]), pool,
                    dim_from_json(header["arena_size"]), header["target"],
                    sections.get("onnx"), header.get("info"), header.get("kernels"),
                    header["cpu_features"], dims)
    try:
        module.num_threads = header.get("num_threads", 0)
    except TensorcError:
        pass        # more threads than this machine takes (saved on a bigger one): all cores
    return module


def validate_header(header: dict, sections: dict[str, bytes], label: str) -> None:
    """Check a CPU module's header before anything is allocated or linked: the fields and
    sections it needs, the signature, the entry name, the arena size, the kernel table."""
    missing = [f"header field {key!r}" for key in _HEADER_FIELDS if key not in header]
    count = header.get("objects")
    if type(count) is not int or count < 1:
        raise corrupt(label, f"its object count {count!r} is not a whole number >= 1")
    names = [*_SECTIONS, *(f"object.{k}" for k in range(count))]
    missing += [f"section {name!r}" for name in names if name not in sections]
    if missing:
        raise corrupt(label, f"it has no {', '.join(missing)}")
    validate_signature(header, label)
    entry = header["entry"]
    if not (isinstance(entry, str) and entry.isidentifier()):
        raise corrupt(label, f"its entry function name {entry!r} is not a symbol name")
    arena = header["arena_size"]
    symbolic = "dims" in header
    if symbolic:
        try:
            table = DimTable.from_state(header["dims"])
            arena = dim_from_json(arena)
        except ValueError as error:
            raise corrupt(label, f"its symbolic dims cannot be read ({error})") from None
        unknown = set(getattr(arena, "names", ())) - set(table.symbols)
        if unknown:
            raise corrupt(label, f"its arena size names dims it does not declare: {unknown}")
    elif type(arena) is not int or not 0 <= arena <= MAX_ARENA_BYTES:
        raise corrupt(label, f"its arena size {arena!r} is not a byte count in "
                      f"[0, {MAX_ARENA_BYTES}]")
    for key in ("target", "cpu_features"):
        if not isinstance(header[key], str):
            raise corrupt(label, f"its {key} {header[key]!r} is not a string")
    if not header["target"].startswith("llvm"):
        raise corrupt(label, f"its target {header['target']!r} is not a CPU target")
    kernels = header.get("kernels") or []
    try:
        if not isinstance(kernels, list):
            raise TypeError(kernels)
        for kernel in kernels:
            KernelInfo.from_json(kernel)
    except (KeyError, TypeError, ValueError):
        raise corrupt(label, "its kernel table cannot be read") from None
    if header.get("info") is not None and not isinstance(header["info"], dict):
        raise corrupt(label, "its info is not a JSON object")
    threads = header.get("num_threads", 0)
    if type(threads) is not int or threads < 0:
        raise corrupt(label, f"its thread count {threads!r} is not a whole number >= 0")


def check_cpu_features(target: str, features: str, label: str) -> None:
    """Refuse code built for CPU features this machine lacks (it would die of SIGILL)."""
    missing = missing_cpu_features(target, features)
    if missing:
        raise ArtifactError(
            f"{label} was compiled for {target} and needs CPU features this machine lacks: "
            f"{', '.join(missing)}; compile the model on this machine (target 'llvm'), or for "
            f"a CPU that both machines support (e.g. target 'llvm -mcpu=x86-64-v2')")


def _refuse(target: str, missing: list[str]):
    """An entry point that raises instead of running code built for ``missing`` features."""
    def entry(*args) -> int:
        raise TensorcError(
            f"this module was compiled for {target} and needs CPU features this machine "
            f"lacks: {', '.join(missing)}; save it and run it on such a machine, or compile "
            f"it for target 'llvm' (this machine) to run it here")
    return entry


def _array_data_reader():
    """A function giving an array's data address. ``ndarray.ctypes.data`` builds a ctypes
    helper object per call (3-5 us: a decode step with six arrays spent more in it than in
    its kernels); CPython's id is the object's address, and NumPy's array struct keeps the
    data pointer right after the object header (the layout its C API's PyArray_DATA reads).
    Used only where a probe confirms that layout, else the slow reader."""
    offset = 2 * ctypes.sizeof(ctypes.c_void_p)     # the header: reference count, type
    at = ctypes.c_void_p.from_address

    def fast(a: np.ndarray) -> int:
        return at(id(a) + offset).value or 0

    def slow(a: np.ndarray) -> int:
        return a.ctypes.data
    if sys.implementation.name != "cpython":
        return slow
    probes = [np.empty(5, np.float32), np.arange(12, dtype=np.int64).reshape(3, 4)[1:]]
    return fast if all(fast(p) == p.ctypes.data for p in probes) else slow


data_address = _array_data_reader()

# distinct input shapes whose binding a module keeps
_BOUND_SHAPES = 64


def check_num_threads(value: int) -> int:
    """``value`` if it is a valid thread count: 0 (all cores) or 1 to 4x the cores."""
    limit = 4 * (os.cpu_count() or 1)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value <= limit:
        raise TensorcError(f"num_threads must be a whole number from 0 (all cores) to {limit} "
                           f"(4 x the {os.cpu_count() or 1} cores of this machine), got "
                           f"{value!r}")
    return int(value)


def default_threads() -> int:
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

"""Object emission: LLVM IR text -> optimized module -> object code or assembly.

The target machine uses static relocations and the large code model (see
:func:`target_machine`); the compilation runs in a forked child (codegen/llvm/child.py) so
that an LLVM assertion kills only the child (:func:`emit_object`).
"""
from __future__ import annotations

import time
from typing import Callable

import llvmlite.binding as llvm

from tensorc.codegen.llvm.child import ChildCrashed, run_in_child
from tensorc.errors import TensorcError
from tensorc.target import Target, _init_llvm


def target_machine(target: Target) -> llvm.TargetMachine:
    _init_llvm()
    tgt = llvm.Target.from_triple(target.triple or llvm.get_process_triple())
    # Static relocations and the large code model: code reaches its constants and globals
    # through 64-bit absolute addresses, not 32-bit offsets from the instruction. MCJIT maps
    # an object's code, read-only data and writable data separately, wherever mmap puts
    # them; in a long-lived process they ended up more than 2 GiB apart, and LLVM aborted the
    # process linking the object (a 32-bit PC-relative relocation out of range, seen in the
    # test suite after some 3,000 modules). Measured within noise of the small model (PIC)
    # on SqueezeNet-, Inception- and EfficientNet-style models and two kernels (-2% to +2%).
    return tgt.create_target_machine(cpu=target.mcpu, features=target.features, opt=3,
                                     reloc="static", codemodel="large")


def optimize_module(llvm_ir: str, target: Target, slp: bool = True, speed: int = 3):
    """Parse, verify and run LLVM's O``speed`` pipeline (O3 unless a caller knows O2 does as
    well: compiler/kernel_objects.py's pass_level); returns (llvm module, target machine)."""
    tm = target_machine(target)
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=speed)
    pto.loop_vectorization = True
    pto.slp_vectorization = slp
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


def emit_object(llvm_ir: str, target: Target,
                on_phase: Callable[[str, float], None] | None = None, speed: int = 3) -> bytes:
    """Optimize (LLVM's O``speed`` pipeline) and compile to object code; ``on_phase(name,
    seconds)`` hears the seconds of "LLVM optimization" (parsing and the pass pipeline) and
    "object emission".

    LLVM stops the process when one of its internal assertions fails, and the SLP vectorizer
    of the LLVM that llvmlite ships can produce IR its own code generator asserts on (seen on a
    normalization kernel's scalar loops). So the compilation runs in a forked child: if the
    child dies, it is compiled again without the SLP vectorizer (our loops are vectorized
    explicitly; SLP only packs leftover scalar code), and if that dies too the error names
    the crash instead of taking the user's process down. The child is forked once and serves
    every call until it dies (codegen/llvm/child.py)."""
    def report(result: tuple[bytes, float, float]) -> bytes:
        obj, optimize_seconds, emit_seconds = result
        if on_phase is not None:
            on_phase("LLVM optimization", optimize_seconds)
            on_phase("object emission", emit_seconds)
        return obj
    try:
        return report(run_in_child(_emit, llvm_ir, target, True, speed))
    except ChildCrashed:
        pass
    try:
        return report(run_in_child(_emit, llvm_ir, target, False, speed))
    except ChildCrashed as crash:
        raise TensorcError(f"LLVM crashed while compiling the generated code ({crash}); this "
                           f"is a bug in tensorc or LLVM: please report it with the model") \
            from None


def emit_object_here(llvm_ir: str, target: Target,
                     on_phase: Callable[[str, float], None] | None = None, speed: int = 3,
                     slp: bool = True) -> bytes:
    """:func:`emit_object` in this process, with the SLP vectorizer: for a process that is
    itself a disposable child (compiler/kernel_objects.py's workers), whose parent builds the
    kernel again through :func:`emit_object` if it dies; or, with ``slp=False``, for code
    without loops that the SLP vectorizer (the known crash) has no reason to touch (the entry
    function, compiler/llvm.py)."""
    obj, optimize_seconds, emit_seconds = _emit(llvm_ir, target, slp, speed)
    if on_phase is not None:
        on_phase("LLVM optimization", optimize_seconds)
        on_phase("object emission", emit_seconds)
    return obj


def _emit(llvm_ir: str, target: Target, slp: bool, speed: int = 3
          ) -> tuple[bytes, float, float]:
    """(object code, seconds optimizing, seconds emitting)."""
    start = time.perf_counter()
    mod, tm = optimize_module(llvm_ir, target, slp, speed)
    optimized = time.perf_counter()
    obj = tm.emit_object(mod)
    return obj, optimized - start, time.perf_counter() - optimized


def emit_assembly(llvm_ir: str, target: Target) -> str:
    """Optimize and compile to assembly text (tests read the instructions it picked)."""
    mod, tm = optimize_module(llvm_ir, target)
    return tm.emit_assembly(mod)

"""Load object code produced by the LLVM codegen (codegen/llvm/) and call its entry function.

Loading links the object into the process with MCJIT; it runs neither LLVM's optimizer nor its
code generator (tests/runtime/test_artifact.py proves it).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

from tensorc.errors import TensorcError
from tensorc.runtime import threadpool
from tensorc.target import _init_llvm

# llvmlite (about 0.1 s to import) is imported where code is linked, so that import tensorc
# and the commands that link nothing do not pay for it.
_gomp_loaded = False

# Parallel loops run on runtime/threadpool.py's pool; libgomp stays loaded for what modules
# saved by older tensorc versions call (GOMP_parallel, omp_get_thread_num) and for
# omp_get_max_threads. libgomp's threads spin about 10 us (libgomp reckons about 100 spins a
# microsecond) before they sleep: its default, about 3 ms, made 2 threads slower than 1
# wherever another process held a core (measured in 0cff703).
GOMP_SPINCOUNT = "1000"
# what the user set decides instead
_WAIT_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def _load_gomp() -> None:
    global _gomp_loaded
    if _gomp_loaded:
        return
    import llvmlite.binding as llvm
    # libgcc_s holds the compiler's helper routines (half-precision conversions and the
    # like) that LLVM may call; unresolved, such a call would jump to address 0
    for runtime in ("gcc_s",):
        found = ctypes.util.find_library(runtime)
        if found:
            llvm.load_library_permanently(found)
    path = ctypes.util.find_library("gomp") or "libgomp.so.1"
    # libgomp reads its wait policy from the environment once, as it is loaded (a copy that
    # another library loaded earlier keeps its own); the variable is set for the load only
    # and child processes do not inherit it
    ours = not any(name in os.environ for name in _WAIT_SETTINGS)
    if ours:
        os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT
    try:
        llvm.load_library_permanently(path)
    except RuntimeError as exc:
        raise TensorcError(
            f"cannot load libgomp ({path}), which parallel kernels need: {exc}. "
            f"Install GCC's OpenMP runtime (Debian: apt-get install libgomp1)") from None
    finally:
        if ours:
            del os.environ["GOMP_SPINCOUNT"]
    _gomp_loaded = True


class NativeLibrary:
    """Object code linked into this process: one object, or several that call each other (a
model's entry and its kernels, compiler/kernel_objects.py); ``address(name)`` finds a
function."""

    def __init__(self, object_code: bytes | list[bytes]):
        import llvmlite.binding as llvm
        _init_llvm()
        _load_gomp()
        threadpool.install()      # tensorc_parallel, which parallel loops call
        tm = llvm.Target.from_default_triple().create_target_machine()
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        objects = [object_code] if isinstance(object_code, (bytes, bytearray, memoryview)) \
            else object_code
        for obj in objects:
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
        self._engine.finalize_object()

    def address(self, name: str) -> int:
        addr = self._engine.get_function_address(name)
        if not addr:
            raise TensorcError(f"compiled code has no function {name!r}")
        return addr

    def global_address(self, name: str) -> int:
        """The address of the exported global variable ``name`` (0 where there is none)."""
        return self._engine.get_global_value_address(name)

    def entry(self, name: str):
        """The function ``int32 name(void **args, int32 num_threads, int64 *timings)`` as a
        ctypes callable (see ``LLVMCodegen.add_entry``, codegen/llvm/codegen.py)."""
        proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.c_int32, ctypes.c_void_p)
        return proto(self.address(name))

"""Compilation targets: what the code generator may assume about the machine.

>>> Target.from_string("llvm -mcpu=znver5").vector_bits
512
>>> Target.from_string("cuda -arch=sm_90").max_shared_memory_per_block
49152
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from tensorc.errors import TensorcError


@dataclass(frozen=True)
class Target:
    kind: str                       # "llvm" | "cuda"
    mcpu: str = ""                  # LLVM CPU name, or CUDA arch such as "sm_90"
    features: str = ""              # LLVM feature string (+avx512f,...)
    triple: str = ""
    options: dict = field(default_factory=dict, compare=False, hash=False)

    # capabilities, read by schedules -----------------------------------------------------
    @property
    def vector_bits(self) -> int:
        if self.kind != "llvm":
            return 128
        if "+avx512f" in self.features:
            return 512
        if "+avx2" in self.features or "+avx" in self.features:
            return 256
        return 128

    def vector_lanes(self, dtype: str = "float32") -> int:
        from tensorc.ir.loop import itemsize
        return max(1, self.vector_bits // (8 * itemsize(dtype)))

    @property
    def num_cores(self) -> int:
        return os.cpu_count() or 1

    # CUDA capabilities (the most restrictive of the requested architectures) ---------------
    @property
    def archs(self) -> tuple[str, ...]:
        """The CUDA architectures the kernels are built for (``-arch=sm_80,sm_90``)."""
        return tuple(self.mcpu.split(",")) if self.kind == "cuda" else ()

    def _cuda(self, capability: str) -> int:
        if self.kind != "cuda":
            raise AttributeError(f"{capability} is a capability of CUDA targets, not {self}")
        return min(getattr(CUDA_ARCHS[a], capability) for a in self.archs)

    max_threads_per_block = property(lambda self: self._cuda("max_threads_per_block"))
    warp_size = property(lambda self: self._cuda("warp_size"))
    # static __shared__ arrays; more than this needs dynamic shared memory and an opt-in
    max_shared_memory_per_block = property(
        lambda self: self._cuda("max_shared_memory_per_block"))
    max_shared_memory_per_block_optin = property(
        lambda self: self._cuda("max_shared_memory_per_block_optin"))
    max_shared_memory_per_sm = property(lambda self: self._cuda("max_shared_memory_per_sm"))
    max_registers_per_thread = property(lambda self: self._cuda("max_registers_per_thread"))
    max_registers_per_block = property(lambda self: self._cuda("max_registers_per_block"))
    max_threads_per_sm = property(lambda self: self._cuda("max_threads_per_sm"))
    sm_count = property(lambda self: self._cuda("sm_count"))

    def __str__(self) -> str:
        parts = [self.kind]
        if self.mcpu:
            parts.append(f"-mcpu={self.mcpu}" if self.kind == "llvm" else f"-arch={self.mcpu}")
        return " ".join(parts)

    @staticmethod
    def host() -> Target:
        import llvmlite.binding as llvm
        _init_llvm()
        features = llvm.get_host_cpu_features().flatten()
        # AMD's SSE4a: LLVM uses its INSERTQ to assemble vector masks, and that instruction
        # measured 10x slower than the whole rest of a pooling kernel on Zen 3 (under KVM);
        # everything it offers has a fast SSE/AVX equivalent
        features = features.replace("+sse4a", "-sse4a")
        return Target("llvm", llvm.get_host_cpu_name(), features, llvm.get_process_triple())

    @staticmethod
    def from_string(text: str | Target) -> Target:
        """Parse ``llvm``, ``llvm -mcpu=NAME``, ``cuda`` or ``cuda -arch=sm_NN``."""
        if isinstance(text, Target):
            return text
        words = text.split()
        if not words or words[0] not in ("llvm", "cuda"):
            raise TensorcError(f"unknown target {text!r}: use 'llvm' (this CPU), "
                               f"'llvm -mcpu=NAME' or 'cuda -arch=sm_NN'")
        opts = dict(w.lstrip("-").split("=", 1) for w in words[1:] if "=" in w)
        if words[0] == "llvm":
            host = Target.host()
            mcpu = opts.get("mcpu", host.mcpu)
            features = host.features if mcpu == host.mcpu else opts.get("mattr", "")
            return Target("llvm", mcpu, features, host.triple, opts)
        archs = opts.get("arch", DEFAULT_CUDA_ARCH).split(",")
        unknown = [a for a in archs if a not in CUDA_ARCHS]
        if unknown or not all(archs):
            raise TensorcError(f"unknown CUDA architecture {','.join(unknown) or '(empty)'} in "
                               f"{text!r}: use one of {', '.join(CUDA_ARCHS)} (several with "
                               f"commas, -arch=sm_80,sm_90)")
        return Target("cuda", ",".join(dict.fromkeys(archs)), "", "", opts)


@dataclass(frozen=True)
class CudaArch:
    """What an NVIDIA architecture's kernels may use (CUDA C Programming Guide, "Technical
    Specifications per Compute Capability"); ``sm_count`` is that of ``reference_gpu``."""

    max_threads_per_block: int
    warp_size: int
    max_shared_memory_per_block: int         # static shared memory
    max_shared_memory_per_block_optin: int   # dynamic, after cudaFuncSetAttribute
    max_shared_memory_per_sm: int
    max_registers_per_thread: int
    max_registers_per_block: int
    max_threads_per_sm: int
    sm_count: int
    reference_gpu: str


CUDA_ARCHS: dict[str, CudaArch] = {
    "sm_80": CudaArch(1024, 32, 48 * 1024, 163 * 1024, 164 * 1024, 255, 65536, 2048, 108,
                      "A100"),
    "sm_89": CudaArch(1024, 32, 48 * 1024, 99 * 1024, 100 * 1024, 255, 65536, 1536, 142,
                      "L40S"),
    "sm_90": CudaArch(1024, 32, 48 * 1024, 227 * 1024, 228 * 1024, 255, 65536, 2048, 132,
                      "H100 SXM"),
}
DEFAULT_CUDA_ARCH = "sm_80"


_llvm_ready = False


def _init_llvm() -> None:
    global _llvm_ready
    if not _llvm_ready:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _llvm_ready = True

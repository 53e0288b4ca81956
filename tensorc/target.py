"""Compilation targets: what the code generator may assume about the machine.

>>> Target.from_string("llvm -mcpu=znver5").vector_bits
512
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
        return Target("cuda", opts.get("arch", "sm_80"), "", "", opts)


_llvm_ready = False


def _init_llvm() -> None:
    global _llvm_ready
    if not _llvm_ready:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _llvm_ready = True

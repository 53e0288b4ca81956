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
from tensorc.ir.loop import itemsize


@dataclass(frozen=True)
class Target:
    kind: str                       # "llvm" | "cuda"
    mcpu: str = ""                  # LLVM CPU name, or CUDA arch such as "sm_90"
    features: str = ""              # LLVM feature string (+avx512f,...)
    triple: str = ""
    options: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        # Target("llvm"), Target("cuda") and Target("llvm -mcpu=znver4") are what a user
        # writes first: each builds the target from_string builds, not one with no features
        if self.kind in ("llvm", "cuda") and not (self.mcpu or self.features or self.triple):
            parsed = Target.from_string(" ".join([self.kind, *(
                f"-{k}={v}" for k, v in self.options.items())]))
        elif self.kind not in ("llvm", "cuda") and isinstance(self.kind, str) and \
                not (self.mcpu or self.features or self.triple or self.options):
            parsed = Target.from_string(self.kind)
        else:
            return
        for name in ("kind", "mcpu", "features", "triple", "options"):
            object.__setattr__(self, name, getattr(parsed, name))

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
        return max(1, self.vector_bits // (8 * itemsize(dtype)))

    @property
    def int8_dot_exact(self) -> bool:
        """Whether int8 dot products sum four byte products exactly (``vpdpbusd`` on 256-bit
        vectors); without it AVX2's ``vpmaddubsw`` saturates each pair of products to int16
        (see codegen/llvm/int8_dot.py)."""
        return self.has_vnni(256)

    def has_vnni(self, bits: int) -> bool:
        """Whether ``vpdpbusd`` exists for ``bits``-wide vectors: AVX-VNNI or AVX512-VNNI with
        VL for 256, AVX512-VNNI with BW for 512."""
        on = {f[1:] for f in self.features.split(",") if f.startswith("+")}
        if bits == 512:
            return {"avx512vnni", "avx512bw"} <= on
        if bits == 256:
            return "avxvnni" in on or {"avx512vnni", "avx512vl"} <= on
        return False

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers a kernel's register tile may fill (AVX-512: 32)."""
        return 32 if self.vector_bits >= 512 else 16

    @property
    def max_tile_rows(self) -> int:
        """The most rows a GEMM register tile may take: each row's broadcast and accumulators
        must fit beside the tile's column vectors in the registers above."""
        return 14 if self.vector_bits >= 512 else 8

    @property
    def l1_bytes(self) -> int:
        """The L1 data cache per core that schedules plan for (the smallest of current x86
        cores: 48 KB on Zen 4/5 and recent Xeons, 32 KB before)."""
        return 48 * 1024

    @property
    def l2_bytes(self) -> int:
        """The L2 budget per core that blocking plans for: 512 KB, the size the matmul's and
        convs' cache blocks were measured against (3a4fd88, Zen 3-5 and Xeon), not the cache's
        full size, so that a block shares L2 with the streams passing it."""
        return 512 * 1024

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
        """Parse ``llvm``, ``llvm -mcpu=NAME [-mattr=+f,-g]``, ``cuda`` or
        ``cuda -arch=sm_NN [-fastmath=1]``; an unknown CPU, feature, architecture or option
        is a TensorcError that lists the valid ones."""
        if isinstance(text, Target):
            return text
        if not isinstance(text, str):
            raise TensorcError(f"a target is a string such as 'llvm' or 'cuda -arch=sm_90', "
                               f"got {type(text).__name__}")
        words = text.split()
        if not words or words[0] not in ("llvm", "cuda"):
            raise TensorcError(f"unknown target {text!r}: use 'llvm' (this CPU), "
                               f"'llvm -mcpu=NAME' or 'cuda -arch=sm_NN'")
        opts = _parse_options(text, words)
        if words[0] == "llvm":
            host = Target.host()
            mcpu = opts.get("mcpu", host.mcpu)
            mattr = opts.get("mattr", "")
            if "mcpu" in opts or mattr:     # the host's own CPU needs no check
                check_llvm_cpu(mcpu, mattr, text)
            if mcpu == host.mcpu:
                features = _merge_features(host.features, mattr)
            else:
                features = _merge_features(
                    ",".join(f"+{f}" for f in sorted(CPU_IMPLIED_FEATURES.get(mcpu, ()))),
                    mattr)
            return Target("llvm", mcpu, features, host.triple, opts)
        archs = opts.get("arch", DEFAULT_CUDA_ARCH).split(",")
        unknown = [a for a in archs if a not in CUDA_ARCHS]
        if unknown or not all(archs):
            raise TensorcError(f"unknown CUDA architecture {','.join(unknown) or '(empty)'} in "
                               f"{text!r}: use one of {', '.join(CUDA_ARCHS)} (several with "
                               f"commas, -arch=sm_80,sm_90)")
        return Target("cuda", ",".join(dict.fromkeys(archs)), "", "", opts)


# the options each target kind reads; anything else is refused rather than ignored
TARGET_OPTIONS = {
    "llvm": {"mcpu": "the CPU to compile for (default: this machine's)",
             "mattr": "LLVM features to add or remove, e.g. +avx2,-avx512f",
             "winograd": "0: every 3x3 conv direct, none as Winograd (default 1: where the "
                         "cost model finds it faster)"},
    "cuda": {"arch": "the GPU architectures, e.g. sm_80,sm_90",
             "fastmath": "1: the GPU's approximate math functions"},
}
# the options that take one of a few values; any other value is refused
OPTION_VALUES = {"winograd": ("0", "1")}


def _parse_options(text: str, words: list[str]) -> dict[str, str]:
    kind = words[0]
    valid = TARGET_OPTIONS[kind]
    listing = "; ".join(f"-{name}=... ({what})" for name, what in valid.items())
    opts: dict[str, str] = {}
    for word in words[1:]:
        name, sep, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or not sep or not value:
            raise TensorcError(f"target {text!r}: cannot read {word!r}; {kind} options are "
                               f"written -NAME=VALUE: {listing}")
        if name not in valid:
            why = (" (tensorc compiles CPU code for the machine it runs on)"
                   if name in ("mtriple", "triple", "march") else "")
            raise TensorcError(f"target {text!r}: unknown option -{name}{why}; {kind} takes "
                               f"{listing}")
        if name in opts:
            raise TensorcError(f"target {text!r}: -{name} is given twice")
        if value not in OPTION_VALUES.get(name, (value,)):
            raise TensorcError(f"target {text!r}: -{name} takes "
                               f"{' or '.join(OPTION_VALUES[name])}, not {value!r}")
        opts[name] = value
    return opts


def _merge_features(base: str, extra: str) -> str:
    """LLVM feature strings joined, a later +f/-f replacing an earlier one."""
    merged: dict[str, str] = {}
    for item in (base + "," + extra).split(","):
        if item:
            merged[item[1:]] = item[0]
    return ",".join(sign + name for name, sign in merged.items())


# The features that a CPU name implies and that matter for whether code runs (the ISA levels),
# for the CPUs whose code is most often shipped to other machines. A CPU not listed here still
# compiles; its artifacts are checked against their -mattr features only.
_V2 = ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16")
_V3 = _V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
CPU_IMPLIED_FEATURES: dict[str, tuple[str, ...]] = {
    "x86-64": (), "x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V4,
    "sandybridge": _V2 + ("avx",), "ivybridge": _V2 + ("avx", "f16c"),
    **dict.fromkeys(("haswell", "broadwell", "skylake", "alderlake", "znver1", "znver2",
                     "znver3"), _V3),
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake", "icelake-client",
                     "icelake-server", "tigerlake", "sapphirerapids", "graniterapids",
                     "znver4", "znver5"), _V4),
}


_llvm_names: tuple[frozenset[str], frozenset[str]] | None = None


def llvm_cpus_and_features() -> tuple[frozenset[str], frozenset[str]]:
    """The CPU names and feature names LLVM knows for this machine's architecture.

    LLVM lists them only by printing its help text for ``-mcpu=help`` (to stderr); that
    runs in a forked child, so that nothing it prints or does reaches this process."""
    global _llvm_names
    if _llvm_names is None:
        import tempfile
        with tempfile.TemporaryFile() as out:
            pid = os.fork()
            if pid == 0:
                try:
                    import llvmlite.binding as llvm
                    os.dup2(out.fileno(), 2)
                    os.dup2(out.fileno(), 1)
                    _init_llvm()
                    llvm.Target.from_default_triple().create_target_machine(cpu="help")
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            out.seek(0)
            text = out.read().decode(errors="replace")
        cpus: set[str] = set()
        features: set[str] = set()
        section = None
        for line in text.splitlines():
            if line.startswith("Available CPUs"):
                section = cpus
            elif line.startswith("Available features"):
                section = features
            elif section is not None and line.startswith("  ") and " - " in line:
                section.add(line.split()[0])
        if not cpus:
            return frozenset(), frozenset()     # LLVM printed nothing: validate nothing
        _llvm_names = frozenset(cpus), frozenset(features)
    return _llvm_names


def check_llvm_cpu(mcpu: str, mattr: str, text: str) -> None:
    """Refuse a CPU name or -mattr feature LLVM does not know (LLVM would print a warning and
    go on to abort the process later)."""
    cpus, features = llvm_cpus_and_features()
    if not cpus:
        return
    if mcpu not in cpus:
        close = [c for c in sorted(cpus) if c[:3] == mcpu[:3]]
        hint = f"close to it: {', '.join(close)}; " if close else ""
        raise TensorcError(f"target {text!r}: LLVM knows no CPU {mcpu!r}; {hint}valid CPUs: "
                           f"{', '.join(sorted(cpus))}; or leave -mcpu out for this "
                           f"machine's ({Target.host().mcpu})")
    bad = [item for item in mattr.split(",")
           if not (len(item) > 1 and item[0] in "+-" and item[1:] in features)]
    if mattr and bad:
        raise TensorcError(f"target {text!r}: unknown -mattr feature {', '.join(bad)}; write "
                           f"+name or -name with names LLVM knows: "
                           f"{', '.join(sorted(features))}")


def host_cpu_features() -> frozenset[str]:
    """The features this machine's CPU has (LLVM's names: avx2, avx512f, fma, ...)."""
    import llvmlite.binding as llvm
    _init_llvm()
    return frozenset(name for name, on in llvm.get_host_cpu_features().items() if on)


def missing_cpu_features(target: str, features: str) -> list[str]:
    """The CPU features code built for ``target`` with LLVM ``features`` needs and this
    machine lacks, sorted; [] when it can run here.

    >>> missing_cpu_features("llvm -mcpu=x86-64-v4", "")  # on an AVX2 machine  # doctest: +SKIP
    ['avx512bw', 'avx512cd', 'avx512dq', 'avx512f', 'avx512vl']
    """
    needed = {item[1:] for item in features.split(",") if item.startswith("+")}
    for word in target.split():
        if word.startswith("-mcpu="):
            needed.update(CPU_IMPLIED_FEATURES.get(word[len("-mcpu="):], ()))
    # names the host detection does not report (modes, tuning flags) cannot be checked
    import llvmlite.binding as llvm
    _init_llvm()
    detectable = set(llvm.get_host_cpu_features())
    return sorted(f for f in needed - host_cpu_features() if f in detectable)


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

"""Build generated CUDA C with nvcc: one fatbin for the requested architectures, and what
``ptxas -v`` says each kernel uses (registers, shared memory, stack, spills).

nvcc is found on PATH, under $CUDA_HOME / $CUDA_PATH, or in /usr/local/cuda*/bin. Builds are
cached in this process by the hash of their source and options, so compiling a model twice
(or its kernels for a test, then for an artifact) runs nvcc once.

>>> build = build_fatbin(source, ("sm_80", "sm_90"))
>>> build.resources["k0_fused_dense"]["sm_80"].registers
40
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from tensorc.errors import TensorcError

NVCC_FLAGS = ("-O3", "-std=c++17", "-Xptxas", "-v")


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel on one architecture."""

    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class CudaBuild:
    fatbin: bytes
    resources: dict[str, dict[str, KernelResources]]    # kernel -> arch -> resources
    log: str
    command: list[str]


_BUILDS: dict[str, CudaBuild] = {}


def find_nvcc() -> str | None:
    """nvcc's path: on PATH, in $CUDA_HOME/bin or $CUDA_PATH/bin, or in the newest
    /usr/local/cuda*/bin; None when there is none."""
    found = shutil.which("nvcc")
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    for root in sorted(Path("/usr/local").glob("cuda*"), reverse=True):
        if (root / "bin" / "nvcc").is_file():
            return str(root / "bin" / "nvcc")
    return None


def require_nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise TensorcError("nvcc (the CUDA compiler) was not found on PATH, in $CUDA_HOME/bin, "
                           "$CUDA_PATH/bin or /usr/local/cuda*/bin: install the CUDA toolkit "
                           "or set CUDA_HOME to it")
    return nvcc


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """SASS for every architecture, and PTX of the newest so that later GPUs can JIT it."""
    flags = []
    for arch in archs:
        num = arch.split("_")[1]
        flags += ["-gencode", f"arch=compute_{num},code=sm_{num}"]
    newest = max(archs, key=lambda a: int(a.split("_")[1])).split("_")[1]
    flags += ["-gencode", f"arch=compute_{newest},code=compute_{newest}"]
    return flags


def build_fatbin(source: str, archs: tuple[str, ...], nvcc: str | None = None) -> CudaBuild:
    """Compile ``source`` into a fatbin for ``archs`` (e.g. ("sm_80", "sm_90"))."""
    nvcc = nvcc or require_nvcc()
    command = [nvcc, "-fatbin", *NVCC_FLAGS, *gencode_flags(tuple(archs))]
    key = hashlib.sha256("\0".join([source, *command]).encode()).hexdigest()
    if key in _BUILDS:
        return _BUILDS[key]
    with tempfile.TemporaryDirectory(prefix="tensorc-nvcc-") as tmp:
        src, out = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.fatbin"
        src.write_text(source)
        cmd = [*command, str(src), "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise TensorcError(f"nvcc failed to compile the generated CUDA source "
                               f"(exit {proc.returncode}):\n{proc.stderr[-6000:]}")
        build = CudaBuild(out.read_bytes(), parse_ptxas(proc.stderr), proc.stderr, cmd)
    _BUILDS[key] = build
    return build


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(log: str) -> dict[str, dict[str, KernelResources]]:
    """The per-kernel, per-architecture resources in ``ptxas -v`` output."""
    out: dict[str, dict[str, KernelResources]] = {}
    current: tuple[str, str] | None = None
    fields: dict = {}
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = (m.group(1), m.group(2))
            fields = {}
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            fields.update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)),
                          spill_loads=int(m.group(3)))
            continue
        m = _USED.search(line)
        if m:
            fields["registers"] = int(m.group(1))
            b = _BARRIERS.search(line)
            s = _SMEM.search(line)
            fields["barriers"] = int(b.group(1)) if b else 0
            fields["shared_bytes"] = int(s.group(1)) if s else 0
            kernel, arch = current
            out.setdefault(kernel, {})[arch] = KernelResources(**fields)
            current = None
    return out


def format_resources(resources: dict[str, dict[str, KernelResources]]) -> str:
    """A table: kernel, architecture, registers, shared memory, stack, spills."""
    lines = [f"{'kernel':<48} {'arch':<6} {'regs':>5} {'smem':>7} {'stack':>6} "
             f"{'spill st/ld':>12}"]
    for kernel, by_arch in resources.items():
        for arch, r in sorted(by_arch.items()):
            lines.append(f"{kernel:<48} {arch:<6} {r.registers:>5} {r.shared_bytes:>7} "
                         f"{r.stack_bytes:>6} {r.spill_stores:>5}/{r.spill_loads:<6}")
    return "\n".join(lines)

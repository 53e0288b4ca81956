"""The CUDA back end: after the shared stages (compiler/pipeline.py, with the GPU
schedules), the host/device split, barriers and the limits check, CUDA C for every kernel, the
launch plan of the model, and nvcc.

    Lowered -> device kernels (split_kernels, insert_barriers, verify_gpu)
            -> CUDA C (codegen/cuda.py) -> fatbin (codegen/nvcc.py)
            \\-> launch plan (runtime/launch_plan.py)

>>> compiled = compile_graph_cuda(graph, Target.from_string("cuda -arch=sm_90"))
>>> print(compiled.source)                  # what `tensorc inspect --stage cuda` shows
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from tensorc.codegen.cuda import CudaCodegen
from tensorc.codegen.nvcc import build_fatbin, find_nvcc, format_resources
from tensorc.compiler.kernel import Kernel, inlined_scalar
from tensorc.compiler.pipeline import (
    Lowered, Progress, input_signature, lower_graph, output_signature,
)
from tensorc.compiler.timing import CompileTimes
from tensorc.errors import ScheduleError, TensorcError
from tensorc.ir.graph import Graph
from tensorc.ir.loop import PrimFunc, format_func
from tensorc.passes.graph.plan_memory import MemoryPlan
from tensorc.passes.loop.insert_barriers import insert_barriers
from tensorc.passes.loop.split_kernels import (
    WORKSPACE_ALIGN, DeviceFunction, split_kernels, workspace_layout,
)
from tensorc.passes.loop.verify_gpu import verify_gpu
from tensorc.runtime.cuda import CudaModule
from tensorc.runtime.launch_plan import Launch, LaunchPlan
from tensorc.target import Target


@dataclass
class CudaCompiled(Lowered):
    device: dict[str, DeviceFunction]           # by the group kernel's name
    source: str
    launches: LaunchPlan

    @property
    def device_kernels(self) -> list[PrimFunc]:
        return [k for d in self.device.values() for k in d.kernels]


def to_device(func: PrimFunc, target: Target, where: str = "") -> DeviceFunction:
    """A scheduled group kernel as device kernels: split at its root nests, barriers
    inserted, each checked against the target's limits."""
    device = split_kernels(func)
    device.kernels = [insert_barriers(k) for k in device.kernels]
    for kernel in device.kernels:
        try:
            verify_gpu(kernel, target)
        except ScheduleError as exc:
            raise ScheduleError(f"{where or func.name}: {exc}") from None
    return device


def compile_graph_cuda(graph: Graph, target: Target, progress: Progress | None = None,
                       times: CompileTimes | None = None) -> CudaCompiled:
    """Compile an imported graph to CUDA C and its launch plan (no nvcc yet); ``times``
    collects the seconds of each phase."""
    times = times if times is not None else CompileTimes()
    start = time.perf_counter()
    lowered = lower_graph(graph, target, progress, times=times)
    device: dict[str, DeviceFunction] = {}
    cg = CudaCodegen(target)
    for kernel in lowered.kernels:
        if kernel.func.name in device:
            continue
        with times.phase("CUDA C emission", kernel.func.name):
            dev = to_device(kernel.func, target, f"{kernel.func.name} ({kernel.group.name})")
            device[kernel.func.name] = dev
            for k in dev.kernels:
                cg.add_kernel(k)
    with times.phase("CUDA C emission"):
        launches = launch_plan(lowered.graph, lowered.kernels, lowered.plan, device)
        source = cg.source()
    if progress:
        progress(f"generated CUDA C for {len(device)} distinct kernels "
                 f"({len(launches.launches)} launches) in {time.perf_counter() - start:.1f}s")
    return CudaCompiled(**vars(lowered), device=device, source=source, launches=launches)


def _align(n: int) -> int:
    return -(-n // WORKSPACE_ALIGN) * WORKSPACE_ALIGN


def launch_plan(graph: Graph, kernels: list[Kernel], plan: MemoryPlan,
                device: dict[str, DeviceFunction]) -> LaunchPlan:
    """The model's launches: each group's device kernels with their arguments' places; the
    kernels' workspace shares one region after the memory plan's arena."""
    workspace_base = _align(plan.arena_size)
    workspace = max((d.workspace_bytes for d in device.values()), default=0)
    launches = []
    for kernel in kernels:
        dev = device[kernel.func.name]
        group = kernel.group
        values = [v for v in group.inputs if not inlined_scalar(v, graph)] + [group.output]
        places = {}
        for buf, value in zip(dev.params, values):
            place = plan.places[value]
            index = place.index if place.kind in ("input", "output") else 0
            places[id(buf)] = (place.kind, index, place.offset)
        for buf, offset in workspace_layout(dev.workspace).items():
            places[id(buf)] = ("arena", 0, workspace_base + offset)
        nodes = tuple((n.name or n.op, n.op) for n in group.nodes)
        for k in dev.kernels:
            launches.append(Launch(k.name, k.attrs["grid"], k.attrs["block"],
                                   [places[id(b)] for b in k.params], group.name, nodes))
    return LaunchPlan(launches, workspace_base + workspace)


def format_device_kernels(compiled: CudaCompiled) -> str:
    """The loop IR of every device kernel, with its launch dimensions."""
    parts = []
    for kernel in compiled.device_kernels:
        grid = "x".join(map(str, kernel.attrs["grid"]))
        block = "x".join(map(str, kernel.attrs["block"]))
        parts.append(f"// grid {grid}, block {block}\n{format_func(kernel)}")
    return "\n".join(parts)


def cuda_module(compiled: CudaCompiled, target: Target, source_onnx: bytes | None = None,
                build: bool = True, info: dict | None = None,
                times: CompileTimes | None = None):
    """A CudaModule of ``compiled``: with ``build``, nvcc compiles its fatbin for the target's
    architectures (and records ptxas's resources per kernel); without, the module can only
    run on an EmulatedDevice. ``times`` hears the seconds of "nvcc"."""
    times = times if times is not None else CompileTimes()
    fatbin, resources = None, {}
    if build:
        with times.phase("nvcc"):
            result = build_fatbin(compiled.source, target.archs)
        fatbin = result.fatbin
        resources = {k: {a: r.to_json() for a, r in by_arch.items()}
                     for k, by_arch in result.resources.items()}
    info = dict(info or {}, kernels=len(compiled.device),
                launches=len(compiled.launches.launches), groups=len(compiled.groups))
    return CudaModule(compiled.source, fatbin, compiled.launches,
                      input_signature(compiled), output_signature(compiled),
                      compiled.plan.const_pool, str(target), source_onnx, info, resources)


def compile_cuda_module(proto, graph: Graph, target: Target, progress: Progress | None,
                        start: float, times: CompileTimes | None = None):
    """``tensorc.compile(..., target="cuda")``: CUDA C for every kernel, built by nvcc for the
    target's architectures, as a CudaModule; ``times`` collects the seconds of each phase and
    the module keeps it as ``compile_times``."""
    times = times if times is not None else CompileTimes()
    compiled = compile_graph_cuda(graph, target, progress, times)
    if progress:
        progress(f"running nvcc for {', '.join(target.archs)}")
    mod = cuda_module(compiled, target, proto.SerializeToString(), times=times)
    mod.info["compile_seconds"] = round(time.perf_counter() - start, 3)
    mod.compile_times = times.finish()
    return mod


def inspect_cuda(graph: Graph, target: Target, stage: str) -> str:
    """``tensorc.inspect`` for CUDA targets: stage loops (the device kernels and the launch
    plan) or cuda (the source, with ptxas's resources per kernel when nvcc is there)."""
    compiled = compile_graph_cuda(graph, target)
    plan = f"// launch plan: {compiled.launches.describe()}\n"
    if stage == "loops":
        return format_device_kernels(compiled) + "\n" + plan
    if stage != "cuda":
        raise TensorcError(f"stage {stage} is the CPU's; for target {target} inspect stage "
                           f"cuda")
    if find_nvcc() is None:
        note = "// ptxas resources: not measured (nvcc not found; set CUDA_HOME)"
    else:
        build = build_fatbin(compiled.source, target.archs)
        note = "// ptxas resources per kernel\n" + "\n".join(
            "// " + line for line in format_resources(build.resources).splitlines())
    return f"{compiled.source}\n{note}\n{plan}"

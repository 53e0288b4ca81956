"""GPU schedule of groups without an anchor (elementwise, broadcast, injective ops).

Each thread writes ``vector`` consecutive elements of the innermost axis (a float4 store where
the axis allows, and float4 loads of the operands that are contiguous along it); consecutive
threads write consecutive vectors, so a warp's accesses coalesce.

    for (i.o: blockIdx.x) for (i.i: threadIdx.x) for (w.i: vectorized, 0, 4)  out[...] = ...
"""
from __future__ import annotations

from tensorc.ir.schedule import Schedule
from tensorc.ir.te import Tensor
from tensorc.ops.gpu.common import THREADS, bind_threads, default_threads, size_of
from tensorc.ops.registry import Template
from tensorc.ops.schedules import INJECTIVE
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

VECTORS = (1, 2, 4)


def injective_space(target: Target, out: Tensor, anchor: Tensor | None, attrs: dict
                    ) -> SearchSpace:
    last = out.shape[-1] if out.shape else 1
    vector = 4 if out.dtype == "float32" and last % 4 == 0 else 1
    threads = default_threads(-(-size_of(out.shape) // vector))
    return SearchSpace(
        [Knob("threads", THREADS, threads, "threads per block"),
         Knob("vector", VECTORS, vector, "consecutive elements per thread")],
        [lambda c: None if last % c["vector"] == 0 else
         f"vector {c['vector']} does not divide the innermost extent {last}"],
        name="gpu injective")


def schedule_injective(target: Target, sch: Schedule, out: Tensor, anchor: Tensor | None,
                       attrs: dict, config) -> None:
    stage = sch[out]
    axes = stage.op_axis
    if not axes:
        return
    loops = list(axes)
    if config["vector"] > 1:
        outer, inner = stage.split(axes[-1], config["vector"])
        stage.vectorize(inner)
        loops = [*axes[:-1], outer]
    bind_threads(stage, config["threads"], loops)


INJECTIVE["cuda"] = Template(schedule_injective, injective_space)

"""The generic GPU schedule, valid for every op: one thread per output element.

A stage of the output's shape that the output reads element for element (the accumulation of
a conv, a pooling window's sum) is computed inside the output's thread, in registers; every
other stage runs as a launch of its own, one thread per element (a reduction accumulating in a
register), its result in workspace for the next launch.

It is what pooling, depthwise and grouped convs, scans, gathers, scatters, top-k and the other
ops without a dedicated GPU schedule use: simple, coalesced along the innermost axis, and
correct for any stage structure.
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.te import Tensor
from tensorc.ops.gpu.common import THREADS, bind_threads, default_threads, root_stages, size_of
from tensorc.ops.registry import REGISTRY, Template
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target


def generic_space(target: Target, out: Tensor, anchor: Tensor | None, attrs: dict
                  ) -> SearchSpace:
    default = default_threads(size_of(out.shape))
    return SearchSpace([Knob("threads", THREADS, default, "threads per block")],
                       name="gpu generic")


def schedule_generic(target: Target, sch: Schedule, out: Tensor, anchor: Tensor | None,
                     attrs: dict, config) -> None:
    threads = config["threads"]
    out_stage = sch[out]
    others = [st for st in root_stages(sch) if st is not out_stage]
    # computed inside the output's threads: stages of its shape that only it reads
    read_by_others = {id(t) for st in others for t in st.op.input_tensors()}
    inside = [st for st in others if st.tensor.shape == out.shape
              and reads_pointwise(sch, out_stage, st.tensor)
              and id(st.tensor) not in read_by_others]
    if out.op.reduce_axis:
        inside.append(sch[sch.cache_write(out, "local")])
    for st in others:
        if st not in inside:
            schedule_alone(st, threads)
    loops = bind_threads(out_stage, threads)
    for st in inside:
        if loops is not None:
            st.compute_at(out_stage, loops[1])


def schedule_alone(stage: Stage, threads: int) -> None:
    """A stage as its own launch: one thread per element, a reduction in a register."""
    local = None
    if stage.op.reduce_axis:
        local = stage.schedule[stage.schedule.cache_write(stage.tensor, "local")]
    loops = bind_threads(stage, threads)
    if local is not None and loops is not None:
        local.compute_at(stage, loops[1])


def expand_inline(sch: Schedule, e: E.Expr) -> E.Expr:
    """``e`` with the bodies of inlined stages substituted for their loads."""
    def fn(x: E.Expr):
        if isinstance(x, E.Load) and isinstance(x.source, Tensor):
            st = sch.stage_of(x.source)
            if st.attach == "inline":
                mapping = {iv.var: idx for iv, idx in zip(st.op.axis, x.indices)}
                return expand_inline(sch, E.substitute(st.op.body, mapping))
        return None
    return E.transform(e, fn)


def reads_pointwise(sch: Schedule, reader: Stage, t: Tensor) -> bool:
    """Whether ``reader`` reads ``t`` only at its own output index (a unit dim may be
    indexed by 0)."""
    body = expand_inline(sch, reader.op.body)
    axes = [iv.var for iv in reader.op.axis]
    loads = [x for x in E.walk(body) if isinstance(x, E.Load) and x.source is t]

    def same_index(ld: E.Load) -> bool:
        return len(ld.indices) == len(axes) and all(
            i is v or (n == 1 and arith.as_const_int(i) == 0)
            for i, v, n in zip(ld.indices, axes, t.shape))
    return bool(loads) and all(same_index(ld) for ld in loads)


GENERIC = Template(schedule_generic, generic_space)

for _op in REGISTRY.values():
    _op.templates.setdefault("cuda", GENERIC)

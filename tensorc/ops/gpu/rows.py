"""GPU schedule of reductions over trailing axes: a block per row.

Reductions (reduce_*), softmax / log_softmax / hardmax, normalizations (layer, instance, RMS)
and argmax / argmin reduce each row, the trailing axes from the first reduced one on. Each
row is one block: its threads stride over the row, accumulate partial results in registers,
and combine them with warp shuffles (and shared memory across warps, a ThreadReduce); every
thread keeps the row's statistics in a register, and the threads write the row's outputs
(normalized values, or the reduced value from the first thread).

    for (row: blockIdx.x)
      for (r.i: threadIdx.x) { partial = ...; for (r.o) partial += x[row, r.o*T + r.i];
                               max = thread_sum(partial) }      (one per reduction stage)
      for (c.o) for (c.i: threadIdx.x) out[row, c.o*T + c.i] = f(x[...], max, ...)

Rows narrower than a warp, and reductions over leading or middle axes, use the generic
schedule (a thread per output element).
"""
from __future__ import annotations

from tensorc.ir.schedule import Schedule
from tensorc.ir.te import Tensor
from tensorc.ops.gpu.common import THREADS, pow2_at_least, root_stages, size_of
from tensorc.ops.gpu.generic import generic_space, schedule_generic
from tensorc.ops.registry import REGISTRY, Template
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

MIN_ROW = 32        # narrower rows: a thread per output element


def reduced_axes(op: str, attrs: dict, ndim: int) -> tuple[int, ...]:
    """The input axes a row reduction reduces, from its attrs."""
    if "axes" in attrs:
        return tuple(attrs["axes"])
    return (attrs["axis"],)


def row_split(op: str, attrs: dict, x_shape: tuple[int, ...]) -> int | None:
    """The first reduced axis when the reduced axes are exactly the trailing ones (and the
    row is wide enough to share among threads), else None."""
    axes = reduced_axes(op, attrs, len(x_shape))
    if not axes or tuple(axes) != tuple(range(axes[0], len(x_shape))):
        return None
    if size_of(x_shape[axes[0]:]) < MIN_ROW:
        return None
    return axes[0]


def _input_shape(anchor: Tensor) -> tuple[int, ...]:
    """The shape of the tensor the group's reductions reduce (the anchor op's input): the
    largest they read."""
    read = [inp for t in _reductions_of(anchor) for inp in t.op.input_tensors()]
    return max(read, key=lambda t: size_of(t.shape)).shape if read else anchor.shape


def _reductions_of(anchor: Tensor) -> list[Tensor]:
    seen, out, frontier = set(), [], [anchor]
    while frontier:
        t = frontier.pop()
        if id(t) in seen or not hasattr(t.op, "body"):
            continue
        seen.add(id(t))
        if t.op.reduce_axis:
            out.append(t)
        frontier.extend(t.op.input_tensors())
    return out


def rows_space(target: Target, out: Tensor, anchor: Tensor, attrs: dict) -> SearchSpace:
    op = anchor.op.name
    shape = _input_shape(anchor)
    first = row_split(op, attrs, shape)
    if first is None:
        space = generic_space(target, out, anchor, attrs)
        return SearchSpace(list(space.knobs.values()) + [Knob("rows", (False,), False)],
                           name="gpu rows (generic)")
    width = size_of(shape[first:])
    threads = min(256, max(32, pow2_at_least(width) // 2 if width > 64 else 32))
    return SearchSpace([Knob("threads", THREADS, threads, "threads per row (block)"),
                        Knob("rows", (True,), True)],
                       [lambda c: None if c["threads"] <= width else
                        f"{c['threads']} threads for rows of {width} elements"],
                       name="gpu rows")


def schedule_rows(target: Target, sch: Schedule, out: Tensor, anchor: Tensor, attrs: dict,
                  config) -> None:
    if not config["rows"]:
        schedule_generic(target, sch, out, anchor, attrs, config)
        return
    threads = config["threads"]
    first = row_split(anchor.op.name, attrs, _input_shape(anchor))
    st = sch[out]
    if not st.op_axis:
        # a 0-d result: one block reduces, its first thread stores; a finish stage after the
        # reduction runs as a launch of its own
        for s in root_stages(sch):
            if s.op.reduce_axis:
                bind_row_reduction(s, threads)
        return
    for s in root_stages(sch):
        if s is not st and not s.op.reduce_axis:
            s.compute_inline()      # e.g. softmax's cached exp: a GPU thread recomputes it
    stages = [s for s in root_stages(sch) if s is not st]
    if out.op.reduce_axis:                  # the output is itself the reduction
        stages.append(sch[sch.cache_write(out, "local")])
    axes = st.op_axis
    lead, trail = axes[:first], axes[first:]
    row = (st.fuse(*lead) if len(lead) > 1 else lead[0]) if lead else None
    if trail:
        col = st.fuse(*trail) if len(trail) > 1 else trail[0]
        col_o, col_i = st.split(col, threads)
        if row is None:
            row, col_o = st.split(col_o, nparts=1)
        st.bind(col_i, "threadIdx.x")
    else:
        row, only = st.split(row, 1)        # one thread writes the row's result
        st.bind(only, "threadIdx.x")
    st.bind(row, "blockIdx.x")
    for s in stages:
        s.compute_at(st, row)
        if s.op.reduce_axis:
            bind_row_reduction(s, threads)


def bind_row_reduction(s, threads: int) -> None:
    """The stage's reduction loops fused and strided over ``threads`` threads: each thread
    accumulates every threads-th element, then the threads combine (a ThreadReduce)."""
    r = s.fuse(*s.reduce_axis) if len(s.reduce_axis) > 1 else s.reduce_axis[0]
    r_o, r_i = s.split(r, threads)
    s.reorder(r_i, r_o)
    s.bind(r_i, "threadIdx.x")


ROWS = Template(schedule_rows, rows_space)
ROW_OPS = ("softmax", "log_softmax", "hardmax", "normalize", "argmax", "argmin",
           "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1",
           "reduce_l2", "reduce_sum_square", "reduce_log_sum", "reduce_log_sum_exp")

for _name in ROW_OPS:
    REGISTRY[_name].schedule(ROWS.apply, target="cuda", space=ROWS.space)

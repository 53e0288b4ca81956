"""Lower a schedule to a loop-IR PrimFunc.

For every stage, the leaf loops become a loop nest. Root loop indices are rebuilt from the
leaves through the split/fuse relations; a split whose factor does not divide its extent
leaves a guard. A reduction gets an init nest over the spatial loops that follow its first
reduction loop, then the update nest. A stage computed at a loop of another stage gets the
region its consumer needs inside that loop (bounds inference on affine indices).

GPU schedules bind loops to thread axes. A shared-memory stage serves every thread of a block,
so its region also spans the thread loops around it; a reduction loop bound to a thread axis
becomes a per-thread partial result combined across the threads (a ThreadReduce).
"""
from __future__ import annotations

import math
import warnings
from typing import Sequence

from tensorc.errors import ScheduleError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.bounds import (
    SYMBOLIC_MAX, NestInfo, as_index, lattice_step, loop_range, part_of_fused_within,
    relaxed_interval, runs, scaled,
)
from tensorc.ir.expr import (
    Const, Expr, Load, Reduce, Var, all_of, format_expr, substitute, transform,
)
from tensorc.ir.loop import (
    CACHE_LINE, Allocate, Buffer, For, IfThenElse, Prefetch, PrimFunc, Stmt, Store,
    ThreadReduce, flat_index, itemsize, map_stmt, seq, symbolic_dims,
)
from tensorc.ir.schedule import Schedule, Stage, SVar
from tensorc.ir.te import ComputeOp, PlaceholderOp, Tensor, is_static


# a loop's prefetches ask for at most this many cache lines per iteration
PREFETCH_MAX_LINES = 32


class RedundantComputeWarning(UserWarning):
    """A stage computed at a loop needs its whole tensor in every iteration of that loop:
    the schedule recomputes the same values over and over (tests turn this into an error)."""


class _Lowering:
    def __init__(self, sch: Schedule, args: Sequence[Tensor]):
        self.sch = sch
        self.region_extent: dict[int, list[int]] = {}
        self.buffers: dict[int, Buffer] = {}
        self.region_min: dict[int, list[Expr]] = {}
        # a region may be a lattice: min + step * k (absent: step 1 in every dim)
        self.region_step: dict[int, list[int]] = {}
        # GPU schedules (loops bound to thread axes) compact strided regions: a thread's
        # register tile strided over the block keeps only its own elements
        self.compact_strides = any(k.startswith(("blockIdx", "threadIdx"))
                                   for st in sch.stages for k in st.loop_kind.values())
        self.var_ranges: dict[Var, tuple[int, int]] = {}
        # the loops of symbolic extent, with their extents (see part_of_fused_within)
        self.var_extents: dict[Var, Expr] = {}
        # loops bound to a GPU thread axis (threadIdx.*), with their ranges
        self.thread_ranges: dict[Var, tuple[int, int]] = {}
        self.params: list[Buffer] = []
        for t in args:
            b = Buffer(t.name, t.shape, t.dtype)
            self.buffers[id(t)] = b
            self.region_min[id(t)] = [E.const(0)] * len(t.shape)
            self.params.append(b)
        self.attached: dict[tuple[int, SVar], list[Stage]] = {}
        # tensors of stages whose loop has been closed: "stage.loop" they were computed at
        self.out_of_scope: dict[int, str] = {}
        # the Prefetch statements that open a loop (Stage.prefetch)
        self.prefetch_at: dict[SVar, list[Stmt]] = {}
        for st in sch.stages:
            if st.attach == "at":
                self.attached.setdefault((id(st.attach_stage), st.attach_var), []).append(st)

    # ----------------------------------------------------------------------------------------
    def lower_root(self) -> Stmt:
        nests: list[Stmt] = []
        allocs: list[Buffer] = []
        for st in self.sch.stages:
            if not isinstance(st.op, ComputeOp) or st.attach != "root":
                continue
            t = st.tensor
            if st.condition is not None:
                raise ScheduleError(f"{st.name} is computed only where {st.condition.name} "
                                    f"is nonzero, which needs a loop to test it at: compute "
                                    f"it at a loop of its consumer (compute_at)")
            if id(t) not in self.buffers:
                if st.is_output:
                    raise ScheduleError(f"output {st.name} is not among the function's "
                                        f"arguments")
                b = Buffer(st.name, t.shape, t.dtype, st.scope)
                self.buffers[id(t)] = b
                self.region_min[id(t)] = [E.const(0)] * len(t.shape)
                allocs.append(b)
            ranges = {sv: (E.const(0), sv.root_extent) for sv in st.root_vars}
            nests.append(self.lower_stage(st, ranges))
        body = seq(*nests)
        for b in reversed(allocs):
            body = Allocate(b, body)
        return body

    def expand(self, e: Expr) -> Expr:
        """Substitute the bodies of inlined stages for their loads."""
        def fn(x: Expr):
            if isinstance(x, Load) and isinstance(x.source, Tensor):
                st = self.sch.stage_of(x.source)
                if st.attach == "inline":
                    op = st.op
                    mapping = {iv.var: idx for iv, idx in zip(op.axis, x.indices)}
                    return self.expand(substitute(op.body, mapping))
            return None
        return transform(e, fn)

    def through_attached(self, parent: Stage, e: Expr, relaxed: dict) -> Expr:
        """``e`` (``parent``'s body) with the bodies of the stages computed inside
        ``parent`` substituted for their loads (a cache_write's accumulation, whose reads of
        a sibling's tensor are ``parent``'s), their reduction axes over their whole extent
        in ``relaxed``."""
        inside = {id(kid.tensor): kid for (pid, _), kids in self.attached.items()
                  if pid == id(parent) for kid in kids}
        if not inside:
            return e

        def fn(x: Expr):
            if isinstance(x, Load) and isinstance(x.source, Tensor) and id(x.source) in inside:
                op = inside[id(x.source)].op
                body = self.expand(op.body)
                if isinstance(body, Reduce):
                    for iv in body.axes:
                        relaxed[iv.var] = loop_range(iv.extent)
                    body = body.source
                mapping = {iv.var: idx for iv, idx in zip(op.axis, x.indices)}
                return substitute(body, mapping)
            return None
        return transform(e, fn)

    def to_buffer_loads(self, e: Expr) -> Expr:
        def fn(x: Expr):
            if isinstance(x, Load) and isinstance(x.source, Tensor):
                key = id(x.source)
                if key in self.out_of_scope:
                    raise ScheduleError(f"{x.source.name} is computed at "
                                        f"{self.out_of_scope[key]} but is also read outside "
                                        f"that loop; compute it at a loop that encloses all "
                                        f"of its readers, or at the root")
                if key not in self.buffers:
                    kind = "input" if isinstance(x.source.op, PlaceholderOp) else "stage"
                    raise ScheduleError(f"{kind} {x.source.name} is read but is neither an "
                                        f"argument nor realized before its reader")
                return Load(self.buffers[key], self.region_offsets(key, x.indices))
            return None
        return transform(e, fn)

    def region_offsets(self, key: int, indices) -> list[Expr]:
        """Indices of a tensor's elements in its buffer (its region: min + step * offset)."""
        mins = self.region_min[key]
        steps = self.region_step.get(key) or [1] * len(mins)
        out = []
        for i, m, step in zip(indices, mins, steps):
            offset = i - m
            if step != 1:
                offset = E.Binary("floordiv", offset, E.const(step, offset.dtype))
            out.append(arith.simplify(offset, self.var_ranges))
        return out

    # ----------------------------------------------------------------------------------------
    def lower_stage(self, st: Stage, root_ranges: dict[SVar, tuple]) -> Stmt:
        info = NestInfo(st, root_ranges)
        for sv in st.leaf_vars:
            self.var_ranges[sv.var] = loop_range(info.extent[sv])
            if not isinstance(info.extent[sv], int):
                self.var_extents[sv.var] = info.extent[sv]
            if st.loop_kind.get(sv, "").startswith("threadIdx"):
                self.thread_ranges[sv.var] = loop_range(info.extent[sv])
        op: ComputeOp = st.op
        subst = {sv.var: info.root_index[sv] for sv in st.root_vars}
        body = self.expand(op.body)
        body = substitute(body, subst) if not isinstance(body, Reduce) else Reduce(
            body.combiner, substitute(body.source, subst), body.axes, body.init)

        # regions of the stages computed inside this one, before its loads are rewritten
        children: dict[SVar, list[Stage]] = {}
        inner: list[Stage] = []       # the stages computed at loops inside the current one
        for sv in reversed(st.leaf_vars):
            kids = self.attached.get((id(st), sv), [])
            children[sv] = kids
            # consumers come after their producers, and inner loops run inside outer ones:
            # infer the last sibling and the innermost loop's stages first, so that a
            # producer sees the regions of all the stages that read it
            for k in range(len(kids) - 1, -1, -1):
                self.infer_region(kids[k], st, sv, info, body, kids[k + 1:] + inner)
            inner = kids + inner

        buf = self.buffers[id(st.tensor)]
        spatial = [sv for sv in st.root_vars if sv.kind == "spatial"]
        store_idx = tuple(self.region_offsets(id(st.tensor),
                                              [info.root_index[sv] for sv in spatial]))
        spatial_guards = [g for sv, g in info.guards if sv.kind == "spatial"]
        reduce_guards = [g for sv, g in info.guards if sv.kind == "reduce"]
        spatial_guards += self.domain_guards(st, info)

        if isinstance(body, Reduce):
            source = self.to_buffer_loads(body.source)
            current = Load(buf, store_idx)
            update_value = _combine(body.combiner, current, source)
            update = _guarded(all_of(*spatial_guards, *reduce_guards),
                              Store(buf, store_idx, update_value))
            init = _guarded(all_of(*spatial_guards), Store(buf, store_idx, body.init))
        else:
            update = _guarded(all_of(*spatial_guards),
                              Store(buf, store_idx, self.to_buffer_loads(body)))
            init = None

        leaves = st.leaf_vars
        self.prefetch_at.update(self.prefetches(st, info, body))
        first_reduce = next((k for k, sv in enumerate(leaves) if sv.kind == "reduce"),
                            len(leaves))
        if isinstance(body, Reduce) and any(sv.kind == "reduce" and _thread_bound(st, sv)
                                            for sv in leaves):
            return self.lower_cross_thread(st, info, body, buf, store_idx, spatial_guards,
                                           reduce_guards, first_reduce, children)
        # update nest: the loops from the first reduction loop inward
        inner = update
        for sv in reversed(leaves[first_reduce:]):
            inner = self.wrap_loop(st, sv, info, inner, children)
        if init is not None:
            # the init runs over copies of the spatial loops that follow the first
            # reduction loop
            init_nest = init
            copies = {}
            for sv in reversed(leaves[first_reduce:]):
                if sv.kind != "spatial":
                    continue
                v = Var(sv.var.name + ".init")
                copies[sv.var] = v
                self.var_ranges[v] = self.var_ranges[sv.var]
                init_nest = For(v, as_index(info.extent[sv]), st.loop_kind.get(sv, "serial"),
                                init_nest)
            init_nest = _subst_stmt(init_nest, copies)
            inner = seq(init_nest, inner)
        for sv in reversed(leaves[:first_reduce]):
            inner = self.wrap_loop(st, sv, info, inner, children)
        return inner

    def lower_cross_thread(self, st: Stage, info: NestInfo, body: Reduce, buf: Buffer,
                           store_idx: tuple, spatial_guards: list, reduce_guards: list,
                           first_reduce: int, children: dict) -> Stmt:
        """A reduction whose outermost reduction loop is bound to a thread axis: each thread
        accumulates its share in a local partial, a ThreadReduce combines the partials, and
        the result is stored (by the first thread, unless the buffer is per-thread)."""
        leaves = st.leaf_vars
        bound = [sv for sv in leaves if sv.kind == "reduce" and _thread_bound(st, sv)]
        where = f"stage {st.name}"
        if len(bound) != 1 or leaves.index(bound[0]) != first_reduce:
            raise ScheduleError(f"{where}: a cross-thread reduction binds exactly one "
                                f"reduction loop, its outermost one, to a thread axis; got "
                                f"{[sv.name for sv in bound]} of loops {leaves}")
        if any(sv.kind == "spatial" for sv in leaves[first_reduce:]):
            raise ScheduleError(f"{where}: a cross-thread reduction needs every spatial loop "
                                f"outside its reduction loops (reorder {leaves})")
        if any(_thread_bound(st, sv) for sv in leaves[first_reduce + 1:]) or any(
                st.loop_kind.get(sv) == "vectorized" for sv in leaves[first_reduce:]):
            raise ScheduleError(f"{where}: inside the thread-bound reduction loop the "
                                f"reduction loops must be serial or unrolled")
        tloop = bound[0]
        partial = Buffer(f"{st.name}.partial", (1,), buf.dtype, "local")
        current = Load(partial, [E.const(0)])
        source = self.to_buffer_loads(body.source)
        update = _guarded(all_of(*spatial_guards, *reduce_guards),
                          Store(partial, (E.const(0),), _combine(body.combiner, current, source)))
        inner = update
        for sv in reversed(leaves[first_reduce + 1:]):
            inner = self.wrap_loop(st, sv, info, inner, children)
        first_thread = None
        if buf.scope != "local":     # a per-thread buffer: every thread keeps its result
            first_thread = E.Compare("eq", tloop.var, E.const(0))
        result = _guarded(all_of(*spatial_guards, first_thread), Store(buf, store_idx, current))
        combine = ThreadReduce(partial, body.combiner, st.loop_kind[tloop], info.extent[tloop])
        inner = Allocate(partial, seq(Store(partial, (E.const(0),), body.init), inner,
                                      combine, result))
        inner = self.wrap_loop(st, tloop, info, inner, children)
        for sv in reversed(leaves[:first_reduce]):
            inner = self.wrap_loop(st, sv, info, inner, children)
        return inner

    def wrap_loop(self, st: Stage, sv: SVar, info: NestInfo, body: Stmt,
                  children: dict[SVar, list[Stage]]) -> Stmt:
        for child in reversed(children.get(sv, [])):
            body = self.lower_attached(child, body)
        # a stage computed at this loop exists only inside it
        for child in children.get(sv, []):
            del self.buffers[id(child.tensor)]
            self.out_of_scope[id(child.tensor)] = f"{st.name}.{sv.name}"
        body = seq(*self.prefetch_at.pop(sv, []), body)
        return For(sv.var, as_index(info.extent[sv]), st.loop_kind.get(sv, "serial"), body)

    def prefetches(self, st: Stage, info: NestInfo, body: Expr) -> dict[SVar, list[Stmt]]:
        """The Prefetch statements that open each loop of ``st`` (its ``prefetch`` calls):
        the elements of the tensor that the loops inside read ``offset`` iterations on, in
        runs of consecutive elements (a tile's rows of weights, say), each a Prefetch of its
        flat index; at most PREFETCH_MAX_LINES cache lines in all."""
        out: dict[SVar, list[Stmt]] = {}
        for t, sv, offset, along, level in st.prefetches:
            where = f"prefetch {t.name} at {st.name}.{sv.name}"
            if sv not in st.leaf_vars:
                raise ScheduleError(f"{where}: the loop was split or fused after the "
                                    f"prefetch; prefetch at a leaf loop, last")
            loads = _loads_of(body, t)
            if not loads or id(t) not in self.buffers:
                raise ScheduleError(f"{where}: {st.name} does not read {t.name}")
            b = self.buffers[id(t)]
            pos = st.leaf_vars.index(sv)
            relaxed = {v.var: info.extent[v] for v in st.leaf_vars[pos + 1:]}
            if not all(isinstance(n, int) for n in relaxed.values()):
                raise ScheduleError(f"{where}: a loop inside it has a symbolic extent; "
                                    f"prefetch at a loop inside the symbolic ones")
            known = {v: r for v, r in self.var_ranges.items()
                     if v is not sv.var and v not in relaxed}
            counted = along or sv
            ahead = {counted.var: counted.var + offset}
            regions = {}
            for load in loads:
                if along is not None and not any(E.uses_var(i, along.var)
                                                 for i in load.indices):
                    raise ScheduleError(f"{where}: {st.name} reads {t.name} at the same place "
                                        f"in every iteration of {along.name}; prefetch along "
                                        f"a loop that moves the read")
                idx = self.region_offsets(id(t), [substitute(i, ahead) for i in load.indices])
                region = runs(arith.simplify(flat_index(b, idx)), relaxed, known)
                if region is None:
                    raise ScheduleError(f"{where}: the loops inside it do not read {t.name} "
                                        f"at increasing affine offsets")
                base, starts, span = region
                regions[(format_expr(base), starts, span)] = (base, starts, span)
            if len(regions) != 1:
                raise ScheduleError(f"{where}: {st.name} reads {t.name} at {len(regions)} "
                                    f"different places; prefetch one of them by hand")
            base, starts, span = next(iter(regions.values()))
            nbytes = span * itemsize(b.dtype)
            lines = len(starts) * -(-nbytes // CACHE_LINE)
            if lines > PREFETCH_MAX_LINES:
                raise ScheduleError(f"{where}: one iteration reads {lines} cache lines of "
                                    f"{t.name} (at most {PREFETCH_MAX_LINES}); prefetch at "
                                    f"a loop further in")
            out.setdefault(sv, []).extend(Prefetch(b, arith.simplify(base + s), nbytes, level)
                                          for s in starts)
        return out

    def lower_attached(self, child: Stage, rest: Stmt) -> Stmt:
        t = child.tensor
        extents = self.region_extent[id(t)]
        b = self.buffers[id(t)]
        ranges = {}
        spatial = [sv for sv in child.root_vars if sv.kind == "spatial"]
        steps = self.region_step.get(id(t)) or [1] * len(extents)
        for sv, m, n, step in zip(spatial, self.region_min[id(t)], extents, steps):
            ranges[sv] = (m, n, step)
        for sv in child.root_vars:
            if sv.kind == "reduce":
                ranges[sv] = (E.const(0), sv.root_extent)
        nest = self.lower_stage(child, ranges)
        if child.condition is not None:
            nest = IfThenElse(self.condition(child, ranges), nest)
        return Allocate(b, seq(nest, rest))

    def condition(self, child: Stage, ranges: dict[SVar, tuple]) -> Expr:
        """compute_if's test: the flag at the region's (single) leading indices, nonzero."""
        flag = child.condition
        index = []
        for sv in child.op_axis[:len(flag.shape)]:
            if ranges[sv][1] != 1:
                raise ScheduleError(f"{child.name} is computed only where {flag.name} is "
                                    f"nonzero, but its region spans {ranges[sv][1]} "
                                    f"elements of axis {sv.name}; compute it at a loop "
                                    f"inside that axis")
            index.append(ranges[sv][0])
        if id(flag) not in self.buffers:
            raise ScheduleError(f"{child.name} is computed where {flag.name} is nonzero, but "
                                f"{flag.name} is not realized before it")
        value = self.to_buffer_loads(Load(flag, index))
        return E.Compare("ne", value, E.Const(0, flag.dtype))

    def domain_guards(self, st: Stage, info: NestInfo) -> list[Expr]:
        """Guards keeping an attached stage inside its tensor's domain (when its region may
        overhang it)."""
        if st.attach != "at":
            return []
        out = []
        spatial = [sv for sv in st.root_vars if sv.kind == "spatial"]
        for sv, n in zip(spatial, st.tensor.shape):
            if sv.name in st.overcomputed:
                continue
            idx = info.root_index[sv]
            for cond in (E.Compare("ge", idx, E.const(0)), E.Compare("lt", idx, as_index(n))):
                c = arith.simplify(cond, self.var_ranges)
                if not (isinstance(c, Const) and c.value or
                        part_of_fused_within(c, self.var_extents, self.var_ranges)):
                    out.append(c)
        return out

    # ----------------------------------------------------------------------------------------
    def infer_region(self, child: Stage, parent: Stage, at: SVar, info: NestInfo,
                     parent_body: Expr, later_siblings: list[Stage]) -> None:
        """The box of ``child``'s tensor that one iteration of ``parent``'s loop ``at`` reads
        (through ``parent`` itself or a sibling computed at the same loop)."""
        t = child.tensor
        pos = parent.leaf_vars.index(at)
        relaxed = {sv.var: loop_range(info.extent[sv]) for sv in parent.leaf_vars[pos + 1:]}
        if child.scope == "shared":
            # one copy serves every thread of the block: span the thread loops around it
            relaxed.update(self.thread_ranges)
        loads = _loads_of(parent_body, t)
        for sib in later_siblings:
            sib_body = self.through_attached(sib, self.expand(sib.op.body), relaxed)
            sib_loads = _loads_of(sib_body, t)
            if sib.condition is t:        # compute_if's test reads the flag
                sib_loads.append(Load(t, [sv.var for sv in sib.op_axis[:len(t.shape)]]))
            if not sib_loads:
                continue
            # the sibling's root loops run over its whole region inside this loop
            mapping = {}
            spatial = [sv for sv in sib.root_vars if sv.kind == "spatial"]
            steps = self.region_step.get(id(sib.tensor)) or [1] * len(spatial)
            for sv, m, n, step in zip(spatial, self.region_min[id(sib.tensor)],
                                      self.region_extent[id(sib.tensor)], steps):
                v = Var(sv.name + ".r")
                relaxed[v] = loop_range(n)
                mapping[sv.var] = m + scaled(v, step)
            for sv in sib.root_vars:
                if sv.kind == "reduce":
                    relaxed[sv.var] = loop_range(sv.root_extent)
            loads += [Load(t, [substitute(i, mapping) for i in ld.indices])
                      for ld in sib_loads]
        if not loads:
            raise ScheduleError(f"{child.name} is computed at {parent.name}.{at.name} but "
                                f"neither {parent.name} nor a stage computed there reads it")
        mins, extents, steps = [], [], []
        for d, n in enumerate(t.shape):
            box = [relaxed_interval(ld.indices[d], relaxed, self.var_ranges)
                   for ld in loads]
            base_key = {arith.expr_key(b[0]) for b in box if b is not None}
            if any(b is None for b in box) or len(base_key) != 1:
                mins.append(E.const(0))
                extents.append(n)
                steps.append(1)
                continue
            lo = min(b[1] for b in box)
            hi = max(b[2] for b in box)
            if not isinstance(n, int) and hi - lo + 1 > SYMBOLIC_MAX // 2:
                # the region runs with a symbolic loop: the whole symbolic dim
                mins.append(E.const(0))
                extents.append(n)
                steps.append(1)
                continue
            if isinstance(n, int) and hi - lo + 1 >= n:
                mins.append(E.const(0))
                extents.append(n)
                steps.append(1)
                continue
            step = 1
            if self.compact_strides:
                step = lattice_step([ld.indices[d] for ld in loads], [b[1] for b in box],
                                     relaxed, self.var_ranges)
            mins.append(arith.simplify(box[0][0] + lo, self.var_ranges))
            extents.append((hi - lo) // step + 1)
            steps.append(step)
        self.region_min[id(t)] = mins
        self.region_extent[id(t)] = extents
        self.region_step[id(t)] = steps
        # threads of a block share a stage's work: only other loops repeat it
        repeats = math.prod(info.extent[sv] for sv in parent.leaf_vars[:pos + 1]
                            if not parent.loop_kind.get(sv, "").startswith("threadIdx")
                            and isinstance(info.extent[sv], int))
        if repeats > 1 and tuple(extents) == t.shape and is_static(t.shape) and \
                math.prod(t.shape) > 1:
            warnings.warn(RedundantComputeWarning(
                f"{child.name} is computed at {parent.name}.{at.name}, but each of its "
                f"{repeats} iterations needs all of {child.name} {list(t.shape)}: the whole "
                f"tensor is recomputed {repeats} times (bounds inference cannot narrow the "
                f"region through {at.name}); compute it at an outer loop or at the root, or "
                f"split so that the loop indexes it affinely"), stacklevel=2)
        # a stage computed inside another's loop is a temporary of that loop: local unless
        # the schedule chose another scope (shared memory on GPUs)
        scope = "local" if child.scope == "global" else child.scope
        shape = list(extents)
        if scope == "local" and shape and "vectorized" in child.loop_kind.values() and \
                isinstance(shape[-1], int):
            # rows of a power-of-two pitch: an odd-width vector's padding lanes then fall in
            # their own row's padding, so the block needs no masked access (codegen/llvm/memory.py)
            shape[-1] = 1 << (shape[-1] - 1).bit_length()
        self.buffers[id(t)] = Buffer(child.name, tuple(shape), t.dtype, scope)


def _thread_bound(st: Stage, sv: SVar) -> bool:
    return st.loop_kind.get(sv, "").startswith("threadIdx")


def _loads_of(body: Expr, t: Tensor) -> list[Load]:
    root = body.source if isinstance(body, Reduce) else body
    return [x for x in E.walk(root) if isinstance(x, Load) and x.source is t]


def _combine(combiner: str, acc: Expr, value: Expr) -> Expr:
    if combiner == "sum":
        return acc + value
    if combiner == "prod":
        return acc * value
    if combiner == "max_ordered":
        return E.select(E.Compare("gt", acc, value), acc, value)
    return E.Binary(combiner, acc, value)


def _guarded(cond: Expr | None, stmt: Stmt) -> Stmt:
    return stmt if cond is None else IfThenElse(cond, stmt)


def _subst_stmt(stmt: Stmt, mapping: dict[Var, Expr]) -> Stmt:
    def fs(s: Stmt):
        if isinstance(s, For) and s.var in mapping:
            return For(mapping[s.var], s.extent, s.kind, s.body)
        return None
    return map_stmt(stmt, lambda e: substitute(e, mapping), fs)


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "kernel") -> PrimFunc:
    """Lower ``sch`` to a PrimFunc whose parameters are ``args`` (inputs, then outputs).

    The result still has multi-dimensional buffer indices; ``passes.loop.optimize`` simplifies
    and flattens it for codegen."""
    low = _Lowering(sch, args)
    body = low.lower_root()
    return PrimFunc(name, list(low.params), body, dims=symbolic_dims(low.params, body))

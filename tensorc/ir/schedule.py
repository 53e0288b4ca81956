"""Schedules: how a tensor-expression program runs, never what it computes.

A :class:`Schedule` holds one :class:`Stage` per computed tensor. Primitives (split, fuse,
reorder, tile, vectorize, parallel, unroll, bind, compute_inline, compute_at, cache_read,
pack, cache_write, rfactor) rewrite the stages; every call is appended to ``schedule.trace``, a
list of plain records that :func:`tensorc.ir.trace.replay` applies to a fresh schedule of the
same program. :func:`tensorc.ir.lower.lower` turns a schedule into a loop-IR PrimFunc.

>>> s = create_schedule([C]); i, j = s[C].op_axis
>>> io, ii = s[C].split(i, 8); s[C].vectorize(s[C].split(j, 16)[1])
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from tensorc.errors import ScheduleError
from tensorc.ir import expr as E
from tensorc.ir.expr import Expr, Load, Reduce, Var, transform
from tensorc.ir.te import (
    ComputeOp, IterVar, Operation, Tensor, extent_of, post_order,
)


class SVar:
    """A loop of a stage's nest: a root axis of the compute, or one derived by split/fuse."""

    __slots__ = ("name", "kind", "var", "root_extent")

    def __init__(self, name: str, kind: str, var: Var | None = None,
                 root_extent: int | None = None):
        self.name, self.kind = name, kind
        self.var = var if var is not None else Var(name)
        self.root_extent = root_extent   # set for root vars

    def __repr__(self) -> str:
        return self.name


@dataclass(eq=False)
class Split:
    parent: SVar
    outer: SVar
    inner: SVar
    factor: int | None
    nparts: int | None
    # the last block moved back to end at the extent (overlapping the one before it)
    # instead of a guarded partial block
    shift_tail: bool = False


@dataclass(eq=False)
class Fuse:
    outer: SVar
    inner: SVar
    fused: SVar


class Stage:
    """The schedule of one computed tensor."""

    def __init__(self, schedule: Schedule, tensor: Tensor, op: Operation):
        self.schedule, self.tensor, self.op = schedule, tensor, op
        self.attach: str = "root"              # root | inline | at
        self.attach_stage: Stage | None = None
        self.attach_var: SVar | None = None
        self.scope = "global"
        self.is_output = False
        self.condition: Tensor | None = None   # compute_if: computed where it is nonzero
        self.overcomputed: set[str] = set()    # root loops run past the domain unguarded
        self._init_vars()

    def _init_vars(self) -> None:
        self.root_vars: list[SVar] = []
        self.var_of_iter: dict[int, SVar] = {}
        if isinstance(self.op, ComputeOp):
            for iv in [*self.op.axis, *self.op.reduce_axis]:
                sv = SVar(iv.var.name, iv.kind, iv.var, iv.extent)
                self.root_vars.append(sv)
                self.var_of_iter[id(iv)] = sv
        self.leaf_vars: list[SVar] = list(self.root_vars)
        self.relations: list[Split | Fuse] = []
        self.loop_kind: dict[SVar, str] = {}
        # prefetch: (tensor read, loop, iterations ahead, the loop they are counted on (None:
        # the same loop), cache level)
        self.prefetches: list[tuple[Tensor, SVar, int, SVar | None, int]] = []

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def op_axis(self) -> list[SVar]:
        """The stage's spatial root loops, outermost first."""
        return [sv for sv in self.root_vars if sv.kind == "spatial"]

    @property
    def reduce_axis(self) -> list[SVar]:
        return [sv for sv in self.root_vars if sv.kind == "reduce"]

    def var(self, name: str) -> SVar:
        for sv in self._all_vars():
            if sv.name == name:
                return sv
        raise ScheduleError(f"stage {self.name} has no loop named {name!r}")

    def _all_vars(self):
        seen = list(self.root_vars)
        for r in self.relations:
            seen.extend([r.outer, r.inner] if isinstance(r, Split) else [r.fused])
        return seen

    def _fresh_name(self, base: str) -> str:
        names = {sv.name for sv in self._all_vars()}
        name, k = base, 1
        while name in names:
            k += 1
            name = f"{base}{k}"
        return name

    def _leaf(self, sv: SVar | str) -> SVar:
        if isinstance(sv, str):
            sv = self.var(sv)
        elif isinstance(sv, IterVar):
            if id(sv) not in self.var_of_iter:
                raise ScheduleError(f"axis {sv.name} is not an axis of stage {self.name}")
            sv = self.var_of_iter[id(sv)]
        if sv not in self._all_vars():
            raise ScheduleError(f"loop {sv.name} is not a loop of stage {self.name}")
        if sv not in self.leaf_vars:
            raise ScheduleError(f"loop {sv.name} of stage {self.name} is not a leaf loop "
                                f"(it was split or fused already)")
        return sv

    def _record(self, prim: str, **args) -> None:
        self.schedule.trace.append({"prim": prim, "stage": self.name, **args})

    # primitives -------------------------------------------------------------------------------
    def split(self, var, factor: int | None = None, nparts: int | None = None,
              shift_tail: bool = False) -> tuple[SVar, SVar]:
        """Split ``var`` into ``outer * factor + inner``; a factor that does not divide the
        extent leaves a guard, or with ``shift_tail`` the last block starts ``factor`` before
        the end (``min(outer * factor, extent - factor) + inner``): whole blocks only, some
        elements computed twice. Only for stages whose recomputation writes the same values
        (no in-place update) and whose outer loop is not parallel."""
        sv = self._leaf(var)
        if (factor is None) == (nparts is None):
            raise ScheduleError("split takes exactly one of factor= and nparts=")
        amount = factor if factor is not None else nparts
        if amount < 1:
            raise ScheduleError(f"split {'factor' if factor is not None else 'nparts'} must be "
                                f">= 1, got {amount}")
        if shift_tail and (factor is None or sv.kind != "spatial"):
            raise ScheduleError("shift_tail splits a spatial loop by a factor")
        self._record("split", var=sv.name, factor=factor, nparts=nparts,
                     **({"shift_tail": True} if shift_tail else {}))
        outer = SVar(self._fresh_name(f"{sv.name}.o"), sv.kind)
        inner = SVar(self._fresh_name(f"{sv.name}.i"), sv.kind)
        self.relations.append(Split(sv, outer, inner, factor, nparts, shift_tail))
        pos = self.leaf_vars.index(sv)
        self.leaf_vars[pos:pos + 1] = [outer, inner]
        return outer, inner

    def fuse(self, *vars) -> SVar:
        """Fuse consecutive leaf loops into one."""
        svs = [self._leaf(v) for v in vars]
        if len(svs) < 2:
            return svs[0]
        pos = [self.leaf_vars.index(s) for s in svs]
        if pos != list(range(pos[0], pos[0] + len(svs))):
            raise ScheduleError(f"fuse needs consecutive loops, got "
                                f"{[s.name for s in svs]} of {self.leaf_vars}")
        if len({s.kind for s in svs}) != 1:
            raise ScheduleError("cannot fuse a spatial loop with a reduction loop")
        self._record("fuse", vars=[s.name for s in svs])
        fused = svs[0]
        for nxt in svs[1:]:
            f = SVar(self._fresh_name(f"{fused.name}_{nxt.name}"), fused.kind)
            self.relations.append(Fuse(fused, nxt, f))
            i = self.leaf_vars.index(fused)
            self.leaf_vars[i:i + 2] = [f]
            fused = f
        return fused

    def reorder(self, *vars) -> None:
        """Put the given leaf loops in this order (the other loops keep their places)."""
        svs = [self._leaf(v) for v in vars]
        if len(set(svs)) != len(svs):
            raise ScheduleError("reorder got the same loop twice")
        self._record("reorder", vars=[s.name for s in svs])
        positions = sorted(self.leaf_vars.index(s) for s in svs)
        for p, s in zip(positions, svs):
            self.leaf_vars[p] = s

    def tile(self, x, y, x_factor: int, y_factor: int) -> tuple[SVar, SVar, SVar, SVar]:
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def _annotate(self, prim: str, var, kind: str) -> None:
        sv = self._leaf(var)
        self._record(prim, var=sv.name)
        self.loop_kind[sv] = kind

    def vectorize(self, var) -> None:
        self._annotate("vectorize", var, "vectorized")

    def parallel(self, var) -> None:
        sv = self._leaf(var)
        if sv.kind == "reduce":
            raise ScheduleError(f"cannot run reduction loop {sv.name} in parallel")
        if any(isinstance(r, Split) and r.shift_tail and r.outer is sv for r in self.relations):
            raise ScheduleError(f"cannot run loop {sv.name} in parallel: its last block "
                                f"overlaps the one before it (a shift_tail split)")
        self._annotate("parallel", var, "parallel")

    def unroll(self, var) -> None:
        self._annotate("unroll", var, "unrolled")

    def overcompute(self, var) -> None:
        """Let this attached local stage run its whole region along root loop ``var``, no
        guard where it overhangs the domain (values computed, never read): for a register
        tile whose reads along ``var`` stay in buffers sized to the region (its patches)."""
        sv = next((r for r in self.root_vars if r.name == getattr(var, "name", var)), None)
        if sv is None or sv.kind != "spatial" or self.scope != "local":
            raise ScheduleError(f"overcompute: no spatial root loop {var!r} of local {self}")
        self._record("overcompute", var=sv.name)
        self.overcomputed.add(sv.name)

    def prefetch(self, tensor: Tensor, var, offset: int, along: tuple[Stage, object] | None =
                 None, level: int = 1) -> None:
        """At the top of each iteration of loop ``var``, ask the cache for what the loops
        inside it will read of ``tensor`` ``offset`` iterations later (TVM's prefetch).
        ``along``: (stage, loop), a loop of the stage this one is computed at, that encloses
        ``var``: ask for what ``var``'s iteration will read ``offset`` iterations of that loop
        later instead (a GEMM's next B panel while the tiles of this one run). ``level``: the
        cache level the lines are brought into (1: L1 and the levels below it; 2: L2).

        >>> s[c_local].prefetch(b_packed, k, 4)   # B's row k + 4 while row k is multiplied
        >>> s[c_local].prefetch(b_packed, k, 1, along=(s[c], panel), level=2)
        """
        sv = self._leaf(var)
        if offset < 1:
            raise ScheduleError(f"prefetch {tensor.name} at {sv.name}: the offset must be "
                                f"at least one iteration ahead, not {offset}")
        if level not in (1, 2):
            raise ScheduleError(f"prefetch {tensor.name} at {sv.name}: level {level} is not "
                                f"a cache level a prefetch can fill (1 or 2)")
        args = {"tensor": tensor.op.name, "var": sv.name, "offset": int(offset)}
        outer = None
        if along is not None:
            stage, loop = along
            outer = stage._leaf(loop)
            args.update(along_stage=stage.name, along_var=outer.name)
        if level != 1:
            args["level"] = level
        self._record("prefetch", **args)
        self.prefetches.append((tensor, sv, int(offset), outer, level))

    def bind(self, var, thread_axis: str) -> None:
        sv = self._leaf(var)
        self._record("bind", var=sv.name, thread_axis=thread_axis)
        self.loop_kind[sv] = thread_axis

    def compute_inline(self) -> None:
        if not isinstance(self.op, ComputeOp) or self.op.reduce_axis:
            raise ScheduleError(f"cannot inline {self.name}: only reduction-free computes "
                                f"can be inlined")
        if self.is_output:
            raise ScheduleError(f"cannot inline {self.name}: it is an output")
        self._record("compute_inline")
        self.attach, self.attach_stage, self.attach_var = "inline", None, None

    def compute_at(self, parent: Stage, var) -> None:
        sv = parent._leaf(var)
        if self.is_output:
            raise ScheduleError(f"cannot compute output {self.name} at another stage")
        self._record("compute_at", parent=parent.name, var=sv.name)
        self.attach, self.attach_stage, self.attach_var = "at", parent, sv

    def compute_if(self, flag: Tensor) -> None:
        """Compute this stage only where ``flag`` is nonzero: ``flag``'s k dims index this
        stage's k leading axes, which must be single elements in the region the stage is
        computed for at its ``compute_at`` loop (one channel's plane, say), and ``flag``
        must be computed before it. Elsewhere the stage's buffer is left unwritten, so its
        readers must not use it there (they select another value where ``flag`` is zero);
        Halide's ``specialize``, narrowed to one stage.

        >>> s[exact].compute_at(s[out], plane)
        >>> s[exact].compute_if(has_nan)       # has_nan[n, c]: this plane needs the slow path
        """
        if len(flag.shape) > len(self.op_axis):
            raise ScheduleError(f"compute_if: flag {flag.name} has {len(flag.shape)} dims, "
                                f"more than the {len(self.op_axis)} axes of {self.name}")
        self._record("compute_if", flag=flag.op.name)
        self.condition = flag

    def compute_root(self) -> None:
        self._record("compute_root")
        self.attach, self.attach_stage, self.attach_var = "root", None, None

    def __repr__(self) -> str:
        return f"Stage({self.name}, leaves={self.leaf_vars})"


class Schedule:
    def __init__(self, outputs: Sequence[Tensor]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self._stage_of: dict[int, Stage] = {}
        self.trace: list[dict] = []
        for t in post_order(self.outputs):
            self._add_stage(t, t.op)
        for t in self.outputs:
            self[t].is_output = True

    def _add_stage(self, tensor: Tensor, op: Operation, before: Stage | None = None) -> Stage:
        stage = Stage(self, tensor, op)
        if before is None:
            self.stages.append(stage)
        else:
            self.stages.insert(self.stages.index(before), stage)
        self._stage_of[id(tensor)] = stage
        return stage

    def __getitem__(self, key: Tensor | str) -> Stage:
        if isinstance(key, str):
            for s in self.stages:
                if s.name == key:
                    return s
            raise ScheduleError(f"schedule has no stage named {key!r}")
        return self._stage_of[id(key)]

    def stage_of(self, tensor: Tensor) -> Stage:
        return self._stage_of[id(tensor)]

    @property
    def compute_stages(self) -> list[Stage]:
        return [s for s in self.stages if isinstance(s.op, ComputeOp)]

    def _unique(self, base: str) -> str:
        names = {s.name for s in self.stages}
        name, k = base, 1
        while name in names:
            k += 1
            name = f"{base}{k}"
        return name

    def cache_write(self, tensor: Tensor, scope: str = "local") -> Tensor:
        """Compute ``tensor`` into a new ``scope`` buffer; ``tensor``'s stage becomes a copy
        out of it. Returns the cache tensor (schedule it with ``compute_at``)."""
        stage = self[tensor]
        if stage.relations or stage.loop_kind:
            raise ScheduleError(f"cache_write on {stage.name} must come before its loops are "
                                f"split, fused or annotated")
        op = stage.op
        if not isinstance(op, ComputeOp):
            raise ScheduleError(f"cannot cache_write input {stage.name}")
        self.trace.append({"prim": "cache_write", "stage": stage.name, "scope": scope})
        new_axis = [IterVar(Var(iv.var.name), iv.extent) for iv in op.axis]
        mapping = {iv.var: nv.var for iv, nv in zip(op.axis, new_axis)}
        body = transform(op.body, lambda e: mapping.get(e) if isinstance(e, Var) else None)
        cache_op = ComputeOp(self._unique(f"{op.name}.{scope}"), new_axis, body, op.tag)
        cache = Tensor(cache_op, tensor.shape, tensor.dtype)
        cache_stage = self._add_stage(cache, cache_op, before=stage)
        cache_stage.scope = scope
        copy_op = ComputeOp(op.name, op.axis, Load(cache, [iv.var for iv in op.axis]), op.tag)
        stage.op = copy_op
        stage._init_vars()
        return cache

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor]) -> Tensor:
        """Copy ``tensor`` into a new ``scope`` buffer that ``readers`` read instead."""
        self.trace.append({"prim": "cache_read", "stage": tensor.name, "scope": scope,
                           "readers": [r.name for r in readers]})
        shape = tensor.shape
        axis = [IterVar(Var(f"ax{d}"), n) for d, n in enumerate(shape)]
        op = ComputeOp(self._unique(f"{tensor.name}.{scope}"), axis,
                       Load(tensor, [a.var for a in axis]))
        cache = Tensor(op, shape, tensor.dtype)
        reader_stages = [self[r] for r in readers]
        first = min(reader_stages, key=self.stages.index)
        cache_stage = self._add_stage(cache, op, before=first)
        cache_stage.scope = scope
        for rs in reader_stages:
            rop = rs.op
            new_body = transform(rop.body, lambda e: Load(cache, e.indices)
                                 if isinstance(e, Load) and e.source is tensor else None)
            rs.op = ComputeOp(rop.name, rop.axis, new_body, rop.tag)
        return cache

    def pack(self, tensor: Tensor, scope: str, readers: Sequence[Tensor], axis: int,
             factor: int) -> Tensor:
        """Like :meth:`cache_read`, but the copy is laid out in blocks: ``axis`` is split by
        ``factor``, the block index goes first and the index within the block last, so that a
        reader walking the other axes with the block's elements side by side reads one
        contiguous stream (a GEMM's A panel: ``A[M, K]`` -> ``P[ceil(M/mr), K, mr]``).
        Rows past the end of ``axis`` repeat its last element.

        >>> p = s.pack(A, "local", [C], axis=0, factor=6)   # p[io, k, ii] = A[io*6 + ii, k]
        """
        if factor < 1:
            raise ScheduleError(f"pack factor must be >= 1, got {factor}")
        shape = tensor.shape
        axis %= len(shape)
        self.trace.append({"prim": "pack", "stage": tensor.name, "scope": scope,
                           "readers": [r.name for r in readers], "axis": axis,
                           "factor": factor})
        n = shape[axis]
        others = [d for d in range(len(shape)) if d != axis]
        packed_shape = (-(-n // factor), *(shape[d] for d in others), factor)
        ivs = [IterVar(Var(f"ax{d}"), e) for d, e in enumerate(packed_shape)]
        index: list[Expr] = [E.const(0)] * len(shape)
        flat = ivs[0].var * factor + ivs[-1].var
        index[axis] = flat if packed_shape[0] * factor == n else E.minimum(flat, n - 1)
        for q, d in enumerate(others):
            index[d] = ivs[1 + q].var
        op = ComputeOp(self._unique(f"{tensor.name}.{scope}"), ivs, Load(tensor, index))
        cache = Tensor(op, packed_shape, tensor.dtype)
        reader_stages = [self[r] for r in readers]
        first = min(reader_stages, key=self.stages.index)
        cache_stage = self._add_stage(cache, op, before=first)
        cache_stage.scope = scope

        def packed_load(e: Expr):
            if isinstance(e, Load) and e.source is tensor:
                i = e.indices[axis]
                return Load(cache, [i // factor, *(e.indices[d] for d in others), i % factor])
            return None
        for rs in reader_stages:
            rop = rs.op
            rs.op = ComputeOp(rop.name, rop.axis, transform(rop.body, packed_load), rop.tag)
        return cache

    def rfactor(self, tensor: Tensor, factor: int, blocked: bool = False,
                lane_first: bool = False) -> Tensor:
        """Split ``tensor``'s reduction into ``factor`` interleaved partial reductions.

        ``blocked=True`` splits it into consecutive blocks of ``factor`` instead: RF's new
        axis is the block (extent ceil(K / factor)), ``RF[..., b] = reduce(x[k = b * factor
        + j] for j)``, a GEMM's k blocks (kc) whose partial sums are added to the output one
        block at a time.

        With the reduction axes flattened to ``k`` (extent K), a new stage
        ``RF[..., j] = reduce(x[k = ko * factor + j] for ko)`` holds ``factor`` independent
        partials and ``tensor`` becomes ``reduce(RF[..., j] for j)``. RF's ``j`` loop is a
        spatial loop, so it can be vectorized: a row reduction in vector registers. Where
        ``factor`` does not divide K, the overhanging ``k`` contribute the reduction's initial
        value (their loads are clamped in bounds). Returns RF (schedule it with compute_at).

        ``lane_first`` puts RF's new axis first instead of last (``RF[j, ...]``): a buffer of
        RF then holds each partial's row contiguously (whole vectors along the last axis).

        >>> rf = s.rfactor(row_sum, 16)     # row_sum[i] = sum(rf[i, j] for j in range(16))
        """
        stage, op = self._unscheduled_reduction(tensor, "rfactor")
        if factor < 2:
            raise ScheduleError(f"rfactor factor must be >= 2, got {factor}")
        record = {"prim": "rfactor", "stage": stage.name, "factor": factor}
        if blocked:
            record["blocked"] = True
        if lane_first:
            record["lane_first"] = True
        self.trace.append(record)
        body: Reduce = op.body
        extents = [iv.extent for iv in op.reduce_axis]
        if not all(isinstance(n, int) for n in extents):
            return self._rfactor_symbolic(stage, tensor, op, factor, blocked, lane_first)
        total = 1
        for n in extents:
            total *= n
        outer_extent = -(-total // factor)
        axis = [IterVar(Var(iv.var.name), iv.extent) for iv in op.axis]
        if blocked:
            lane = IterVar(Var("rf.j"), outer_extent)
            outer = IterVar(Var("rf.k"), factor, "reduce")
            k = lane.var * factor + outer.var
        else:
            lane = IterVar(Var("rf.j"), factor)
            outer = IterVar(Var("rf.k"), outer_extent, "reduce")
            k = outer.var * factor + lane.var
        exact = outer_extent * factor == total
        flat = k if exact else E.minimum(k, total - 1)
        mapping: dict[Var, Expr] = {iv.var: nv.var for iv, nv in zip(op.axis, axis)}
        # k row-major over the reduction axes: r_i = (k // stride_i) % n_i
        stride = total
        for iv, n in zip(op.reduce_axis, extents):
            stride //= n
            index = flat // stride if stride > 1 else flat
            mapping[iv.var] = index % n if n * stride < total else index
        source = E.substitute(body.source, mapping)
        if not exact:
            source = E.select(E.Compare("lt", k, E.const(total)), source, body.init)
        rf_op = ComputeOp(self._unique(f"{op.name}.rf"),
                          [lane, *axis] if lane_first else [*axis, lane],
                          Reduce(body.combiner, source, [outer], body.init), op.tag)
        return self._add_partials(stage, tensor, rf_op, lane)


    def _rfactor_symbolic(self, stage: Stage, tensor: Tensor, op: ComputeOp, factor: int,
                          blocked: bool, lane_first: bool) -> Tensor:
        """rfactor over reduction axes of symbolic extent: the same partials, their count
        rounded up at run time, every overhanging ``k`` guarded (never assumed whole)."""
        body: Reduce = op.body
        extents = [iv.extent for iv in op.reduce_axis]
        total = extent_of(math.prod(extents))
        outer_extent = extent_of((total + (factor - 1)) // factor)
        axis = [IterVar(Var(iv.var.name), iv.extent) for iv in op.axis]
        if blocked:
            lane = IterVar(Var("rf.j"), outer_extent)
            outer = IterVar(Var("rf.k"), factor, "reduce")
            k = lane.var * factor + outer.var
        else:
            lane = IterVar(Var("rf.j"), factor)
            outer = IterVar(Var("rf.k"), outer_extent, "reduce")
            k = outer.var * factor + lane.var
        flat = E.minimum(k, E.as_expr(total - 1))
        mapping: dict[Var, Expr] = {iv.var: nv.var for iv, nv in zip(op.axis, axis)}
        # k row-major over the reduction axes: r_i = (k // stride_i) % n_i
        for pos, (iv, n) in enumerate(zip(op.reduce_axis, extents)):
            stride = extent_of(math.prod(extents[pos + 1:]))
            index = flat // E.as_expr(stride) if not (isinstance(stride, int) and
                                                      stride == 1) else flat
            mapping[iv.var] = index % E.as_expr(n) if pos > 0 else index
        source = E.select(E.Compare("lt", k, E.as_expr(total)),
                          E.substitute(body.source, mapping), body.init)
        rf_op = ComputeOp(self._unique(f"{op.name}.rf"),
                          [lane, *axis] if lane_first else [*axis, lane],
                          Reduce(body.combiner, source, [outer], body.init), op.tag)
        return self._add_partials(stage, tensor, rf_op, lane)

    def rfactor_axis(self, tensor: Tensor, axis: IterVar) -> Tensor:
        """Split one of ``tensor``'s reduction axes off as a new stage's spatial axis:
        ``RF[..., a] = reduce(x over the other reduction axes)`` and ``tensor`` becomes
        ``reduce(RF[..., a] for a)``. Unlike ``rfactor`` nothing is flattened: RF keeps the
        other axes as they are (a conv's kernel taps and channels inside a block), so they
        can be reordered, and the split-off axis (a conv's input channel blocks) can be
        placed outside ``tensor``'s spatial loops, its partial sums added one ``a`` at a
        time. Returns RF (schedule it with compute_at).

        >>> rf = s.rfactor_axis(conv, conv.op.reduce_axis[0])    # channel blocks outside
        """
        stage, op = self._unscheduled_reduction(tensor, "rfactor_axis")
        if axis not in op.reduce_axis or len(op.reduce_axis) < 2:
            raise ScheduleError(f"rfactor_axis: {axis.var.name} is not one of {stage.name}'s "
                                f"several reduction axes")
        self.trace.append({"prim": "rfactor_axis", "stage": stage.name,
                           "axis": op.reduce_axis.index(axis)})
        body: Reduce = op.body
        spatial = [IterVar(Var(iv.var.name), iv.extent) for iv in op.axis]
        lane = IterVar(Var(axis.var.name), axis.extent)
        rest = [iv for iv in op.reduce_axis if iv is not axis]
        inner = [IterVar(Var(iv.var.name), iv.extent, "reduce") for iv in rest]
        mapping: dict[Var, Expr] = {iv.var: nv.var for iv, nv in zip(op.axis, spatial)}
        mapping[axis.var] = lane.var
        mapping.update({iv.var: nv.var for iv, nv in zip(rest, inner)})
        rf_op = ComputeOp(self._unique(f"{op.name}.rf"), [*spatial, lane],
                          Reduce(body.combiner, E.substitute(body.source, mapping), inner,
                                 body.init), op.tag)
        return self._add_partials(stage, tensor, rf_op, lane)

    def _unscheduled_reduction(self, tensor: Tensor, prim: str) -> tuple[Stage, ComputeOp]:
        """``tensor``'s stage and op, which ``prim`` (an rfactor) may rewrite: a reduction
        whose loops are not yet split, fused or annotated."""
        stage = self[tensor]
        op = stage.op
        if not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce):
            raise ScheduleError(f"{prim} needs a reduction, and {stage.name} is none")
        if stage.relations or stage.loop_kind:
            raise ScheduleError(f"{prim} on {stage.name} must come before its loops are "
                                f"split, fused or annotated")
        return stage, op

    def _add_partials(self, stage: Stage, tensor: Tensor, rf_op: ComputeOp, lane: IterVar
                      ) -> Tensor:
        """RF (``rf_op``: ``tensor``'s axes and then ``lane``, or ``lane`` first) as a new
        stage before ``stage``, which becomes the reduction of RF over ``lane``. Returns
        RF."""
        op = stage.op
        body: Reduce = op.body
        lane_first = rf_op.axis[0] is lane
        shape = (lane.extent, *tensor.shape) if lane_first else (*tensor.shape, lane.extent)
        rf = Tensor(rf_op, shape, body.dtype)
        self._add_stage(rf, rf_op, before=stage)
        final = IterVar(Var(lane.var.name), lane.extent, "reduce")
        axes = [iv.var for iv in op.axis]
        index = [final.var, *axes] if lane_first else [*axes, final.var]
        stage.op = ComputeOp(op.name, op.axis, Reduce(
            body.combiner, Load(rf, index), [final], body.init), op.tag)
        stage._init_vars()
        return rf


def create_schedule(outputs: Tensor | Sequence[Tensor]) -> Schedule:
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    return Schedule(outputs)


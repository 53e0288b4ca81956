"""Vector loops: a vectorized loop's body as straight-line vector code, its guards run on all
lanes, masked (predicated) or lane by lane, and the lane masks each memory access needs.

:class:`VectorLoops` holds the state of the vector loop being emitted (its variable, its
lanes, the mask of the lanes that run) for the code generator ``gen`` (codegen.py); the loads
and stores themselves are ``gen.memory``'s (memory.py).
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen.llvm.ir_types import I1, I32, I64, constant
from tensorc.codegen.llvm.part import CodegenPart
from tensorc.codegen.llvm.values import ICMP, is_signed
from tensorc.codegen.llvm.vector_index import multiple_of
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, For, IfThenElse, Seq, Stmt, Store
from tensorc.passes.loop.allocations import slack_lanes
from tensorc.passes.loop.vector_loops import pow2_at_least

# integer ops that trap on some operands (masked-off lanes compute on garbage)
_TRAPPING = ("div", "floordiv", "floormod", "truncdiv", "truncmod")


def _may_trap(e: E.Expr) -> bool:
    """An integer division whose divisor may be 0 in a masked-off lane (by a nonzero
    constant, as a batch x heads loop's head index is split back, it never traps)."""
    if not (isinstance(e, E.Binary) and e.op in _TRAPPING and not E.is_float(e.dtype)):
        return False
    return not (isinstance(e.b, E.Const) and e.b.value != 0)


class VectorLoops(CodegenPart):
    """The vector loop being emitted: ``var`` is bound to a vector of ``lanes`` lane ids, of
    which ``active_lanes`` run; ``lane_mask`` says which lanes run (a vector of i1, None for
    all) and ``tail_mask_only`` whether that mask only drops the padding lanes of an odd-width
    loop. Register tiles (tiles.py) set the same state for their vectors."""

    def __init__(self, gen):
        super().__init__(gen)
        self.var: E.Var | None = None
        self.lanes = self.active_lanes = 0
        self.lane_ids: list[int] = []
        self.lane_mask: ir.Value | None = None
        self.tail_mask_only = True


    def bind(self, var: E.Var, lanes: int, active_lanes: int) -> None:
        """Make ``var`` the vector variable, over ``lanes`` lanes of which the first
        ``active_lanes`` run."""
        self.var, self.lanes, self.active_lanes = var, lanes, active_lanes
        self.set_lanes(list(range(lanes)))

    def vector_loop(self, s: For, lanes: int) -> bool:
        """Emit ``s`` as straight-line vector code on the ``vector_width`` lanes that
        passes/loop/vector_loops.py gave it (the lanes past ``lanes`` masked off); False
        where it has none (then the caller emits a scalar loop)."""
        width = s.annotations.get("vector_width")
        if width is None:
            return False
        self.bind(s.var, width, lanes)
        self.fs.ranges[s.var] = (0, width - 1)
        saved_mask = self.lane_mask
        self.lane_mask = None if width == lanes else constant(
            ir.VectorType(I1, width), [int(k < lanes) for k in range(width)])
        self.tail_mask_only = True
        self.vector_stmt(s.body, s)
        self.lane_mask = saved_mask
        del self.fs.env[s.var]
        return True

    def set_lanes(self, lane_ids: list[int]) -> None:
        """Bind the vector variable to the values ``lane_ids`` (one per vector element)."""
        self.lane_ids = lane_ids
        self.fs.env[self.var] = constant(ir.VectorType(I64, len(lane_ids)), lane_ids)

    def vector_stmt(self, st: Stmt, loop: For) -> None:
        if isinstance(st, Seq):
            for c in st.stmts:
                self.vector_stmt(c, loop)
        elif isinstance(st, Store):
            self.gen.memory.store(st, self.lanes)
        elif isinstance(st, IfThenElse):
            if not self.gen.facts.uses_var(st.cond, loop.var):
                with self.b.if_then(self.gen.expr(st.cond)):
                    self.vector_stmt(st.then_case, loop)
                return
            if self._if_converts(st):
                self._under_mask(st, loop, self._guard_mask(st))
                return
            # An affine condition holds on all lanes iff it holds on the first and last:
            # then the body runs as plain vector code. Otherwise (a row's tail) it runs
            # predicated: global loads and stores masked to the lanes where the condition
            # holds, so masked-off lanes never touch memory.
            env = self.fs.env
            vec = env[loop.var]
            env[loop.var] = constant(I64, 0)
            first = self.gen.expr(st.cond)
            env[loop.var] = constant(I64, self.active_lanes - 1)
            last = self.gen.expr(st.cond)
            env[loop.var] = vec
            all_lanes = self.b.and_(first, last)
            with self.b.if_else(all_lanes) as (then, otherwise):
                with then:
                    self.vector_stmt(st.then_case, loop)
                with otherwise:
                    if not st.annotations.get("lane_by_lane"):
                        self._predicated(st, loop)
                    else:
                        del env[loop.var]
                        self.gen.serial_loop(loop.var, constant(I64, self.active_lanes),
                                             lambda: self.gen.stmt(st))
                        env[loop.var] = vec

    def _predicated(self, st: IfThenElse, loop: For) -> None:
        mask = self._guard_mask(st)
        any_lane = self.b.call(self.gen.declare(f"llvm.vector.reduce.or.v{self.lanes}i1", I1,
                                                [mask.type]), [mask])
        with self.b.if_then(any_lane):
            self._under_mask(st, loop, mask)

    def _guard_mask(self, st: IfThenElse) -> ir.Value:
        mask = self.gen.values.broadcast(self.gen.expr(st.cond, self.lanes), self.lanes)
        if self.lane_mask is not None:
            mask = self.b.and_(mask, self.lane_mask)
        return mask

    def _under_mask(self, st: IfThenElse, loop: For, mask: ir.Value) -> None:
        """``st``'s body on the lanes of ``mask``: loads of global buffers masked, stores
        masked (into a local block: a select of the new and old lanes)."""
        saved, self.lane_mask = self.lane_mask, mask
        saved_tail, self.tail_mask_only = self.tail_mask_only, False
        self.vector_stmt(st.then_case, loop)
        self.lane_mask, self.tail_mask_only = saved, saved_tail

    def _if_converts(self, st: IfThenElse) -> bool:
        """Whether a lane-dependent guard over a symbolic bound runs as straight-line code
        under its mask, with no branch: its body only stores whole vectors into local blocks
        (a register tile's last, partial column panel, accumulated at every step of k).
        Branching at every step on whether all lanes or any lane hold kept the tile's
        accumulators in memory (QK^T over a decode step's cache of 10: 3x static).
        Masked-off lanes compute garbage that no store keeps; integer division, which
        could trap on it, keeps the branches. Static kernels have no such guard."""
        dims = self.gen.kernel_dims
        if st.else_case is not None or st.annotations.get("lane_by_lane") or not dims or \
                self.lanes != pow2_at_least(self.lanes) or \
                not set(self.gen.facts.free_vars(st.cond)) & dims:
            return False
        stores = st.then_case.stmts if isinstance(st.then_case, Seq) else [st.then_case]
        return all(isinstance(s, Store) and len(s.indices) == 1 and
                   self.local_vector(s.buffer, s.indices[0], self.lanes) and
                   not any(_may_trap(e) for e in E.walk(s.value))
                   for s in stores)

    def masked(self, buf: Buffer, index: E.Expr | None = None, store: bool = False
                ) -> ir.Value | None:
        """The lane mask that an access of ``buf`` at ``index`` needs. Local blocks need
        none where every lane stays inside the allocation (they are padded for this): a load
        in masked-off lanes then reads harmless garbage, and a store of an odd-width vector
        at the start of a row whose pitch is the vector's width (lowering pads rows so) puts
        its padding lanes in that row's own padding, never on another element. So LLVM keeps
        accumulators in registers."""
        if buf.scope != "local" or index is None:
            return self.lane_mask
        if buf in self.fs.row_slack and self._in_row(buf, index):
            # a row block's vectors stay in the block: loads need no mask; a store keeps
            # its mask, which a local store applies as a select of the new and old lanes
            return self.lane_mask if store else None
        stride = 0
        if self.lane_mask is not None or not store:
            lin = self.gen.facts.linear_coeff(index, self.var)
            if lin is None:
                return self.lane_mask
            base, stride = lin
        if self.lane_mask is None:
            return None
        lo, hi = arith.const_bounds(base, self.fs.ranges)
        if lo is None or hi is None or lo < 0 or stride < 0 or \
                hi + stride * (self.lanes - 1) >= self.fs.allocated.get(buf, buf.size):
            return self.lane_mask
        if not store:
            return None
        if self.tail_mask_only and stride == 1:
            pitch = buf.shape[-1] if buf.shape else 1
            if (pitch == self.lanes and multiple_of(base, pitch)) or \
                    lo + self.active_lanes >= buf.size:
                return None
        return self.lane_mask

    def local_vector(self, buf: Buffer, index: E.Expr | None, lanes: int) -> bool:
        """Whether a vector access of ``buf`` at ``index`` is a contiguous run of ``lanes``
        elements inside a local buffer's allocation."""
        if index is None or buf.scope != "local":
            return False
        lin = self.gen.facts.linear_coeff(index, self.var)
        return lin is not None and lin[1] == 1 and self.in_allocation(buf, lin[0], lanes)

    def in_allocation(self, buf: Buffer, base: E.Expr, span: int) -> bool:
        """Whether ``buf[base : base + span]`` lies inside ``buf``'s allocation (local
        buffers only: parameters' extents are not known to be padded)."""
        if buf.scope != "local":
            return False
        if buf in self.fs.row_slack:
            return span <= slack_lanes(buf.dtype)
        lo, hi = arith.const_bounds(base, self.fs.ranges)
        return lo is not None and hi is not None and lo >= 0 and \
            hi + span <= self.fs.allocated.get(buf, buf.size)

    def _in_row(self, buf: Buffer, index: E.Expr) -> bool:
        """Whether a vector access of a row block at ``index`` is a contiguous run within
        the block's slack past the row: the row's loops split by whole vectors put every
        vector's first lane inside the row."""
        lin = self.gen.facts.linear_coeff(index, self.var)
        return lin is not None and lin[1] == 1 and self.lanes <= slack_lanes(buf.dtype)

    def lane_compare(self, e: E.Compare, lanes: int) -> ir.Value | None:
        """An integer comparison affine in the vector variable, ``base + s*k OP 0`` for lanes
        k: compare the constant lane vector ``s*k`` with ``-base`` in 32-bit lanes (one
        instruction) instead of building 64-bit index vectors."""
        lin = self.gen.facts.linear_coeff(e.a - e.b, self.var)
        if lin is None or not is_signed(e.a.dtype) or abs(lin[1]) * lanes >= 1 << 30:
            return None
        base, stride = lin
        b = self.b
        cast = self.gen.values.cast
        neg = cast(b.sub(constant(I64, 0), cast(self.gen.expr(base, None), e.a.dtype, "int64")),
                   "int64", "int64")
        # saturate -base into int32: the lane offsets are small, so the comparison is exact
        lo, hi = constant(I64, -(1 << 31)), constant(I64, (1 << 31) - 1)
        neg = b.select(b.icmp_signed("<", neg, lo), lo, neg)
        neg = b.select(b.icmp_signed(">", neg, hi), hi, neg)
        rhs = self.gen.values.broadcast(b.trunc(neg, I32), lanes)
        offsets = constant(ir.VectorType(I32, lanes), [stride * k for k in self.lane_ids])
        return b.icmp_signed(ICMP[e.op], offsets, rhs)

"""Loads and stores, scalar and vector: contiguous vector accesses (odd widths masked to the
next power of two), strided loads as one masked load and a shuffle, loads whose index takes
two values over the lanes, the padded-load idiom as a masked load, gathers and scattered
stores, and masked loads and stores issued a register at a time.

:class:`VectorMemory` emits them for the code generator ``gen`` (codegen.py); the lane
masks they need come from ``gen.vectors`` (vectors.py).
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen.llvm import narrow_dtypes
from tensorc.codegen.llvm.ir_types import I1, I32, I64, PTR, VOID, concat, constant, slice_lanes
from tensorc.codegen.llvm.part import CodegenPart
from tensorc.codegen.llvm.values import ValueOps, storage_type, type_suffix
from tensorc.codegen.llvm.vector_index import two_step
from tensorc.codegen.llvm.vectors import VectorLoops
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, Store, itemsize
from tensorc.passes.loop.vector_loops import pow2_at_least

MAX_SHUFFLE_STRIDE = 4   # strided vector loads up to this stride: masked load + shuffle
# x86 permutes of a whole register by a vector of indices, per (element type, register bits)
_REGISTER_PERMUTES = {("float", 512): "llvm.x86.avx512.permvar.sf.512"}


class VectorMemory(CodegenPart):
    """Emits the loads and stores of the code generator ``gen`` (see the module docstring)."""

    @property
    def vec(self) -> VectorLoops:
        return self.gen.vectors

    @property
    def values(self) -> ValueOps:
        return self.gen.values

    def _at(self, buf: Buffer, index: E.Expr) -> ir.Value:
        """The address of ``buf[index]``, ``index`` a scalar: the terms of the index that are
        constant here (an unrolled loop's, bound to a constant) as a constant offset from the
        address of the rest, which the index cache then emits once for all of them (a
        Winograd transform's 36 unrolled loads share one address)."""
        rest, offset = self.gen.offsets.split(index)
        if not offset:
            return self.gen.pointer(buf, self.gen.scalar_index(index))
        base = self.gen.fs.buffers[buf] if isinstance(rest, E.Const) and rest.value == 0 else \
            self.gen.pointer(buf, self.gen.scalar_index(rest))
        return self.b.gep(base, [constant(I64, offset)], source_etype=storage_type(buf.dtype))

    def load(self, e: E.Load, lanes: int | None) -> ir.Value:
        buf = e.source
        (index,) = e.indices
        if lanes is not None and self.gen.facts.uses_var(index, self.vec.var):
            lin = self.gen.facts.linear_coeff(index, self.vec.var)
            if lin is not None and lin[1] == 1:
                ptr = self._at(buf, lin[0])
                return self.values.from_storage(self._contiguous_load(ptr, buf, lanes, index),
                                                buf.dtype)
            if lin is not None and 2 <= lin[1] <= MAX_SHUFFLE_STRIDE:
                return self._strided_load(buf, lin[0], lin[1], lanes, index)
            mask = self.vec.masked(buf, index)
            step = None if mask is not None else two_step(index, self.vec.var, lanes)
            if step is not None:
                return self._two_step_load(buf, *step, lanes)
            return self._gather(buf, self.gen.expr(index, lanes), lanes, mask)
        ptr = self._at(buf, index)
        return self.values.from_storage(self.b.load(ptr, typ=storage_type(buf.dtype)), buf.dtype)

    def _two_step_load(self, buf: Buffer, outer: E.Expr, scale: int, numerator: E.Expr,
                       divisor: int, lanes: int) -> ir.Value:
        """``buf[outer + scale * (numerator // divisor)]`` where the quotient takes at most two
        values over the vector, q and q + 1 (see ``vector_index.two_step``): two scalar loads
        and a select on the lanes whose numerator reaches (q + 1) * divisor, not a gather (a
        broadcast operand [C, 1, 1] of an elementwise loop over a flat [C, H, W]). The second
        load reads the last lane's element, which every unmasked vector has in bounds."""
        first = E.substitute(numerator, {self.vec.var: E.const(0, numerator.dtype)})
        last = E.substitute(numerator, {self.vec.var: E.const(lanes - 1, numerator.dtype)})
        q_first, q_last = (E.Binary("floordiv", n, E.const(divisor, n.dtype))
                           for n in (first, last))
        low, high = (self.values.from_storage(self.b.load(
            self._at(buf, outer + q * scale),
            typ=storage_type(buf.dtype)), buf.dtype) for q in (q_first, q_last))
        threshold = self.gen.scalar_index((q_first + 1) * divisor)
        upper = self.b.icmp_signed(">=", self.gen.expr(numerator, lanes),
                                   self.values.broadcast(threshold, lanes))
        return self.b.select(upper, self.values.broadcast(high, lanes),
                             self.values.broadcast(low, lanes))

    def _strided_load(self, buf: Buffer, base: E.Expr, stride: int, lanes: int,
                      index: E.Expr) -> ir.Value:
        """Elements base, base+stride, ...: one masked load of the covering span (masked-off
        lanes never fault), then a shuffle picks every stride-th element."""
        ety = storage_type(buf.dtype)
        used = stride * (lanes - 1) + 1
        span = pow2_at_least(used)
        wide = ir.VectorType(ety, span)
        mask = constant(ir.VectorType(I1, span), [int(j % stride == 0 and j < used)
                                                     for j in range(span)])
        lane_mask = self.vec.masked(buf, index)
        ptr = self._at(buf, base)
        if lane_mask is None and self.vec.in_allocation(buf, base, span):
            # a local buffer with room past the span: one plain load, then the shuffle
            v = self.b.load(ptr, typ=wide)
            v.align = itemsize(buf.dtype)
        else:
            if lane_mask is not None:
                mask = self.b.and_(mask, self._spread(lane_mask, stride, span))
            v = self.masked_load(ptr, mask, buf.dtype)
        return self.values.from_storage(self._pick(v, [k * stride for k in range(lanes)]),
                                        buf.dtype)

    def _pick(self, v: ir.Value, picks: list[int]) -> ir.Value:
        """The elements ``picks`` of vector ``v``. Narrowing a register (16 floats) to half
        of it, LLVM emits an extract and two shuffles (and folds two generic shuffles, or a
        permute intrinsic with constant indices, back into that); a register permute
        (vpermps) taking its low half does it in one instruction. Its indices are read from a
        global variable, which LLVM cannot fold (the read is hoisted out of loops)."""
        span, lanes = v.type.count, len(picks)
        undef = constant(v.type, ir.Undefined)
        permute = _REGISTER_PERMUTES.get((str(v.type.element), span * 32))
        if permute is None or span * 32 != self.gen.target.vector_bits or span == lanes:
            return self.b.shuffle_vector(v, undef, constant(ir.VectorType(I32, lanes),
                                                               picks))
        order_ty = ir.VectorType(I32, span)
        name = "tensorc_permute_" + "_".join(map(str, picks))
        order = self.gen.module.globals.get(name)
        if order is None:
            order = ir.GlobalVariable(self.gen.module, order_ty, name)
            order.initializer = constant(order_ty, picks + [0] * (span - lanes))
            order.align = span * 4
            order.linkage = "linkonce_odr"
        indices = self.b.load(order, typ=order_ty)
        indices.align = span * 4
        whole = self.b.call(self.gen.declare(permute, v.type, [v.type, order_ty]), [v, indices])
        return self.b.shuffle_vector(whole, undef, constant(ir.VectorType(I32, lanes),
                                                               list(range(lanes))))

    def _contiguous_load(self, ptr: ir.Value, buf: Buffer, lanes: int,
                         index: E.Expr | None = None) -> ir.Value:
        """A vector load; an odd width (14, 7 lanes) from memory loads the next power of two
        with the extra lanes masked off, which legalizes into one masked instruction. Local
        buffers keep plain accesses, which LLVM promotes to registers. In a predicated region
        only the running lanes are loaded."""
        dtype = buf.dtype
        ety = storage_type(dtype)
        full = pow2_at_least(lanes)
        lane_mask = self.vec.masked(buf, index)
        if lane_mask is None and (full == lanes or buf.scope == "local"):
            v = self.b.load(ptr, typ=ir.VectorType(ety, lanes))
            v.align = itemsize(dtype)
            return v
        wide = ir.VectorType(ety, full)
        v = self.masked_load(ptr, self._widened_mask(lane_mask, lanes, full), dtype)
        if full == lanes:
            return v
        return self.b.shuffle_vector(v, constant(wide, ir.Undefined),
                                     constant(ir.VectorType(I32, lanes), list(range(lanes))))

    def _contiguous_store(self, ptr: ir.Value, value: ir.Value, buf: Buffer, lanes: int,
                          index: E.Expr | None = None) -> None:
        dtype = buf.dtype
        full = pow2_at_least(lanes)
        lane_mask = self.vec.masked(buf, index, store=True)
        if lane_mask is not None and full == lanes and self.vec.local_vector(buf, index, lanes):
            # a predicated store inside a local buffer (a register tile's remainder): the
            # lanes that do not run keep their value, by a select and a plain store, which
            # LLVM promotes to registers (a masked store stays in memory: each step of the
            # tile's reduction went through the stack; measured in 7c4e02c)
            old = self.b.load(ptr, typ=value.type)
            old.align = itemsize(dtype)
            value = self.b.select(self._widened_mask(lane_mask, lanes, full), value, old)
            lane_mask = None
        if lane_mask is None and (full == lanes or buf.scope == "local"):
            st = self.b.store(value, ptr)
            st.align = itemsize(dtype)
            return
        if full != lanes:
            value = self.b.shuffle_vector(
                value, constant(value.type, ir.Undefined),
                constant(ir.VectorType(I32, full), [min(k, lanes - 1) for k in range(full)]))
        self.masked_store(value, ptr, self._widened_mask(lane_mask, lanes, full), dtype)

    def masked_load(self, ptr: ir.Value, mask: ir.Value, dtype: str) -> ir.Value:
        """``llvm.masked.load`` of ``mask``'s width, issued in pieces of at most one register
        (LLVM splitting a wider masked load itself miscompiled the upper half on AVX2)."""
        ety = storage_type(dtype)
        width = mask.type.count
        piece = min(width, self.gen.target.vector_lanes(dtype))
        parts = []
        for start in range(0, width, piece):
            vty = ir.VectorType(ety, piece)
            fn = self.gen.declare(f"llvm.masked.load.v{piece}{type_suffix(ety)}.p0", vty,
                                  [PTR, I32, ir.VectorType(I1, piece), vty])
            part_ptr = ptr if start == 0 else self.b.gep(ptr, [constant(I64, start)],
                                                         source_etype=ety)
            parts.append(self.b.call(fn, [part_ptr, constant(I32, itemsize(dtype)),
                                          slice_lanes(self.b, mask, start, piece),
                                          constant(vty, ir.Undefined)]))
        return concat(self.b, parts)

    def masked_store(self, value: ir.Value, ptr: ir.Value, mask: ir.Value, dtype: str) -> None:
        ety = storage_type(dtype)
        width = mask.type.count
        piece = min(width, self.gen.target.vector_lanes(dtype))
        for start in range(0, width, piece):
            vty = ir.VectorType(ety, piece)
            fn = self.gen.declare(f"llvm.masked.store.v{piece}{type_suffix(ety)}.p0", VOID,
                                  [vty, PTR, I32, ir.VectorType(I1, piece)])
            part_ptr = ptr if start == 0 else self.b.gep(ptr, [constant(I64, start)],
                                                         source_etype=ety)
            self.b.call(fn, [slice_lanes(self.b, value, start, piece), part_ptr,
                             constant(I32, itemsize(dtype)),
                             slice_lanes(self.b, mask, start, piece)])

    def _widened_mask(self, lane_mask: ir.Value | None, lanes: int, full: int) -> ir.Value:
        """A ``full``-lane mask: ``lane_mask`` (or all lanes) for the first ``lanes``."""
        if lane_mask is None:
            return constant(ir.VectorType(I1, full), [int(k < lanes) for k in range(full)])
        if full == lanes:
            return lane_mask
        return self.b.shuffle_vector(
            lane_mask, constant(lane_mask.type, None),
            constant(ir.VectorType(I32, full), [k if k < lanes else lanes
                                                   for k in range(full)]))

    def _spread(self, lane_mask: ir.Value, stride: int, span: int) -> ir.Value:
        """Element j of a ``span``-wide strided access belongs to lane j // stride."""
        last = lane_mask.type.count - 1
        return self.b.shuffle_vector(
            lane_mask, constant(lane_mask.type, ir.Undefined),
            constant(ir.VectorType(I32, span), [min(j // stride, last)
                                                   for j in range(span)]))

    def guarded_load(self, e: E.Select, lanes: int) -> ir.Value | None:
        """``select(cond, B[clamp(i)], v)`` where cond proves every clamp a no-op (the padded
        load idiom): a masked vector load of ``B[i]`` (masked-off lanes never fault)."""
        load: E.Load = e.true_value
        buf = load.source
        if buf.dtype in ("bool", "bfloat16") or buf.dtype in narrow_dtypes.NARROW_DTYPES:
            return None
        index = self.gen.facts.strip_justified_clamps(load.indices[0], e.cond)
        lin = None if index is None else self.gen.facts.linear_coeff(index, self.vec.var)
        if lin is None or not 1 <= lin[1] <= MAX_SHUFFLE_STRIDE:
            return None
        base, stride = lin
        mask = self.values.broadcast(self.gen.expr(e.cond, lanes), lanes)
        other = self.values.broadcast(self.gen.expr(e.false_value, lanes), lanes)
        used = stride * (lanes - 1) + 1
        span = pow2_at_least(used) if stride > 1 else lanes
        if stride > 1:
            # the condition of element j of the span is the condition of lane j // stride,
            # and only every stride-th element is loaded
            lane_ids = self.vec.lane_ids
            self.vec.set_lanes([min(j // stride, lanes - 1) for j in range(span)])
            spread = self.values.broadcast(self.gen.expr(e.cond, span), span)
            self.vec.set_lanes(lane_ids)
            pattern = constant(ir.VectorType(I1, span), [int(j % stride == 0 and j < used)
                                                             for j in range(span)])
            wide_mask = self.b.and_(spread, pattern)
        else:
            wide_mask = mask
        lane_mask = self.vec.masked(buf, index)
        if lane_mask is not None:
            wide_mask = self.b.and_(wide_mask, lane_mask if stride == 1 else
                                    self._spread(lane_mask, stride, span))
        ptr = self._at(buf, base)
        if stride == 1 and lane_mask is None and self.vec.in_allocation(buf, base, lanes) \
                and buf in self.fs.row_slack:
            # a row block's last vector, read whole (it stays in the block): a plain load
            # forwards from the store that wrote it, a masked one waits for it
            v = self.b.load(ptr, typ=ir.VectorType(storage_type(buf.dtype), lanes))
            v.align = itemsize(buf.dtype)
            return self.b.select(mask, v, other)
        v = self.masked_load(ptr, wide_mask, buf.dtype)
        if stride > 1:
            v = self._pick(v, [k * stride for k in range(lanes)])
        return self.b.select(mask, v, other)

    def _gather(self, buf: Buffer, idx: ir.Value, lanes: int,
                mask: ir.Value | None = None) -> ir.Value:
        ety = storage_type(buf.dtype)
        vty = ir.VectorType(ety, lanes)
        ptrs = self.b.gep(self.fs.buffers[buf], [idx], source_etype=ety)
        ptrs.type = ir.VectorType(PTR, lanes)     # llvmlite types a vector GEP as scalar
        fn = self.gen.declare(f"llvm.masked.gather.v{lanes}{type_suffix(ety)}.v{lanes}p0", vty,
                              [ir.VectorType(PTR, lanes), I32, ir.VectorType(I1, lanes), vty])
        if mask is None:
            mask = constant(ir.VectorType(I1, lanes), [1] * lanes)
        v = self.b.call(fn, [ptrs, constant(I32, itemsize(buf.dtype)), mask,
                             constant(vty, ir.Undefined)])
        return self.values.from_storage(v, buf.dtype)

    def store(self, s: Store, lanes: int | None) -> None:
        buf = s.buffer
        (index,) = s.indices
        value = self.gen.expr(s.value, lanes)
        if lanes is not None and self.gen.facts.uses_var(index, self.vec.var):
            value = self.values.broadcast(value, lanes)
            lin = self.gen.facts.linear_coeff(index, self.vec.var)
            if lin is not None and lin[1] == 1:
                ptr = self._at(buf, lin[0])
                self._contiguous_store(ptr, self.values.to_storage(value, buf.dtype), buf, lanes,
                                       index)
                return
            mask = self.vec.masked(buf, index, store=True)
            if lin is not None:
                # a constant stride: lane k at a constant offset from one scalar address
                # (not an index vector whose lanes are moved to scalar registers one by one)
                base = self._at(buf, lin[0])
                ety = storage_type(buf.dtype)
                pointers = [self.b.gep(base, [constant(I64, k * lin[1])], source_etype=ety)
                            for k in range(lanes)]
            else:
                idx = self.gen.expr(index, lanes)
                pointers = [self.gen.pointer(buf, self.b.extract_element(idx, constant(I32, k)))
                            for k in range(lanes)]
            for k, ptr in enumerate(pointers):
                x = self.b.extract_element(value, constant(I32, k))
                if mask is None:
                    self.b.store(self.values.to_storage(x, buf.dtype), ptr)
                    continue
                with self.b.if_then(self.b.extract_element(mask, constant(I32, k))):
                    self.b.store(self.values.to_storage(x, buf.dtype), ptr)
            return
        if isinstance(value.type, ir.VectorType):
            # a lane-invariant store in a vector loop: every lane writes the same element
            value = self.b.extract_element(value, constant(I32, value.type.count - 1))
        self.b.store(self.values.to_storage(value, buf.dtype),
                     self._at(buf, index))

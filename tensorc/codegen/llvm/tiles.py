"""Register tiles stored with shuffles: interleaved tiles, transposed tiles (guarded or
not) and horizontal reductions. passes/loop/register_tiles.py decides which loop is which
(its ``register_tile`` annotation); :class:`RegisterTiles` emits them.
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen.llvm.narrow_dtypes import NARROW_DTYPES
from tensorc.codegen.llvm.ir_types import I1, I32, I64, PTR, VOID, constant
from tensorc.codegen.llvm.part import CodegenPart
from tensorc.codegen.llvm.values import storage_type, type_suffix
from tensorc.codegen.llvm.vectors import VectorLoops
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import For, IfThenElse, interleaved_tile, itemsize
from tensorc.passes.loop.register_tiles import reduction_operands, row_stride
from tensorc.passes.loop.vector_loops import pow2_at_least


class RegisterTiles(CodegenPart):
    """Emits the register tiles of the code generator ``gen`` (codegen.py), which binds the
    loop variables, and whose vector loop state (``gen.vectors``) each tile's vectors use."""

    @property
    def vec(self) -> VectorLoops:
        return self.gen.vectors

    def emit(self, s: For, n: int) -> bool:
        """Emit ``s``, an annotated register tile of ``n`` iterations; False where codegen
        emits it as a plain loop instead."""
        shape = s.annotations["register_tile"]
        if shape == "horizontal_reduction":
            return self.horizontal_reduction(s, n)
        {"interleaved": self.interleaved, "transposed": self.transposed,
         "guarded_transposed": self.guarded_transposed}[shape](s, n)
        return True

    def interleaved(self, s: For, k: int) -> None:
        """k vectors interleaved into whole vectors of consecutive elements: ``s`` an
        unrolled loop over u around a vector loop over v storing ``out[base + u + k * v]``
        (see ``ir.loop.interleaved_tile``; a Winograd tile's output columns), maybe guarded.
        As written, each vector would be scattered lane by lane; instead the k vectors (and
        their guards' masks) are computed first, interleaved with k * log2(k) shuffles, and
        stored as k contiguous vectors, masked where a guard or an odd width asks."""
        inner, st = interleaved_tile(s)
        lanes = arith.as_const_int(inner.extent)
        guard = inner.body.cond if isinstance(inner.body, IfThenElse) else None
        width = pow2_at_least(lanes)
        tail = None if width == lanes else constant(
            ir.VectorType(I1, width), [int(j < lanes) for j in range(width)])
        saved = self.vec.lane_mask, self.vec.tail_mask_only
        self.fs.ranges[s.var] = (0, k - 1)
        values, masks = [], []
        for u in range(k):
            self.fs.env[s.var] = constant(I64, u)
            self.vec.bind(inner.var, width, lanes)
            self.fs.ranges[inner.var] = (0, width - 1)
            mask = tail
            if guard is not None:
                held = self.gen.values.broadcast(self.gen.expr(guard, width), width)
                mask = held if mask is None else self.b.and_(held, mask)
            # the value's loads run on the stored lanes only
            self.vec.lane_mask, self.vec.tail_mask_only = mask, guard is None
            value = self.gen.values.broadcast(self.gen.expr(st.value, width), width)
            values.append(self.gen.values.to_storage(value, st.buffer.dtype))
            masks.append(mask)
            del self.fs.env[inner.var]
        self.vec.lane_mask, self.vec.tail_mask_only = saved
        self.fs.env[s.var] = constant(I64, 0)
        self.fs.env[inner.var] = constant(I64, 0)
        base = self.gen.pointer(st.buffer, self.gen.scalar_index(st.indices[0]))
        del self.fs.env[inner.var], self.fs.env[s.var]
        ety = storage_type(st.buffer.dtype)
        rows = self._interleave(values)
        row_masks = self._interleave(masks) if masks[0] is not None else [None] * k
        for j, (row, mask) in enumerate(zip(rows, row_masks)):
            ptr = self.b.gep(base, [constant(I64, j * width)], source_etype=ety) if j \
                else base
            if mask is None:
                self.b.store(row, ptr).align = 4
            else:
                self.gen.memory.masked_store(row, ptr, mask, st.buffer.dtype)

    def _interleave(self, vectors: list[ir.Value]) -> list[ir.Value]:
        """k vectors of w lanes (both powers of two) as the k vectors of their interleaved
        elements (v0[0], v1[0], .., v0[1], v1[1], ..): the even-numbered vectors interleaved,
        the odd-numbered ones interleaved, then the two streams zipped pairwise, two
        shuffles per pair."""
        if len(vectors) == 1:
            return list(vectors)
        even, odd = self._interleave(vectors[0::2]), self._interleave(vectors[1::2])
        out = []
        for a, b in zip(even, odd):
            w = a.type.count
            for half in (0, w // 2):
                picks = [half + j // 2 + (w if j % 2 else 0) for j in range(w)]
                out.append(self.b.shuffle_vector(a, b, constant(ir.VectorType(I32, w),
                                                                   picks)))
        return out

    def transposed(self, s: For, m: int) -> None:
        """An m x n tile stored transposed, from registers: ``s`` an unrolled loop over u
        (m <= n iterations) around a vector loop over v (n lanes), storing
        ``out[base + u + stride * v]``: contiguous along u, so as written each vector (one u)
        would be scattered lane by lane. Instead the m vectors are computed first,
        transposed with shuffles, and stored as n vectors (one per v) of m contiguous
        elements (masked stores where m < n: a concat part or a row's tail shorter than a
        vector). A transposing group (``transposed_axis`` in ops/schedules.py) is tiled so."""
        inner = s.body
        st = inner.body
        n = arith.as_const_int(inner.extent)
        (index,) = st.indices
        stride = row_stride(index, inner.var)
        values = []
        saved_mask = self.vec.lane_mask
        self.fs.ranges[s.var] = (0, m - 1)
        for k in range(m):
            self.fs.env[s.var] = constant(I64, k)
            self.vec.bind(inner.var, n, n)
            self.fs.ranges[inner.var] = (0, n - 1)
            self.vec.lane_mask = None
            value = self.gen.values.broadcast(self.gen.expr(st.value, n), n)
            values.append(self.gen.values.to_storage(value, st.buffer.dtype))
            del self.fs.env[inner.var]
        self.vec.lane_mask = saved_mask
        self.fs.env[s.var] = constant(I64, 0)
        self.fs.env[inner.var] = constant(I64, 0)
        base = self.gen.pointer(st.buffer, self.gen.scalar_index(index))
        # a symbolic row length apart: the offsets are multiples of its run-time value
        step = None if isinstance(stride, int) else self.gen.scalar_index(stride)
        del self.fs.env[inner.var], self.fs.env[s.var]
        ety = storage_type(st.buffer.dtype)
        values += [constant(values[0].type, ir.Undefined)] * (n - m)
        mask = None if m == n else constant(ir.VectorType(I1, n), [k < m for k in range(n)])
        prefetch = self.gen.declare("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
        for j, row in enumerate(self._transpose(values)):
            ptr = self.b.gep(base, [self._times(step, stride, j)], source_etype=ety) if j \
                else base
            # The rows land in n different cache lines (or two each): a cold output costs a
            # read for ownership of each, one after another. Ask for the lines of the next
            # block along v (n rows on) for writing now, so that they arrive in parallel.
            ahead = self.b.gep(ptr, [self._times(step, stride, n)], source_etype=ety)
            self.b.call(prefetch, [ahead, constant(I32, 1), constant(I32, 3),
                                   constant(I32, 1)])
            if mask is None:
                self.b.store(row, ptr).align = 4
            elif self.gen.kernel_dims and st.buffer.dtype not in NARROW_DTYPES:
                self._store_first(row, ptr, m, ety, st.buffer.dtype)
            else:
                self.gen.memory.masked_store(row, ptr, mask, st.buffer.dtype)

    def _store_first(self, row: ir.Value, ptr: ir.Value, m: int, ety: ir.Type,
                     dtype: str) -> None:
        """The first ``m`` lanes of ``row`` at ``ptr``, as plain stores of power-of-two
        pieces (7: 4, 2, 1) rather than one masked store, which Zen 3 runs about one per 12
        cycles: a symbolic row's last columns of a transposed tile (a key cache of 10 rows,
        transposed for QK^T, spent half its time in them). Kernels over symbolic dims only:
        static kernels keep their code."""
        start = 0
        while start < m:
            piece = 1 << ((m - start).bit_length() - 1)
            part = self.b.extract_element(row, constant(I32, start)) if piece == 1 else \
                self.b.shuffle_vector(row, constant(row.type, ir.Undefined), constant(
                    ir.VectorType(I32, piece), list(range(start, start + piece))))
            at = self.b.gep(ptr, [constant(I64, start)], source_etype=ety) if start else ptr
            self.b.store(part, at).align = max(1, itemsize(dtype))
            start += piece

    def _times(self, step: ir.Value | None, stride: int, k: int) -> ir.Value:
        """k rows' offset: ``k * stride`` where the stride is a constant, else k times its
        run-time value ``step``."""
        if step is None:
            return constant(I64, k * stride)
        return self.b.mul(step, constant(I64, k))

    def guarded_transposed(self, s: For, m: int) -> None:
        """A transposed tile (:meth:`transposed`) whose every store is under one guard that
        depends on neither of the tile's loops (a register tile's second row of outputs,
        past the map's last row in the last tile): the guard is tested once, around the
        transposed stores, instead of storing lane by lane."""
        inner = s.body
        guard = inner.body
        bare = For(s.var, s.extent, s.kind,
                   For(inner.var, inner.extent, inner.kind, guard.then_case))
        with self.b.if_then(self.gen.expr(guard.cond)):
            self.transposed(bare, m)

    def horizontal_reduction(self, s: For, n: int) -> bool:
        """``acc[i] = acc[i] op part(j)`` over a serial ``j`` whose ``part`` reads local
        buffers contiguously in ``j``: the partial results of an rfactor (a row's max or sum
        kept in a few vector registers). As written it is one dependent scalar op per partial
        (64 of them after a 4-register row sum, about 200 cycles); instead the partials are
        loaded as whole vectors, combined pairwise and reduced across lanes with shuffles.
        max and min are exact in any order; a sum is reassociated as the rfactor already did.
        False where the loop has less than a register's worth of partials."""
        st = s.body
        value = st.value
        acc, part = reduction_operands(st)
        lanes = self.gen.target.vector_lanes(value.dtype)
        if n < lanes:
            return False
        lane = E.Var(f"{s.var.name}.lane")
        vectors = []
        self.fs.ranges[lane] = (0, lanes - 1)
        saved_mask, self.vec.lane_mask = self.vec.lane_mask, None
        for k in range(n // lanes):
            self.vec.bind(lane, lanes, lanes)
            chunk = E.substitute(part, {s.var: lane + k * lanes})
            vectors.append(self.gen.values.broadcast(self.gen.expr(chunk, lanes), lanes))
            del self.fs.env[lane]
        self.vec.lane_mask = saved_mask
        while len(vectors) > 1:
            pairs = [self.gen.values.binary(value.op, value.dtype, a, b)
                     for a, b in zip(vectors[0::2], vectors[1::2])]
            vectors = pairs + vectors[len(pairs) * 2:]
        (vector,) = vectors
        ety = vector.type.element
        if value.op == "add":
            fn = self.gen.declare(f"llvm.vector.reduce.fadd.v{lanes}{type_suffix(ety)}", ety,
                                  [ety, vector.type])
            total = self.b.call(fn, [constant(ety, -0.0), vector], fastmath=("reassoc",))
        else:
            name = "fmaximum" if value.op == "max" else "fminimum"
            fn = self.gen.declare(f"llvm.vector.reduce.{name}.v{lanes}{type_suffix(ety)}",
                                  ety, [vector.type])
            total = self.b.call(fn, [vector], fastmath=("nsz",))
        for j in range(n // lanes * lanes, n):     # partials past the last whole vector
            self.fs.env[s.var] = constant(I64, j)
            total = self.gen.values.binary(value.op, value.dtype, total, self.gen.expr(part))
        self.fs.env.pop(s.var, None)
        values = self.gen.values
        result = values.binary(value.op, value.dtype, self.gen.expr(acc), total)
        self.b.store(values.to_storage(result, st.buffer.dtype),
                     self.gen.pointer(st.buffer, self.gen.scalar_index(st.indices[0])))
        return True

    def _transpose(self, rows: list[ir.Value]) -> list[ir.Value]:
        """The transpose of n vectors of n lanes (n a power of two): for each bit of the
        row index, swap it with the same bit of the lane index, one shuffle per row."""
        n = len(rows)
        rows = list(rows)
        bit = n // 2
        while bit:
            out = list(rows)
            for i in range(n):
                if i & bit:
                    continue
                j = i | bit
                low = [c if not c & bit else n + (c ^ bit) for c in range(n)]
                high = [c ^ bit if not c & bit else n + c for c in range(n)]
                out[i] = self.b.shuffle_vector(rows[i], rows[j],
                                               constant(ir.VectorType(I32, n), low))
                out[j] = self.b.shuffle_vector(rows[i], rows[j],
                                               constant(ir.VectorType(I32, n), high))
            rows = out
            bit //= 2
        return rows

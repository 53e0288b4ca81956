"""Parallel loops: the body outlined into a function that the runtime's thread pool runs
(``tensorc_parallel``, runtime/threadpool.py), and the chunk protocol by which its threads
share the iterations (:meth:`ParallelLoops.emit`).
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen.llvm.function_state import FunctionState, opaque
from tensorc.codegen.llvm.index_cache import IndexCache
from tensorc.codegen.llvm.ir_types import I1, I32, I64, PTR, VOID, constant
from tensorc.codegen.llvm.part import CodegenPart
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import For, buffers_used, stmt_exprs, walk_stmts
from tensorc.passes.loop.parallel_work import MIN_CHUNK_WORK

# Chunks per thread (more: better balance when a worker is descheduled; 0cff703); the fewest
# stores a chunk does is MIN_CHUNK_WORK (passes/loop/parallel_work.py)
CHUNKS_PER_THREAD = 8
# A parallel loop's iterations are cut into one contiguous range per thread, at most this
# many (5678c7b); the ranges' counters lie a cache line (COUNTER_STRIDE int64s) apart
MAX_RANGES = 16
COUNTER_STRIDE = 8
_RANGE_VAR = E.Var("range")


class ParallelLoops(CodegenPart):
    """Outlines the parallel loops of the code generator ``gen`` (codegen.py): the outlined
    function is emitted with its own :class:`FunctionState`, swapped in for ``gen.fs``."""

    def __init__(self, gen):
        super().__init__(gen)
        self.outlined = 0     # functions outlined so far: their names' numbers


    def emit(self, s: For) -> None:
        """Outline the loop body into ``body(ptr closure)`` and run it on the runtime's
        thread pool, ``tensorc_parallel(body, closure, team)`` (runtime/threadpool.py).

        The iterations are cut into one contiguous range per thread of the team (at most
        MAX_RANGES), each with its own counter. A thread takes a ticket as it enters, drains
        the range the ticket names chunk by chunk (one atomic add per chunk), then takes
        chunks from the other ranges' counters until none are left. So a worker that the OS
        deschedules, or that starts late, delays only the chunk it holds: the others take the
        rest of its range. And each thread's work is contiguous, as a static split's is:
        neighbouring iterations (a conv's rows of one filter block, a GEMM's tiles of one
        column panel) share their weights, which then travel to one core's cache, not to
        every core's. A chunk is about ``1 / CHUNKS_PER_THREAD`` of a range, and at least
        ``MIN_CHUNK_WORK`` stores (its ``iteration_work``, passes/loop/parallel_work.py, counts
        them from the body's loop nest), so the counters cost little. A loop with one chunk,
        or a run at one thread, calls the body directly and wakes no worker."""
        captured_vars = sorted({v for st in walk_stmts(s.body) for e in stmt_exprs(st)
                                for v in E.free_vars(e) if v in self.fs.env},
                               key=lambda v: v.name)
        captured_bufs = [b for b in buffers_used(s.body) if b in self.fs.buffers]
        # the closure: [ticket, chunk size, ranges, the ranges' next iterations (a cache
        # line apart), captured values...]
        counters = ir.ArrayType(I64, MAX_RANGES * COUNTER_STRIDE)
        n = arith.as_const_int(s.extent)
        # a symbolic extent travels in the closure, after the counters
        fields = [I64, I64, I64, counters] + ([I64] if n is None else []) + \
            [I64] * len(captured_vars) + [PTR] * len(captured_bufs)
        first = 4 if n is not None else 5     # the first captured value's field
        closure_ty = ir.LiteralStructType(fields)
        self.outlined += 1
        name = f"{self.fs.fn.name}.par{self.outlined}"
        fn = ir.Function(self.gen.module, ir.FunctionType(VOID, [PTR]), name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        extent = constant(I64, n) if n is not None else self.gen.expr(s.extent)

        # caller: pack the closure, size the chunks, run the body on the team
        b = self.b
        entry = ir.IRBuilder(self.fs.entry)
        closure = opaque(entry.alloca(closure_ty, name=f"{name}.closure"))

        def slot(builder, base, k):
            return builder.gep(base, [constant(I32, 0), constant(I32, k)],
                               source_etype=closure_ty)

        values = [self.fs.env[v] for v in captured_vars] + \
                 [self.fs.buffers[buf] for buf in captured_bufs]
        for k, v in enumerate(values):
            b.store(v, slot(b, closure, k + first))
        nthreads = b.load(self.gen.num_threads, typ=I32)
        nth = b.sext(nthreads, I64)
        work = s.annotations["iteration_work"]
        if isinstance(work, int):
            min_chunk = constant(I64, max(1, -(-MIN_CHUNK_WORK // max(1, work))))
        else:       # over symbolic dims: from the run's dims
            work = self.gen.expr(E.maximum(work, E.const(1, work.dtype)))
            min_chunk = b.sdiv(b.add(constant(I64, MIN_CHUNK_WORK - 1), work), work)
        share = b.mul(nth, constant(I64, CHUNKS_PER_THREAD))
        chunk = b.sdiv(b.add(extent, b.sub(share, constant(I64, 1))), share)
        chunk = b.select(b.icmp_signed("<", chunk, min_chunk), min_chunk, chunk)
        b.store(constant(I64, 0), slot(b, closure, 0))
        b.store(chunk, slot(b, closure, 1))
        chunks = b.sdiv(b.add(extent, b.sub(chunk, constant(I64, 1))), chunk)
        # no more threads than chunks: a thread with nothing to take only costs a wake-up
        team = b.select(b.icmp_signed("<", chunks, nth), chunks, nth)
        ranges = b.select(b.icmp_signed("<", team, constant(I64, MAX_RANGES)), team,
                          constant(I64, MAX_RANGES))
        if n is None:
            # an extent of 0 at run time: one empty range (the callee divides by the count)
            ranges = b.select(b.icmp_signed("<", ranges, constant(I64, 1)),
                              constant(I64, 1), ranges)
        b.store(ranges, slot(b, closure, 2))

        def counter(builder, base, r):
            return builder.gep(base, [constant(I32, 0), constant(I32, 3),
                                      builder.mul(r, constant(I64, COUNTER_STRIDE))],
                               source_etype=closure_ty)

        def range_start(builder, r, count, extent=extent):
            return builder.sdiv(builder.mul(r, extent), count)

        if n is None:
            b.store(extent, slot(b, closure, 4))

        # each range's counter starts at its first iteration
        self.gen.serial_loop(_RANGE_VAR, ranges, lambda: b.store(
            range_start(b, self.fs.env[_RANGE_VAR], ranges),
            counter(b, closure, self.fs.env[_RANGE_VAR])))
        alone = constant(I1, 1) if n is not None and n <= 1 else \
            b.icmp_signed("<=", team, constant(I64, 1))
        with b.if_else(alone) as (serial, threaded):
            with serial:
                b.call(fn, [closure])
            with threaded:
                pool = self.gen.declare("tensorc_parallel", VOID, [PTR, PTR, I32])
                b.call(pool, [fn, closure, b.trunc(team, I32)])

        # callee: unpack, take a ticket, then take chunks from the home range's counter
        # until it passes the range's end, then from the other ranges' counters
        state = FunctionState(fn, {}, {})
        state.ranges = dict(self.fs.ranges)
        state.row_slack = set(self.fs.row_slack)
        cb = state.builder
        if self.fs.index is not None:
            state.index = IndexCache()
        for k, key in enumerate([*captured_vars, *captured_bufs]):
            val = cb.load(slot(cb, fn.args[0], k + first), typ=fields[k + first])
            (state.env if isinstance(key, E.Var) else state.buffers)[key] = val
            if isinstance(key, E.Var) and state.index is not None:
                state.index.bind(key, cb.block, val)
        own_chunk = cb.load(slot(cb, fn.args[0], 1), typ=I64)
        own_ranges = cb.load(slot(cb, fn.args[0], 2), typ=I64)
        ticket = cb.atomic_rmw("add", slot(cb, fn.args[0], 0), constant(I64, 1), "monotonic")
        home = cb.urem(ticket, own_ranges)
        # ranges visited: the home range, then the next ones in turn
        visited = ir.IRBuilder(state.entry).alloca(I64)
        cb.store(constant(I64, 0), visited)
        saved, saved_par = self.fs, self.gen.in_parallel
        self.gen.fs, self.gen.in_parallel = state, True
        visit = cb.append_basic_block(f"{name}.visit")
        take = cb.append_basic_block(f"{name}.take")
        run = cb.append_basic_block(f"{name}.run")
        drained = cb.append_basic_block(f"{name}.drained")
        done = cb.append_basic_block(f"{name}.done")
        cb.branch(visit)
        cb.position_at_end(visit)
        seen = cb.load(visited, typ=I64)
        r = cb.urem(cb.add(home, seen), own_ranges)
        own_extent = extent if n is not None else cb.load(slot(cb, fn.args[0], 4), typ=I64)
        end = range_start(cb, cb.add(r, constant(I64, 1)), own_ranges, own_extent)
        next_iteration = counter(cb, fn.args[0], r)
        cb.cbranch(cb.icmp_signed("<", seen, own_ranges), take, done)
        cb.position_at_end(take)
        lo = cb.atomic_rmw("add", next_iteration, own_chunk, "monotonic")
        cb.cbranch(cb.icmp_signed("<", lo, end), run, drained)
        cb.position_at_end(run)
        hi = cb.add(lo, own_chunk)
        hi = cb.select(cb.icmp_signed("<", hi, end), hi, end)
        self.gen.serial_loop(s.var, hi, lambda: self.gen.stmt(s.body), start=lo)
        cb.branch(take)
        cb.position_at_end(drained)
        cb.store(cb.add(seen, constant(I64, 1)), visited)
        cb.branch(visit)
        cb.position_at_end(done)
        cb.ret_void()
        state.close()
        self.gen.fs, self.gen.in_parallel = saved, saved_par

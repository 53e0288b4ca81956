"""LLVM code generation: loop-IR PrimFuncs -> LLVM IR (llvmlite) -> object code.

Vectorized loops become LLVM vector instructions (contiguous accesses are vector loads and
stores; others gather lane by lane). Parallel loops are outlined into a function that
the runtime's thread pool runs (``tensorc_parallel``, runtime/threadpool.py), each thread
taking chunks of iterations from a shared counter until none are left (``parallel_loop``).
Kernels are internal functions of one module; the entry function
``int32 entry(void **args, int32 num_threads, int64 *timings)`` calls them in turn, so an
inference is one call into native code. With ``timings`` not null, the entry adds each kernel
call's wall time in nanoseconds to ``timings[k]`` (the profiler times kernels inside the
same entry a normal run uses). It returns the run's status: 0, or the code a kernel stored
in ``tensorc_status`` (a runtime check that failed): the number of the failing kernel call
plus one, with the offending value in the exported i64 ``tensorc_bad_index`` and the size of
the axis it indexes in ``tensorc_bad_size`` (see ``check_index`` in ir/expr.py).
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen import narrow_dtypes
from tensorc.errors import TensorcError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    CACHE_LINE, Allocate, Barrier, Buffer, For, IfThenElse, KernelCall, Prefetch, PrimFunc, Seq,
    Stmt, Store, buffers_used, interleaved_tile, walk_stmts, stmt_exprs,
)
from tensorc.codegen.llvm_types import I1, I8, I32, I64, PTR, VOID
from tensorc.codegen.llvm_values import (
    _ICMP, ValueOps, _is_signed, _itemsize, _pow2_at_least, _type_suffix, storage_type,
    value_type,
)
from tensorc.target import Target, _init_llvm

UNROLL_LIMIT = 64
LANE_PADDING = 64        # elements past a local block's end, for masked-off vector lanes
TIMESPEC = ir.LiteralStructType([I64, I64])      # struct timespec {tv_sec; tv_nsec} on x86-64
MAX_SHUFFLE_STRIDE = 4   # strided vector loads up to this stride: masked load + shuffle
# x86 permutes of a whole register by a vector of indices, per (element type, register bits)
_REGISTER_PERMUTES = {("float", 512): "llvm.x86.avx512.permvar.sf.512"}
# Parallel loops: chunks per thread (more: better balance when a worker is descheduled) and
# the fewest stores a chunk does: 2^17 vector multiply-adds take a core 1-3 us, about what
# waking a sleeping worker costs, so a loop of less than two such chunks runs on the calling
# thread alone and bigger chunks keep the shared counter's cost small
CHUNKS_PER_THREAD = 8
MIN_CHUNK_WORK = 1 << 17
# A parallel loop's iterations are cut into one contiguous range per thread, at most this
# many; the ranges' counters lie a cache line (COUNTER_STRIDE int64s) apart
MAX_RANGES = 16
COUNTER_STRIDE = 8
_RANGE_VAR = E.Var("range")


def _opaque(value: ir.Value) -> ir.Value:
    """llvmlite's IR layer still types allocas and globals as typed pointers; LLVM 15+ has
    only opaque ones, so retype them."""
    value.type = PTR
    return value


class _FuncState:
    """Per LLVM-function state: builder, alloca block, variable and buffer bindings."""

    def __init__(self, fn: ir.Function, env: dict, buffers: dict):
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.builder = ir.IRBuilder(body)
        self.env = env          # Var -> ir.Value (scalar or vector)
        self.buffers = buffers  # Buffer -> ptr
        self.ranges: dict = {}  # Var -> (lo, hi) of the loops being emitted
        self.allocated: dict = {}   # local Buffer -> elements allocated (with lane padding)


class LLVMCodegen(ValueOps):
    """Builds one LLVM module from PrimFuncs."""

    def __init__(self, target: Target, name: str = "tensorc"):
        _init_llvm()
        self.target = target
        self.module = ir.Module(name)
        self.module.triple = target.triple
        self.num_threads = self._global_i32("tensorc_num_threads")
        self.status = self._global_i32("tensorc_status")
        self.current_call = self._global_i32("tensorc_call")   # the kernel call running
        self.bad_index = _opaque(ir.GlobalVariable(self.module, I64, "tensorc_bad_index"))
        self.bad_index.initializer = ir.Constant(I64, 0)
        self.bad_size = _opaque(ir.GlobalVariable(self.module, I64, "tensorc_bad_size"))
        self.bad_size.initializer = ir.Constant(I64, 0)
        self.functions: dict[str, ir.Function] = {}
        self._outlined = 0
        self.fs: _FuncState | None = None
        self.in_parallel = False
        # inside a vector loop: which lanes run (a vector of i1), or None for all; whether
        # that mask only drops the padding lanes of an odd-width loop
        self.lane_mask: ir.Value | None = None
        self.tail_mask_only = True

    def _global_i32(self, name: str) -> ir.GlobalVariable:
        var = _opaque(ir.GlobalVariable(self.module, I32, name))
        var.initializer = ir.Constant(I32, 0)
        var.linkage = "internal"
        return var

    # declarations ------------------------------------------------------------------------
    def _declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def _intrinsic(self, name: str, ty: ir.Type, nargs: int) -> ir.Function:
        suffix = _type_suffix(ty)
        return self._declare(f"{name}.{suffix}", ty, [ty] * nargs)

    # functions --------------------------------------------------------------------------
    def add_kernel(self, func: PrimFunc, internal: bool = True) -> ir.Function:
        """A kernel ``void name(ptr noalias p0, ...)`` over its buffer parameters."""
        fnty = ir.FunctionType(VOID, [PTR] * len(func.params))
        fn = ir.Function(self.module, fnty, func.name)
        if internal:
            fn.linkage = "internal"
            fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        for arg in fn.args:
            arg.add_attribute("noalias")
        buffers = {b: arg for b, arg in zip(func.params, fn.args)}
        self._emit_function(fn, func.body, {}, buffers)
        self.functions[func.name] = fn
        return fn

    def add_entry(self, func: PrimFunc) -> ir.Function:
        """The exported entry ``int32 name(void **args, int32 num_threads, int64 *timings)``:
        args[i] is the pointer for ``func.params[i]``; ``func.body`` is a sequence of kernel
        calls, timed into ``timings`` (one slot per call) when it is not null."""
        fn = ir.Function(self.module, ir.FunctionType(I32, [PTR, I32, PTR]), func.name)
        fn.attributes.add("nounwind")
        state = _FuncState(fn, {}, {})
        b = state.builder
        # 0 threads: libgomp's default team size (OMP_NUM_THREADS, else every core); the
        # parallel loops size their chunks from the resolved count
        requested = fn.args[1]
        default = self._declare("omp_get_max_threads", I32, [])
        with b.if_then(b.icmp_signed("<=", requested, ir.Constant(I32, 0))):
            b.store(b.call(default, []), self.num_threads)
        with b.if_then(b.icmp_signed(">", requested, ir.Constant(I32, 0))):
            b.store(requested, self.num_threads)
        b.store(ir.Constant(I32, 0), self.status)
        for k, buf in enumerate(func.params):
            slot = b.gep(fn.args[0], [ir.Constant(I64, k)], source_etype=PTR)
            state.buffers[buf] = b.load(slot, typ=PTR)
        calls = list(func.body.stmts) if isinstance(func.body, Seq) else [func.body]
        saved = self.fs
        self.fs = state
        timings = fn.args[2]
        profiling = b.icmp_unsigned("!=", timings, ir.Constant(PTR, None))
        start = _opaque(ir.IRBuilder(state.entry).alloca(I64, name="start"))
        now = _opaque(ir.IRBuilder(state.entry).alloca(TIMESPEC, name="now"))
        # one copy of each call, with the timing around it in branches (duplicating the
        # calls into a timed and an untimed sequence tripped an LLVM code generator assert)
        for k, call in enumerate(calls):
            with b.if_then(profiling):
                b.store(self._now_ns(now), start)
            b.store(ir.Constant(I32, k), self.current_call)
            self.stmt(call)
            with b.if_then(profiling):
                slot = b.gep(timings, [ir.Constant(I64, k)], source_etype=I64)
                elapsed = b.sub(self._now_ns(now), b.load(start, typ=I64))
                b.store(b.add(b.load(slot, typ=I64), elapsed), slot)
        b.ret(b.load(self.status, typ=I32))
        ir.IRBuilder(state.entry).branch(fn.blocks[1])
        self.fs = saved
        self.functions[func.name] = fn
        return fn

    def _now_ns(self, slot: ir.Value) -> ir.Value:
        """CLOCK_MONOTONIC in nanoseconds (clock_gettime goes through the vDSO: ~20 ns);
        ``slot`` is a ``struct timespec`` alloca."""
        timespec = TIMESPEC
        clock_gettime = self._declare("clock_gettime", I32, [I32, PTR])
        b = self.b
        b.call(clock_gettime, [ir.Constant(I32, 1), slot])     # CLOCK_MONOTONIC = 1
        sec = b.load(b.gep(slot, [ir.Constant(I32, 0), ir.Constant(I32, 0)],
                           source_etype=timespec), typ=I64)
        nsec = b.load(b.gep(slot, [ir.Constant(I32, 0), ir.Constant(I32, 1)],
                            source_etype=timespec), typ=I64)
        return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)

    def _emit_function(self, fn, body: Stmt, env, buffers) -> None:
        self._run(_FuncState(fn, env, buffers), body)

    def _run(self, state: _FuncState, body: Stmt) -> None:
        saved = self.fs
        self.fs = state
        self.stmt(body)
        self.fs.builder.ret_void()
        ir.IRBuilder(state.entry).branch(state.fn.blocks[1])
        self.fs = saved

    @property
    def b(self) -> ir.IRBuilder:
        return self.fs.builder

    # statements -------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For):
            self.for_loop(s)
        elif isinstance(s, Store):
            self.store(s, None)
        elif isinstance(s, IfThenElse):
            cond = self.expr(s.cond)
            if s.else_case is None:
                with self.b.if_then(cond):
                    self.stmt(s.then_case)
            else:
                with self.b.if_else(cond) as (then, otherwise):
                    with then:
                        self.stmt(s.then_case)
                    with otherwise:
                        self.stmt(s.else_case)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, KernelCall):
            self.kernel_call(s)
        elif isinstance(s, Prefetch):
            self.prefetch(s)
        elif isinstance(s, Barrier):
            pass
        else:
            raise TensorcError(f"LLVM codegen cannot emit {type(s).__name__}")

    def prefetch(self, s: Prefetch) -> None:
        """One read prefetch per cache line of the run: into all cache levels (locality 3,
        x86's prefetcht0), or from L2 on (locality 2, prefetcht1)."""
        intrinsic = self._declare("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
        base = self._pointer(s.buffer, self._scalar_index(s.index))
        locality = ir.Constant(I32, 3 if s.level <= 1 else 2)
        for offset in range(0, s.nbytes, CACHE_LINE):
            ptr = self.b.gep(base, [ir.Constant(I64, offset)], source_etype=I8) if offset \
                else base
            self.b.call(intrinsic, [ptr, ir.Constant(I32, 0), locality, ir.Constant(I32, 1)])

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        ty = storage_type(buf.dtype)
        if not _on_heap(buf):
            # allocas live in the entry block so that loops do not grow the stack; a local
            # block has room for the masked-off lanes of a padded vector, so its accesses
            # need no mask and LLVM keeps it in registers
            size = buf.size + (LANE_PADDING if buf.scope == "local" else 0)
            self.fs.allocated[buf] = size
            entry = ir.IRBuilder(self.fs.entry)
            ptr = _opaque(entry.alloca(ty, size=ir.Constant(I64, size), name=buf.name))
            ptr.align = 64
            if buf.scope == "local" and _has_padding_lanes(buf):
                # zeroed once per call (or per worker): the padding lanes that unmasked
                # accesses read are never written otherwise, and stack garbage there is
                # often denormal; a 3x3 depthwise conv on 28x28 maps ran 30x slower (1.1
                # instead of 0.035 ms) on it, depending on what the stack held before
                memset = self.module.declare_intrinsic("llvm.memset", [PTR, I64])
                entry.call(memset, [ptr, ir.Constant(ir.IntType(8), 0),
                                    ir.Constant(I64, size * _itemsize(buf.dtype)),
                                    ir.Constant(ir.IntType(1), 0)])
            self.fs.buffers[buf] = ptr
            self.stmt(s.body)
            return
        # Buffers allocated one inside the other (a kernel's stages at the root) share one
        # block. Freed separately, the heap's top would hold their sum, which glibc returns
        # to the system once it exceeds twice the largest block it has freed (its trim
        # threshold): every call then faulted its pages in again (a Winograd conv's input,
        # transformed input and GEMM result: 10-15% of its time).
        chain = [s]
        while isinstance(chain[-1].body, Allocate) and _on_heap(chain[-1].body.buffer):
            chain.append(chain[-1].body)
        offsets, total = [], 0
        for a in chain:
            offsets.append(total)
            total += -(-a.buffer.nbytes // 64) * 64
        malloc = self._declare("aligned_alloc", PTR, [I64, I64])
        free = self._declare("free", VOID, [PTR])
        ptr = self.b.call(malloc, [ir.Constant(I64, 64), ir.Constant(I64, total)])
        for a, offset in zip(chain, offsets):
            self.fs.buffers[a.buffer] = self.b.gep(ptr, [ir.Constant(I64, offset)],
                                                   source_etype=I8) if offset else ptr
        self.stmt(chain[-1].body)
        self.b.call(free, [ptr])

    def kernel_call(self, s: KernelCall) -> None:
        fn = self.functions[s.func]
        args = []
        for buf, offset in s.args:
            ptr = self.fs.buffers[buf]
            if offset:
                ptr = self.b.gep(ptr, [ir.Constant(I64, offset)], source_etype=I8)
            args.append(ptr)
        self.b.call(fn, args)

    def for_loop(self, s: For) -> None:
        n = arith.as_const_int(s.extent)
        if n is not None:
            self.fs.ranges[s.var] = (0, n - 1)
        if s.kind == "vectorized" and n is not None and n > 1 and self.vector_loop(s, n):
            return
        if s.kind == "unrolled" and n is not None and self._interleaved_tile(s, n):
            return
        if s.kind == "unrolled" and n is not None and (self._transposed_tile(s, n) or
                                                       self._guarded_transposed_tile(s, n)):
            return
        if s.kind == "serial" and n is not None and self._horizontal_reduction(s, n):
            return
        if s.kind == "unrolled" and n is not None and n <= UNROLL_LIMIT:
            for k in range(n):
                self.fs.env[s.var] = ir.Constant(I64, k)
                self.stmt(s.body)
            del self.fs.env[s.var]
            return
        if s.kind == "parallel" and not self.in_parallel:
            self.parallel_loop(s)
            return
        if s.kind.startswith(("blockIdx", "threadIdx")):
            raise TensorcError(f"loop {s.var.name} is bound to {s.kind}, which a CPU target "
                               f"cannot run; compile for target='cuda' or schedule it again")
        self.serial_loop(s.var, self.expr(s.extent), lambda: self.stmt(s.body))

    def serial_loop(self, var: E.Var, extent: ir.Value, emit_body, start=None) -> None:
        b = self.b
        pre = b.block
        header = b.append_basic_block(f"{var.name}.head")
        body = b.append_basic_block(f"{var.name}.body")
        done = b.append_basic_block(f"{var.name}.done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, name=var.name)
        i.add_incoming(start if start is not None else ir.Constant(I64, 0), pre)
        b.cbranch(b.icmp_signed("<", i, extent), body, done)
        b.position_at_end(body)
        self.fs.env[var] = i
        emit_body()
        nxt = b.add(i, ir.Constant(I64, 1), flags=["nsw"])
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)
        del self.fs.env[var]

    def parallel_loop(self, s: For) -> None:
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
        ``MIN_CHUNK_WORK`` stores (estimated from the body's loop nest), so the counters cost
        little. A loop with one chunk, or a run at one thread, calls the body directly and
        wakes no worker."""
        captured_vars = sorted({v for st in walk_stmts(s.body) for e in stmt_exprs(st)
                                for v in E.free_vars(e) if v in self.fs.env},
                               key=lambda v: v.name)
        captured_bufs = [b for b in buffers_used(s.body) if b in self.fs.buffers]
        # the closure: [ticket, chunk size, ranges, the ranges' next iterations (a cache
        # line apart), captured values...]
        counters = ir.ArrayType(I64, MAX_RANGES * COUNTER_STRIDE)
        fields = [I64, I64, I64, counters] + [I64] * len(captured_vars) + \
            [PTR] * len(captured_bufs)
        first = 4     # the first captured value's field
        closure_ty = ir.LiteralStructType(fields)
        self._outlined += 1
        name = f"{self.fs.fn.name}.par{self._outlined}"
        fn = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        extent = self._const_extent(s.extent)
        n = extent.constant

        # caller: pack the closure, size the chunks, run the body on the team
        b = self.b
        entry = ir.IRBuilder(self.fs.entry)
        closure = _opaque(entry.alloca(closure_ty, name=f"{name}.closure"))

        def slot(builder, base, k):
            return builder.gep(base, [ir.Constant(I32, 0), ir.Constant(I32, k)],
                               source_etype=closure_ty)

        values = [self.fs.env[v] for v in captured_vars] + \
                 [self.fs.buffers[buf] for buf in captured_bufs]
        for k, v in enumerate(values):
            b.store(v, slot(b, closure, k + first))
        nthreads = b.load(self.num_threads, typ=I32)
        nth = b.sext(nthreads, I64)
        min_chunk = max(1, -(-MIN_CHUNK_WORK // max(1, _stmt_work(s.body))))
        share = b.mul(nth, ir.Constant(I64, CHUNKS_PER_THREAD))
        chunk = b.sdiv(b.add(extent, b.sub(share, ir.Constant(I64, 1))), share)
        chunk = b.select(b.icmp_signed("<", chunk, ir.Constant(I64, min_chunk)),
                         ir.Constant(I64, min_chunk), chunk)
        b.store(ir.Constant(I64, 0), slot(b, closure, 0))
        b.store(chunk, slot(b, closure, 1))
        chunks = b.sdiv(b.add(extent, b.sub(chunk, ir.Constant(I64, 1))), chunk)
        # no more threads than chunks: a thread with nothing to take only costs a wake-up
        team = b.select(b.icmp_signed("<", chunks, nth), chunks, nth)
        ranges = b.select(b.icmp_signed("<", team, ir.Constant(I64, MAX_RANGES)), team,
                          ir.Constant(I64, MAX_RANGES))
        b.store(ranges, slot(b, closure, 2))

        def counter(builder, base, r):
            return builder.gep(base, [ir.Constant(I32, 0), ir.Constant(I32, 3),
                                      builder.mul(r, ir.Constant(I64, COUNTER_STRIDE))],
                               source_etype=closure_ty)

        def range_start(builder, r, count):
            return builder.sdiv(builder.mul(r, extent), count)

        # each range's counter starts at its first iteration
        self.serial_loop(_RANGE_VAR, ranges, lambda: b.store(
            range_start(b, self.fs.env[_RANGE_VAR], ranges),
            counter(b, closure, self.fs.env[_RANGE_VAR])))
        alone = b.icmp_signed("<=", team, ir.Constant(I64, 1)) if n > 1 else ir.Constant(I1, 1)
        with b.if_else(alone) as (serial, threaded):
            with serial:
                b.call(fn, [closure])
            with threaded:
                pool = self._declare("tensorc_parallel", VOID, [PTR, PTR, I32])
                b.call(pool, [fn, closure, b.trunc(team, I32)])

        # callee: unpack, take a ticket, then take chunks from the home range's counter
        # until it passes the range's end, then from the other ranges' counters
        state = _FuncState(fn, {}, {})
        state.ranges = dict(self.fs.ranges)
        cb = state.builder
        for k, key in enumerate([*captured_vars, *captured_bufs]):
            val = cb.load(slot(cb, fn.args[0], k + first), typ=fields[k + first])
            (state.env if isinstance(key, E.Var) else state.buffers)[key] = val
        own_chunk = cb.load(slot(cb, fn.args[0], 1), typ=I64)
        own_ranges = cb.load(slot(cb, fn.args[0], 2), typ=I64)
        ticket = cb.atomic_rmw("add", slot(cb, fn.args[0], 0), ir.Constant(I64, 1), "monotonic")
        home = cb.urem(ticket, own_ranges)
        # ranges visited: the home range, then the next ones in turn
        visited = ir.IRBuilder(state.entry).alloca(I64)
        cb.store(ir.Constant(I64, 0), visited)
        saved, saved_par = self.fs, self.in_parallel
        self.fs, self.in_parallel = state, True
        visit = cb.append_basic_block(f"{name}.visit")
        take = cb.append_basic_block(f"{name}.take")
        run = cb.append_basic_block(f"{name}.run")
        drained = cb.append_basic_block(f"{name}.drained")
        done = cb.append_basic_block(f"{name}.done")
        cb.branch(visit)
        cb.position_at_end(visit)
        seen = cb.load(visited, typ=I64)
        r = cb.urem(cb.add(home, seen), own_ranges)
        end = range_start(cb, cb.add(r, ir.Constant(I64, 1)), own_ranges)
        next_iteration = counter(cb, fn.args[0], r)
        cb.cbranch(cb.icmp_signed("<", seen, own_ranges), take, done)
        cb.position_at_end(take)
        lo = cb.atomic_rmw("add", next_iteration, own_chunk, "monotonic")
        cb.cbranch(cb.icmp_signed("<", lo, end), run, drained)
        cb.position_at_end(run)
        hi = cb.add(lo, own_chunk)
        hi = cb.select(cb.icmp_signed("<", hi, end), hi, end)
        self.serial_loop(s.var, hi, lambda: self.stmt(s.body), start=lo)
        cb.branch(take)
        cb.position_at_end(drained)
        cb.store(cb.add(seen, ir.Constant(I64, 1)), visited)
        cb.branch(visit)
        cb.position_at_end(done)
        cb.ret_void()
        ir.IRBuilder(state.entry).branch(fn.blocks[1])
        self.fs, self.in_parallel = saved, saved_par

    def _const_extent(self, e: E.Expr) -> ir.Value:
        n = arith.as_const_int(e)
        if n is None:
            raise TensorcError("parallel loops need a constant extent")
        return ir.Constant(I64, n)

    # vector loops -----------------------------------------------------------------------
    def vector_loop(self, s: For, lanes: int) -> bool:
        """Emit ``s`` as straight-line vector code; False when the body does not allow it
        (then the caller emits a scalar loop)."""
        if not _vectorizable(s.body, s.var):
            return False
        # an odd extent (13, 7) runs on the next power of two with the extra lanes masked:
        # LLVM legalizes odd-width vectors into scalar shuffles, power-of-two ones into
        # whole registers
        width = _pow2_at_least(lanes) if _predicable(s.body) else lanes
        self.vec_var, self.lanes, self.active_lanes = s.var, width, lanes
        self._set_lanes(list(range(width)))
        self.fs.ranges[s.var] = (0, width - 1)
        saved_mask = self.lane_mask
        self.lane_mask = None if width == lanes else ir.Constant(
            ir.VectorType(I1, width), [int(k < lanes) for k in range(width)])
        self.tail_mask_only = True
        self.vector_stmt(s.body, s)
        self.lane_mask = saved_mask
        del self.fs.env[s.var]
        return True

    def _interleaved_tile(self, s: For, k: int) -> bool:
        """k vectors interleaved into whole vectors of consecutive elements: ``s`` an
        unrolled loop over u around a vector loop over v storing ``out[base + u + k * v]``
        (see ``ir.loop.interleaved_tile``; a Winograd tile's output columns), maybe guarded.
        As written, each vector would be scattered lane by lane; instead the k vectors (and
        their guards' masks) are computed first, interleaved with k * log2(k) shuffles, and
        stored as k contiguous vectors, masked where a guard or an odd width asks."""
        found = interleaved_tile(s)
        if found is None or getattr(self, "vec_var", None) in self.fs.env:
            return False
        inner, st = found
        lanes = arith.as_const_int(inner.extent)
        guard = inner.body.cond if isinstance(inner.body, IfThenElse) else None
        if lanes is None or lanes < 2 or len(st.indices) != 1 or \
                not _vectorizable(inner.body, inner.var) or not _predicable(inner.body) or \
                any(isinstance(e, E.Load) and e.source == st.buffer for e in E.walk(st.value)):
            return False
        width = _pow2_at_least(lanes)
        tail = None if width == lanes else ir.Constant(
            ir.VectorType(I1, width), [int(j < lanes) for j in range(width)])
        saved = self.lane_mask, self.tail_mask_only
        self.fs.ranges[s.var] = (0, k - 1)
        values, masks = [], []
        for u in range(k):
            self.fs.env[s.var] = ir.Constant(I64, u)
            self.vec_var, self.lanes, self.active_lanes = inner.var, width, lanes
            self._set_lanes(list(range(width)))
            self.fs.ranges[inner.var] = (0, width - 1)
            mask = tail
            if guard is not None:
                held = self._broadcast(self.expr(guard, width), width)
                mask = held if mask is None else self.b.and_(held, mask)
            # the value's loads run on the stored lanes only
            self.lane_mask, self.tail_mask_only = mask, guard is None
            values.append(self._to_storage(self._broadcast(self.expr(st.value, width), width),
                                           st.buffer.dtype))
            masks.append(mask)
            del self.fs.env[inner.var]
        self.lane_mask, self.tail_mask_only = saved
        self.fs.env[s.var] = ir.Constant(I64, 0)
        self.fs.env[inner.var] = ir.Constant(I64, 0)
        base = self._pointer(st.buffer, self._scalar_index(st.indices[0]))
        del self.fs.env[inner.var], self.fs.env[s.var]
        ety = storage_type(st.buffer.dtype)
        rows = self._interleave(values)
        row_masks = self._interleave(masks) if masks[0] is not None else [None] * k
        for j, (row, mask) in enumerate(zip(rows, row_masks)):
            ptr = self.b.gep(base, [ir.Constant(I64, j * width)], source_etype=ety) if j \
                else base
            if mask is None:
                self.b.store(row, ptr).align = 4
            else:
                self._masked_store(row, ptr, mask, st.buffer.dtype)
        return True

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
                out.append(self.b.shuffle_vector(a, b, ir.Constant(ir.VectorType(I32, w),
                                                                   picks)))
        return out

    def _transposed_tile(self, s: For, m: int) -> bool:
        """An m x n tile stored transposed, from registers: ``s`` an unrolled loop over u
        (m <= n iterations) around a vector loop over v (n lanes), storing
        ``out[base + u + stride * v]``: contiguous along u, so as written each vector (one u)
        would be scattered lane by lane. Instead the m vectors are computed first,
        transposed with shuffles, and stored as n vectors (one per v) of m contiguous
        elements (masked stores where m < n: a concat part or a row's tail shorter than a
        vector). A transposing group (``transposed_axis`` in ops/schedules.py) is tiled so;
        False where ``s`` is not such a tile."""
        if not self._transposable(s, m):
            return False
        inner = s.body
        st = inner.body
        n = arith.as_const_int(inner.extent)
        (index,) = st.indices
        stride = arith.linear_coeff(index, inner.var)[1]
        values = []
        saved_mask = self.lane_mask
        self.fs.ranges[s.var] = (0, m - 1)
        for k in range(m):
            self.fs.env[s.var] = ir.Constant(I64, k)
            self.vec_var, self.lanes, self.active_lanes = inner.var, n, n
            self._set_lanes(list(range(n)))
            self.fs.ranges[inner.var] = (0, n - 1)
            self.lane_mask = None
            values.append(self._to_storage(self._broadcast(self.expr(st.value, n), n),
                                           st.buffer.dtype))
            del self.fs.env[inner.var]
        self.lane_mask = saved_mask
        self.fs.env[s.var] = ir.Constant(I64, 0)
        self.fs.env[inner.var] = ir.Constant(I64, 0)
        base = self._pointer(st.buffer, self._scalar_index(index))
        del self.fs.env[inner.var], self.fs.env[s.var]
        ety = storage_type(st.buffer.dtype)
        values += [ir.Constant(values[0].type, ir.Undefined)] * (n - m)
        mask = None if m == n else ir.Constant(ir.VectorType(I1, n), [k < m for k in range(n)])
        prefetch = self._declare("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
        for j, row in enumerate(self._transpose(values)):
            ptr = self.b.gep(base, [ir.Constant(I64, j * stride)], source_etype=ety) if j \
                else base
            # The rows land in n different cache lines (or two each): a cold output costs a
            # read for ownership of each, one after another. Ask for the lines of the next
            # block along v (n rows on) for writing now, so that they arrive in parallel.
            ahead = self.b.gep(ptr, [ir.Constant(I64, n * stride)], source_etype=ety)
            self.b.call(prefetch, [ahead, ir.Constant(I32, 1), ir.Constant(I32, 3),
                                   ir.Constant(I32, 1)])
            if mask is None:
                self.b.store(row, ptr).align = 4
            else:
                self._masked_store(row, ptr, mask, st.buffer.dtype)
        return True

    def _transposable(self, s: For, m: int) -> bool:
        """Whether ``s`` is a tile that ``_transposed_tile`` stores transposed."""
        inner = s.body
        if getattr(self, "vec_var", None) in self.fs.env or not isinstance(inner, For) or \
                inner.kind != "vectorized" or not isinstance(inner.body, Store):
            return False
        n = arith.as_const_int(inner.extent)
        if n not in (4, 8, 16) or not 2 <= m <= n:
            return False
        st = inner.body
        if len(st.indices) != 1 or _itemsize(st.buffer.dtype) != 4 or \
                not _vectorizable(st, inner.var) or \
                any(isinstance(e, E.Load) and e.source == st.buffer
                    for e in E.walk(st.value)):
            return False
        (index,) = st.indices
        lin_u = arith.linear_coeff(index, s.var)
        lin_v = arith.linear_coeff(index, inner.var)
        return lin_u is not None and lin_v is not None and lin_u[1] == 1 and lin_v[1] >= m

    def _guarded_transposed_tile(self, s: For, m: int) -> bool:
        """A transposed tile (``_transposed_tile``) whose every store is under one guard
        that depends on neither of the tile's loops (a register tile's second row of
        outputs, past the map's last row in the last tile): the guard is tested once, around
        the transposed stores, instead of storing lane by lane."""
        inner = s.body
        if not isinstance(inner, For) or not isinstance(inner.body, IfThenElse) or \
                inner.body.else_case is not None:
            return False
        guard = inner.body
        if E.uses_var(guard.cond, s.var) or E.uses_var(guard.cond, inner.var):
            return False
        bare = For(s.var, s.extent, s.kind,
                   For(inner.var, inner.extent, inner.kind, guard.then_case))
        if not self._transposable(bare, m):
            return False
        with self.b.if_then(self.expr(guard.cond)):
            self._transposed_tile(bare, m)
        return True

    def _horizontal_reduction(self, s: For, n: int) -> bool:
        """``acc[i] = acc[i] op part(j)`` over a serial ``j`` whose ``part`` reads local
        buffers contiguously in ``j``: the partial results of an rfactor (a row's max or sum
        kept in a few vector registers). As written it is one dependent scalar op per partial
        (64 of them after a 4-register row sum, about 200 cycles); instead the partials are
        loaded as whole vectors, combined pairwise and reduced across lanes with shuffles.
        max and min are exact in any order; a sum is reassociated as the rfactor already did.
        False where ``s`` is no such loop."""
        st = s.body
        if getattr(self, "vec_var", None) in self.fs.env or not isinstance(st, Store) or \
                len(st.indices) != 1 or E.uses_var(st.indices[0], s.var):
            return False
        value = st.value
        if not isinstance(value, E.Binary) or value.op not in ("add", "max", "min") or \
                not E.is_float(value.dtype):
            return False

        def is_acc(e: E.Expr) -> bool:
            return isinstance(e, E.Load) and e.source is st.buffer and \
                E.same(e.indices[0], st.indices[0])
        def partial_read(e: E.Expr) -> bool:
            """Not a load, or one that reads partials: a local buffer, contiguous in j."""
            if not isinstance(e, E.Load) or e.source is st.buffer:
                return not isinstance(e, E.Load)
            if not E.uses_var(e.indices[0], s.var):
                return True
            step = arith.linear_coeff(e.indices[0], s.var)
            return e.source.scope == "local" and step is not None and step[1] == 1
        acc, part = (value.a, value.b) if is_acc(value.a) else (value.b, value.a)
        if not is_acc(acc) or not E.uses_var(part, s.var) or \
                not all(partial_read(e) for e in E.walk(part)):
            return False
        lanes = self._register_lanes(value.dtype)
        if n < lanes:
            return False
        lane = E.Var(f"{s.var.name}.lane")
        vectors = []
        self.fs.ranges[lane] = (0, lanes - 1)
        saved_mask, self.lane_mask = self.lane_mask, None
        for k in range(n // lanes):
            self.vec_var, self.lanes, self.active_lanes = lane, lanes, lanes
            self._set_lanes(list(range(lanes)))
            chunk = E.substitute(part, {s.var: lane + k * lanes})
            vectors.append(self._broadcast(self.expr(chunk, lanes), lanes))
            del self.fs.env[lane]
        self.lane_mask = saved_mask
        while len(vectors) > 1:
            pairs = [self.binary(value.op, value.dtype, a, b)
                     for a, b in zip(vectors[0::2], vectors[1::2])]
            vectors = pairs + vectors[len(pairs) * 2:]
        (vector,) = vectors
        ety = vector.type.element
        if value.op == "add":
            fn = self._declare(f"llvm.vector.reduce.fadd.v{lanes}{_type_suffix(ety)}", ety,
                               [ety, vector.type])
            total = self.b.call(fn, [ir.Constant(ety, -0.0), vector], fastmath=("reassoc",))
        else:
            name = "fmaximum" if value.op == "max" else "fminimum"
            fn = self._declare(f"llvm.vector.reduce.{name}.v{lanes}{_type_suffix(ety)}", ety,
                               [vector.type])
            total = self.b.call(fn, [vector], fastmath=("nsz",))
        for j in range(n // lanes * lanes, n):     # partials past the last whole vector
            self.fs.env[s.var] = ir.Constant(I64, j)
            total = self.binary(value.op, value.dtype, total, self.expr(part))
        self.fs.env.pop(s.var, None)
        self.b.store(self._to_storage(self.binary(value.op, value.dtype, self.expr(acc), total),
                                      st.buffer.dtype),
                     self._pointer(st.buffer, self._scalar_index(st.indices[0])))
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
                                               ir.Constant(ir.VectorType(I32, n), low))
                out[j] = self.b.shuffle_vector(rows[i], rows[j],
                                               ir.Constant(ir.VectorType(I32, n), high))
            rows = out
            bit //= 2
        return rows

    def _set_lanes(self, lane_ids: list[int]) -> None:
        """Bind the vector variable to the values ``lane_ids`` (one per vector element)."""
        self.lane_ids = lane_ids
        self.fs.env[self.vec_var] = ir.Constant(ir.VectorType(I64, len(lane_ids)), lane_ids)

    def vector_stmt(self, st: Stmt, loop: For) -> None:
        if isinstance(st, Seq):
            for c in st.stmts:
                self.vector_stmt(c, loop)
        elif isinstance(st, Store):
            self.store(st, self.lanes)
        elif isinstance(st, IfThenElse):
            if not E.uses_var(st.cond, loop.var):
                with self.b.if_then(self.expr(st.cond)):
                    self.vector_stmt(st.then_case, loop)
                return
            # An affine condition holds on all lanes iff it holds on the first and last:
            # then the body runs as plain vector code. Otherwise (a row's tail) it runs
            # predicated: global loads and stores masked to the lanes where the condition
            # holds, so masked-off lanes never touch memory.
            env = self.fs.env
            vec = env[loop.var]
            env[loop.var] = ir.Constant(I64, 0)
            first = self.expr(st.cond)
            env[loop.var] = ir.Constant(I64, self.active_lanes - 1)
            last = self.expr(st.cond)
            env[loop.var] = vec
            all_lanes = self.b.and_(first, last)
            with self.b.if_else(all_lanes) as (then, otherwise):
                with then:
                    self.vector_stmt(st.then_case, loop)
                with otherwise:
                    if _predicable(st.then_case):
                        self._predicated(st, loop)
                    else:
                        del env[loop.var]
                        self.serial_loop(loop.var, ir.Constant(I64, self.active_lanes),
                                         lambda: self.stmt(st))
                        env[loop.var] = vec

    def _predicated(self, st: IfThenElse, loop: For) -> None:
        mask = self._broadcast(self.expr(st.cond, self.lanes), self.lanes)
        if self.lane_mask is not None:
            mask = self.b.and_(mask, self.lane_mask)
        any_lane = self.b.call(self._declare(f"llvm.vector.reduce.or.v{self.lanes}i1", I1,
                                             [mask.type]), [mask])
        with self.b.if_then(any_lane):
            saved, self.lane_mask = self.lane_mask, mask
            saved_tail, self.tail_mask_only = self.tail_mask_only, False
            self.vector_stmt(st.then_case, loop)
            self.lane_mask, self.tail_mask_only = saved, saved_tail

    def _check_index(self, index: ir.Value, size: int) -> ir.Value:
        """``index``; where it lies outside [-size, size) in a running lane, the run's status
        becomes the kernel call's number plus one and ``tensorc_bad_index`` the index."""
        b = self.b
        vector = isinstance(index.type, ir.VectorType)
        lanes = index.type.count if vector else None

        def constant(value: int) -> ir.Value:
            c = ir.Constant(I64, value)
            return self._broadcast(c, lanes) if vector else c
        # index + size lies in [0, 2 size) exactly when index is in range: one unsigned compare
        bad = b.icmp_unsigned(">=", b.add(index, constant(size)), constant(2 * size))
        value = index
        if vector:
            if self.lane_mask is not None and self.lane_mask.type.count == lanes:
                bad = b.and_(bad, self.lane_mask)
            any_bad = b.call(self._declare(f"llvm.vector.reduce.or.v{lanes}i1", I1,
                                           [bad.type]), [bad])
            picked = b.select(bad, index, constant(-(2 ** 63)))
            value = b.call(self._declare(f"llvm.vector.reduce.smax.v{lanes}i64", I64,
                                         [picked.type]), [picked])
        else:
            any_bad = bad
        with b.if_then(any_bad, likely=False):
            b.store(b.add(b.load(self.current_call, typ=I32), ir.Constant(I32, 1)),
                    self.status)
            b.store(value, self.bad_index)
            b.store(ir.Constant(I64, size), self.bad_size)
        return index

    def _masked(self, buf: Buffer, index: E.Expr | None = None, store: bool = False
                ) -> ir.Value | None:
        """The lane mask that an access of ``buf`` at ``index`` needs. Local blocks need
        none where every lane stays inside the allocation (they are padded for this): a load
        in masked-off lanes then reads harmless garbage, and a store of an odd-width vector
        at the start of a row whose pitch is the vector's width (lowering pads rows so) puts
        its padding lanes in that row's own padding, never on another element. So LLVM keeps
        accumulators in registers."""
        if buf.scope != "local" or index is None:
            return self.lane_mask
        stride = 0
        if self.lane_mask is not None or not store:
            lin = arith.linear_coeff(index, self.vec_var)
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
            if (pitch == self.lanes and _multiple_of(base, pitch)) or \
                    lo + self.active_lanes >= buf.size:
                return None
        return self.lane_mask

    def _local_vector(self, buf: Buffer, index: E.Expr | None, lanes: int) -> bool:
        """Whether a vector access of ``buf`` at ``index`` is a contiguous run of ``lanes``
        elements inside a local buffer's allocation."""
        if index is None or buf.scope != "local":
            return False
        lin = arith.linear_coeff(index, self.vec_var)
        return lin is not None and lin[1] == 1 and self._in_allocation(buf, lin[0], lanes)

    def _in_allocation(self, buf: Buffer, base: E.Expr, span: int) -> bool:
        """Whether ``buf[base : base + span]`` lies inside ``buf``'s allocation (local
        buffers only: parameters' extents are not known to be padded)."""
        if buf.scope != "local":
            return False
        lo, hi = arith.const_bounds(base, self.fs.ranges)
        return lo is not None and hi is not None and lo >= 0 and \
            hi + span <= self.fs.allocated.get(buf, buf.size)

    # memory -----------------------------------------------------------------------------
    def _pointer(self, buf: Buffer, index: ir.Value) -> ir.Value:
        return self.b.gep(self.fs.buffers[buf], [index], source_etype=storage_type(buf.dtype))

    def load(self, e: E.Load, lanes: int | None) -> ir.Value:
        buf = e.source
        (index,) = e.indices
        if lanes is not None and E.uses_var(index, self.vec_var):
            lin = arith.linear_coeff(index, self.vec_var)
            if lin is not None and lin[1] == 1:
                ptr = self._pointer(buf, self._scalar_index(lin[0]))
                return self._from_storage(self._contiguous_load(ptr, buf, lanes, index),
                                          buf.dtype)
            if lin is not None and 2 <= lin[1] <= MAX_SHUFFLE_STRIDE:
                return self._strided_load(buf, lin[0], lin[1], lanes, index)
            mask = self._masked(buf, index)
            step = None if mask is not None else _two_step(index, self.vec_var, lanes)
            if step is not None:
                return self._two_step_load(buf, *step, lanes)
            return self._gather(buf, self.expr(index, lanes), lanes, mask)
        ptr = self._pointer(buf, self._scalar_index(index))
        return self._from_storage(self.b.load(ptr, typ=storage_type(buf.dtype)), buf.dtype)

    def _two_step_load(self, buf: Buffer, outer: E.Expr, scale: int, numerator: E.Expr,
                       divisor: int, lanes: int) -> ir.Value:
        """``buf[outer + scale * (numerator // divisor)]`` where the quotient takes at most two
        values over the vector, q and q + 1 (see :func:`_two_step`): two scalar loads and a
        select on the lanes whose numerator reaches (q + 1) * divisor, not a gather (a
        broadcast operand [C, 1, 1] of an elementwise loop over a flat [C, H, W]). The second
        load reads the last lane's element, which every unmasked vector has in bounds."""
        first = E.substitute(numerator, {self.vec_var: E.const(0, numerator.dtype)})
        last = E.substitute(numerator, {self.vec_var: E.const(lanes - 1, numerator.dtype)})
        q_first, q_last = (E.Binary("floordiv", n, E.const(divisor, n.dtype))
                           for n in (first, last))
        low, high = (self._from_storage(self.b.load(
            self._pointer(buf, self._scalar_index(outer + q * scale)),
            typ=storage_type(buf.dtype)), buf.dtype) for q in (q_first, q_last))
        threshold = self._scalar_index((q_first + 1) * divisor)
        upper = self.b.icmp_signed(">=", self.expr(numerator, lanes),
                                   self._broadcast(threshold, lanes))
        return self.b.select(upper, self._broadcast(high, lanes), self._broadcast(low, lanes))

    def _strided_load(self, buf: Buffer, base: E.Expr, stride: int, lanes: int,
                      index: E.Expr) -> ir.Value:
        """Elements base, base+stride, ...: one masked load of the covering span (masked-off
        lanes never fault), then a shuffle picks every stride-th element."""
        ety = storage_type(buf.dtype)
        used = stride * (lanes - 1) + 1
        span = _pow2_at_least(used)
        wide = ir.VectorType(ety, span)
        mask = ir.Constant(ir.VectorType(I1, span), [int(j % stride == 0 and j < used)
                                                     for j in range(span)])
        lane_mask = self._masked(buf, index)
        ptr = self._pointer(buf, self._scalar_index(base))
        if lane_mask is None and self._in_allocation(buf, base, span):
            # a local buffer with room past the span: one plain load, then the shuffle
            v = self.b.load(ptr, typ=wide)
            v.align = _itemsize(buf.dtype)
        else:
            if lane_mask is not None:
                mask = self.b.and_(mask, self._spread(lane_mask, stride, span))
            v = self._masked_load(ptr, mask, buf.dtype)
        return self._from_storage(self._pick(v, [k * stride for k in range(lanes)]),
                                  buf.dtype)

    def _pick(self, v: ir.Value, picks: list[int]) -> ir.Value:
        """The elements ``picks`` of vector ``v``. Narrowing a register (16 floats) to half
        of it, LLVM emits an extract and two shuffles (and folds two generic shuffles, or a
        permute intrinsic with constant indices, back into that); a register permute
        (vpermps) taking its low half does it in one instruction. Its indices are read from a
        global variable, which LLVM cannot fold (the read is hoisted out of loops)."""
        span, lanes = v.type.count, len(picks)
        undef = ir.Constant(v.type, ir.Undefined)
        permute = _REGISTER_PERMUTES.get((str(v.type.element), span * 32))
        if permute is None or span * 32 != self.target.vector_bits or span == lanes:
            return self.b.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, lanes),
                                                               picks))
        order_ty = ir.VectorType(I32, span)
        name = "tensorc_permute_" + "_".join(map(str, picks))
        order = self.module.globals.get(name)
        if order is None:
            order = ir.GlobalVariable(self.module, order_ty, name)
            order.initializer = ir.Constant(order_ty, picks + [0] * (span - lanes))
            order.align = span * 4
            order.linkage = "linkonce_odr"
        indices = self.b.load(order, typ=order_ty)
        indices.align = span * 4
        whole = self.b.call(self._declare(permute, v.type, [v.type, order_ty]), [v, indices])
        return self.b.shuffle_vector(whole, undef, ir.Constant(ir.VectorType(I32, lanes),
                                                               list(range(lanes))))

    def _contiguous_load(self, ptr: ir.Value, buf: Buffer, lanes: int,
                         index: E.Expr | None = None) -> ir.Value:
        """A vector load; an odd width (14, 7 lanes) from memory loads the next power of two
        with the extra lanes masked off, which legalizes into one masked instruction. Local
        buffers keep plain accesses, which LLVM promotes to registers. In a predicated region
        only the running lanes are loaded."""
        dtype = buf.dtype
        ety = storage_type(dtype)
        full = _pow2_at_least(lanes)
        lane_mask = self._masked(buf, index)
        if lane_mask is None and (full == lanes or buf.scope == "local"):
            v = self.b.load(ptr, typ=ir.VectorType(ety, lanes))
            v.align = _itemsize(dtype)
            return v
        wide = ir.VectorType(ety, full)
        v = self._masked_load(ptr, self._widened_mask(lane_mask, lanes, full), dtype)
        if full == lanes:
            return v
        return self.b.shuffle_vector(v, ir.Constant(wide, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, lanes), list(range(lanes))))

    def _contiguous_store(self, ptr: ir.Value, value: ir.Value, buf: Buffer, lanes: int,
                          index: E.Expr | None = None) -> None:
        dtype = buf.dtype
        full = _pow2_at_least(lanes)
        lane_mask = self._masked(buf, index, store=True)
        if lane_mask is not None and full == lanes and self._local_vector(buf, index, lanes):
            # a predicated store inside a local buffer (a register tile's remainder): the
            # lanes that do not run keep their value, by a select and a plain store, which
            # LLVM promotes to registers (a masked store stays in memory: each step of the
            # tile's reduction went through the stack; SqueezeNet's classifier, 512 -> 1000
            # onto 13x13, its last 9 columns so: 1.57 -> 1.30-1.38 ms at one thread)
            old = self.b.load(ptr, typ=value.type)
            old.align = _itemsize(dtype)
            value = self.b.select(self._widened_mask(lane_mask, lanes, full), value, old)
            lane_mask = None
        if lane_mask is None and (full == lanes or buf.scope == "local"):
            st = self.b.store(value, ptr)
            st.align = _itemsize(dtype)
            return
        if full != lanes:
            value = self.b.shuffle_vector(
                value, ir.Constant(value.type, ir.Undefined),
                ir.Constant(ir.VectorType(I32, full), [min(k, lanes - 1) for k in range(full)]))
        self._masked_store(value, ptr, self._widened_mask(lane_mask, lanes, full), dtype)

    def _masked_load(self, ptr: ir.Value, mask: ir.Value, dtype: str) -> ir.Value:
        """``llvm.masked.load`` of ``mask``'s width, issued in pieces of at most one register
        (LLVM splitting a wider masked load itself miscompiled the upper half on AVX2)."""
        ety = storage_type(dtype)
        width = mask.type.count
        piece = min(width, self._register_lanes(dtype))
        parts = []
        for start in range(0, width, piece):
            vty = ir.VectorType(ety, piece)
            fn = self._declare(f"llvm.masked.load.v{piece}{_type_suffix(ety)}.p0", vty,
                               [PTR, I32, ir.VectorType(I1, piece), vty])
            part_ptr = ptr if start == 0 else self.b.gep(ptr, [ir.Constant(I64, start)],
                                                         source_etype=ety)
            parts.append(self.b.call(fn, [part_ptr, ir.Constant(I32, _itemsize(dtype)),
                                          self._slice(mask, start, piece),
                                          ir.Constant(vty, ir.Undefined)]))
        return self._concat(parts)

    def _masked_store(self, value: ir.Value, ptr: ir.Value, mask: ir.Value, dtype: str) -> None:
        ety = storage_type(dtype)
        width = mask.type.count
        piece = min(width, self._register_lanes(dtype))
        for start in range(0, width, piece):
            vty = ir.VectorType(ety, piece)
            fn = self._declare(f"llvm.masked.store.v{piece}{_type_suffix(ety)}.p0", VOID,
                               [vty, PTR, I32, ir.VectorType(I1, piece)])
            part_ptr = ptr if start == 0 else self.b.gep(ptr, [ir.Constant(I64, start)],
                                                         source_etype=ety)
            self.b.call(fn, [self._slice(value, start, piece), part_ptr,
                             ir.Constant(I32, _itemsize(dtype)), self._slice(mask, start, piece)])

    def _register_lanes(self, dtype: str) -> int:
        return max(1, self.target.vector_bits // (8 * _itemsize(dtype)))

    def _slice(self, v: ir.Value, start: int, count: int) -> ir.Value:
        if start == 0 and count == v.type.count:
            return v
        return self.b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), ir.Constant(
            ir.VectorType(I32, count), list(range(start, start + count))))

    def _concat(self, parts: list[ir.Value]) -> ir.Value:
        while len(parts) > 1:
            merged = []
            for a, b in zip(parts[0::2], parts[1::2]):
                n = a.type.count
                merged.append(self.b.shuffle_vector(a, b, ir.Constant(
                    ir.VectorType(I32, 2 * n), list(range(2 * n)))))
            parts = merged
        return parts[0]

    def _widened_mask(self, lane_mask: ir.Value | None, lanes: int, full: int) -> ir.Value:
        """A ``full``-lane mask: ``lane_mask`` (or all lanes) for the first ``lanes``."""
        if lane_mask is None:
            return ir.Constant(ir.VectorType(I1, full), [int(k < lanes) for k in range(full)])
        if full == lanes:
            return lane_mask
        return self.b.shuffle_vector(
            lane_mask, ir.Constant(lane_mask.type, None),
            ir.Constant(ir.VectorType(I32, full), [k if k < lanes else lanes
                                                   for k in range(full)]))

    def _spread(self, lane_mask: ir.Value, stride: int, span: int) -> ir.Value:
        """Element j of a ``span``-wide strided access belongs to lane j // stride."""
        last = lane_mask.type.count - 1
        return self.b.shuffle_vector(
            lane_mask, ir.Constant(lane_mask.type, ir.Undefined),
            ir.Constant(ir.VectorType(I32, span), [min(j // stride, last)
                                                   for j in range(span)]))

    def _lane_compare(self, e: E.Compare, lanes: int) -> ir.Value | None:
        """An integer comparison affine in the vector variable, ``base + s*k OP 0`` for lanes
        k: compare the constant lane vector ``s*k`` with ``-base`` in 32-bit lanes (one
        instruction) instead of building 64-bit index vectors."""
        lin = arith.linear_coeff(e.a - e.b, self.vec_var)
        if lin is None or not _is_signed(e.a.dtype) or abs(lin[1]) * lanes >= 1 << 30:
            return None
        base, stride = lin
        b = self.b
        neg = self.cast(b.sub(ir.Constant(I64, 0), self.cast(self.expr(base, None),
                                                             e.a.dtype, "int64")),
                        "int64", "int64")
        # saturate -base into int32: the lane offsets are small, so the comparison is exact
        lo, hi = ir.Constant(I64, -(1 << 31)), ir.Constant(I64, (1 << 31) - 1)
        neg = b.select(b.icmp_signed("<", neg, lo), lo, neg)
        neg = b.select(b.icmp_signed(">", neg, hi), hi, neg)
        rhs = self._broadcast(b.trunc(neg, I32), lanes)
        offsets = ir.Constant(ir.VectorType(I32, lanes), [stride * k for k in self.lane_ids])
        return b.icmp_signed(_ICMP[e.op], offsets, rhs)

    def _guarded_load(self, e: E.Select, lanes: int) -> ir.Value | None:
        """``select(cond, B[clamp(i)], v)`` where cond proves every clamp a no-op (the padded
        load idiom): a masked vector load of ``B[i]`` (masked-off lanes never fault)."""
        load: E.Load = e.true_value
        buf = load.source
        if buf.dtype in ("bool", "bfloat16") or buf.dtype in narrow_dtypes.NARROW_DTYPES:
            return None
        index = _strip_justified_clamps(load.indices[0], e.cond)
        lin = None if index is None else arith.linear_coeff(index, self.vec_var)
        if lin is None or not 1 <= lin[1] <= MAX_SHUFFLE_STRIDE:
            return None
        base, stride = lin
        mask = self._broadcast(self.expr(e.cond, lanes), lanes)
        other = self._broadcast(self.expr(e.false_value, lanes), lanes)
        used = stride * (lanes - 1) + 1
        span = _pow2_at_least(used) if stride > 1 else lanes
        if stride > 1:
            # the condition of element j of the span is the condition of lane j // stride,
            # and only every stride-th element is loaded
            lane_ids = self.lane_ids
            self._set_lanes([min(j // stride, lanes - 1) for j in range(span)])
            spread = self._broadcast(self.expr(e.cond, span), span)
            self._set_lanes(lane_ids)
            pattern = ir.Constant(ir.VectorType(I1, span), [int(j % stride == 0 and j < used)
                                                             for j in range(span)])
            wide_mask = self.b.and_(spread, pattern)
        else:
            wide_mask = mask
        lane_mask = self._masked(buf, index)
        if lane_mask is not None:
            wide_mask = self.b.and_(wide_mask, lane_mask if stride == 1 else
                                    self._spread(lane_mask, stride, span))
        ptr = self._pointer(buf, self._scalar_index(base))
        v = self._masked_load(ptr, wide_mask, buf.dtype)
        if stride > 1:
            v = self._pick(v, [k * stride for k in range(lanes)])
        return self.b.select(mask, v, other)

    def _gather(self, buf: Buffer, idx: ir.Value, lanes: int,
                mask: ir.Value | None = None) -> ir.Value:
        ety = storage_type(buf.dtype)
        vty = ir.VectorType(ety, lanes)
        ptrs = self.b.gep(self.fs.buffers[buf], [idx], source_etype=ety)
        ptrs.type = ir.VectorType(PTR, lanes)     # llvmlite types a vector GEP as scalar
        fn = self._declare(f"llvm.masked.gather.v{lanes}{_type_suffix(ety)}.v{lanes}p0", vty,
                           [ir.VectorType(PTR, lanes), I32, ir.VectorType(I1, lanes), vty])
        if mask is None:
            mask = ir.Constant(ir.VectorType(I1, lanes), [1] * lanes)
        v = self.b.call(fn, [ptrs, ir.Constant(I32, _itemsize(buf.dtype)), mask,
                             ir.Constant(vty, ir.Undefined)])
        return self._from_storage(v, buf.dtype)

    def store(self, s: Store, lanes: int | None) -> None:
        buf = s.buffer
        (index,) = s.indices
        value = self.expr(s.value, lanes)
        if lanes is not None and E.uses_var(index, self.vec_var):
            value = self._broadcast(value, lanes)
            lin = arith.linear_coeff(index, self.vec_var)
            if lin is not None and lin[1] == 1:
                ptr = self._pointer(buf, self._scalar_index(lin[0]))
                self._contiguous_store(ptr, self._to_storage(value, buf.dtype), buf, lanes,
                                       index)
                return
            mask = self._masked(buf, index, store=True)
            if lin is not None:
                # a constant stride: lane k at a constant offset from one scalar address
                # (not an index vector whose lanes are moved to scalar registers one by one)
                base = self._pointer(buf, self._scalar_index(lin[0]))
                ety = storage_type(buf.dtype)
                pointers = [self.b.gep(base, [ir.Constant(I64, k * lin[1])], source_etype=ety)
                            for k in range(lanes)]
            else:
                idx = self.expr(index, lanes)
                pointers = [self._pointer(buf, self.b.extract_element(idx, ir.Constant(I32, k)))
                            for k in range(lanes)]
            for k, ptr in enumerate(pointers):
                x = self.b.extract_element(value, ir.Constant(I32, k))
                if mask is None:
                    self.b.store(self._to_storage(x, buf.dtype), ptr)
                    continue
                with self.b.if_then(self.b.extract_element(mask, ir.Constant(I32, k))):
                    self.b.store(self._to_storage(x, buf.dtype), ptr)
            return
        if isinstance(value.type, ir.VectorType):
            # a lane-invariant store in a vector loop: every lane writes the same element
            value = self.b.extract_element(value, ir.Constant(I32, value.type.count - 1))
        self.b.store(self._to_storage(value, buf.dtype),
                     self._pointer(buf, self._scalar_index(index)))

    def _decided(self, cond: E.Expr) -> bool | None:
        """``cond``'s value where every variable it reads is bound to a constant (the index
        of an unrolled loop): a select on the row of a Winograd transform then emits that
        row alone, not all of them for LLVM to fold away."""
        values = {}
        for var in E.free_vars(cond):
            bound = self.fs.env.get(var)
            if not isinstance(bound, ir.Constant) or not isinstance(bound.type, ir.IntType):
                return None
            values[var] = E.const(bound.constant, var.dtype)
        folded = arith.simplify(E.substitute(cond, values))
        return bool(folded.value) if isinstance(folded, E.Const) else None

    def _scalar_index(self, index: E.Expr) -> ir.Value:
        v = self.expr(index, None)
        if isinstance(v.type, ir.VectorType):
            raise TensorcError("internal: vector index where a scalar was expected")
        return v

    # expressions ------------------------------------------------------------------------
    def expr(self, e: E.Expr, lanes: int | None = None) -> ir.Value:
        """Emit ``e``; inside a vector loop (``lanes`` set) values that depend on the loop
        variable are vectors, the others stay scalars."""
        if lanes is not None and not E.uses_var(e, self.vec_var) and not isinstance(e, E.Var):
            lanes = None
        b = self.b
        if isinstance(e, E.Var):
            return self.fs.env[e]
        if isinstance(e, E.Const):
            return ir.Constant(value_type(e.dtype), e.value)
        if isinstance(e, E.Load):
            return self.load(e, lanes)
        if isinstance(e, E.Binary):
            x, y = self._pair(self.expr(e.a, lanes), self.expr(e.b, lanes))
            return self.binary(e.op, e.a.dtype, x, y)
        if isinstance(e, E.Compare):
            if lanes is not None and E.is_int(e.a.dtype):
                fast = self._lane_compare(e, lanes)
                if fast is not None:
                    return fast
            x, y = self._pair(self.expr(e.a, lanes), self.expr(e.b, lanes))
            if E.is_float(e.a.dtype):
                return b.fcmp_ordered(_ICMP[e.op], x, y) if e.op != "ne" else \
                    b.fcmp_unordered("!=", x, y)
            if _is_signed(e.a.dtype):
                return b.icmp_signed(_ICMP[e.op], x, y)
            return b.icmp_unsigned(_ICMP[e.op], x, y)
        if isinstance(e, E.Logical):
            if e.op == "not":
                return b.not_(self.expr(e.args[0], lanes))
            x, y = self._pair(self.expr(e.args[0], lanes), self.expr(e.args[1], lanes))
            return b.and_(x, y) if e.op == "and" else b.or_(x, y)
        if isinstance(e, E.Select):
            decided = self._decided(e.cond)
            if decided is not None:         # one branch only: the other is never emitted
                return self.expr(e.true_value if decided else e.false_value, lanes)
            if lanes is not None and isinstance(e.true_value, E.Load):
                guarded = self._guarded_load(e, lanes)
                if guarded is not None:
                    return guarded
            c = self.expr(e.cond, lanes)
            t, f = self._pair(self.expr(e.true_value, lanes), self.expr(e.false_value, lanes))
            if isinstance(c.type, ir.VectorType) or isinstance(t.type, ir.VectorType):
                n = c.type.count if isinstance(c.type, ir.VectorType) else t.type.count
                c, t, f = (self._broadcast(c, n), self._broadcast(t, n), self._broadcast(f, n))
            return b.select(c, t, f)
        if isinstance(e, E.Cast):
            return self.cast(self.expr(e.value, lanes), e.value.dtype, e.dtype)
        if isinstance(e, E.Call):
            return self.call(e, lanes)
        raise TensorcError(f"LLVM codegen cannot emit expression {type(e).__name__}")

def _two_step(index: E.Expr, var: E.Var, lanes: int
              ) -> tuple[E.Expr, int, E.Expr, int] | None:
    """``index`` as (outer, scale, numerator, divisor): outer + scale * (numerator // divisor)
    with ``outer`` free of ``var``, ``numerator`` affine in it with a stride c >= 1 such that
    c * (lanes - 1) < divisor, so that over the vector's lanes the quotient takes at most two
    consecutive values. Nested divisions by constants merge ((a // b) // c = a // (b * c)).
    None for any other index."""
    outer, scale = E.const(0, index.dtype), 1
    e = index
    while True:
        if isinstance(e, E.Binary) and e.op == "add":
            free, used = (e.a, e.b) if not E.uses_var(e.a, var) else (e.b, e.a)
            if E.uses_var(free, var):
                return None
            outer, e = outer + free * scale, used
        elif isinstance(e, E.Binary) and e.op == "mul" and isinstance(e.b, E.Const):
            scale, e = scale * int(e.b.value), e.a
        elif isinstance(e, E.Binary) and e.op == "mul" and isinstance(e.a, E.Const):
            scale, e = scale * int(e.a.value), e.b
        else:
            break
    divisor = 1
    while isinstance(e, E.Binary) and e.op == "floordiv" and isinstance(e.b, E.Const) and \
            int(e.b.value) > 0:
        divisor, e = divisor * int(e.b.value), e.a
    lin = arith.linear_coeff(e, var)
    if divisor == 1 or lin is None or lin[1] < 1 or lin[1] * (lanes - 1) >= divisor:
        return None
    return outer, scale, e, divisor


# Local blocks up to this size are zeroed whatever their rows (the cost is nothing)
ZEROED_LOCAL_BYTES = 64 * 1024
WIDEST_VECTOR_BYTES = 64


def _has_padding_lanes(buf: Buffer) -> bool:
    """Whether a local block may have lanes that vectors read but nothing writes: rows that
    are no whole number of the widest vectors. Larger blocks of whole-vector rows (a
    Winograd band's transformed tiles, hundreds of KB) are not zeroed on every call."""
    return buf.nbytes <= ZEROED_LOCAL_BYTES or not buf.shape or \
        buf.shape[-1] * _itemsize(buf.dtype) % WIDEST_VECTOR_BYTES != 0


def _on_heap(buf: Buffer) -> bool:
    """Whether a buffer is malloc'd (large global ones) rather than on the stack."""
    return buf.scope != "local" and buf.nbytes > 64 * 1024


def _stmt_work(s: Stmt) -> int:
    """Stores that ``s`` executes, from its loop nest (a loop of unknown extent counts 16,
    a conditional its larger branch): the size of a parallel loop's iteration."""
    if isinstance(s, For):
        n = arith.as_const_int(s.extent)
        return (16 if n is None else max(n, 0)) * _stmt_work(s.body)
    if isinstance(s, Seq):
        return sum(_stmt_work(c) for c in s.stmts)
    if isinstance(s, Store):
        return 1
    if isinstance(s, Allocate):
        return _stmt_work(s.body)
    if isinstance(s, IfThenElse):
        return max(_stmt_work(s.then_case),
                   _stmt_work(s.else_case) if s.else_case is not None else 0)
    if isinstance(s, KernelCall):
        return MIN_CHUNK_WORK
    return 0


def _conjuncts(c: E.Expr) -> list[E.Expr]:
    if isinstance(c, E.Logical) and c.op == "and":
        return [x for a in c.args for x in _conjuncts(a)]
    return [c]


def _strip_justified_clamps(index: E.Expr, cond: E.Expr) -> E.Expr | None:
    """``index`` with each clamp ``max(e, 0)`` / ``min(e, n - 1)`` replaced by ``e`` where
    ``cond`` has the conjunct ``e >= 0`` / ``e < n``; None when nothing could be stripped."""
    lower, upper = set(), set()
    for c in _conjuncts(cond):
        if isinstance(c, E.Compare) and isinstance(c.b, E.Const):
            if c.op == "ge" and c.b.value == 0:
                lower.add(arith.expr_key(c.a))
            elif c.op == "lt":
                upper.add((arith.expr_key(c.a), c.b.value))
    stripped = False

    def fn(x: E.Expr):
        nonlocal stripped
        if isinstance(x, E.Binary) and isinstance(x.b, E.Const):
            key = arith.expr_key(x.a)
            if (x.op == "max" and x.b.value == 0 and key in lower) or \
                    (x.op == "min" and (key, x.b.value + 1) in upper):
                stripped = True
                return x.a
        return None
    out = E.transform(index, fn)
    return out if stripped else None


def _vectorizable(s: Stmt, var: E.Var) -> bool:
    """Straight-line stores (possibly guarded) whose guards are affine in ``var``."""
    if isinstance(s, Store):
        # Every lane storing a var-dependent value to the same element is a reduction over
        # ``var`` (``acc = acc + x[var]``): the lanes depend on each other, so stay scalar.
        return any(E.uses_var(i, var) for i in s.indices) or not E.uses_var(s.value, var)
    if isinstance(s, Seq):
        return all(_vectorizable(c, var) for c in s.stmts)
    if isinstance(s, IfThenElse):
        return s.else_case is None and _affine_condition(s.cond, var) and \
            _vectorizable(s.then_case, var)
    return False


def _multiple_of(e: E.Expr, n: int) -> bool:
    """Whether the integer expression ``e`` is a multiple of ``n`` for every value of its
    variables (every term's coefficient and the constant are)."""
    aff = arith.to_affine(e, {})
    return aff.const % n == 0 and all(c % n == 0 for _, c in aff.terms.values())


def _predicable(s: Stmt) -> bool:
    """Whether ``s`` can run with some vector lanes masked off: its memory accesses are
    masked, but arithmetic runs on every lane, so it must not trap (integer division)."""
    for st in walk_stmts(s):
        for e in stmt_exprs(st):
            for x in E.walk(e):
                if isinstance(x, E.Binary) and x.op in _TRAPPING and E.is_int(x.dtype) and \
                        not isinstance(x.b, E.Const):
                    return False
    return True


_TRAPPING = ("div", "truncdiv", "floordiv", "truncmod", "floormod")


def _affine_condition(c: E.Expr, var: E.Var) -> bool:
    if not E.uses_var(c, var):
        return True
    if isinstance(c, E.Logical) and c.op == "and":
        return all(_affine_condition(a, var) for a in c.args)
    if isinstance(c, E.Compare) and c.op in ("lt", "le", "gt", "ge") and E.is_int(c.a.dtype):
        return arith.linear_coeff(c.a - c.b, var) is not None
    return False


# ---------------------------------------------------------------------------------------------
# compilation to machine code

def target_machine(target: Target):
    import llvmlite.binding as llvm
    _init_llvm()
    tgt = llvm.Target.from_triple(target.triple or llvm.get_process_triple())
    # Static relocations and the large code model: code reaches its constants and globals
    # through 64-bit absolute addresses, not 32-bit offsets from the instruction. MCJIT maps
    # an object's code, read-only data and writable data separately, wherever mmap puts
    # them; in a long-lived process they ended up more than 2 GiB apart, and LLVM aborted the
    # process linking the object (a 32-bit PC-relative relocation out of range, seen in the
    # test suite after some 3,000 modules). Measured within noise of the small model (PIC)
    # on SqueezeNet-, Inception- and EfficientNet-style models and two kernels (-2% to +2%).
    return tgt.create_target_machine(cpu=target.mcpu, features=target.features, opt=3,
                                     reloc="static", codemodel="large")


def optimize_module(llvm_ir: str, target: Target, slp: bool = True):
    """Parse, verify and run LLVM's O3 pipeline; returns (llvm module, target machine)."""
    import llvmlite.binding as llvm
    tm = target_machine(target)
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = slp
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


def emit_object(llvm_ir: str, target: Target) -> bytes:
    """Optimize and compile to object code.

    LLVM stops the process when one of its internal assertions fails, and the SLP vectorizer
    of the LLVM that llvmlite ships can produce IR its own code generator asserts on (seen on a
    normalization kernel's scalar loops). So the compilation runs in a forked child: if the
    child dies, it is compiled again without the SLP vectorizer (our loops are vectorized
    explicitly; SLP only packs leftover scalar code), and if that dies too the error names
    the crash instead of taking the user's process down."""
    def emit(slp: bool) -> bytes:
        mod, tm = optimize_module(llvm_ir, target, slp)
        return tm.emit_object(mod)
    try:
        return _in_child(emit, True)
    except _ChildCrashed:
        pass
    try:
        return _in_child(emit, False)
    except _ChildCrashed as crash:
        raise TensorcError(f"LLVM crashed while compiling the generated code ({crash}); this "
                           f"is a bug in tensorc or LLVM: please report it with the model") \
            from None


def emit_assembly(llvm_ir: str, target: Target) -> str:
    mod, tm = optimize_module(llvm_ir, target)
    return tm.emit_assembly(mod)


class _ChildCrashed(Exception):
    pass


def _in_child(fn, *args) -> bytes:
    """``fn(*args)`` (returning bytes) run in a forked child process, so that an abort inside
    native code kills only the child. A Python exception in the child is raised here."""
    import faulthandler
    import os
    import pickle
    import signal
    import tempfile

    with tempfile.TemporaryFile() as result, tempfile.TemporaryFile() as errors:
        pid = os.fork()
        if pid == 0:         # the child: never returns into the caller's code
            status = 0
            try:
                faulthandler.disable()          # a crash here is expected and handled
                os.dup2(errors.fileno(), 2)     # LLVM's assertion text, kept for the error
                try:
                    payload = pickle.dumps((True, fn(*args)))
                except BaseException as exc:   # noqa: BLE001 (carried to the parent)
                    payload = pickle.dumps((False, exc))
                result.write(payload)
                result.flush()
            except BaseException:   # noqa: BLE001
                status = 1
            finally:
                os._exit(status)
        _, wait_status = os.waitpid(pid, 0)
        errors.seek(0)
        said = errors.read().decode(errors="replace").strip().splitlines()
        said = f": {said[-1][-300:]}" if said else ""
        if os.WIFSIGNALED(wait_status):
            name = signal.Signals(os.WTERMSIG(wait_status)).name
            raise _ChildCrashed(f"signal {name}{said}")
        if os.WEXITSTATUS(wait_status) != 0:
            raise _ChildCrashed(f"exit status {os.WEXITSTATUS(wait_status)}{said}")
        result.seek(0)
        ok, value = pickle.loads(result.read())
    if not ok:
        raise value
    return value

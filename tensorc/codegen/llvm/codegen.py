"""LLVM code generation: loop-IR PrimFuncs -> LLVM IR (llvmlite); objects.py makes object code.

:class:`LLVMCodegen` builds one module: the kernels, each an internal function, and the entry
function ``int32 entry(void **args, int32 num_threads, int64 *timings)`` that calls them in
turn, so an inference is one call into native code. With ``timings`` not null, the entry adds
each kernel call's wall time in nanoseconds to ``timings[k]`` (the profiler times kernels
inside the same entry a normal run uses). It returns the run's status: 0, or the code a kernel
stored in ``tensorc_status`` (a runtime check that failed): the number of the failing kernel
call plus one, with the offending value in the exported i64 ``tensorc_bad_index`` and the size
of the axis it indexes in ``tensorc_bad_size`` (see ``check_index`` in ir/expr.py).

It lowers statements and expressions itself and hands the rest to helpers it holds: vector
loops (``vectors``, vectors.py) and their loads and stores (``memory``, memory.py), register
tiles (``tiles``, tiles.py), parallel loops (``parallel``, parallel.py) and arithmetic on
values (``values``, values.py). How each loop is emitted was decided on the loop IR before, by
the passes of passes/loop/annotate.py.
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen.llvm.expr_facts import ExprFacts
from tensorc.codegen.llvm.function_state import FunctionState, opaque
from tensorc.codegen.llvm.index_cache import IndexCache
from tensorc.codegen.llvm.offsets import ConstantOffsets
from tensorc.codegen.llvm.ir_types import I1, I32, I64, I8, PTR, VOID, constant
from tensorc.codegen.llvm.memory import VectorMemory
from tensorc.codegen.llvm.parallel import ParallelLoops
from tensorc.codegen.llvm.tiles import RegisterTiles
from tensorc.codegen.llvm.values import (
    ICMP, ValueOps, is_signed, storage_type, type_suffix, value_type,
)
from tensorc.codegen.llvm.vectors import VectorLoops
from tensorc.errors import TensorcError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    CACHE_LINE, Allocate, Barrier, Buffer, For, IfThenElse, KernelCall, Prefetch, PrimFunc, Seq,
    Stmt, Store, itemsize,
)
from tensorc.passes.loop.annotate import annotate_for_llvm
from tensorc.target import Target, _init_llvm

UNROLL_LIMIT = 64
LANE_PADDING = 64        # elements past a local block's end, for masked-off vector lanes
TIMESPEC = ir.LiteralStructType([I64, I64])      # struct timespec {tv_sec; tv_nsec} on x86-64


# How a module holds the run's state (thread count, status, the call running, the bad index
# and size): "own" (one module with every kernel and the entry: internal globals), "define"
# (the entry's module when each kernel has a module of its own: it defines them, exported) or
# "declare" (a kernel's own module: it uses the entry module's).
STATE_LINKAGE = ("own", "define", "declare")


class LLVMCodegen:
    """Builds one LLVM module from PrimFuncs; ``state`` (see STATE_LINKAGE) says whether the
    module is the whole program, or the entry or one kernel of a program linked from several
    objects (compiler/kernel_objects.py)."""

    def __init__(self, target: Target, name: str = "tensorc", state: str = "own"):
        _init_llvm()
        if state not in STATE_LINKAGE:
            raise ValueError(f"state must be one of {STATE_LINKAGE}, got {state!r}")
        self.target = target
        self.state = state
        self.kernel_dims: frozenset = frozenset()   # the symbolic dims of the kernel emitted
        self.module = ir.Module(name)
        self._rolled: ir.MDValue | None = None
        self.module.triple = target.triple
        self.num_threads = self._global_i32("tensorc_num_threads")
        self.status = self._global_i32("tensorc_status")
        self.current_call = self._global_i32("tensorc_call")   # the kernel call running
        self.bad_index = opaque(ir.GlobalVariable(self.module, I64, "tensorc_bad_index"))
        self.bad_size = opaque(ir.GlobalVariable(self.module, I64, "tensorc_bad_size"))
        if state != "declare":
            self.bad_index.initializer = constant(I64, 0)
            self.bad_size.initializer = constant(I64, 0)
        self.functions: dict[str, ir.Function] = {}
        self.fs: FunctionState | None = None
        self.in_parallel = False        # emitting the body of an outlined parallel loop
        self.facts = ExprFacts()       # uses_var and linear_coeff, answered once each
        self._decisions: dict[tuple, bool | None] = {}     # see _decided
        self.offsets = ConstantOffsets(self)
        self.values = ValueOps(self)
        self.vectors = VectorLoops(self)
        self.memory = VectorMemory(self)
        self.tiles = RegisterTiles(self)
        self.parallel = ParallelLoops(self)

    def _global_i32(self, name: str) -> ir.GlobalVariable:
        var = opaque(ir.GlobalVariable(self.module, I32, name))
        if self.state != "declare":
            var.initializer = constant(I32, 0)
        if self.state == "own":
            var.linkage = "internal"
        return var

    def declare_kernel(self, name: str, num_params: int, num_dims: int = 0) -> ir.Function:
        """A kernel defined in another module (``state="define"``), for the entry to call:
        its buffer parameters, then its symbolic dims' values."""
        fn = self.declare(name, VOID, [PTR] * num_params + [I64] * num_dims)
        fn.attributes.add("nounwind")
        self.functions[name] = fn
        return fn

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def intrinsic(self, name: str, ty: ir.Type, nargs: int) -> ir.Function:
        suffix = type_suffix(ty)
        return self.declare(f"{name}.{suffix}", ty, [ty] * nargs)

    def add_kernel(self, func: PrimFunc, internal: bool = True) -> ir.Function:
        """A kernel ``void name(ptr noalias p0, ..., i64 dim0, ...)`` over its buffer
        parameters and its symbolic dims' values. The annotation passes run on its loop IR
        first (passes/loop/annotate.py): they decide how each loop is emitted, and this class
        maps it so."""
        fnty = ir.FunctionType(VOID, [PTR] * len(func.params) + [I64] * len(func.dims))
        fn = ir.Function(self.module, fnty, func.name)
        if internal:
            fn.linkage = "internal"
            fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        for arg in fn.args[:len(func.params)]:
            arg.add_attribute("noalias")
        buffers = {b: arg for b, arg in zip(func.params, fn.args)}
        dims = dict(zip(func.dims, fn.args[len(func.params):]))
        for var, arg in dims.items():
            arg.name = var.name
        state = FunctionState(fn, dims, buffers)
        state.index = IndexCache()
        for var, arg in dims.items():
            state.index.bind(var, state.entry, arg)
        saved, saved_dims = self.fs, self.kernel_dims
        self.fs, self.kernel_dims = state, frozenset(func.dims)
        self.stmt(annotate_for_llvm(func).body)
        self.fs.builder.ret_void()
        state.close()
        self.fs, self.kernel_dims = saved, saved_dims
        self.functions[func.name] = fn
        return fn

    def add_entry(self, func: PrimFunc) -> ir.Function:
        """The exported entry ``int32 name(void **args, int32 num_threads, int64 *timings)``:
        args[i] is the pointer for ``func.params[i]``, and where ``func.dims`` are symbolic
        dims, the next one points to their int64 values; ``func.body`` is a sequence of
        kernel calls, timed into ``timings`` (one slot per call) when it is not null."""
        fn = ir.Function(self.module, ir.FunctionType(I32, [PTR, I32, PTR]), func.name)
        fn.attributes.add("nounwind")
        state = FunctionState(fn, {}, {})
        b = state.builder
        # 0 threads: libgomp's default team size (OMP_NUM_THREADS, else every core); the
        # parallel loops size their chunks from the resolved count
        requested = fn.args[1]
        default = self.declare("omp_get_max_threads", I32, [])
        with b.if_then(b.icmp_signed("<=", requested, constant(I32, 0))):
            b.store(b.call(default, []), self.num_threads)
        with b.if_then(b.icmp_signed(">", requested, constant(I32, 0))):
            b.store(requested, self.num_threads)
        b.store(constant(I32, 0), self.status)
        for k, buf in enumerate(func.params):
            slot = b.gep(fn.args[0], [constant(I64, k)], source_etype=PTR)
            state.buffers[buf] = b.load(slot, typ=PTR)
        if func.dims:
            slot = b.gep(fn.args[0], [constant(I64, len(func.params))], source_etype=PTR)
            values = b.load(slot, typ=PTR)
            for k, var in enumerate(func.dims):
                state.env[var] = b.load(b.gep(values, [constant(I64, k)], source_etype=I64),
                                        typ=I64, name=var.name)
            # data-dependent dims: kernels write their slots (compiler/llvm.py make_entry)
            if "dims_array" in func.attrs:
                state.buffers[func.attrs["dims_array"]] = values
        calls = list(func.body.stmts) if isinstance(func.body, Seq) else [func.body]
        saved = self.fs
        self.fs = state
        timings = fn.args[2]
        profiling = b.icmp_unsigned("!=", timings, constant(PTR, None))
        start = opaque(ir.IRBuilder(state.entry).alloca(I64, name="start"))
        now = opaque(ir.IRBuilder(state.entry).alloca(TIMESPEC, name="now"))
        # one copy of each call, with the timing around it in branches (duplicating the
        # calls into a timed and an untimed sequence tripped an LLVM code generator assert)
        for k, call in enumerate(calls):
            with b.if_then(profiling):
                b.store(self._now_ns(now), start)
            b.store(constant(I32, k), self.current_call)
            self.stmt(call)
            with b.if_then(profiling):
                slot = b.gep(timings, [constant(I64, k)], source_etype=I64)
                elapsed = b.sub(self._now_ns(now), b.load(start, typ=I64))
                b.store(b.add(b.load(slot, typ=I64), elapsed), slot)
        b.ret(b.load(self.status, typ=I32))
        state.close()
        self.fs = saved
        self.functions[func.name] = fn
        return fn

    def _now_ns(self, slot: ir.Value) -> ir.Value:
        """CLOCK_MONOTONIC in nanoseconds (clock_gettime goes through the vDSO: ~20 ns);
        ``slot`` is a ``struct timespec`` alloca."""
        timespec = TIMESPEC
        clock_gettime = self.declare("clock_gettime", I32, [I32, PTR])
        b = self.b
        b.call(clock_gettime, [constant(I32, 1), slot])     # CLOCK_MONOTONIC = 1
        sec = b.load(b.gep(slot, [constant(I32, 0), constant(I32, 0)],
                           source_etype=timespec), typ=I64)
        nsec = b.load(b.gep(slot, [constant(I32, 0), constant(I32, 1)],
                            source_etype=timespec), typ=I64)
        return b.add(b.mul(sec, constant(I64, 1_000_000_000)), nsec)

    @property
    def b(self) -> ir.IRBuilder:
        """The builder of the function being emitted."""
        return self.fs.builder

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For):
            self.for_loop(s)
        elif isinstance(s, Store):
            self.memory.store(s, None)
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
        intrinsic = self.declare("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
        base = self.pointer(s.buffer, self.scalar_index(s.index))
        locality = constant(I32, 3 if s.level <= 1 else 2)
        for offset in range(0, s.nbytes, CACHE_LINE):
            ptr = self.b.gep(base, [constant(I64, offset)], source_etype=I8) if offset \
                else base
            self.b.call(intrinsic, [ptr, constant(I32, 0), locality, constant(I32, 1)])

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        ty = storage_type(buf.dtype)
        if s.annotations["storage"] == "stack":
            # allocas live in the entry block so that loops do not grow the stack; a local
            # block has room for the masked-off lanes of a padded vector, so its accesses
            # need no mask and LLVM keeps it in registers
            size = buf.size + (LANE_PADDING if buf.scope == "local" else 0)
            self.fs.allocated[buf] = size
            entry = ir.IRBuilder(self.fs.entry)
            ptr = opaque(entry.alloca(ty, size=constant(I64, size), name=buf.name))
            ptr.align = 64
            if s.annotations.get("zeroed"):
                # zeroed once per call (or per worker): the padding lanes that unmasked
                # accesses read are never written otherwise (passes/loop/allocations.py)
                memset = self.module.declare_intrinsic("llvm.memset", [PTR, I64])
                entry.call(memset, [ptr, constant(ir.IntType(8), 0),
                                    constant(I64, size * itemsize(buf.dtype)),
                                    constant(ir.IntType(1), 0)])
            self.fs.buffers[buf] = ptr
            self.stmt(s.body)
            return
        # Buffers allocated one inside the other (a kernel's stages at the root) share one
        # block. Freed separately, the heap's top would hold their sum, which glibc returns
        # to the system once it exceeds twice the largest block it has freed (its trim
        # threshold): every call then faulted its pages in again (a Winograd conv's input,
        # transformed input and GEMM result: 10-15% of its time).
        chain = [s]
        while isinstance(chain[-1].body, Allocate) and \
                chain[-1].body.annotations["storage"] == "heap":
            chain.append(chain[-1].body)
        if not all(a.buffer.is_static for a in chain):
            self._allocate_symbolic(chain)
            return
        offsets, total = [], 0
        for a in chain:
            offsets.append(total)
            total += -(-a.buffer.nbytes // 64) * 64
        malloc = self.declare("aligned_alloc", PTR, [I64, I64])
        free = self.declare("free", VOID, [PTR])
        ptr = self.b.call(malloc, [constant(I64, 64), constant(I64, total)])
        for a, offset in zip(chain, offsets):
            self.fs.buffers[a.buffer] = self.b.gep(ptr, [constant(I64, offset)],
                                                   source_etype=I8) if offset else ptr
        self.stmt(chain[-1].body)
        self.b.call(free, [ptr])

    def _allocate_symbolic(self, chain: list[Allocate]) -> None:
        """Heap blocks whose sizes are expressions of symbolic dims: one block, its offsets
        computed at run time (each part rounded up to a cache line)."""
        b = self.b
        offsets, sizes, total = [], [], constant(I64, 0)
        for a in chain:
            offsets.append(total)
            nbytes = a.buffer.nbytes
            size = constant(I64, nbytes) if isinstance(nbytes, int) else self.expr(nbytes)
            sizes.append(size)
            rounded = b.and_(b.add(size, constant(I64, 63)), constant(I64, -64))
            total = b.add(total, rounded)
        # aligned_alloc of 0 bytes may return null: ask for one line at least
        total = b.select(b.icmp_signed("<", total, constant(I64, 64)),
                         constant(I64, 64), total)
        malloc = self.declare("aligned_alloc", PTR, [I64, I64])
        free = self.declare("free", VOID, [PTR])
        ptr = b.call(malloc, [constant(I64, 64), total])
        for a, offset, size in zip(chain, offsets, sizes):
            self.fs.buffers[a.buffer] = b.gep(ptr, [offset], source_etype=I8)
            if a.annotations.get("row_slack"):
                # its rows' last vectors are read whole, the lanes past the row discarded;
                # zeroed, those lanes never hold the denormals of the heap's garbage
                self.fs.row_slack.add(a.buffer)
                memset = self.module.declare_intrinsic("llvm.memset", [PTR, I64])
                b.call(memset, [self.fs.buffers[a.buffer], constant(ir.IntType(8), 0), size,
                                constant(ir.IntType(1), 0)])
        self.stmt(chain[-1].body)
        self.b.call(free, [ptr])

    def kernel_call(self, s: KernelCall) -> None:
        fn = self.functions[s.func]
        args = []
        for buf, offset in s.args:
            ptr = self.fs.buffers[buf]
            if isinstance(offset, E.Expr):      # a place after blocks of symbolic size
                ptr = self.b.gep(ptr, [self.expr(offset)], source_etype=I8)
            elif offset:
                ptr = self.b.gep(ptr, [constant(I64, offset)], source_etype=I8)
            args.append(ptr)
        args += [self.expr(d) for d in s.dims]
        self.b.call(fn, args)
        # the dims the call wrote (data-dependent), through its last arguments (their slots
        # in the dims array, compiler/llvm.py make_entry): read again
        for var, slot in zip(s.updates, args[len(s.args) - len(s.updates):len(s.args)]):
            self.fs.env[var] = self.b.load(slot, typ=I64, name=var.name)

    def for_loop(self, s: For) -> None:
        n = arith.as_const_int(s.extent)
        if n is not None:
            self.fs.ranges[s.var] = (0, n - 1)
        if s.kind == "vectorized" and n is not None and n > 1 and self.vectors.vector_loop(s, n):
            return
        if "register_tile" in s.annotations and self.tiles.emit(s, n):
            return
        if s.kind == "unrolled" and n is not None and n <= UNROLL_LIMIT:
            for k in range(n):
                self.fs.env[s.var] = constant(I64, k)
                self.stmt(s.body)
            del self.fs.env[s.var]
            return
        if s.kind == "parallel" and not self.in_parallel:
            self.parallel.emit(s)
            return
        if s.kind.startswith(("blockIdx", "threadIdx")):
            raise TensorcError(f"loop {s.var.name} is bound to {s.kind}, which a CPU target "
                               f"cannot run; compile for target='cuda' or schedule it again")
        self.serial_loop(s.var, self.expr(s.extent), lambda: self.stmt(s.body),
                         rolled=s.annotations.get("rolled", False))

    def serial_loop(self, var: E.Var, extent: ir.Value, emit_body, start=None,
                    rolled: bool = False) -> None:
        """A loop from ``start`` (0) while below ``extent``; ``rolled``: LLVM keeps it a loop
        (no unrolling, no vectorizing: a symbolic tail's copy, passes/loop/symbolic_tails.py,
        whose code the unrolled loops multiplied)."""
        b = self.b
        pre = b.block
        header = b.append_basic_block(f"{var.name}.head")
        body = b.append_basic_block(f"{var.name}.body")
        done = b.append_basic_block(f"{var.name}.done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, name=var.name)
        i.add_incoming(start if start is not None else constant(I64, 0), pre)
        b.cbranch(b.icmp_signed("<", i, extent), body, done)
        b.position_at_end(body)
        self.fs.env[var] = i
        if self.fs.index is not None:
            self.fs.index.bind(var, body, i)
        emit_body()
        nxt = b.add(i, constant(I64, 1), flags=["nsw"])
        i.add_incoming(nxt, b.block)
        back = b.branch(header)
        if rolled:
            back.set_metadata("llvm.loop", self._rolled_loop())
        b.position_at_end(done)
        del self.fs.env[var]
        if self.fs.index is not None:
            self.fs.index.unbind(var)

    def _rolled_loop(self) -> ir.MDValue:
        """The loop metadata of a loop LLVM keeps rolled: self-referential, as a loop's ID is
        (one shared by every such loop of the module)."""
        if self._rolled is None:
            m = self.module
            options = [m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.disable")]),
                       m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.enable"),
                                       constant(I1, 0)])]
            self._rolled = m.add_metadata([None, *options])
            self._rolled.operands = (self._rolled, *options)
        return self._rolled

    def check_index(self, index: ir.Value, size: int | ir.Value) -> ir.Value:
        """``index``; where it lies outside [-size, size) in a running lane, the run's status
        becomes the kernel call's number plus one and ``tensorc_bad_index`` the index.
        ``size``: an int, or an i64 value (a symbolic dim's)."""
        b = self.b
        vector = isinstance(index.type, ir.VectorType)
        lanes = index.type.count if vector else None

        def operand(value: int | ir.Value) -> ir.Value:
            c = constant(I64, value) if isinstance(value, int) else value
            return self.values.broadcast(c, lanes) if vector else c
        # index + size lies in [0, 2 size) exactly when index is in range: one unsigned compare
        twice = 2 * size if isinstance(size, int) else b.add(size, size)
        bad = b.icmp_unsigned(">=", b.add(index, operand(size)), operand(twice))
        value = index
        if vector:
            lane_mask = self.vectors.lane_mask
            if lane_mask is not None and lane_mask.type.count == lanes:
                bad = b.and_(bad, lane_mask)
            any_bad = b.call(self.declare(f"llvm.vector.reduce.or.v{lanes}i1", I1,
                                          [bad.type]), [bad])
            picked = b.select(bad, index, operand(-(2 ** 63)))
            value = b.call(self.declare(f"llvm.vector.reduce.smax.v{lanes}i64", I64,
                                        [picked.type]), [picked])
        else:
            any_bad = bad
        with b.if_then(any_bad, likely=False):
            b.store(b.add(b.load(self.current_call, typ=I32), constant(I32, 1)),
                    self.status)
            b.store(value, self.bad_index)
            b.store(constant(I64, size) if isinstance(size, int) else size, self.bad_size)
        return index

    def pointer(self, buf: Buffer, index: ir.Value) -> ir.Value:
        return self.b.gep(self.fs.buffers[buf], [index], source_etype=storage_type(buf.dtype))

    def _decided(self, cond: E.Expr) -> bool | None:
        """``cond``'s value where every variable it reads is bound to a constant (the index
        of an unrolled loop): a select on the row of a Winograd transform then emits that
        row alone, not all of them for LLVM to fold away."""
        env = self.fs.env
        bound = []
        for var in self.facts.free_vars(cond):
            value = env.get(var)
            if not isinstance(value, ir.Constant) or not isinstance(value.type, ir.IntType):
                return None
            bound.append(value.constant)
        key = (cond, tuple(bound))
        if key in self._decisions:       # an unrolled loop asks again per iteration
            return self._decisions[key]
        values = {var: E.const(c, var.dtype) for var, c in zip(self.facts.free_vars(cond),
                                                                bound)}
        folded = arith.simplify(E.substitute(cond, values))
        decided = self._decisions[key] = \
            bool(folded.value) if isinstance(folded, E.Const) else None
        return decided

    def scalar_index(self, index: E.Expr) -> ir.Value:
        v = self.expr(index, None)
        if isinstance(v.type, ir.VectorType):
            raise TensorcError("internal: vector index where a scalar was expected")
        return v

    def expr(self, e: E.Expr, lanes: int | None = None) -> ir.Value:
        """Emit ``e``; inside a vector loop (``lanes`` set) values that depend on the loop
        variable are vectors, the others stay scalars."""
        if lanes is not None and not self.facts.uses_var(e, self.vectors.var) and \
                not isinstance(e, E.Var):
            lanes = None
        if lanes is None and self.fs.index is not None and \
                not isinstance(e, (E.Var, E.Const)) and self.facts.pure_index(e):
            return self.fs.index.value(self, e)
        return self.emit(e, lanes)

    def emit(self, e: E.Expr, lanes: int | None = None) -> ir.Value:
        """Emit ``e`` where the builder stands (:meth:`expr` without the index cache)."""
        b = self.b
        if isinstance(e, E.Var):
            return self.fs.env[e]
        if isinstance(e, E.Const):
            return constant(value_type(e.dtype), e.value)
        if isinstance(e, E.Load):
            return self.memory.load(e, lanes)
        if isinstance(e, E.Binary):
            if lanes is None and self.fs.index is not None and \
                    e.op in ("floordiv", "floormod") and isinstance(e.b, E.Const) and \
                    e.b.value > 0 and is_signed(e.dtype) and self.facts.nonnegative(e.a) and \
                    self.fs.index.nonnegative_vars(self, e.a):
                # floor and truncating division agree on a dividend that is never negative:
                # one instruction, not the nine of the sign fix-up
                x = self.expr(e.a)
                y = constant(x.type, e.b.value)
                return b.udiv(x, y) if e.op == "floordiv" else b.urem(x, y)
            x, y = self.values.pair(self.expr(e.a, lanes), self.expr(e.b, lanes))
            return self.values.binary(e.op, e.a.dtype, x, y)
        if isinstance(e, E.Compare):
            if lanes is not None and E.is_int(e.a.dtype):
                fast = self.vectors.lane_compare(e, lanes)
                if fast is not None:
                    return fast
            x, y = self.values.pair(self.expr(e.a, lanes), self.expr(e.b, lanes))
            if E.is_float(e.a.dtype):
                return b.fcmp_ordered(ICMP[e.op], x, y) if e.op != "ne" else \
                    b.fcmp_unordered("!=", x, y)
            if is_signed(e.a.dtype):
                return b.icmp_signed(ICMP[e.op], x, y)
            return b.icmp_unsigned(ICMP[e.op], x, y)
        if isinstance(e, E.Logical):
            if e.op == "not":
                return b.not_(self.expr(e.args[0], lanes))
            x, y = self.values.pair(self.expr(e.args[0], lanes), self.expr(e.args[1], lanes))
            return b.and_(x, y) if e.op == "and" else b.or_(x, y)
        if isinstance(e, E.Select):
            decided = self._decided(e.cond)
            if decided is not None:         # one branch only: the other is never emitted
                return self.expr(e.true_value if decided else e.false_value, lanes)
            if lanes is not None and isinstance(e.true_value, E.Load):
                guarded = self.memory.guarded_load(e, lanes)
                if guarded is not None:
                    return guarded
            c = self.expr(e.cond, lanes)
            t, f = self.values.pair(self.expr(e.true_value, lanes),
                                    self.expr(e.false_value, lanes))
            if isinstance(c.type, ir.VectorType) or isinstance(t.type, ir.VectorType):
                n = c.type.count if isinstance(c.type, ir.VectorType) else t.type.count
                c, t, f = (self.values.broadcast(x, n) for x in (c, t, f))
            return b.select(c, t, f)
        if isinstance(e, E.Cast):
            return self.values.cast(self.expr(e.value, lanes), e.value.dtype, e.dtype)
        if isinstance(e, E.Call):
            return self.values.call(e, lanes)
        raise TensorcError(f"LLVM codegen cannot emit expression {type(e).__name__}")

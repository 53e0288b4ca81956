"""CUDA code generation: device kernels (loop IR) -> CUDA C source.

Each device kernel (one launch, see passes/loop/split_kernels.py) becomes an
``extern "C" __global__`` function with ``__launch_bounds__`` of its block size. Loops bound to
``blockIdx``/``threadIdx`` read the index (with a guard where the loop is shorter than the
launch's dimension); shared buffers are ``__shared__`` arrays, local buffers per-thread arrays
(registers, once nvcc unrolls the loops that index them); a vectorized loop of 2 or 4
float32 lanes moves ``float2``/``float4`` where its accesses are contiguous and provably
aligned; a ThreadReduce calls the prelude's warp-shuffle reduction. A run-time index check
(``check_index``) calls the prelude's ``tc_check_index`` with the kernel's number in the source
(from 1), which the first failing check records for the host to report (runtime/cuda.py).

Half-precision values are computed in float and rounded to half after every operation (what
IEEE half arithmetic gives); bfloat16 values are float until stored, as on the CPU.

>>> cg = CudaCodegen(Target.from_string("cuda")); cg.add_kernel(kernel); print(cg.source())
"""
from __future__ import annotations

import re

import numpy as np

from tensorc.codegen.cuda_prelude import PRELUDE
from tensorc.errors import TensorcError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    Allocate, Barrier, Buffer, For, IfThenElse, Prefetch, PrimFunc, Seq, Stmt, Store,
    ThreadReduce, itemsize, walk_stmts,
)
from tensorc.passes.loop.verify_gpu import reduce_scratch_bytes
from tensorc.target import Target

# the C type a value of each dtype is computed in, and the one it is stored as
VALUE_TYPE = {
    "float32": "float", "float64": "double", "float16": "float", "bfloat16": "float",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long", "bool": "bool",
}
STORAGE_TYPE = {**VALUE_TYPE, "float16": "__half", "bfloat16": "__nv_bfloat16",
                "bool": "unsigned char"}
# math intrinsics on float; double drops the "f"
MATH = {"exp": "expf", "log": "logf", "sqrt": "sqrtf", "tanh": "tanhf", "fabs": "fabsf",
        "floor": "floorf", "ceil": "ceilf", "round": "rintf", "trunc": "truncf", "erf": "erff",
        "sin": "sinf", "cos": "cosf", "tan": "tanf", "asin": "asinf", "acos": "acosf",
        "atan": "atanf", "sinh": "sinhf", "cosh": "coshf", "asinh": "asinhf",
        "acosh": "acoshf", "atanh": "atanhf", "pow": "powf", "fmod": "fmodf"}
# with the target option -fastmath=1: the hardware's approximate versions
FAST_MATH = {"exp": "__expf", "log": "__logf", "pow": "__powf", "sin": "__sinf",
             "cos": "__cosf", "tan": "__tanf"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "eq": "==", "ne": "!=",
          "gt": ">", "ge": ">=", "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<",
          "shr": ">>"}
_REDUCE_OP = {"sum": "tc_op_sum()", "prod": "tc_op_prod()", "min": "tc_op_min()",
              "max": "tc_op_max()", "max_ordered": "tc_op_max_ordered()"}
UNROLL_LIMIT = 64
INT32_LIMIT = (1 << 31) - 1


def value_type(dtype: str) -> str:
    try:
        return VALUE_TYPE[dtype]
    except KeyError:
        raise TensorcError(f"the CUDA backend does not support dtype {dtype}; compile this "
                           f"model for target='llvm'") from None


def storage_type(dtype: str) -> str:
    value_type(dtype)
    return STORAGE_TYPE[dtype]


def float_literal(value: float, dtype: str) -> str:
    if dtype == "float64":
        if np.isnan(value):
            return "tc_bitcast<double>(0x7ff8000000000000ULL)"
        if np.isinf(value):
            return ("-" if value < 0 else "") + "tc_bitcast<double>(0x7ff0000000000000ULL)"
        return repr(float(value))
    if dtype == "float16":
        value = float(np.float16(value))
    if np.isnan(value):
        return "tc_bitcast<float>(0x7fc00000u)"
    if np.isinf(value):
        return ("-" if value < 0 else "") + "tc_bitcast<float>(0x7f800000u)"
    text = np.format_float_scientific(np.float32(value), unique=True, trim="-")
    return f"{text}f"


def int_literal(value: int, dtype: str) -> str:
    if dtype.startswith("uint"):       # modulo 2^bits, like LLVM's constants (-1: all ones)
        bits = 64 if dtype == "uint64" else 32
        value %= 1 << bits
        return f"{value}ULL" if bits == 64 else f"{value}u"
    if -INT32_LIMIT <= value <= INT32_LIMIT:
        return str(value)
    if value == -(1 << 63):
        return "(-9223372036854775807LL - 1)"
    return f"{value}LL"


class CudaCodegen:
    """Collects device kernels and renders them, after the prelude, as one CUDA source."""

    def __init__(self, target: Target):
        self.target = target
        self.fast_math = str(target.options.get("fastmath", "0")).lower() in ("1", "true")
        self.kernels: list[str] = []
        self.names: list[str] = []

    def add_kernel(self, kernel: PrimFunc) -> None:
        """Render a device kernel (a PrimFunc with attrs grid and block)."""
        number = len(self.kernels) + 1      # what a failed index check records
        self.kernels.append(_KernelWriter(kernel, self.fast_math, number).render())
        self.names.append(kernel.name)

    def source(self) -> str:
        return PRELUDE + "\n" + "\n".join(self.kernels)


def kernel_source(kernel: PrimFunc, target: Target | None = None) -> str:
    """The CUDA source of one device kernel, with the prelude."""
    cg = CudaCodegen(target or Target.from_string("cuda"))
    cg.add_kernel(kernel)
    return cg.source()


# registers per thread a kernel may use: __launch_bounds__ asks for as many blocks per
# multiprocessor as leave each thread this many of the 64K registers. Without a minimum,
# ptxas trades registers for occupancy on its own and sometimes spills a register tile; with
# too high a budget, simple kernels unroll into registers and lose occupancy.
REGISTER_BUDGET = 64
TILED_REGISTER_BUDGET = 128       # kernels with shared tiles or register tiles
MAX_BLOCKS_PER_SM = 16


def min_blocks(threads: int, tiled: bool = False) -> int:
    budget = TILED_REGISTER_BUDGET if tiled else REGISTER_BUDGET
    return max(1, min(MAX_BLOCKS_PER_SM, 65536 // (threads * budget)))


# names a buffer or loop variable must not take: C++ keywords, CUDA's built-in variables, the
# math functions and the prelude's helpers
RESERVED = frozenset({
    "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double",
    "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
    "register", "return", "short", "signed", "sizeof", "static", "struct", "switch",
    "typedef", "union", "unsigned", "void", "volatile", "while", "class", "delete", "new",
    "operator", "private", "public", "template", "this", "throw", "try", "catch", "true",
    "false", "namespace", "using", "virtual", "friend", "mutable", "explicit", "typename",
    "asm", "alignas", "alignof", "constexpr", "decltype", "noexcept", "nullptr",
    "static_assert", "thread_local", "float2", "float4", "dim3", "uint3", "memcpy", "min",
    "max", "abs", "fabs", "fmin", "fmax", "exp", "log", "sqrt", "pow", "tanh", "erf", "sin",
    "cos", "tan", "floor", "ceil", "round", "trunc", "fmod", "isnan", "isinf", "rint",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize",
    *MATH.values(), *FAST_MATH.values(),
})


def c_identifier(name: str) -> str:
    ident = re.sub(r"[^0-9A-Za-z_]", "_", name)
    ident = ident if ident and not ident[0].isdigit() else f"_{ident}"
    if ident in RESERVED or ident.startswith(("tc_", "__")):
        ident = f"v_{ident}"
    return ident


class _KernelWriter:
    def __init__(self, kernel: PrimFunc, fast_math: bool, number: int = 1):
        self.kernel = kernel
        self.fast_math = fast_math
        self.number = number
        self.grid = kernel.attrs.get("grid", (1, 1, 1))
        self.block = kernel.attrs.get("block", (1, 1, 1))
        self.lines: list[str] = []
        self.depth = 1
        self.used_names: set[str] = set()
        self.names: dict[object, str] = {}        # Var or Buffer -> C name
        self.ranges: dict[E.Var, tuple[int, int]] = {}
        self.lane: dict[E.Var, str] = {}          # vector loop variable -> current lane
        self.vector_loads: dict[int, list[str]] = {}   # id(Load) -> lane expressions
        self.temps = 0
        sizes = [b.size for b in _all_buffers(kernel)]
        sizes += [arith.as_const_int(s.extent) or 0 for s in walk_stmts(kernel.body)
                  if isinstance(s, For)]
        self.index_type = "int" if max(sizes, default=0) < INT32_LIMIT else "long long"
        self.written = {id(s.buffer) for s in walk_stmts(kernel.body) if isinstance(s, Store)}

    # names ----------------------------------------------------------------------------------
    def name_of(self, key, base: str) -> str:
        if key not in self.names:
            name = c_identifier(base)
            k = 1
            while name in self.used_names:
                k += 1
                name = f"{c_identifier(base)}_{k}"
            self.used_names.add(name)
            self.names[key] = name
        return self.names[key]

    def temp(self, base: str) -> str:
        self.temps += 1
        return self.name_of(("temp", self.temps), f"{base}{self.temps}")

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    # kernel ---------------------------------------------------------------------------------
    def render(self) -> str:
        k = self.kernel
        params = []
        for b in k.params:
            const = "const " if id(b) not in self.written else ""
            params.append(f"{const}{storage_type(b.dtype)}* __restrict__ "
                          f"{self.name_of(b, b.name)}")
        threads = self.block[0] * self.block[1] * self.block[2]
        tiled = any(isinstance(s, Allocate) and (s.buffer.scope == "shared" or
                                                 s.buffer.size >= 8)
                    for s in walk_stmts(k.body))
        head = (f'extern "C" __global__ void __launch_bounds__({threads}, '
                f'{min_blocks(threads, tiled)}) {c_identifier(k.name)}({", ".join(params)}) {{')
        for s in walk_stmts(k.body):
            if isinstance(s, Allocate) and s.buffer.scope == "shared":
                b = s.buffer
                self.line(f"__shared__ __align__(16) {storage_type(b.dtype)} "
                          f"{self.name_of(b, b.name)}[{b.size}];")
            elif isinstance(s, ThreadReduce) and reduce_scratch_bytes(s, self.block):
                n = reduce_scratch_bytes(s, self.block) // max(4, itemsize(s.buffer.dtype))
                self.line(f"__shared__ __align__(16) {value_type(s.buffer.dtype)} "
                          f"{self.name_of(s, 'red_buf')}[{n}];")
        self.stmt(k.body)
        return "\n".join([head, *self.lines, "}", ""])

    # statements -----------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For):
            self.for_loop(s)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, IfThenElse):
            self.line(f"if ({self.expr(s.cond)}) {{")
            self.block_of(s.then_case)
            if s.else_case is not None:
                self.line("} else {")
                self.block_of(s.else_case)
            self.line("}")
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.scope == "local":
                self.line(f"{value_type(b.dtype)} {self.name_of(b, b.name)}[{b.size}];")
            elif b.scope != "shared":
                raise TensorcError(f"CUDA codegen: global buffer {b.name} allocated inside "
                                   f"kernel {self.kernel.name}")
            self.stmt(s.body)
        elif isinstance(s, Barrier):
            self.line("__syncthreads();")
        elif isinstance(s, Prefetch):
            pass      # a CPU cache hint; GPU schedules stage data in shared memory instead
        elif isinstance(s, ThreadReduce):
            b = self.name_of(s.buffer, s.buffer.name)
            scratch = self.names.get(s, f"({value_type(s.buffer.dtype)}*)0")
            self.line(f"{b}[0] = tc_thread_reduce({b}[0], {_REDUCE_OP[s.combiner]}, "
                      f"{s.extent}, {scratch});")
        else:
            raise TensorcError(f"CUDA codegen cannot emit {type(s).__name__}")

    def block_of(self, s: Stmt) -> None:
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def for_loop(self, s: For) -> None:
        n = arith.as_const_int(s.extent)
        if n is not None:
            self.ranges[s.var] = (0, n - 1)
        var = self.name_of(s.var, s.var.name)
        if s.kind.startswith(("blockIdx", "threadIdx")):
            axis = "xyz".index(s.kind[-1])
            launched = (self.grid if s.kind.startswith("blockIdx") else self.block)[axis]
            self.line("{")
            self.depth += 1
            self.line(f"{self.index_type} {var} = {s.kind};")
            if n is None or n < launched:
                self.line(f"if ({var} < {self.expr(s.extent)}) {{")
                self.block_of(s.body)
                self.line("}")
            else:
                self.stmt(s.body)
            self.depth -= 1
            self.line("}")
            return
        if s.kind == "vectorized" and n in (2, 4) and self.vector_loop(s, n):
            return
        if s.kind in ("unrolled", "vectorized") and n is not None and n <= UNROLL_LIMIT:
            self.line("#pragma unroll")
        self.line(f"for ({self.index_type} {var} = 0; {var} < {self.expr(s.extent)}; "
                  f"++{var}) {{")
        self.block_of(s.body)
        self.line("}")

    # vector loops ---------------------------------------------------------------------------
    def vector_loop(self, s: For, lanes: int) -> bool:
        """A loop of 2 or 4 lanes over one float32 store: contiguous aligned loads and the
        store move as float2/float4, the arithmetic runs lane by lane."""
        body, cond = s.body, None
        if isinstance(body, IfThenElse) and body.else_case is None and \
                not E.uses_var(body.cond, s.var):
            cond, body = body.cond, body.then_case
        if not isinstance(body, Store) or body.buffer.dtype != "float32":
            return False
        store_vec = self.aligned_access(body.buffer, body.indices[0], s.var, lanes)
        loads = [x for x in E.walk(body.value) if isinstance(x, E.Load)
                 and E.uses_var(x.indices[0], s.var)]
        vec_loads = {id(ld): self.aligned_access(ld.source, ld.indices[0], s.var, lanes)
                     for ld in loads if ld.source.dtype == "float32"}
        if store_vec is None and not any(v is not None for v in vec_loads.values()):
            return False
        if cond is not None:
            self.line(f"if ({self.expr(cond)}) {{")
            self.depth += 1
        self.line("{")
        self.depth += 1
        vtype = f"float{lanes}"
        done: dict[str, list[str]] = {}
        for ld in loads:
            base = vec_loads.get(id(ld))
            if base is None:
                continue
            ptr = f"&{self.name_of(ld.source, ld.source.name)}[{base}]"
            if ptr not in done:
                t = self.temp("v")
                self.line(f"const {vtype} {t} = *reinterpret_cast<const {vtype}*>({ptr});")
                done[ptr] = [f"{t}.{c}" for c in "xyzw"[:lanes]]
            self.vector_loads[id(ld)] = done[ptr]
        values = []
        for k in range(lanes):
            self.lane[s.var] = str(k)
            values.append(self.expr(body.value))
        if store_vec is not None:
            t = self.temp("s")
            self.line(f"{vtype} {t};")
            for k, c in enumerate("xyzw"[:lanes]):
                self.line(f"{t}.{c} = {values[k]};")
            buf = self.name_of(body.buffer, body.buffer.name)
            self.line(f"*reinterpret_cast<{vtype}*>(&{buf}[{store_vec}]) = {t};")
        else:
            for k in range(lanes):
                self.lane[s.var] = str(k)
                self.line(f"{self.buffer_ref(body.buffer, body.indices[0])} = "
                          f"{self.to_storage(values[k], body.buffer.dtype)};")
        del self.lane[s.var]
        for ld in loads:
            self.vector_loads.pop(id(ld), None)
        self.depth -= 1
        self.line("}")
        if cond is not None:
            self.depth -= 1
            self.line("}")
        return True

    def aligned_access(self, buf: Buffer, index: E.Expr, var: E.Var, lanes: int) -> str | None:
        """The C base index when ``buf[index]`` over the lanes of ``var`` is ``lanes``
        contiguous elements starting at a multiple of ``lanes`` (so a vector access is
        aligned: buffers start 16-byte aligned), else None."""
        if buf.scope == "local":
            return None
        lin = arith.linear_coeff(index, var, self.ranges)
        if lin is None or lin[1] != 1:
            return None
        base = lin[0]
        aff = arith.to_affine(base, self.ranges)
        if aff.const % lanes or any(c % lanes for _, c in aff.terms.values()):
            return None
        return self.expr(base)

    # memory ---------------------------------------------------------------------------------
    def buffer_ref(self, buf: Buffer, index: E.Expr) -> str:
        return f"{self.name_of(buf, buf.name)}[{self.expr(index)}]"

    def to_storage(self, value: str, dtype: str) -> str:
        if dtype == "float16":
            return f"__float2half_rn({value})"
        if dtype == "bfloat16":
            return f"__float2bfloat16_rn({value})"
        if dtype == "bool":
            return f"(unsigned char)({value})"
        return value

    def from_storage(self, ref: str, dtype: str, scope: str) -> str:
        if scope == "local":
            return ref             # local buffers hold values, not storage
        if dtype == "float16":
            return f"__half2float({ref})"
        if dtype == "bfloat16":
            return f"__bfloat162float({ref})"
        if dtype == "bool":
            return f"({ref} != 0)"
        return ref

    def store(self, s: Store) -> None:
        value = self.expr(s.value)
        if s.buffer.scope != "local":
            value = self.to_storage(value, s.buffer.dtype)
        elif s.buffer.dtype == "bfloat16":
            value = f"tc_bf({value})"      # a bfloat16 buffer holds bfloat16 values
        self.line(f"{self.buffer_ref(s.buffer, s.indices[0])} = {value};")

    # expressions ----------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> str:
        if isinstance(e, E.Var):
            if e in self.lane:
                return self.lane[e]
            return self.names[e] if e in self.names else self.name_of(e, e.name)
        if isinstance(e, E.Const):
            if e.dtype == "bool":
                return "true" if e.value else "false"
            if E.is_float(e.dtype):
                return float_literal(e.value, e.dtype)
            return int_literal(e.value, e.dtype)
        if isinstance(e, E.Load):
            lanes = self.vector_loads.get(id(e))
            if lanes is not None:
                var = next(v for v in self.lane)
                return lanes[int(self.lane[var])]
            ref = self.buffer_ref(e.source, e.indices[0])
            return self.from_storage(ref, e.source.dtype, e.source.scope)
        if isinstance(e, E.Binary):
            return self.binary(e)
        if isinstance(e, E.Compare):
            return f"({self.expr(e.a)} {_INFIX[e.op]} {self.expr(e.b)})"
        if isinstance(e, E.Logical):
            if e.op == "not":
                return f"(!{self.expr(e.args[0])})"
            op = "&&" if e.op == "and" else "||"
            return f"({self.expr(e.args[0])} {op} {self.expr(e.args[1])})"
        if isinstance(e, E.Select):
            return (f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : "
                    f"{self.expr(e.false_value)})")
        if isinstance(e, E.Cast):
            return self.cast(self.expr(e.value), e.value.dtype, e.dtype)
        if isinstance(e, E.Call):
            return self.call(e)
        raise TensorcError(f"CUDA codegen cannot emit expression {type(e).__name__}")

    def binary(self, e: E.Binary) -> str:
        a, b, op, dtype = self.expr(e.a), self.expr(e.b), e.op, e.a.dtype
        if E.is_float(dtype):
            if op in ("add", "sub", "mul", "div"):
                text = f"({a} {'+-*/'[('add', 'sub', 'mul', 'div').index(op)]} {b})"
            elif op in ("min", "max"):
                text = f"tc_f{op}({a}, {b})"
            elif op == "pow":
                text = self.math("pow", dtype, [a, b])
            elif op == "floordiv":
                text = f"{self.math('floor', dtype, [f'({a} / {b})'])}"
            elif op == "floormod":
                text = f"tc_floormodf({a}, {b})"
            elif op == "truncmod":
                text = self.math("fmod", dtype, [a, b])
            else:
                raise TensorcError(f"CUDA codegen: float op {op} is not supported")
            return f"tc_h({text})" if dtype == "float16" else text
        ctype = value_type(dtype)
        if dtype == "int64" and self.is_index(e):
            ctype = self.index_type        # loop-index arithmetic: 32-bit where it fits
        if op in _INFIX:
            text = f"({a} {_INFIX[op]} {b})"
        elif op in ("div", "truncdiv"):
            text = f"({a} / {b})"
        elif op == "truncmod":
            text = f"({a} % {b})"
        elif op in ("floordiv", "floormod"):
            if dtype.startswith("uint") or dtype == "bool" or self.non_negative(e.a, e.b):
                text = f"({a} {'/' if op == 'floordiv' else '%'} {b})"
            else:
                text = f"tc_{op}<{ctype}>({a}, {b})"
        elif op in ("min", "max"):
            text = f"tc_i{op}<{ctype}>({a}, {b})"
        else:
            raise TensorcError(f"CUDA codegen: integer op {op} is not supported")
        if dtype in ("int8", "int16", "uint8", "uint16"):   # C computes these in int: wrap
            text = f"(({ctype}){text})"
        return text

    def is_index(self, e: E.Expr) -> bool:
        """Index arithmetic: loop variables and constants that fit the index type, no loads
        (whose int64 values may not fit)."""
        for x in E.walk(e):
            if isinstance(x, (E.Load, E.Call, E.Cast)):
                return False
            if isinstance(x, E.Var) and x not in self.ranges and x not in self.lane:
                return False
            if isinstance(x, E.Const) and not -INT32_LIMIT <= x.value <= INT32_LIMIT:
                return False
        return True

    def non_negative(self, a: E.Expr, b: E.Expr) -> bool:
        lo, _ = arith.const_bounds(a, self.ranges)
        blo, _ = arith.const_bounds(b, self.ranges)
        return lo is not None and lo >= 0 and blo is not None and blo > 0

    def math(self, name: str, dtype: str, args: list[str]) -> str:
        fn = MATH[name]
        if self.fast_math and dtype in ("float32", "float16", "bfloat16") and name in FAST_MATH:
            fn = FAST_MATH[name]
        if dtype == "float64":
            fn = fn[:-1]
        return f"{fn}({', '.join(args)})"

    def call(self, e: E.Call) -> str:
        args = [self.expr(a) for a in e.args]
        src = e.args[0].dtype
        if e.name == "bitcast":
            return self.bitcast(args[0], src, e.dtype)
        if e.name == "check_index":  # see tc_check_index in the prelude
            return f"tc_check_index({args[0]}, {args[1]}, {self.number}ULL)"
        if e.name in ("isnan", "isinf"):
            return f"tc_{e.name}({args[0]})"
        if not E.is_float(src):
            raise TensorcError(f"CUDA codegen: {e.name} of {src} values is not supported")
        text = self.math(e.name, src, args)
        return f"tc_h({text})" if e.dtype == "float16" else text

    def bitcast(self, value: str, src: str, dst: str) -> str:
        # half and bfloat16 values are floats in registers: go through their bits
        if src in ("float16", "bfloat16"):
            value = (f"tc_bitcast<unsigned short>(__float2half_rn({value}))" if src == "float16"
                     else f"tc_bitcast<unsigned short>(__float2bfloat16_rn({value}))")
            src = "uint16"
        if dst == "float16":
            return f"__half2float(tc_bitcast<__half>((unsigned short)({value})))"
        if dst == "bfloat16":
            return f"__bfloat162float(tc_bitcast<__nv_bfloat16>((unsigned short)({value})))"
        if src == "bool":
            value = f"(unsigned char)({value})"
        if dst == "bool":
            return f"(tc_bitcast<unsigned char>({value}) != 0)"
        return f"tc_bitcast<{value_type(dst)}>(({value_type(src)})({value}))"

    def cast(self, value: str, src: str, dst: str) -> str:
        if src == dst:
            return value
        if dst == "bool":
            return f"({value} != 0)"
        if dst == "float16":
            return f"tc_h((float)({value}))"
        if dst == "bfloat16":
            return f"tc_bf((float)({value}))"
        return f"(({value_type(dst)})({value}))"


def _all_buffers(kernel: PrimFunc) -> list[Buffer]:
    out = list(kernel.params)
    for s in walk_stmts(kernel.body):
        if isinstance(s, Allocate):
            out.append(s.buffer)
    return out



"""The loop IR: what a kernel does, step by step.

A kernel is a :class:`PrimFunc` over buffer parameters. Loops start at 0 and carry a kind
(serial, parallel, vectorized, unrolled, or a GPU thread axis); buffers carry a memory scope.

    for (i: parallel, 0, 64)
      for (j: vectorized, 0, 16)
        C[i, j] = A[i, j] + B[j]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from tensorc.ir.arith import as_const_int, linear_coeff, simplify
from tensorc.ir.expr import (
    Expr, Load, Var, const, format_expr, free_vars, transform, uses_var, walk,
)

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled",
              "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
              "threadIdx.z")
SCOPES = ("global", "shared", "local")


class Buffer:
    """A dense row-major array in some memory scope. Hashed by identity. A dim is an int, or
    an index expression of symbolic dims (a kernel parameter: see PrimFunc.dims)."""

    def __init__(self, name: str, shape: tuple, dtype: str, scope: str = "global"):
        assert scope in SCOPES, scope
        self.name, self.shape, self.dtype, self.scope = name, tuple(_dim(d) for d in shape), \
            dtype, scope

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def size(self) -> int | Expr:
        if self.is_static:
            return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        return _product(self.shape)

    @property
    def nbytes(self) -> int | Expr:
        size = self.size
        return size * itemsize(self.dtype) if isinstance(size, int) else \
            simplify(size * const(itemsize(self.dtype)))

    def strides(self) -> tuple:
        out, acc = [], 1
        for d in reversed(self.shape):
            out.append(acc)
            acc = acc * d if isinstance(acc, int) and isinstance(d, int) else \
                simplify(_as_index(acc) * _as_index(d))
        return tuple(reversed(out))

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"


def _dim(d) -> int | Expr:
    d = getattr(d, "expr", d)      # a symbolic Dim of the graph IR: its expression
    if isinstance(d, Expr):
        d = simplify(d)
        n = as_const_int(d)
        return d if n is None else n
    return int(d)


def _as_index(d) -> Expr:
    return d if isinstance(d, Expr) else const(d)


def _product(dims) -> int | Expr:
    out: int | Expr = 1
    for d in dims:
        out = out * d if isinstance(out, int) and isinstance(d, int) else \
            simplify(_as_index(out) * _as_index(d))
    return out


CACHE_LINE = 64     # bytes


def flat_index(buffer: Buffer, indices) -> Expr:
    """The row-major 1-D index of ``buffer[indices]`` (one index: itself)."""
    if len(indices) == 1:
        return indices[0]
    flat: Expr | None = None
    for idx, stride in zip(indices, buffer.strides()):
        term = idx * stride if not (isinstance(stride, int) and stride == 1) else idx
        flat = term if flat is None else flat + term
    return flat if flat is not None else const(0)


def itemsize(dtype: str) -> int:
    if dtype == "bfloat16":
        return 2
    return np.dtype(dtype).itemsize


class Stmt:
    def children(self) -> tuple[Stmt, ...]:
        return ()


@dataclass(eq=False)
class For(Stmt):
    """A loop. ``annotations`` hold what the passes that run just before codegen decided
    about it (passes/loop/annotate.py: how it vectorizes, whether it is a register tile), and
    ``rolled`` where LLVM is to keep it a loop (passes/loop/symbolic_tails.py's copies);
    :func:`map_stmt` keeps them, so a rewrite after those passes must drop what it makes
    untrue."""

    var: Var
    extent: Expr
    kind: str
    body: Stmt
    annotations: dict = field(default_factory=dict)

    def __post_init__(self):
        assert self.kind in LOOP_KINDS, self.kind

    def children(self):
        return (self.body,)


@dataclass(eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(eq=False)
class Allocate(Stmt):
    """A buffer's lifetime; ``annotations`` as :class:`For`'s (where the block lives)."""

    buffer: Buffer
    body: Stmt
    annotations: dict = field(default_factory=dict)

    def children(self):
        return (self.body,)


@dataclass(eq=False)
class IfThenElse(Stmt):
    """A conditional; ``annotations`` as :class:`For`'s (how a vector loop's guard runs)."""

    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None
    annotations: dict = field(default_factory=dict)

    def children(self):
        return (self.then_case,) if self.else_case is None else (self.then_case,
                                                                  self.else_case)


@dataclass(eq=False)
class Seq(Stmt):
    stmts: list[Stmt]

    def children(self):
        return tuple(self.stmts)


@dataclass(eq=False)
class Prefetch(Stmt):
    """A hint that ``nbytes`` bytes of ``buffer`` from flat element ``index`` on will be read
    soon: codegen asks the cache for each line of them (a CPU prefetch). It changes no value,
    and an address past the buffer's end is harmless (prefetches do not fault). ``level``: the
    nearest cache level the lines are brought into (1: L1 and all below it; 2: L2, leaving L1
    to what is read now)."""

    buffer: Buffer
    index: Expr
    nbytes: int
    level: int = 1


@dataclass(eq=False)
class Barrier(Stmt):
    """``__syncthreads()`` on GPUs; nothing on CPUs."""


@dataclass(eq=False)
class ThreadReduce(Stmt):
    """A reduction across threads (GPU only): the ``extent`` threads along ``thread_axis``
    each hold a partial value in their ``buffer[0]`` (a local buffer); afterwards every one
    of them holds the ``combiner`` of all of them there. Lowering emits it for a reduction
    loop bound to a thread axis; CUDA code does it with warp shuffles and shared memory."""

    buffer: Buffer
    combiner: str
    thread_axis: str
    extent: int


@dataclass(eq=False)
class KernelCall(Stmt):
    """Call another PrimFunc of the same module with ``buffer + byte_offset`` arguments and
    the values of its symbolic dims (expressions of the caller's). ``updates``: the
    caller's dims whose values the call writes (data-dependent dims, into the caller's dims
    array): the caller reads them again after it."""

    func: str
    args: list[tuple[Buffer, int]]
    dims: list[Expr] = field(default_factory=list)
    updates: list[Var] = field(default_factory=list)


@dataclass(eq=False)
class PrimFunc:
    """A kernel over buffer parameters and, where shapes are symbolic, the dims its loop
    extents and buffer shapes are expressions of (int64 scalar parameters after the
    buffers)."""

    name: str
    params: list[Buffer]
    body: Stmt
    attrs: dict = field(default_factory=dict)
    dims: list[Var] = field(default_factory=list)

    def with_body(self, body: Stmt, attrs: dict | None = None) -> PrimFunc:
        """This function with another body (the passes' rewrite), params and dims kept."""
        return PrimFunc(self.name, self.params, body,
                        dict(self.attrs if attrs is None else attrs), list(self.dims))

    def __str__(self) -> str:
        return format_func(self)


def seq(*stmts: Stmt | None) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(flat)


# ---------------------------------------------------------------------------------------------
# traversal

def walk_stmts(stmt: Stmt) -> Iterator[Stmt]:
    stack = [stmt]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(reversed(s.children()))


def buffers_used(s: Stmt) -> list[Buffer]:
    """Every buffer ``s`` loads from, stores to, prefetches or passes to a kernel it calls,
    in first-use order."""
    seen: dict[int, Buffer] = {}
    for st in walk_stmts(s):
        if isinstance(st, (Store, Prefetch, ThreadReduce)):
            seen.setdefault(id(st.buffer), st.buffer)
        if isinstance(st, KernelCall):
            for b, _ in st.args:
                seen.setdefault(id(b), b)
        for e in stmt_exprs(st):
            for x in walk(e):
                if isinstance(x, Load):
                    seen.setdefault(id(x.source), x.source)
    return list(seen.values())


def symbolic_dims(params: list[Buffer], body: Stmt) -> list[Var]:
    """The dims that the buffers' shapes and the loops' extents are expressions of, sorted
    by name: the scalar parameters of a kernel over symbolic shapes. A loop's variable is
    none, even where a dim has its name (a batch dim named ``n``, a compute's axis ``n``)."""
    loops = {id(st.var) for st in walk_stmts(body) if isinstance(st, For)}
    found: dict[str, Var] = {}

    def add(e) -> None:
        if isinstance(e, Expr):
            for v in free_vars(e):
                if id(v) not in loops:
                    found.setdefault(v.name, v)

    for b in params:
        for d in b.shape:
            add(d)
    for st in walk_stmts(body):
        if isinstance(st, Allocate):
            for d in st.buffer.shape:
                add(d)
        # the loops' extents, and every value that reads a dim (a tensor of dims' values)
        for e in stmt_exprs(st):
            add(e)
    return [found[n] for n in sorted(found)]


def stmt_exprs(s: Stmt) -> list[Expr]:
    """The expressions held directly by ``s`` (not by its children)."""
    if isinstance(s, For):
        return [s.extent]
    if isinstance(s, Store):
        return [*s.indices, s.value]
    if isinstance(s, Prefetch):
        return [s.index]
    if isinstance(s, IfThenElse):
        return [s.cond]
    return []


def map_stmt(stmt: Stmt, fexpr: Callable[[Expr], Expr] | None = None,
             fstmt: Callable[[Stmt], Stmt | None] | None = None) -> Stmt:
    """Rebuild ``stmt`` bottom-up: ``fexpr`` rewrites each held expression, then ``fstmt``
    may replace each rebuilt statement."""
    fx = fexpr or (lambda e: e)

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, For):
            out = For(s.var, fx(s.extent), s.kind, visit(s.body), dict(s.annotations))
        elif isinstance(s, Store):
            out = Store(s.buffer, tuple(fx(i) for i in s.indices), fx(s.value))
        elif isinstance(s, Prefetch):
            out = Prefetch(s.buffer, fx(s.index), s.nbytes, s.level)
        elif isinstance(s, Allocate):
            out = Allocate(s.buffer, visit(s.body), dict(s.annotations))
        elif isinstance(s, IfThenElse):
            out = IfThenElse(fx(s.cond), visit(s.then_case),
                             None if s.else_case is None else visit(s.else_case),
                             dict(s.annotations))
        elif isinstance(s, Seq):
            out = seq(*[visit(c) for c in s.stmts])
        else:
            out = s
        if fstmt is not None:
            r = fstmt(out)
            if r is not None:
                return r
        return out

    return visit(stmt)


def map_exprs(stmt: Stmt, fn: Callable[[Expr], Expr | None]) -> Stmt:
    """Apply an expression rewrite (see :func:`expr.transform`) everywhere in ``stmt``."""
    return map_stmt(stmt, lambda e: transform(e, fn))


def interleaved_tile(loop: For) -> tuple[For, Store] | None:
    """``loop`` an unrolled loop over u (extent k, a power of two) around a vectorized loop
    over v whose one statement, maybe guarded, stores ``out[..., base + u + k * v]``: the k
    vectors, one per u, interleave into k * lanes consecutive elements. Codegen stores them
    as whole vectors (codegen/llvm/tiles.py), and loop partitioning keeps such a loop whole (its
    pieces would each be a strided store). Returns (the vectorized loop, the store)."""
    k = as_const_int(loop.extent)
    inner = loop.body
    if loop.kind != "unrolled" or k is None or k < 2 or k & (k - 1) or \
            not isinstance(inner, For) or inner.kind != "vectorized":
        return None
    store = inner.body
    if isinstance(store, IfThenElse) and store.else_case is None:
        store = store.then_case
    if not isinstance(store, Store) or not store.indices:
        return None
    *rest, last = store.indices
    if any(uses_var(i, loop.var) or uses_var(i, inner.var) for i in rest):
        return None
    along_u, along_v = linear_coeff(last, loop.var), linear_coeff(last, inner.var)
    if along_u is None or along_v is None or along_u[1] != 1 or along_v[1] != k:
        return None
    return inner, store


# ---------------------------------------------------------------------------------------------
# printing

def format_stmt(s: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(s, For):
        return (f"{pad}for ({s.var.name}: {s.kind}, 0, {format_expr(s.extent)})"
                f"{format_annotations(s.annotations)}\n" + format_stmt(s.body, indent + 1))
    if isinstance(s, Store):
        idx = ", ".join(format_expr(i) for i in s.indices)
        return f"{pad}{s.buffer.name}[{idx}] = {format_expr(s.value)}\n"
    if isinstance(s, Allocate):
        b = s.buffer
        return (f"{pad}allocate {b.name}: {b.dtype}[{', '.join(map(str, b.shape))}] "
                f"({b.scope}){format_annotations(s.annotations)}\n"
                + format_stmt(s.body, indent))
    if isinstance(s, IfThenElse):
        text = f"{pad}if ({format_expr(s.cond)}){format_annotations(s.annotations)}\n" + \
            format_stmt(s.then_case, indent + 1)
        if s.else_case is not None:
            text += f"{pad}else\n" + format_stmt(s.else_case, indent + 1)
        return text
    if isinstance(s, Seq):
        return "".join(format_stmt(c, indent) for c in s.stmts)
    if isinstance(s, Prefetch):
        into = f", into L{s.level}" if s.level != 1 else ""
        return f"{pad}prefetch {s.buffer.name}[{format_expr(s.index)}] ({s.nbytes} bytes{into})\n"
    if isinstance(s, Barrier):
        return f"{pad}barrier()\n"
    if isinstance(s, ThreadReduce):
        name = s.buffer.name
        return (f"{pad}{name}[0] = thread_{s.combiner}({name}[0], {s.thread_axis}, "
                f"{s.extent})\n")
    if isinstance(s, KernelCall):
        args = ", ".join(b.name if isinstance(off, int) and off == 0 else
                         f"{b.name}+{format_expr(off) if isinstance(off, Expr) else off}"
                         for b, off in s.args)
        writes = f"  -> dims {', '.join(v.name for v in s.updates)}" if s.updates else ""
        return f"{pad}call {s.func}({args}){writes}\n"
    return f"{pad}{type(s).__name__}\n"


def format_annotations(annotations: dict) -> str:
    """`` [key=value, ...]``; '' for none."""
    if not annotations:
        return ""
    return f" [{', '.join(f'{k}={v}' for k, v in annotations.items())}]"


def format_func(f: PrimFunc) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}[{', '.join(map(str, b.shape))}]"
                       for b in f.params)
    return f"func {f.name}({params})\n" + format_stmt(f.body, 1)

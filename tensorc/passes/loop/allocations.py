"""Where each allocated block lives, for the CPU: ``storage``, ``heap`` for large global
blocks (malloc'd) or ``stack``; and ``zeroed`` for a local block that may have lanes vectors
read but nothing writes (rows that are no whole number of the widest vectors), which codegen
zeroes once per call (stack garbage there is often denormal: a 3x3 depthwise conv on 28x28
maps ran 30x slower on it, depending on what the stack held before).

>>> annotate_allocations(func)   # doctest: +SKIP
(allocate acc: float32[4, 13] (local) [storage=stack, zeroed=True])
"""
from __future__ import annotations

from tensorc.errors import TensorcError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    Allocate, Buffer, For, IfThenElse, PrimFunc, Seq, Stmt, Store, itemsize, map_stmt, seq,
)

HEAP_BYTES = 64 * 1024    # global blocks above this are malloc'd, not on the stack
# Local blocks up to this size are zeroed whatever their rows (the cost is nothing)
ZEROED_LOCAL_BYTES = 64 * 1024
WIDEST_VECTOR_BYTES = 64


def slack_lanes(dtype: str) -> int:
    """The elements a hoisted row block (:func:`hoist_row_blocks`) has at least past its
    row: a vector of up to this many lanes that starts in the row stays in the block."""
    return WIDEST_VECTOR_BYTES // itemsize(dtype)


def on_heap(buf: Buffer) -> bool:
    """Whether a buffer is malloc'd (large global ones, and those of symbolic size) rather
    than on the stack."""
    if buf.scope == "local":
        if not buf.is_static and not _row_block(buf):
            raise TensorcError(f"the local block {buf.name} would have the symbolic shape "
                               f"{list(buf.shape)}; a register or cache tile needs constant "
                               f"dims (compute it at a loop inside the symbolic ones)")
        return not buf.is_static
    return not buf.is_static or buf.nbytes > HEAP_BYTES


def _row_block(buf: Buffer) -> bool:
    """A local block of rows of symbolic length (a softmax's exp values, kept for the row's
    later passes; a few rows where its rows are not the outermost axis): every dim constant
    but the last."""
    return all(isinstance(d, int) for d in buf.shape[:-1]) and \
        not isinstance(buf.shape[-1], int)


def has_padding_lanes(buf: Buffer) -> bool:
    """Whether a local block may have lanes that vectors read but nothing writes: rows that
    are no whole number of the widest vectors. Larger blocks of whole-vector rows (a
    Winograd band's transformed tiles, hundreds of KB) are not zeroed on every call."""
    return buf.nbytes <= ZEROED_LOCAL_BYTES or not buf.shape or \
        buf.shape[-1] * itemsize(buf.dtype) % WIDEST_VECTOR_BYTES != 0


def annotate_allocations(func: PrimFunc) -> PrimFunc:
    """Give each allocation its ``storage`` and, where it needs it, ``zeroed``; a local row
    block of symbolic length is malloc'd once per call, not once per row
    (:func:`hoist_row_blocks`)."""
    def visit(s: Stmt) -> Stmt | None:
        if isinstance(s, Allocate):
            s.annotations["storage"] = "heap" if on_heap(s.buffer) else "stack"
            if s.buffer.scope == "local" and s.buffer.is_static and \
                    has_padding_lanes(s.buffer):
                s.annotations["zeroed"] = True
        return None
    func = func.with_body(map_stmt(func.body, fstmt=visit))
    return hoist_row_blocks(func) if func.dims else func


def hoist_row_blocks(func: PrimFunc) -> PrimFunc:
    """Move each malloc'd local block (a row of symbolic length: its size reads only the
    dims) out of the loops around it to the kernel's top: one malloc per call. A row's block
    is written before it is read in each iteration of the row loop, so one block serves
    every row of a serial loop; a parallel loop's iterations each take a slice of it, whose
    pitch leaves a widest vector past the row (a local block's vectors may overhang its
    row: never into another thread's slice) and starts on a cache line.

        for (r: parallel) for (i) allocate e[n] ... e[k] ...
          ->  allocate e[R, pitch(n)] for (r: parallel) for (i) ... e[r*pitch(n) + k] ...

    (A malloc per parallel iteration cost more than the row passes it saved: glibc's
    aligned_alloc splits and consolidates chunks each time.) A block outside any parallel
    loop gets the same padded pitch. Each hoisted block is annotated ``row_slack``: a vector
    that starts inside the row stays inside the block, so codegen reads and writes its
    row's last, partial vector whole (a masked store followed by a masked load of the same
    lanes could not forward: the softmax of a decode step over a cache of 10, 2.4x static)."""
    dims = set(func.dims)

    def movable(a: Allocate) -> bool:
        return a.annotations.get("storage") == "heap" and a.buffer.scope == "local" and \
            E.free_vars(a.buffer.nbytes) <= dims

    def wrap(body: Stmt, blocks: list[Allocate]) -> Stmt:
        for a in reversed(blocks):
            if not a.annotations.get("row_slack"):
                body, a.buffer = _sliced(body, a.buffer)
            body = Allocate(a.buffer, body, {**a.annotations, "row_slack": True})
        return body

    def visit(s: Stmt) -> tuple[Stmt, list[Allocate]]:
        if isinstance(s, For):
            body, blocks = visit(s.body)
            if s.kind == "parallel" and blocks:
                if not E.free_vars(s.extent) <= dims:
                    return For(s.var, s.extent, s.kind, wrap(body, blocks),
                               dict(s.annotations)), []
                for a in blocks:
                    body, a.buffer = _sliced(body, a.buffer, s.var, s.extent)
                    a.annotations["row_slack"] = True
            return For(s.var, s.extent, s.kind, body, dict(s.annotations)), blocks
        if isinstance(s, Allocate):
            body, blocks = visit(s.body)
            if movable(s):
                return body, [Allocate(s.buffer, seq(), dict(s.annotations)), *blocks]
            return Allocate(s.buffer, body, dict(s.annotations)), blocks
        if isinstance(s, Seq):
            parts, blocks = [], []
            for c in s.stmts:
                part, more = visit(c)
                parts.append(part)
                blocks += more
            return seq(*parts), blocks
        if isinstance(s, IfThenElse):
            then, blocks = visit(s.then_case)
            other, more = (None, []) if s.else_case is None else visit(s.else_case)
            return IfThenElse(s.cond, then, other, dict(s.annotations)), blocks + more
        return s, []
    body, blocks = visit(func.body)
    return func.with_body(wrap(body, blocks)) if blocks else func


def _sliced(body: Stmt, buf: Buffer, var: E.Var | None = None, count: E.Expr | None = None
            ) -> tuple[Stmt, Buffer]:
    """``body`` with its (flat) accesses of ``buf`` moved to slice ``var`` of a block of
    ``count`` slices (without ``var``: one slice), and that block."""
    lanes = slack_lanes(buf.dtype)
    pitch = arith.simplify((buf.size + (2 * lanes - 1)) // lanes * lanes)
    block = Buffer(buf.name, (pitch,) if var is None else (count, pitch), buf.dtype,
                   buf.scope)

    def at(index: E.Expr) -> E.Expr:
        return index if var is None else var * pitch + index

    def load(e: E.Expr) -> E.Expr | None:
        if isinstance(e, E.Load) and e.source is buf:
            return E.Load(block, [at(e.indices[0])])
        return None

    def store(s: Stmt) -> Stmt | None:
        if isinstance(s, Store) and s.buffer is buf:
            return Store(block, (at(s.indices[0]),), s.value)
        return None
    return map_stmt(body, lambda e: E.transform(e, load), store), block

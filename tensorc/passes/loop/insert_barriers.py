"""Insert ``__syncthreads()`` (Barrier) where threads of a block share memory.

A shared-memory buffer is written by some threads and read by others: a read must wait for
the writes before it (read after write), and a write must wait for the reads of the previous
contents (write after read, e.g. the next tile of a loop). Walking the statements in order, the
pass keeps the shared buffers written and read since the last barrier; a statement that
conflicts with them gets a barrier before it, as high in the tree as the conflict allows (so
a tile loop syncs once per tile, not once per element). A serial loop whose body would
conflict with its own next iteration gets a barrier at the end of the body.

    for (k.o, 0, 16)                          for (k.o, 0, 16)
      A.shared[...] = A[...]                    A.shared[...] = A[...]
      C.local[...] += A.shared[...] ...   ->    barrier()
                                                C.local[...] += A.shared[...] ...
                                                barrier()
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    Allocate, Barrier, Buffer, For, IfThenElse, PrimFunc, Seq, Stmt, Store, seq, stmt_exprs,
    walk_stmts,
)


@dataclass
class _Pending:
    """Shared buffers read and written since the last barrier."""

    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)

    def conflicts(self, reads: set, writes: set) -> bool:
        # read after write, write after read; two writes with no read between them need no
        # order (threads writing one element race with or without a barrier)
        return bool(writes & self.reads or reads & self.writes)

    def clear(self) -> None:
        self.reads.clear()
        self.writes.clear()


def shared_accesses(s: Stmt) -> tuple[set[Buffer], set[Buffer]]:
    """(read, written) shared buffers anywhere inside ``s``."""
    reads, writes = set(), set()
    for st in walk_stmts(s):
        if isinstance(st, Store) and st.buffer.scope == "shared":
            writes.add(st.buffer)
        for e in stmt_exprs(st):
            for x in E.walk(e):
                if isinstance(x, E.Load) and getattr(x.source, "scope", "") == "shared":
                    reads.add(x.source)
    return reads, writes


def insert_barriers(func: PrimFunc) -> PrimFunc:
    """Add the barriers ``func``'s shared-memory accesses need (see the module docstring)."""
    body = _visit(func.body, _Pending())
    return func.with_body(body)


def _visit(s: Stmt, pending: _Pending) -> Stmt:
    if isinstance(s, Seq):
        out: list[Stmt] = []
        for child in s.stmts:
            if isinstance(child, Allocate):
                # an allocation only scopes what follows it: look at its statements
                out.append(_visit(child, pending))
                continue
            reads, writes = shared_accesses(child)
            if (reads or writes) and pending.conflicts(reads, writes) and \
                    not isinstance(child, Barrier):
                out.append(Barrier())
                pending.clear()
            out.append(_visit(child, pending))
        return seq(*out)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _visit(_seq_of(s.body), pending))
    if isinstance(s, IfThenElse):
        before = _Pending(set(pending.reads), set(pending.writes))
        then_case = _visit(s.then_case, pending)
        else_case = None
        if s.else_case is not None:
            other = _Pending(set(before.reads), set(before.writes))
            else_case = _visit(s.else_case, other)
            pending.reads |= other.reads
            pending.writes |= other.writes
        return IfThenElse(s.cond, then_case, else_case)
    if isinstance(s, For):
        reads, writes = shared_accesses(s.body)
        body = _visit(_seq_of(s.body), pending)
        repeats = not s.kind.startswith(("blockIdx", "threadIdx")) and \
            arith.as_const_int(s.extent) != 1
        if repeats and pending.conflicts(reads, writes):
            body = seq(body, Barrier())
            pending.clear()
        return For(s.var, s.extent, s.kind, body)
    if isinstance(s, Barrier):
        pending.clear()
        return s
    if isinstance(s, Store):
        reads, writes = shared_accesses(s)
        if pending.conflicts(reads, writes):
            # a lone statement (not inside a Seq) that conflicts: sync right before it
            pending.clear()
            pending.reads |= reads
            pending.writes |= writes
            return seq(Barrier(), s)
        pending.reads |= reads
        pending.writes |= writes
        return s
    return s


def _seq_of(s: Stmt) -> Stmt:
    """Loop bodies are visited as sequences, so that a conflict at their start gets its
    barrier inside the body (once per iteration where the next iteration needs it)."""
    return s if isinstance(s, Seq) else Seq([s])

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
from tensorc.ir.loop import Allocate, Buffer, PrimFunc, Stmt, itemsize, map_stmt

HEAP_BYTES = 64 * 1024    # global blocks above this are malloc'd, not on the stack
# Local blocks up to this size are zeroed whatever their rows (the cost is nothing)
ZEROED_LOCAL_BYTES = 64 * 1024
WIDEST_VECTOR_BYTES = 64


def on_heap(buf: Buffer) -> bool:
    """Whether a buffer is malloc'd (large global ones, and those of symbolic size) rather
    than on the stack."""
    if buf.scope == "local":
        if not buf.is_static:
            raise TensorcError(f"the local block {buf.name} would have the symbolic shape "
                               f"{list(buf.shape)}; a register or cache tile needs constant "
                               f"dims (compute it at a loop inside the symbolic ones)")
        return False
    return not buf.is_static or buf.nbytes > HEAP_BYTES


def has_padding_lanes(buf: Buffer) -> bool:
    """Whether a local block may have lanes that vectors read but nothing writes: rows that
    are no whole number of the widest vectors. Larger blocks of whole-vector rows (a
    Winograd band's transformed tiles, hundreds of KB) are not zeroed on every call."""
    return buf.nbytes <= ZEROED_LOCAL_BYTES or not buf.shape or \
        buf.shape[-1] * itemsize(buf.dtype) % WIDEST_VECTOR_BYTES != 0


def annotate_allocations(func: PrimFunc) -> PrimFunc:
    """Give each allocation its ``storage`` and, where it needs it, ``zeroed``."""
    def visit(s: Stmt) -> Stmt | None:
        if isinstance(s, Allocate):
            s.annotations["storage"] = "heap" if on_heap(s.buffer) else "stack"
            if s.buffer.scope == "local" and has_padding_lanes(s.buffer):
                s.annotations["zeroed"] = True
        return None
    return func.with_body(map_stmt(func.body, fstmt=visit))

"""Flatten multi-dimensional buffer accesses into row-major 1-D indices."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, Prefetch, PrimFunc, Store, map_stmt


def flat_index(buffer: Buffer, indices) -> E.Expr:
    if len(indices) == 1:
        return indices[0]
    flat: E.Expr | None = None
    for idx, stride in zip(indices, buffer.strides()):
        term = idx * stride if stride != 1 else idx
        flat = term if flat is None else flat + term
    return flat if flat is not None else E.const(0)


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    """Rewrite every ``B[i, j, k]`` as ``B[(i*J + j)*K + k]``.

    >>> flatten_buffers(func)   # C[i, j] = A[i, j]  ->  C[i*16 + j] = A[i*16 + j]
    """
    def fexpr(e):
        return E.transform(e, lambda x: E.Load(x.source, [flat_index(x.source, x.indices)])
                           if isinstance(x, E.Load) and len(x.indices) != 1 else None)

    def fstmt(s):
        if isinstance(s, Store) and len(s.indices) != 1:
            return Store(s.buffer, (flat_index(s.buffer, s.indices),), s.value)
        if isinstance(s, Prefetch) and len(s.indices) != 1:
            return Prefetch(s.buffer, (flat_index(s.buffer, s.indices),), s.nbytes)
        return None

    body = map_stmt(func.body, fexpr, fstmt)
    return func.__class__(func.name, func.params, body, dict(func.attrs))

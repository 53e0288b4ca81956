"""Flatten multi-dimensional buffer accesses into row-major 1-D indices."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir.loop import PrimFunc, Store, flat_index, map_stmt


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
        return None

    body = map_stmt(func.body, fexpr, fstmt)
    return func.with_body(body)

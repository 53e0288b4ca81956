"""Register tiles that codegen stores with shuffles rather than lane by lane.

Each loop that is one gets ``register_tile``, naming the shape (codegen/llvm/tiles.py emits
them):

- ``interleaved``: an unrolled loop over u (a power of two, k) around a vectorized loop over
  v storing ``out[base + u + k * v]`` (``ir.loop.interleaved_tile``), maybe guarded: the k
  vectors interleave into k whole vectors of consecutive elements (a Winograd tile's output
  columns);
- ``transposed``: an unrolled loop over u (m iterations) around a vectorized loop over v (n of
  4, 8, 16 lanes, m <= n) storing 4-byte ``out[base + u + stride * v]``, stride >= m: stored
  as n vectors of m contiguous elements (a transposing group, ``transposed_axis`` in
  ops/schedules.py); ``guarded_transposed``: the same under one guard that depends on
  neither loop (the last tile's line past the map), tested once around the stores;
- ``horizontal_reduction``: a serial loop over j doing ``acc[i] = acc[i] op part(j)`` (op add,
  max or min on floats) whose ``part`` reads local buffers contiguously in j: an rfactor's
  partials, reduced as whole vectors and then across lanes. Codegen takes it where the loop
  has at least a register's worth of partials.

>>> annotate_register_tiles(func)   # doctest: +SKIP
(for (u: unrolled, 0, 4) [register_tile=interleaved])
"""
from __future__ import annotations

from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir.loop import (
    For, IfThenElse, PrimFunc, Stmt, Store, interleaved_tile, itemsize, map_stmt,
)
from tensorc.passes.loop.vector_loops import predicable, vectorizable


def _stores_into_read(st: Store) -> bool:
    """Whether the value ``st`` stores reads the buffer it stores into."""
    return any(isinstance(e, E.Load) and e.source == st.buffer for e in E.walk(st.value))


def is_interleaved(s: For) -> bool:
    found = interleaved_tile(s)
    if found is None:
        return False
    inner, st = found
    lanes = arith.as_const_int(inner.extent)
    return lanes is not None and lanes >= 2 and len(st.indices) == 1 and \
        vectorizable(inner.body, inner.var) and predicable(inner.body) and \
        not _stores_into_read(st)


def is_transposed(s: For) -> bool:
    m = arith.as_const_int(s.extent)
    inner = s.body
    if s.kind != "unrolled" or m is None or not isinstance(inner, For) or \
            inner.kind != "vectorized" or not isinstance(inner.body, Store):
        return False
    n = arith.as_const_int(inner.extent)
    if n not in (4, 8, 16) or not 2 <= m <= n:
        return False
    st = inner.body
    if len(st.indices) != 1 or itemsize(st.buffer.dtype) != 4 or \
            not vectorizable(st, inner.var) or _stores_into_read(st):
        return False
    (index,) = st.indices
    lin_u = arith.linear_coeff(index, s.var)
    stride = row_stride(index, inner.var)
    if lin_u is None or lin_u[1] != 1 or stride is None:
        return False
    # a run-time stride (a symbolic row length) is at least m: the m x n elements the tile
    # stores are distinct, which a stride below m would contradict
    return not isinstance(stride, int) or stride >= m


def row_stride(index: E.Expr, var: E.Var) -> int | E.Expr | None:
    """The stride of ``index`` along ``var``: an int, or an expression of the symbolic dims
    (free of ``var``) where ``index`` is ``base + stride * var`` with a run-time stride
    (``d*i + d*var``: a transposed tile's rows, a symbolic row length apart). None where
    ``index`` is not of that form."""
    lin = arith.linear_coeff(index, var)
    if lin is not None:
        return lin[1]
    base = arith.simplify(E.substitute(index, {var: E.const(0)}))
    stride = arith.simplify(E.substitute(index, {var: E.const(1)}) - base)
    if E.uses_var(stride, var) or \
            arith.as_const_int(arith.simplify(index - (base + stride * var))) != 0:
        return None
    return stride


def is_guarded_transposed(s: For) -> bool:
    inner = s.body
    if not isinstance(inner, For) or not isinstance(inner.body, IfThenElse) or \
            inner.body.else_case is not None:
        return False
    guard = inner.body
    if E.uses_var(guard.cond, s.var) or E.uses_var(guard.cond, inner.var):
        return False
    return is_transposed(For(s.var, s.extent, s.kind,
                             For(inner.var, inner.extent, inner.kind, guard.then_case)))


def is_horizontal_reduction(s: For) -> bool:
    st = s.body
    if s.kind != "serial" or not isinstance(st, Store) or len(st.indices) != 1 or \
            E.uses_var(st.indices[0], s.var):
        return False
    value = st.value
    if not isinstance(value, E.Binary) or value.op not in ("add", "max", "min") or \
            not E.is_float(value.dtype):
        return False
    acc, part = reduction_operands(st)
    return is_accumulator(acc, st) and E.uses_var(part, s.var) and \
        all(_partial_read(e, st, s.var) for e in E.walk(part))


def reduction_operands(st: Store) -> tuple[E.Expr, E.Expr]:
    """(the accumulator, the partial) of a horizontal reduction's ``acc op part``."""
    value = st.value
    return (value.a, value.b) if is_accumulator(value.a, st) else (value.b, value.a)


def is_accumulator(e: E.Expr, st: Store) -> bool:
    return isinstance(e, E.Load) and e.source is st.buffer and \
        E.same(e.indices[0], st.indices[0])


def _partial_read(e: E.Expr, st: Store, var: E.Var) -> bool:
    """Not a load, or one that reads partials: a local buffer, contiguous in ``var``."""
    if not isinstance(e, E.Load) or e.source is st.buffer:
        return not isinstance(e, E.Load)
    if not E.uses_var(e.indices[0], var):
        return True
    step = arith.linear_coeff(e.indices[0], var)
    return e.source.scope == "local" and step is not None and step[1] == 1


def register_tile(s: For) -> str | None:
    """The register tile ``s`` is (see the module docstring), or None."""
    if arith.as_const_int(s.extent) is None:
        return None
    if s.kind == "unrolled":
        if is_interleaved(s):
            return "interleaved"
        if is_transposed(s):
            return "transposed"
        if is_guarded_transposed(s):
            return "guarded_transposed"
    if s.kind == "serial" and is_horizontal_reduction(s):
        return "horizontal_reduction"
    return None


def annotate_register_tiles(func: PrimFunc) -> PrimFunc:
    """Give each register tile its ``register_tile`` (see the module docstring)."""
    def visit(s: Stmt) -> Stmt | None:
        shape = register_tile(s) if isinstance(s, For) else None
        if shape is not None:
            s.annotations["register_tile"] = shape
        return None
    return func.with_body(map_stmt(func.body, fstmt=visit))

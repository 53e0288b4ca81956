"""Tensor expressions: what a kernel computes, with no word on how.

>>> A = placeholder((64, 32), name="A"); B = placeholder((32, 16), name="B")
>>> k = reduce_axis(32, "k")
>>> C = compute((64, 16), lambda i, j: sum_(A[i, k] * B[k, j], axis=k), name="C")
"""
from __future__ import annotations

import contextvars
import inspect
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from tensorc.ir import arith
from tensorc.ir.dims import dim_var
from tensorc.ir.expr import same as E_same
from tensorc.ir.expr import (
    INDEX, Const, Expr, Load, Reduce, Var, as_expr, const, format_expr, free_vars, is_float,
    substitute, walk,
)


def extent_of(d) -> int | Expr:
    """A dim or loop extent as the IR keeps it: an int where it is known, else an index
    expression over symbolic dims (a Var per dim: ``batch``, ``seq * 4``). Accepts ints,
    Exprs, and symbolic dims that carry their expression as ``.expr``."""
    if isinstance(d, (int, np.integer)):
        return int(d)
    e = getattr(d, "expr", d)
    if not isinstance(e, Expr):
        return int(d)
    e = arith.simplify(e)
    n = arith.as_const_int(e)
    if n is not None:
        return n
    # one Var per dim name, so that every kernel and buffer of a program binds the same
    # variable to the dim's run-time value
    return substitute(e, {v: dim_var(v.name) for v in free_vars(e)})



# The value a symbolic dim is taken to have where a schedule chooses a tile or whether to
# run on threads: its hint (the shape being tuned for), else DEFAULT_HINT within its range.
# A choice made at the hint is valid at every value: lowering guards every split of a
# symbolic extent, so hints decide speed, never results.
DEFAULT_HINT = 64
_HINTS: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "dim_hints", default=None)


@contextmanager
def dim_hints(values: Mapping[str, int]) -> Iterator[None]:
    """Schedule with ``values`` (by dim name) as the symbolic dims' hints."""
    token = _HINTS.set(dict(values))
    try:
        yield
    finally:
        _HINTS.reset(token)


def current_hints() -> dict[str, int]:
    """The hints in force (by dim name)."""
    return dict(_HINTS.get() or {})


def hint(extent) -> int:
    """An extent's value for a schedule's choices: itself where it is an int, else the
    expression evaluated at the dims' hints."""
    extent = extent_of(extent)
    if isinstance(extent, int):
        return extent
    values = _HINTS.get() or {}
    mapping = {v: const(values.get(v.name, DEFAULT_HINT)) for v in free_vars(extent)}
    n = arith.as_const_int(arith.simplify(substitute(extent, mapping)))
    return max(n if n is not None else DEFAULT_HINT, 0)


def hint_shape(shape) -> tuple[int, ...]:
    return tuple(hint(d) for d in shape)


def is_static(shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def broadcast_shape(*shapes) -> tuple:
    """numpy's broadcast of ``shapes``, where a symbolic dim meets only 1 or the same dim
    (the frontend unifies or checks at run time whatever else it may meet)."""
    if all(is_static(s) for s in shapes):
        return tuple(np.broadcast_shapes(*shapes))
    n = max(len(s) for s in shapes)
    out: list = [1] * n
    for s in shapes:
        for k, d in enumerate(s, start=n - len(s)):
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(out[k], int) and out[k] == 1:
                out[k] = d
            elif isinstance(d, int) and isinstance(out[k], int) and d != out[k]:
                raise ValueError(f"shapes {shapes} do not broadcast")
            elif not isinstance(d, int) or not isinstance(out[k], int):
                if not isinstance(d, int) and not isinstance(out[k], int):
                    if not E_same(d, out[k]):
                        raise ValueError(f"shapes {shapes} do not broadcast: dims "
                                         f"{format_expr(d)} and {format_expr(out[k])} differ")
                elif not isinstance(out[k], int):
                    raise ValueError(f"shapes {shapes} do not broadcast: dim "
                                     f"{format_expr(out[k])} against {d}")
                else:
                    raise ValueError(f"shapes {shapes} do not broadcast: dim "
                                     f"{format_expr(d)} against {out[k]}")
    return tuple(out)


class IterVar:
    """An iteration axis: a variable with the range [0, extent); ``kind`` is "spatial" or
    "reduce". ``extent`` is an int, or an index expression of symbolic dims."""

    __slots__ = ("var", "extent", "kind")

    def __init__(self, var: Var, extent: int | Expr, kind: str = "spatial"):
        self.var, self.extent, self.kind = var, extent_of(extent), kind

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.extent}, {self.kind})"

    # arithmetic on an axis is arithmetic on its variable: ``y * stride + ry``
    def __add__(self, other):
        return self.var + _as_var(other)

    def __radd__(self, other):
        return _as_var(other) + self.var

    def __sub__(self, other):
        return self.var - _as_var(other)

    def __rsub__(self, other):
        return _as_var(other) - self.var

    def __mul__(self, other):
        return self.var * _as_var(other)

    def __rmul__(self, other):
        return _as_var(other) * self.var

    def __floordiv__(self, other):
        return self.var // _as_var(other)

    def __mod__(self, other):
        return self.var % _as_var(other)


def _as_var(x):
    return x.var if isinstance(x, IterVar) else x


def reduce_axis(extent: int | Expr, name: str = "k") -> IterVar:
    return IterVar(Var(name), extent, "reduce")


class Operation:
    """What produces a tensor: a placeholder (an input) or a compute."""

    name: str

    def input_tensors(self) -> list[Tensor]:
        return []


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[int, ...], dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype


class ComputeOp(Operation):
    """``output[axis...] = body`` where body may be a Reduce over ``reduce_axis``."""

    def __init__(self, name: str, axis: list[IterVar], body: Expr, tag: str = ""):
        self.name, self.axis, self.body, self.tag = name, axis, body, tag
        self.reduce_axis: list[IterVar] = list(body.axes) if isinstance(body, Reduce) else []

    def input_tensors(self) -> list[Tensor]:
        seen: dict[int, Tensor] = {}
        for e in walk(self.body):
            if isinstance(e, Load) and isinstance(e.source, Tensor):
                seen.setdefault(id(e.source), e.source)
        return list(seen.values())


class Tensor:
    """The output of an Operation. ``T[i, j]`` builds a Load expression."""

    def __init__(self, op: Operation, shape: tuple[int, ...], dtype: str):
        self.op, self.shape, self.dtype = op, tuple(extent_of(d) for d in shape), dtype

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise IndexError(f"{self.name} has rank {len(self.shape)}, indexed with "
                             f"{len(indices)} indices")
        return Load(self, [_index(i) for i in indices])

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"

    __hash__ = object.__hash__


def _index(i) -> Expr:
    if isinstance(i, IterVar):
        return i.var
    return as_expr(i, INDEX)


def placeholder(shape: Sequence, dtype: str = "float32", name: str = "input") -> Tensor:
    shape = tuple(extent_of(d) for d in shape)
    return Tensor(PlaceholderOp(name, shape, dtype), shape, dtype)


def compute(shape: Sequence, fcompute: Callable[..., Expr], name: str = "compute",
            tag: str = "", axis_names: Sequence[str] | None = None) -> Tensor:
    """Define ``name[i0, i1, ...] = fcompute(i0, i1, ...)``.

    ``fcompute`` takes one index variable per dimension (or a single ``*indices``).
    Dims may be symbolic (see :func:`extent_of`).
    """
    shape = tuple(extent_of(d) for d in shape)
    names = list(axis_names) if axis_names else _axis_names(fcompute, len(shape))
    axis = [IterVar(Var(n), d) for n, d in zip(names, shape)]
    body = fcompute(*[a.var for a in axis])
    if not isinstance(body, Expr):
        body = as_expr(body, "float32")
    op = ComputeOp(name, axis, body, tag)
    return Tensor(op, shape, body.dtype)


def _axis_names(fcompute, ndim: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == ndim and all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params):
        return [p.name for p in params]
    return [f"i{d}" for d in range(ndim)]


def _reduce(combiner: str, source: Expr, axis, init) -> Reduce:
    axes = axis if isinstance(axis, (list, tuple)) else [axis]
    return Reduce(combiner, source, axes, init)


def sum_(source: Expr, axis) -> Reduce:
    return _reduce("sum", source, axis, const(0, source.dtype) if not is_float(source.dtype)
                   else Const(0.0, source.dtype))


def max_(source: Expr, axis) -> Reduce:
    return _reduce("max", source, axis, min_value(source.dtype))


def max_ordered(source: Expr, axis) -> Reduce:
    """Maximum as ``acc > x ? acc : x`` (one vmaxps; onnxruntime's MaxPool semantics)."""
    return _reduce("max_ordered", source, axis, min_value(source.dtype))


def min_(source: Expr, axis) -> Reduce:
    return _reduce("min", source, axis, max_value(source.dtype))


# Sums and products of half-precision values accumulate in float32 and round once, as numpy
# and onnxruntime do: accumulating in float16 loses digits with every term.
_ACCUMULATOR = {"float16": "float32", "bfloat16": "float32"}


def accumulator_dtype(dtype: str) -> str:
    return _ACCUMULATOR.get(dtype, dtype)


def min_value(dtype: str) -> Const:
    if is_float(dtype):
        return Const(float("-inf"), dtype)
    return Const(0 if dtype == "bool" else int(np.iinfo(dtype).min), dtype)


def max_value(dtype: str) -> Const:
    if is_float(dtype):
        return Const(float("inf"), dtype)
    return Const(1 if dtype == "bool" else int(np.iinfo(dtype).max), dtype)


def post_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    """Every tensor that ``outputs`` depend on, producers before consumers."""
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor):
        if id(t.op) in seen:
            return
        seen.add(id(t.op))
        for inp in t.op.input_tensors():
            visit(inp)
        order.append(t)

    for t in outputs:
        visit(t)
    return order

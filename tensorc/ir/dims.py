"""Symbolic dims: a tensor dim whose value is known only at run time (``batch``, ``seq``,
``(H + 2)//2 + 1``, ``past + seq``).

A :class:`Dim` wraps an integer :class:`~tensorc.ir.expr.Expr` of dtype INDEX over dim
variables (one interned ``Var`` per dim name) and integer constants, kept canonical by
:func:`tensorc.ir.arith.simplify`. Arithmetic with ints and Dims gives a plain ``int``
whenever the result is constant, so a static shape never holds a Dim. Equality and hashing
are structural on the canonical form (Dims key dicts): ``Dim == 1`` is False for a symbolic
dim even where its value may be 1 at run time; ask :func:`may_equal` for that.

Nothing assumes a value silently: ``bool(d)``, ``int(d)``, ``range(d)`` and the comparisons
``< <= > >=`` that the dims' ranges cannot decide raise :class:`SymbolicDimError` naming the
dim. The ranges come from the active dim table (``graph.dims``, see
:mod:`tensorc.ir.dim_table`); without one every dim is only known to be >= 0.

>>> batch, seq = Dim("batch"), Dim("seq")
>>> str(batch * seq * 768), (batch * seq) // seq == batch, seq - seq
('batch*seq*768', True, 0)
"""
from __future__ import annotations

import contextvars
from typing import Iterator, Mapping, Union

from tensorc.errors import SymbolicDimError
from tensorc.ir.arith import const_bounds, decide_interval, simplify, simplify_nonnegative
from tensorc.ir.expr import INDEX, Binary, Const, Expr, Var, substitute, walk

# One Var per dim name, so that equal names are one atom to the affine form (it keys vars by
# identity); dims are never loop variables, so the table only grows by the models' names.
_VARS: dict[str, Var] = {}

# The dim table whose ranges decide comparisons and which records constraints (see
# dim_table.DimTable.active()); None outside an import.
ACTIVE: contextvars.ContextVar = contextvars.ContextVar("tensorc_dim_table", default=None)


def dim_var(name: str) -> Var:
    """The one INDEX Var of dim ``name``."""
    var = _VARS.get(name)
    if var is None:
        var = _VARS[name] = Var(name, INDEX)
    return var


def _key(e: Expr) -> tuple:
    """A structural key with vars by name (stable across processes, unlike expr_key)."""
    if isinstance(e, Var):
        return ("v", e.name)
    if isinstance(e, Const):
        return ("c", e.value)
    return (e.op,) + tuple(_key(k) for k in e.children())


def _build(key: tuple) -> Expr:
    if key[0] == "v":
        return dim_var(key[1])
    if key[0] == "c":
        return Const(key[1], INDEX)
    return Binary(key[0], _build(key[1]), _build(key[2]))


DimLike = Union[int, "Dim"]


class Dim:
    """An immutable symbolic integer; ``Dim("seq")`` is the dim named ``seq``.

    >>> h = Dim("H"); str((h + 2 * 1 - 3) // 2 + 1)
    '(H - 1)//2 + 1'
    """

    __slots__ = ("expr", "_key", "_hash")

    def __init__(self, name: str | Expr):
        expr = dim_var(name) if isinstance(name, str) else name
        object.__setattr__(self, "expr", expr)
        object.__setattr__(self, "_key", _key(expr))
        object.__setattr__(self, "_hash", hash(self._key))

    def __setattr__(self, name, value):
        raise AttributeError("Dim is immutable")

    # construction -----------------------------------------------------------------------------
    @staticmethod
    def of(expr: Expr) -> DimLike:
        """The canonical form of ``expr``: an ``int`` when it is constant, else a Dim."""
        e = simplify_nonnegative(expr)
        if isinstance(e, Const):
            return int(e.value)
        return Dim(e)

    @property
    def names(self) -> tuple[str, ...]:
        """The dim names this Dim is an expression of, sorted."""
        return tuple(sorted({e.name for e in walk(self.expr) if isinstance(e, Var)}))

    @property
    def is_name(self) -> bool:
        """Whether this Dim is a dim name alone (``seq``, not ``seq + 1``)."""
        return isinstance(self.expr, Var)

    # arithmetic -------------------------------------------------------------------------------
    def _binary(self, op: str, other, reverse: bool = False) -> DimLike:
        if not isinstance(other, (int, Dim)) or isinstance(other, bool):
            return NotImplemented
        a, b = self.expr, as_expr(other)
        if reverse:
            a, b = b, a
        if op in ("floordiv", "floormod"):
            _check_divisor(b, op)
        return Dim.of(Binary(op, a, b))

    def __add__(self, other):
        return self._binary("add", other)

    def __radd__(self, other):
        return self._binary("add", other, True)

    def __sub__(self, other):
        return self._binary("sub", other)

    def __rsub__(self, other):
        return self._binary("sub", other, True)

    def __mul__(self, other):
        return self._binary("mul", other)

    def __rmul__(self, other):
        return self._binary("mul", other, True)

    def __floordiv__(self, other):
        return self._binary("floordiv", other)

    def __rfloordiv__(self, other):
        return self._binary("floordiv", other, True)

    def __mod__(self, other):
        return self._binary("floormod", other)

    def __rmod__(self, other):
        return self._binary("floormod", other, True)

    def __neg__(self):
        return Dim.of(Binary("sub", Const(0, INDEX), self.expr))

    def __pos__(self):
        return self

    # refusals: what would assume a value -------------------------------------------------------
    def __bool__(self):
        raise SymbolicDimError(f"the truth of dim {self} is known only at run time", self)

    def __int__(self):
        raise SymbolicDimError(f"dim {self} has no value at compile time (it is symbolic); "
                               f"this code needs porting to symbolic dims", self)

    __index__ = __int__

    def __float__(self):
        raise SymbolicDimError(f"dim {self} has no value at compile time", self)

    def _compare(self, op: str, other) -> bool:
        if not isinstance(other, (int, Dim)) or isinstance(other, bool):
            return NotImplemented
        decided = decide(op, self, other)
        if decided is None:
            symbol = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
            raise SymbolicDimError(
                f"whether {self} {symbol} {other} depends on the run-time value of "
                f"{', '.join(self.names)} (ranges {describe_ranges(self)}); this code "
                f"needs porting to symbolic dims, or narrower dim_ranges", self)
        return decided

    def __lt__(self, other):
        return self._compare("lt", other)

    def __le__(self, other):
        return self._compare("le", other)

    def __gt__(self, other):
        return self._compare("gt", other)

    def __ge__(self, other):
        return self._compare("ge", other)

    # identity ---------------------------------------------------------------------------------
    def __eq__(self, other):
        return isinstance(other, Dim) and self._key == other._key

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (_from_key, (self._key,))

    def __str__(self) -> str:
        return format_dim(self.expr)

    def __repr__(self) -> str:
        return f"Dim({str(self)!r})"


def _from_key(key: tuple) -> Dim:
    return Dim(_build(key))


def as_expr(d: DimLike) -> Expr:
    """The INDEX expression of an int or a Dim (what a kernel uses as a loop extent)."""
    if isinstance(d, Dim):
        return d.expr
    if isinstance(d, bool) or not hasattr(d, "__index__"):
        raise TypeError(f"a dim is an int or a Dim, got {d!r}")
    return Const(int(d), INDEX)


def _check_divisor(b: Expr, op: str) -> None:
    if isinstance(b, Const) and b.value == 0:
        raise ZeroDivisionError(f"dim {op} by 0")


def is_symbolic(d) -> bool:
    return isinstance(d, Dim)


def is_static_shape(shape) -> bool:
    return not any(isinstance(d, Dim) for d in shape)


# ranges and decisions ------------------------------------------------------------------------
def _bounds() -> dict:
    table = ACTIVE.get()
    return table.bounds() if table is not None else {}


def bounds(d: DimLike) -> tuple[int | None, int | None]:
    """The inclusive interval of ``d`` from the active ranges (None: unbounded on that side).
    Every dim name is at least 0, also where no range says so.

    >>> bounds(Dim("seq") + 1)   # no active table: seq >= 0
    (1, None)
    """
    if not isinstance(d, Dim):
        return (int(d), int(d))
    known = _bounds()
    ranges = {dim_var(n): known.get(dim_var(n), (0, None)) for n in d.names}
    return const_bounds(d.expr, ranges)


def describe_ranges(d: Dim) -> str:
    known = _bounds()
    parts = []
    for name in d.names:
        lo, hi = known.get(dim_var(name), (0, None))
        parts.append(f"{name} in [{lo}, {'inf' if hi is None else hi}]")
    return ", ".join(parts)


def decide(op: str, a: DimLike, b: DimLike) -> bool | None:
    """``a op b`` for op in lt le gt ge eq ne where the ranges settle it, else None."""
    if op not in ("lt", "le", "gt", "ge", "eq", "ne"):
        raise ValueError(op)
    diff = a - b
    lo, hi = bounds(diff) if isinstance(diff, Dim) else (diff, diff)
    return decide_interval(op, lo, hi)


def provably_equal(a: DimLike, b: DimLike) -> bool:
    """Whether ``a == b`` for every value of the dims in their ranges."""
    return a == b or decide("eq", a, b) is True


def provably_not_equal(a: DimLike, b: DimLike) -> bool:
    return decide("eq", a, b) is False


def may_equal(a: DimLike, b: DimLike) -> bool:
    """Whether ``a == b`` for some value of the dims in their ranges (``may_equal(seq, 1)``
    is True for seq in [1, inf))."""
    return decide("eq", a, b) is not False


def ceil_div(a: DimLike, b: DimLike) -> DimLike:
    """``ceil(a / b)`` for b > 0: ``(a + b - 1) // b``."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (a + b - 1) // b


def dim_min(a: DimLike, b: DimLike) -> DimLike:
    """min(a, b): the smaller where the ranges decide it, else a min expression."""
    if decide("le", a, b) is True:
        return a
    if decide("le", b, a) is True:
        return b
    return Dim.of(Binary("min", as_expr(a), as_expr(b)))


def dim_max(a: DimLike, b: DimLike) -> DimLike:
    if decide("ge", a, b) is True:
        return a
    if decide("ge", b, a) is True:
        return b
    return Dim.of(Binary("max", as_expr(a), as_expr(b)))


def evaluate_within(value, values: Mapping[str, int]):
    """``value`` (a dim, or a tuple or list holding dims at any depth, or anything else)
    with every Dim in it evaluated (:func:`evaluate`): a node's attrs or a type's shape
    specialized to one shape."""
    if isinstance(value, Dim):
        return evaluate(value, values)
    if isinstance(value, tuple):
        return tuple(evaluate_within(v, values) for v in value)
    if isinstance(value, list):
        return [evaluate_within(v, values) for v in value]
    return value


def evaluate(d: DimLike, values: Mapping[str, int]) -> int:
    """The value of ``d`` with each dim name given a value.

    >>> evaluate(Dim("H") // 2 + 1, {"H": 7})
    4
    """
    if not isinstance(d, Dim):
        return int(d)
    missing = [n for n in d.names if n not in values]
    if missing:
        raise SymbolicDimError(f"dim {d} needs a value for {', '.join(missing)}", d)
    e = simplify(substitute(d.expr, {dim_var(n): Const(int(values[n]), INDEX)
                                     for n in d.names}))
    assert isinstance(e, Const), e
    return int(e.value)


def substitute_dims(d: DimLike, mapping: Mapping[str, DimLike]) -> DimLike:
    """``d`` with the dim names in ``mapping`` replaced by ints or Dims."""
    if not isinstance(d, Dim) or not any(n in mapping for n in d.names):
        return d
    return Dim.of(substitute(d.expr, {dim_var(n): as_expr(v) for n, v in mapping.items()
                                      if n in d.names}))


def dims_in(values) -> Iterator[Dim]:
    """Every Dim in a nest of tuples and lists (a shape, an attribute)."""
    for v in values:
        if isinstance(v, Dim):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from dims_in(v)


# printing ------------------------------------------------------------------------------------
def format_dim(e: Expr) -> str:
    """A dim expression as people write it: ``batch*seq``, ``(H + 2)//2 + 1``,
    ``past + seq``, ``min(seq, 512)``."""
    return _format_sum(_terms(e))


def _terms(e: Expr) -> list[tuple[int, Expr | None]]:
    """``e`` as (coefficient, atom or None for the constant) terms."""
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        right = _terms(e.b)
        if e.op == "sub":
            right = [(-c, atom) for c, atom in right]
        return _terms(e.a) + right
    if isinstance(e, Const):
        return [(int(e.value), None)]
    if isinstance(e, Binary) and e.op == "mul" and isinstance(e.b, Const):
        return [(c * int(e.b.value), atom) for c, atom in _terms(e.a)] \
            if _is_sum(e.a) else [(int(e.b.value), e.a)]
    return [(1, e)]


def _is_sum(e: Expr) -> bool:
    return isinstance(e, Binary) and e.op in ("add", "sub")


def _format_sum(terms: list[tuple[int, Expr | None]]) -> str:
    text = ""
    for c, atom in terms:
        if atom is None:
            body, sign = str(abs(c)), c < 0
        else:
            factor = _format_atom(atom)
            body = factor if abs(c) == 1 else f"{factor}*{abs(c)}"
            sign = c < 0
        if not text:
            text = f"-{body}" if sign else body
        else:
            text += f" - {body}" if sign else f" + {body}"
    return text or "0"


def _format_atom(e: Expr) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return str(e.value)
    if isinstance(e, Binary) and e.op == "mul":
        return f"{_format_factor(e.a)}*{_format_factor(e.b)}"
    if isinstance(e, Binary) and e.op in ("floordiv", "floormod"):
        symbol = "//" if e.op == "floordiv" else "%"
        return f"{_format_factor(e.a)}{symbol}{_format_factor(e.b)}"
    if isinstance(e, Binary) and e.op in ("min", "max"):
        return f"{e.op}({format_dim(e.a)}, {format_dim(e.b)})"
    return format_dim(e) if _is_sum(e) else repr(e)


def _format_factor(e: Expr) -> str:
    text = format_dim(e)
    if _is_sum(e) or (isinstance(e, Binary) and e.op in ("floordiv", "floormod")) \
            or text.startswith("-"):
        return f"({text})"
    return text


_PY_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%"}


def _python(e: Expr, names: Mapping[str, str]) -> str:
    if isinstance(e, Var):
        return names[e.name]
    if isinstance(e, Const):
        return repr(int(e.value))
    if isinstance(e, Binary) and e.op in _PY_OPS:
        return f"({_python(e.a, names)} {_PY_OPS[e.op]} {_python(e.b, names)})"
    if isinstance(e, Binary) and e.op in ("min", "max"):
        return f"{e.op}({_python(e.a, names)}, {_python(e.b, names)})"
    raise SymbolicDimError(f"a dim of the form {format_dim(e)} cannot be evaluated at run time")


def evaluator(dims: list[DimLike], names: list[str]):
    """A function from the dims' values (a sequence, in ``names`` order) to the values of
    ``dims`` (a tuple): Python code compiled once, so that a run evaluates its shapes in
    microseconds rather than through the simplifier (floor division and modulo are Python's,
    as the IR's)."""
    local = {n: f"d{k}" for k, n in enumerate(names)}
    parts = [repr(d) if isinstance(d, int) else _python(as_expr(d), local) for d in dims]
    unpack = f"    {', '.join(local.values())}, = values\n" if names else ""
    body = ", ".join(parts) + ("," if parts else "")
    source = f"def evaluate(values):\n{unpack}    return ({body})\n"
    scope: dict = {}
    exec(compile(source, "<dims>", "exec"), {}, scope)     # noqa: S102 (our own expressions)
    return scope["evaluate"]


def dim_to_json(d: DimLike):
    """An int, or a Dim as ``{"dim": [op, ...]}`` (its canonical form, names by name)."""
    if isinstance(d, Dim):
        return {"dim": _key_to_json(d._key)}
    return int(d)


def dim_from_json(obj) -> DimLike:
    """The inverse of :func:`dim_to_json`; a ValueError for anything else."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        return obj
    if isinstance(obj, dict) and set(obj) == {"dim"}:
        return Dim.of(_build(_key_from_json(obj["dim"])))
    raise ValueError(f"not a dim: {obj!r}")


def _key_to_json(key: tuple) -> list:
    if key[0] in ("v", "c"):
        return list(key)
    return [key[0], *(_key_to_json(k) for k in key[1:])]


def _key_from_json(obj) -> tuple:
    if not isinstance(obj, list) or not obj or not isinstance(obj[0], str):
        raise ValueError(f"not a dim expression: {obj!r}")
    if obj[0] == "v" and len(obj) == 2 and isinstance(obj[1], str):
        return ("v", obj[1])
    if obj[0] == "c" and len(obj) == 2 and isinstance(obj[1], int):
        return ("c", obj[1])
    if obj[0] in ("add", "sub", "mul", "floordiv", "floormod", "min", "max") and len(obj) == 3:
        return (obj[0], _key_from_json(obj[1]), _key_from_json(obj[2]))
    raise ValueError(f"not a dim expression: {obj!r}")

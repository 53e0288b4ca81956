"""Scalar expressions shared by tensor expressions and the loop IR.

Expressions are immutable trees. Index arithmetic (``+ - *`` by constants, ``//`` and ``%``
by positive constants) is kept in a canonical affine form by :func:`simplify`, which is what
bounds inference, vector strides and tiling reason about.

>>> i = Var("i"); simplify((i * 4 + 3) // 4 * 4 + (i * 4 + 3) % 4)
i*4 + 3
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

INDEX = "int64"

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64",
                # minifloats, computed in float32 (codegen/narrow_dtypes.py)
                "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                "float4_e2m1fn", "float8_e8m0fnu")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


class Expr:
    """Base of every scalar expression. Hashed by identity; compare with :func:`same`."""

    __slots__ = ("dtype",)
    dtype: str

    # arithmetic builds new expressions (constants are wrapped by `const_like`)
    def __add__(self, other):
        return Binary("add", self, as_expr(other, self.dtype))

    def __radd__(self, other):
        return Binary("add", as_expr(other, self.dtype), self)

    def __sub__(self, other):
        return Binary("sub", self, as_expr(other, self.dtype))

    def __rsub__(self, other):
        return Binary("sub", as_expr(other, self.dtype), self)

    def __mul__(self, other):
        return Binary("mul", self, as_expr(other, self.dtype))

    def __rmul__(self, other):
        return Binary("mul", as_expr(other, self.dtype), self)

    def __truediv__(self, other):
        return Binary("div", self, as_expr(other, self.dtype))

    def __rtruediv__(self, other):
        return Binary("div", as_expr(other, self.dtype), self)

    def __floordiv__(self, other):
        return Binary("floordiv", self, as_expr(other, self.dtype))

    def __mod__(self, other):
        return Binary("floormod", self, as_expr(other, self.dtype))

    def __neg__(self):
        return Binary("sub", const(0, self.dtype), self)

    def __lt__(self, other):
        return Compare("lt", self, as_expr(other, self.dtype))

    def __le__(self, other):
        return Compare("le", self, as_expr(other, self.dtype))

    def __gt__(self, other):
        return Compare("gt", self, as_expr(other, self.dtype))

    def __ge__(self, other):
        return Compare("ge", self, as_expr(other, self.dtype))

    __hash__ = object.__hash__

    def children(self) -> tuple[Expr, ...]:
        return ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return self

    def __repr__(self) -> str:
        return format_expr(self)


class Var(Expr):
    """A scalar variable (loop index, or a parameter)."""

    __slots__ = ("name",)

    def __init__(self, name: str, dtype: str = INDEX):
        self.name = name
        self.dtype = dtype


class Const(Expr):
    __slots__ = ("value",)

    def __init__(self, value, dtype: str):
        self.dtype = dtype
        if dtype == "bool":
            value = bool(value)
        elif is_float(dtype):
            value = float(value)
        else:
            value = int(value)
        self.value = value


class Binary(Expr):
    """``a op b`` for op in add sub mul div floordiv floormod truncdiv truncmod min max pow,
    and on integers bitand bitor bitxor shl shr (shr is arithmetic for signed dtypes)."""

    __slots__ = ("op", "a", "b")
    OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "truncdiv", "truncmod", "min",
           "max", "pow", "bitand", "bitor", "bitxor", "shl", "shr")

    def __init__(self, op: str, a: Expr, b: Expr):
        assert op in self.OPS, op
        if a.dtype != b.dtype:
            raise TypeError(f"{op}: operand dtypes differ: {a.dtype} vs {b.dtype}")
        self.op, self.a, self.b, self.dtype = op, a, b, a.dtype

    def children(self):
        return (self.a, self.b)

    def with_children(self, c):
        return Binary(self.op, c[0], c[1])


class Compare(Expr):
    __slots__ = ("op", "a", "b")
    OPS = ("lt", "le", "eq", "ne", "gt", "ge")

    def __init__(self, op: str, a: Expr, b: Expr):
        assert op in self.OPS, op
        if a.dtype != b.dtype:
            raise TypeError(f"{op}: operand dtypes differ: {a.dtype} vs {b.dtype}")
        self.op, self.a, self.b, self.dtype = op, a, b, "bool"

    def children(self):
        return (self.a, self.b)

    def with_children(self, c):
        return Compare(self.op, c[0], c[1])


class Logical(Expr):
    """``and`` / ``or`` of two booleans, ``not`` of one."""

    __slots__ = ("op", "args")

    def __init__(self, op: str, *args: Expr):
        assert op in ("and", "or", "not")
        self.op, self.args, self.dtype = op, tuple(args), "bool"

    def children(self):
        return self.args

    def with_children(self, c):
        return Logical(self.op, *c)


class Select(Expr):
    __slots__ = ("cond", "true_value", "false_value")

    def __init__(self, cond: Expr, true_value: Expr, false_value: Expr):
        if true_value.dtype != false_value.dtype:
            raise TypeError("select: branch dtypes differ")
        self.cond, self.true_value, self.false_value = cond, true_value, false_value
        self.dtype = true_value.dtype

    def children(self):
        return (self.cond, self.true_value, self.false_value)

    def with_children(self, c):
        return Select(*c)


class Cast(Expr):
    __slots__ = ("value",)

    def __init__(self, dtype: str, value: Expr):
        self.dtype, self.value = dtype, value

    def children(self):
        return (self.value,)

    def with_children(self, c):
        return Cast(self.dtype, c[0])


# Math intrinsics a Call may name; codegen maps each to an LLVM intrinsic or a libm function.
INTRINSICS = ("exp", "log", "sqrt", "tanh", "fabs", "floor", "ceil", "round", "trunc", "erf",
              "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
              "atanh", "pow", "fmod", "isnan", "isinf",
              "bitcast",          # the same bits read as the Call's dtype (equal bit widths)
              # check_index(index, size): ``index`` itself; where it is outside [-size, size)
              # the run fails (codegen/llvm.py: the entry returns a status naming the call)
              "check_index",
              # clamp(index, lo, hi): index clamped into [lo, hi] where a select discards the
              # load it indexes (see guarded_clamp); never reaches codegen
              "clamp")


class Call(Expr):
    __slots__ = ("name", "args")

    def __init__(self, name: str, args: Iterable[Expr], dtype: str):
        assert name in INTRINSICS, name
        self.name, self.args, self.dtype = name, tuple(args), dtype

    def children(self):
        return self.args

    def with_children(self, c):
        return Call(self.name, c, self.dtype)


class Load(Expr):
    """Element ``source[indices]``: source is a te.Tensor (tensor expressions) or a
    loop.Buffer (loop IR). After buffer flattening, indices has one element."""

    __slots__ = ("source", "indices")

    def __init__(self, source, indices: Iterable[Expr]):
        self.source, self.indices, self.dtype = source, tuple(indices), source.dtype

    def children(self):
        return self.indices

    def with_children(self, c):
        return Load(self.source, c)


class Reduce(Expr):
    """A commutative reduction of ``source`` over ``axes`` (te.IterVar) starting at ``init``."""

    __slots__ = ("combiner", "source", "axes", "init")
    # "max_ordered": acc > x ? acc : x, which is x86's maxps and onnxruntime's pooling (a NaN
    # input is skipped unless it comes last); "max" propagates NaN like numpy.
    COMBINERS = ("sum", "max", "min", "prod", "max_ordered")

    def __init__(self, combiner: str, source: Expr, axes, init: Expr):
        assert combiner in self.COMBINERS
        self.combiner, self.source, self.axes, self.init = combiner, source, tuple(axes), init
        self.dtype = source.dtype

    def children(self):
        return (self.source, self.init)

    def with_children(self, c):
        return Reduce(self.combiner, c[0], self.axes, c[1])


# ---------------------------------------------------------------------------------------------
# construction helpers

def const(value, dtype: str = INDEX) -> Const:
    return Const(value, dtype)


def as_expr(value, dtype: str = INDEX) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(getattr(value, "var", None), Var):     # a te.IterVar stands for its variable
        return value.var
    if isinstance(value, bool):
        return Const(value, "bool") if dtype == "bool" else Const(int(value), dtype)
    if isinstance(value, float) and not is_float(dtype):
        return Const(value, "float32")
    return Const(value, dtype)


def cast(dtype: str, value: Expr) -> Expr:
    return value if value.dtype == dtype else Cast(dtype, value)


def minimum(a, b) -> Expr:
    a = as_expr(a)
    return Binary("min", a, as_expr(b, a.dtype))


def maximum(a, b) -> Expr:
    a = as_expr(a)
    return Binary("max", a, as_expr(b, a.dtype))


def select(cond: Expr, a, b) -> Expr:
    a = as_expr(a)
    return Select(cond, a, as_expr(b, a.dtype))


def guarded_clamp(index: Expr, extent: int) -> Expr:
    """``index`` clamped into [0, extent) for a load that a select guards (a concat's
    inputs): the clamp keeps the load in its buffer where the select discards it.

    Unlike min/max, the clamp stays one node until the loop pass ``resolve_clamps``: where
    the select's condition proves the clamp changes nothing and the unclamped load cannot
    leave its buffer, the pass drops it (a concat of slices of one tensor then loads that
    tensor contiguously); elsewhere it becomes min/max. Folded to a constant early, a clamp
    into an axis of size 1 would lose the index it clamps.
    """
    return Call("clamp", (as_expr(index), const(0), const(extent - 1)), INDEX)


def all_of(*conds: Expr) -> Expr | None:
    result = None
    for c in conds:
        if c is None:
            continue
        result = c if result is None else Logical("and", result, c)
    return result


def any_of(*conds: Expr) -> Expr | None:
    result = None
    for c in conds:
        result = c if result is None else Logical("or", result, c)
    return result


def eq(a: Expr, b) -> Expr:
    return Compare("eq", a, as_expr(b, a.dtype))


def ne(a: Expr, b) -> Expr:
    return Compare("ne", a, as_expr(b, a.dtype))


def call(name: str, *args: Expr) -> Expr:
    return Call(name, args, args[0].dtype)


# ---------------------------------------------------------------------------------------------
# traversal

def transform(expr: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn`` may return a replacement for a node (or None)."""
    memo: dict[int, Expr] = {}

    def visit(e: Expr) -> Expr:
        key = id(e)
        if key in memo:
            return memo[key]
        kids = e.children()
        if kids:
            new_kids = tuple(visit(k) for k in kids)
            if any(a is not b for a, b in zip(new_kids, kids)):
                e2 = e.with_children(new_kids)
            else:
                e2 = e
        else:
            e2 = e
        r = fn(e2)
        out = e2 if r is None else r
        memo[key] = out
        return out

    return visit(expr)


def substitute(expr: Expr, mapping: dict[Var, Expr]) -> Expr:
    if not mapping:
        return expr
    return transform(expr, lambda e: mapping.get(e) if isinstance(e, Var) else None)


def walk(expr: Expr):
    """Yield every node of ``expr`` (pre-order)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(reversed(e.children()))    # operands in source order


def free_vars(expr: Expr) -> set[Var]:
    return {e for e in walk(expr) if isinstance(e, Var)}


def uses_var(expr: Expr, var: Var) -> bool:
    return any(e is var for e in walk(expr))


def checks_index(expr: Expr) -> bool:
    """Whether ``expr`` holds a ``check_index`` call: a side effect that folding must keep."""
    return any(isinstance(e, Call) and e.name == "check_index" for e in walk(expr))


def same(a: Expr, b: Expr) -> bool:
    """Structural equality."""
    if a is b:
        return True
    if type(a) is not type(b) or a.dtype != b.dtype:
        return False
    if isinstance(a, Var):
        return False
    if isinstance(a, Const):
        return a.value == b.value
    for attr in ("op", "name", "combiner", "source"):
        if hasattr(a, attr) and getattr(a, attr) != getattr(b, attr):
            return False
    ka, kb = a.children(), b.children()
    return len(ka) == len(kb) and all(same(x, y) for x, y in zip(ka, kb))


# ---------------------------------------------------------------------------------------------
# canonical affine form

class Affine:
    """``const + sum(coeff * atom)`` over integer atoms (vars or non-affine sub-expressions).

    Atoms are keyed by a structural key, so equal sub-expressions merge.
    """

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, terms: dict | None = None, const_: int = 0, dtype: str = INDEX):
        self.terms: dict[tuple, tuple[Expr, int]] = terms or {}
        self.const = const_
        self.dtype = dtype

    @staticmethod
    def of_atom(e: Expr) -> Affine:
        return Affine({expr_key(e): (e, 1)}, 0, e.dtype)

    def add(self, other: Affine, sign: int = 1) -> Affine:
        terms = dict(self.terms)
        for k, (atom, c) in other.terms.items():
            old = terms.get(k)
            n = (old[1] if old else 0) + sign * c
            if n:
                terms[k] = (atom, n)
            elif old:
                del terms[k]
        return Affine(terms, self.const + sign * other.const, self.dtype)

    def scale(self, k: int) -> Affine:
        if k == 0:
            return Affine({}, 0, self.dtype)
        return Affine({key: (a, c * k) for key, (a, c) in self.terms.items()}, self.const * k,
                      self.dtype)

    def is_const(self) -> bool:
        return not self.terms

    def to_expr(self) -> Expr:
        parts: list[Expr] = []
        for atom, c in sorted(self.terms.values(), key=lambda t: _atom_order(t[0])):
            if c == 1:
                parts.append(atom)
            elif c == -1:
                parts.append(Binary("mul", atom, const(-1, self.dtype)))
            else:
                parts.append(Binary("mul", atom, const(c, self.dtype)))
        result = parts[0] if parts else None
        for p in parts[1:]:
            result = Binary("add", result, p)
        if result is None:
            return const(self.const, self.dtype)
        if self.const > 0:
            result = Binary("add", result, const(self.const, self.dtype))
        elif self.const < 0:
            result = Binary("sub", result, const(-self.const, self.dtype))
        return result


def _atom_order(e: Expr):
    # Vars first (by name), then compound atoms; deterministic printing and hashing.
    return (0, e.name) if isinstance(e, Var) else (1, format_expr(e))


def expr_key(e: Expr) -> tuple:
    """A hashable structural key (vars by identity)."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Const):
        return ("const", e.dtype, e.value)
    head = [type(e).__name__, e.dtype]
    for attr in ("op", "name", "combiner"):
        if hasattr(e, attr):
            head.append(getattr(e, attr))
    if isinstance(e, Load):
        head.append(id(e.source))
    return tuple(head) + tuple(expr_key(k) for k in e.children())


Bounds = dict  # Var -> (lo: int, hi: int) inclusive


def const_bounds(e: Expr, bounds: Bounds) -> tuple[int | None, int | None]:
    """Inclusive integer interval of an integer expression, None where unknown."""
    if isinstance(e, Const):
        return (e.value, e.value) if not isinstance(e.value, float) else (None, None)
    if isinstance(e, Var):
        return bounds.get(e, (None, None))
    if isinstance(e, Binary):
        la, ha = const_bounds(e.a, bounds)
        lb, hb = const_bounds(e.b, bounds)
        op = e.op
        if op == "add":
            return (_add(la, lb), _add(ha, hb))
        if op == "sub":
            return (_add(la, _neg(hb)), _add(ha, _neg(lb)))
        if op == "mul" and None not in (la, ha, lb, hb):
            products = (la * lb, la * hb, ha * lb, ha * hb)
            return (min(products), max(products))
        if op == "floordiv" and lb is not None and lb == hb and lb > 0:
            return (None if la is None else la // lb, None if ha is None else ha // lb)
        if op == "floormod" and lb is not None and lb == hb and lb > 0:
            if la is not None and ha is not None and la // lb == ha // lb:
                return (la % lb, ha % lb)
            return (0, lb - 1)
        if op == "min":
            return (_min(la, lb), _min(ha, hb) if None not in (ha, hb) else (ha if hb is None
                                                                             else hb))
        if op == "max":
            return (_max(la, lb) if None not in (la, lb) else (la if lb is None else lb),
                    _max(ha, hb))
    if isinstance(e, Call) and e.name == "clamp":
        lo, hi = e.args[1].value, e.args[2].value
        le, he = const_bounds(e.args[0], bounds)
        return (lo if le is None else min(max(le, lo), hi),
                hi if he is None else max(min(he, hi), lo))
    if isinstance(e, Select):
        lt, ht = const_bounds(e.true_value, bounds)
        lf, hf = const_bounds(e.false_value, bounds)
        return (_min(lt, lf), _max(ht, hf))
    return (None, None)


def _add(a, b):
    return None if a is None or b is None else a + b


def _neg(a):
    return None if a is None else -a


def _min(a, b):
    return None if a is None or b is None else min(a, b)


def _max(a, b):
    return None if a is None or b is None else max(a, b)


def to_affine(e: Expr, bounds: Bounds) -> Affine:
    """Canonical affine form of an integer expression (sub-expressions simplified first)."""
    if isinstance(e, Const):
        return Affine({}, e.value, e.dtype)
    if isinstance(e, Binary):
        if e.op in ("add", "sub"):
            return to_affine(e.a, bounds).add(to_affine(e.b, bounds), 1 if e.op == "add" else -1)
        if e.op == "mul":
            a, b = to_affine(e.a, bounds), to_affine(e.b, bounds)
            if b.is_const():
                return a.scale(b.const)
            if a.is_const():
                return b.scale(a.const)
            return Affine.of_atom(Binary("mul", a.to_expr(), b.to_expr()))
        if e.op in ("floordiv", "floormod"):
            return _affine_divmod(e.op, to_affine(e.a, bounds), to_affine(e.b, bounds), bounds)
        if e.op in ("min", "max"):
            a, b = to_affine(e.a, bounds), to_affine(e.b, bounds)
            diff = a.add(b, -1)
            lo, hi = const_bounds(diff.to_expr(), bounds)
            first = (hi is not None and hi <= 0) if e.op == "min" else \
                (lo is not None and lo >= 0)
            second = (lo is not None and lo >= 0) if e.op == "min" else \
                (hi is not None and hi <= 0)
            # the operand a fold drops must not check an index: clamping a run-time index
            # into an axis of size 1 is the constant 0, but its check still has to run
            if first and not checks_index(b.to_expr()):
                return a
            if second and not checks_index(a.to_expr()):
                return b
            if a.is_const() and b.is_const():
                return Affine({}, min(a.const, b.const) if e.op == "min" else
                              max(a.const, b.const), e.dtype)
            return Affine.of_atom(Binary(e.op, a.to_expr(), b.to_expr()))
    if isinstance(e, Var):
        return Affine.of_atom(e)
    return Affine.of_atom(simplify(e, bounds))


def _affine_divmod(op: str, a: Affine, b: Affine, bounds: Bounds) -> Affine:
    if not b.is_const() or b.const <= 0:
        return Affine.of_atom(Binary(op, a.to_expr(), b.to_expr()))
    c = b.const
    if c == 1:
        return a if op == "floordiv" else Affine({}, 0, a.dtype)
    # Split a = c*q + r where q holds the terms whose coefficient c divides, r the rest.
    q_terms, r_terms = {}, {}
    for k, (atom, coeff) in a.terms.items():
        if coeff % c == 0:
            q_terms[k] = (atom, coeff // c)
        else:
            r_terms[k] = (atom, coeff)
    q = Affine(q_terms, a.const // c, a.dtype)
    r = Affine(r_terms, a.const % c, a.dtype)
    lo, hi = const_bounds(r.to_expr(), bounds)
    if lo is not None and hi is not None and 0 <= lo and hi < c:
        return q if op == "floordiv" else r
    if lo is not None and hi is not None and lo // c == hi // c:
        # r's quotient is a known constant
        k = lo // c
        if op == "floordiv":
            return q.add(Affine({}, k, a.dtype))
        return r.add(Affine({}, -k * c, a.dtype))
    if op == "floordiv":
        if not q_terms:
            return Affine.of_atom(Binary(op, a.to_expr(), const(c, a.dtype)))
        return q.add(Affine.of_atom(Binary(op, r.to_expr(), const(c, a.dtype))))
    return Affine.of_atom(Binary(op, r.to_expr(), const(c, a.dtype)))


def merge_div_mod(aff: Affine) -> Affine:
    """Rewrite ``k*c*(x // c) + k*(x % c)`` into ``k*x``."""
    changed = True
    while changed:
        changed = False
        for key, (atom, coeff) in list(aff.terms.items()):
            if not (isinstance(atom, Binary) and atom.op == "floormod"
                    and isinstance(atom.b, Const)):
                continue
            c = atom.b.value
            div_key = expr_key(Binary("floordiv", atom.a, atom.b))
            div = aff.terms.get(div_key)
            if div is None and isinstance(atom.a, Binary) and atom.a.op == "floordiv" and \
                    isinstance(atom.a.b, Const):
                # (x // a) % c beside x // (a*c): the same pair, with the division nested
                div_key = expr_key(Binary("floordiv", atom.a.a, const(atom.a.b.value * c,
                                                                      atom.a.b.dtype)))
                div = aff.terms.get(div_key)
            whole = atom.a
            if div is None:
                # (y // c) * c + x % c with y - x a multiple of c is y: a split's tail at
                # offset 160 of a row of 13, (q + 160) // 13 * 13 + (q + 4) % 13
                div_key, div, whole = _shifted_div(aff, atom.a, c, coeff)
            if div is None or div[1] != coeff * c:
                continue
            terms = dict(aff.terms)
            del terms[key]
            del terms[div_key]
            aff = Affine(terms, aff.const, aff.dtype).add(to_affine(whole, {}).scale(coeff))
            changed = True
            break
    return aff


def _shifted_div(aff: Affine, x: Expr, c: int, coeff: int):
    """A term ``coeff*c * (y // c)`` of ``aff`` whose y - x is a constant multiple of c:
    (its key, (atom, coefficient), y), or (None, None, None)."""
    for key, (atom, k) in aff.terms.items():
        if k != coeff * c or not (isinstance(atom, Binary) and atom.op == "floordiv" and
                                  isinstance(atom.b, Const) and atom.b.value == c):
            continue
        diff = to_affine(atom.a, {}).add(to_affine(x, {}), -1)
        if diff.is_const() and diff.const % c == 0:
            return key, (atom, k), atom.a
    return None, None, None


_FOLD = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "min": min, "max": max,
}

_CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "eq": lambda a, b: a == b,
        "ne": lambda a, b: a != b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _root(x: Expr) -> Expr:
    """sqrt(x) with pow's edges for the reciprocal root: pow(-0, -0.5) = +inf, pow(-inf,
    -0.5) = +0 (x ** 0.5 itself is sqrt in numpy: -0 and nan there)."""
    inf = Const(math.inf, x.dtype)
    return Call("sqrt", [Select(Compare("eq", x, Const(-math.inf, x.dtype)), inf,
                                Binary("add", x, Const(0.0, x.dtype)))], x.dtype)


# pow(x, c) for constant c as arithmetic: same results as pow to within an ulp, and vector
# instructions instead of one libm call per lane
_POW_BY_CONSTANT: dict[float, Callable[[Expr], Expr]] = {
    0.0: lambda x: Const(1.0, x.dtype),
    1.0: lambda x: x,
    2.0: lambda x: Binary("mul", x, x),
    3.0: lambda x: Binary("mul", Binary("mul", x, x), x),
    4.0: lambda x: Binary("mul", Binary("mul", x, x), Binary("mul", x, x)),
    -1.0: lambda x: Binary("div", Const(1.0, x.dtype), x),
    0.5: lambda x: Call("sqrt", [x], x.dtype),
    -0.5: lambda x: Binary("div", Const(1.0, x.dtype), _root(x)),
}


def simplify(e: Expr, bounds: Bounds | None = None) -> Expr:
    """Canonicalize integer arithmetic, fold constants, decide comparisons that the bounds of
    the variables settle. ``bounds`` maps Var -> inclusive (lo, hi)."""
    bounds = bounds or {}
    if isinstance(e, (Var, Const)):
        return e
    if is_int(e.dtype) and isinstance(e, Binary) and e.op in (
            "add", "sub", "mul", "floordiv", "floormod", "min", "max"):
        return merge_div_mod(to_affine(e, bounds)).to_expr()
    kids = tuple(simplify(k, bounds) for k in e.children())
    if isinstance(e, Compare):
        a, b = kids
        if is_int(a.dtype):
            diff = simplify(Binary("sub", a, b), bounds)
            lo, hi = const_bounds(diff, bounds)
            decided = _decide(e.op, lo, hi)
            if decided is not None and not checks_index(diff):
                return Const(decided, "bool")
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(_CMP[e.op](a.value, b.value), "bool")
        return Compare(e.op, a, b)
    if isinstance(e, Logical):
        if e.op == "not":
            return Const(not kids[0].value, "bool") if isinstance(kids[0], Const) else \
                Logical("not", kids[0])
        a, b = kids
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if e.op == "and":
                    return y if x.value else Const(False, "bool")
                return Const(True, "bool") if x.value else y
        return Logical(e.op, a, b)
    if isinstance(e, Select):
        c, t, f = kids
        if isinstance(c, Const):
            return t if c.value else f
        return Select(c, t, f)
    if isinstance(e, Binary) and all(isinstance(k, Const) for k in kids) and e.op in _FOLD:
        return Const(_FOLD[e.op](kids[0].value, kids[1].value), e.dtype)
    if isinstance(e, Call) and e.name == "clamp":
        return _fold_clamp(kids, bounds)
    if isinstance(e, Call) and e.name == "pow" and is_float(e.dtype) \
            and isinstance(kids[1], Const) and kids[1].value in _POW_BY_CONSTANT:
        return _POW_BY_CONSTANT[kids[1].value](kids[0])
    if isinstance(e, Cast) and isinstance(kids[0], Const):
        v = kids[0].value
        if is_int(e.dtype) and isinstance(v, float):
            v = math.trunc(v)
        return Const(v, e.dtype)
    if any(a is not b for a, b in zip(kids, e.children())):
        return e.with_children(kids)
    return e


def _fold_clamp(kids: tuple[Expr, ...], bounds: Bounds) -> Expr:
    """A clamp whose operand's bounds decide it: the operand, or the bound it is clamped to."""
    x, lo, hi = kids[0], kids[1].value, kids[2].value
    le, he = const_bounds(x, bounds)
    if le is not None and he is not None and lo <= le and he <= hi:
        return x
    if he is not None and he <= lo and lo < hi:
        return Const(lo, x.dtype)
    if le is not None and le >= hi and lo < hi:
        return Const(hi, x.dtype)
    return Call("clamp", kids, x.dtype)


def _decide(op: str, lo, hi) -> bool | None:
    """Decide ``diff op 0`` from diff's interval."""
    if op == "lt":
        return True if hi is not None and hi < 0 else (False if lo is not None and lo >= 0
                                                      else None)
    if op == "le":
        return True if hi is not None and hi <= 0 else (False if lo is not None and lo > 0
                                                       else None)
    if op == "gt":
        return True if lo is not None and lo > 0 else (False if hi is not None and hi <= 0
                                                      else None)
    if op == "ge":
        return True if lo is not None and lo >= 0 else (False if hi is not None and hi < 0
                                                       else None)
    if op == "eq":
        if lo == hi == 0:
            return True
        return False if (lo is not None and lo > 0) or (hi is not None and hi < 0) else None
    if op == "ne":
        d = _decide("eq", lo, hi)
        return None if d is None else not d
    return None


def as_const_int(e: Expr) -> int | None:
    e = simplify(e)
    return e.value if isinstance(e, Const) and isinstance(e.value, int) else None


def linear_coeff(e: Expr, var: Var, bounds: Bounds | None = None) -> tuple[Expr, int] | None:
    """Write ``e`` as ``base + stride * var`` with an integer stride and ``base`` free of var.

    Returns (base, stride), or None when ``e`` is not affine in ``var``.
    """
    aff = merge_div_mod(to_affine(e, bounds or {}))
    stride = 0
    rest = {}
    for k, (atom, c) in aff.terms.items():
        if atom is var:
            stride = c
        elif uses_var(atom, var):
            return None
        else:
            rest[k] = (atom, c)
    return Affine(rest, aff.const, aff.dtype).to_expr(), stride


# ---------------------------------------------------------------------------------------------
# printing

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%",
          "lt": "<", "le": "<=", "eq": "==", "ne": "!=", "gt": ">", "ge": ">=", "and": "&&",
          "or": "||"}


def format_expr(e: Expr) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        if is_float(e.dtype):
            text = repr(e.value)
            return f"{text}f" if e.dtype == "float32" and "n" not in text else text
        return str(e.value)
    if isinstance(e, (Binary, Compare)):
        if e.op in _INFIX:
            return _infix(e)
        return f"{e.op}({format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Logical):
        if e.op == "not":
            arg = format_expr(e.args[0])
            return f"!({arg})" if isinstance(e.args[0], (Binary, Compare)) else f"!{arg}"
        return f"({format_expr(e.args[0])} {_INFIX[e.op]} {format_expr(e.args[1])})"
    if isinstance(e, Select):
        return (f"select({format_expr(e.cond)}, {format_expr(e.true_value)}, "
                f"{format_expr(e.false_value)})")
    if isinstance(e, Cast):
        return f"{e.dtype}({format_expr(e.value)})"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Load):
        return f"{e.source.name}[{', '.join(format_expr(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(a.var.name for a in e.axes)
        return f"{e.combiner}({format_expr(e.source)}, axis=[{axes}])"
    return type(e).__name__


def _infix(e) -> str:
    a, b = format_expr(e.a), format_expr(e.b)
    if isinstance(e.a, (Binary, Compare)) and e.a.op in _INFIX and not (
            e.op in ("add", "sub") and e.a.op in ("add", "sub", "mul")) and not (
            e.op == "mul" and e.a.op == "mul"):
        a = f"({a})"
    if isinstance(e.b, (Binary, Compare)) and e.b.op in _INFIX and not (
            e.op == "add" and e.b.op == "mul"):
        b = f"({b})"
    return f"{a}{_INFIX[e.op]}{b}" if e.op == "mul" else f"{a} {_INFIX[e.op]} {b}"

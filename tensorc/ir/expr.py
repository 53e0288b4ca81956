"""Scalar expressions shared by tensor expressions and the loop IR.

Expressions are immutable trees: the node classes, the helpers that build them, traversal
and printing. The arithmetic that reasons about integer indices (canonical affine form,
bounds, simplification) is in :mod:`tensorc.ir.arith`.

>>> i = Var("i"); format_expr((i + 1) * 4)
'(i + 1)*4'
"""
from __future__ import annotations

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

    def __bool__(self):
        # `if extent > 1` on a symbolic extent would build a Compare and take it as true:
        # an expression has no truth value until it is evaluated (test for None with `is`)
        raise TypeError(f"the expression {format_expr(self)} has no truth value at compile "
                        f"time")

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
              # the run fails (codegen/llvm/codegen.py: the entry returns a status naming the call)
              "check_index",
              # clamp(index, lo, hi): index clamped into [lo, hi] where a select discards the
              # load it indexes (see guarded_clamp); never reaches codegen
              "clamp",
              # dot4_u8s8(u, s): int32 words of four unsigned and four signed bytes -> the sum
              # of the four products (codegen/llvm/int8_dot.py: pairs may saturate to int16);
              # dot4_s8s8(x, w): both signed, w never -128; the _rev / s8u8 forms take their
              # operands the other way round
              "dot4_u8s8", "dot4_s8u8", "dot4_s8s8", "dot4_s8s8_rev")


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
    if isinstance(getattr(value, "expr", None), Expr):   # a symbolic Dim, its expression
        return value.expr
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
    if not isinstance(extent, int):     # a symbolic extent: a plain min/max
        return minimum(maximum(as_expr(index), const(0)), as_expr(extent - 1))
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

"""Integer index arithmetic: the canonical affine form, bounds, and simplification.

Index arithmetic (``+ - *`` by constants, ``//`` and ``%`` by positive constants) is kept in
a canonical affine form by :func:`simplify`, which is what bounds inference, vector strides
and tiling reason about; :func:`const_bounds` gives an integer expression's interval from its
variables' ranges, :func:`linear_coeff` its stride along one variable.

>>> i = Var("i"); simplify((i * 4 + 3) // 4 * 4 + (i * 4 + 3) % 4)
i*4 + 3
"""
from __future__ import annotations

import math
from typing import Callable

from tensorc.ir.expr import (
    INDEX, Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Select, Var, checks_index,
    const, format_expr, is_float, is_int, uses_var,
)


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
        if op == "mul" and (lb is not None and lb == hb or la is not None and la == ha):
            # one side constant, the other unbounded somewhere (a symbolic dim in [1, inf))
            (lo, hi), k = ((la, ha), lb) if lb is not None and lb == hb else ((lb, hb), la)
            return (_scaled(lo, k), _scaled(hi, k)) if k >= 0 else \
                (_scaled(hi, k), _scaled(lo, k))
        if op == "mul" and la is not None and lb is not None and la >= 0 and lb >= 0:
            # two non-negative factors, one unbounded (batch*seq)
            return (la * lb, None if ha is None or hb is None else ha * hb)
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


def _scaled(a, k: int):
    return None if a is None else a * k


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
            return _multiply(a, b)
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


def _factors(e: Expr) -> list[Expr]:
    """The factors of a product of atoms (``b*s*h`` -> [b, s, h]); [e] for any other atom."""
    if isinstance(e, Binary) and e.op == "mul" and not isinstance(e.a, Const) \
            and not isinstance(e.b, Const):
        return _factors(e.a) + _factors(e.b)
    return [e]


def _monomial(factors: list[Expr]) -> Expr:
    """A product of atoms in one canonical order, so that ``s*b`` and ``b*s`` are one atom."""
    ordered = sorted(factors, key=_atom_order)
    result = ordered[0]
    for factor in ordered[1:]:
        result = Binary("mul", result, factor)
    return result


def _multiply(a: Affine, b: Affine) -> Affine:
    """The product of two non-constant affine forms, distributed into a sum of monomials:
    ``(b + 1)*s`` is ``b*s + s`` (symbolic shapes multiply dims: batch*seq*heads)."""
    result = Affine({}, a.const * b.const, a.dtype)
    for atom, c in a.terms.values():
        result = result.add(Affine.of_atom(atom).scale(c * b.const))
    for atom, c in b.terms.values():
        result = result.add(Affine.of_atom(atom).scale(c * a.const))
    for x, cx in a.terms.values():
        for y, cy in b.terms.values():
            result = result.add(Affine.of_atom(_monomial(_factors(x) + _factors(y)))
                                .scale(cx * cy))
    return result


def _exact_quotient(a: Affine, b: Affine) -> Affine | None:
    """``a / b`` where ``b`` is one monomial (times a constant) that divides every term of
    ``a`` exactly (``b*s*768 // (s*768)`` is ``b``); None otherwise."""
    if a.const != 0 or len(b.terms) != 1 or b.const != 0:
        return None
    ((divisor, c),) = b.terms.values()
    wanted = [expr_key(f) for f in _factors(divisor)]
    result = Affine({}, 0, a.dtype)
    for atom, coeff in a.terms.values():
        factors = _factors(atom)
        keys = [expr_key(f) for f in factors]
        for key in wanted:
            if key not in keys:
                return None
            index = keys.index(key)
            del keys[index], factors[index]
        if coeff % c:
            return None
        part = Affine({}, 1, a.dtype) if not factors else Affine.of_atom(_monomial(factors))
        result = result.add(part.scale(coeff // c))
    return result


def _affine_divmod(op: str, a: Affine, b: Affine, bounds: Bounds) -> Affine:
    if not b.is_const():
        quotient = _exact_quotient(a, b)
        if quotient is not None:
            return quotient if op == "floordiv" else Affine({}, 0, a.dtype)
        return Affine.of_atom(Binary(op, a.to_expr(), b.to_expr()))
    if b.const <= 0:
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
            if isinstance(atom, Binary) and atom.op == "floormod" and \
                    not isinstance(atom.b, Const):
                merged = _merge_symbolic_div_mod(aff, key, atom, coeff)
                if merged is not None:
                    aff, changed = merged, True
                    break
                continue
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


def _merge_symbolic_div_mod(aff: Affine, key, mod: Binary, coeff: int) -> Affine | None:
    """``k*D*(x // D) + k*(x % D)`` as ``k*x`` for a divisor D of symbolic dims (a map's
    positions fused and taken apart by its run-time width), or None where the pair is not
    there."""
    product = _monomial(_factors(mod.b) + [Binary("floordiv", mod.a, mod.b)])
    div_key = expr_key(product)
    div = aff.terms.get(div_key)
    if div is None or div[1] != coeff:
        return None
    terms = dict(aff.terms)
    del terms[key]
    del terms[div_key]
    return Affine(terms, aff.const, aff.dtype).add(to_affine(mod.a, {}).scale(coeff))


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
            decided = decide_interval(e.op, lo, hi)
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


def decide_interval(op: str, lo, hi) -> bool | None:
    """Decide ``diff op 0`` (op lt le gt ge eq ne) from diff's interval [lo, hi] (None:
    unbounded); None where the interval does not."""
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
        d = decide_interval("eq", lo, hi)
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


def simplify_nonnegative(e: Expr) -> Expr:
    """:func:`simplify`, then the floor-division rules that hold for every integer and that
    symbolic dims need to stay short (loop indices keep :func:`simplify`'s form):
    ``(x + k*c)//c`` is ``x//c + k`` and ``(x//a)//b`` is ``x//(a*b)`` (a, b, c > 0), so a
    width pooled twice, ``((W - 2)//2 - 1)//2 + 1``, reads ``W//4``.

    >>> W = Var("W"); simplify_nonnegative(((W - 2) // 2 - 1) // 2 + 1)
    W // 4
    """
    for _ in range(16):
        before = format_expr(e)
        e = simplify(_merge_divisions(simplify(e)))
        if format_expr(e) == before:
            break
    return e


def _merge_divisions(e: Expr) -> Expr:
    if not isinstance(e, Binary):
        return e
    a, b = _merge_divisions(e.a), _merge_divisions(e.b)
    if e.op == "floordiv" and isinstance(b, Const) and b.value > 0:
        c = b.value
        if isinstance(a, Binary) and a.op == "floordiv" and isinstance(a.b, Const) \
                and a.b.value > 0:
            return Binary("floordiv", a.a, const(a.b.value * c, e.dtype))
        inner = to_affine(a, {})
        k = inner.const // c
        if k and inner.terms and inner.const % c == 0:
            rest = Affine(inner.terms, 0, inner.dtype)
            return Binary("add", Binary("floordiv", rest.to_expr(), b), const(k, e.dtype))
    return Binary(e.op, a, b) if (a is not e.a or b is not e.b) else e


def never_decreases(e: Expr) -> bool:
    """Whether ``e`` never decreases as its variables (all >= 0: loop indices, dims) grow:
    sums, min/max, products of such terms, floor division by a positive constant, minus a
    constant."""
    if isinstance(e, (Var, Const)):
        return True
    if isinstance(e, Binary) and e.op in ("add", "min", "max", "mul"):
        if e.op == "mul" and any(isinstance(x, Const) and x.value < 0 for x in (e.a, e.b)):
            return False
        return never_decreases(e.a) and never_decreases(e.b)
    if isinstance(e, Binary) and e.op == "sub" and isinstance(e.b, Const):
        return never_decreases(e.a)
    if isinstance(e, Binary) and e.op == "floordiv" and isinstance(e.b, Const) and \
            e.b.value > 0:
        return never_decreases(e.a)
    return False

"""Index arithmetic: canonical affine form, comparisons, bounds, linear coefficients."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorc.ir.arith import const_bounds, linear_coeff, simplify
from tensorc.ir.expr import (
    Binary, Call, Cast, Compare, Const, Expr, Logical, Select, Var, const, eq, format_expr, maximum,
    minimum, ne, select,
)

i, j, x = Var("i"), Var("j"), Var("x")
BOUNDS = {i: (0, 7), j: (0, 3)}


def show(e: Expr, bounds=None) -> str:
    return format_expr(simplify(e, bounds))


# ---------------------------------------------------------------------------------------------
# canonical affine form

@pytest.mark.parametrize("expr, printed", [
    (i + j - i, "j"),
    (i * 2 + i * 3, "i*5"),
    ((i + 1) * 2 - 2, "i*2"),
    (2 * (i + j) - j, "i*2 + j"),
    (j + i, "i + j"),                    # variables sorted by name
    (3 + i, "i + 3"),                    # the constant last
    (i - 3, "i - 3"),
    (0 - i, "i*-1"),
    (i * 2 * 3, "i*6"),
    (x * 3 // 3, "x"),
    ((x * 6 + 4) // 3, "x*2 + 1"),
    ((x * 6 + 4) % 3, "1"),
    ((x * 6 + 4) % 6, "4"),
    (x // 1, "x"),
    (x % 1, "0"),
])
def test_affine_canonical_form(expr, printed):
    assert show(expr) == printed


@pytest.mark.parametrize("expr, printed", [
    (x // 8 * 8 + x % 8, "x"),
    (x % 8 + x // 8 * 8, "x"),
    ((x // 4) * 4 + (x % 4) + 1, "x + 1"),
    ((x // 4) * 8 + (x % 4) * 2 + 1, "x*2 + 1"),      # k*c*(x//c) + k*(x%c) -> k*x
    ((i * 4 + 3) // 4 * 4 + (i * 4 + 3) % 4, "i*4 + 3"),
    ((x + j) // 5 * 5 + (x + j) % 5, "j + x"),
    # the numerators differ by a multiple of c: a split's tail at offset 160 of rows of 13
    ((x + 160) // 13 * 13 + (x + 4) % 13, "x + 160"),
    ((x + 26) // 13 * 26 + (x + 13) % 13 * 2, "x*2 + 52"),
])
def test_div_mod_pair_merges(expr, printed):
    assert show(expr) == printed


def test_div_mod_pair_with_mismatched_coefficients_stays():
    # (x//8)*4 + x%8 is not a multiple of x
    assert show(x // 8 * 4 + x % 8) == "(x % 8) + (x // 8)*4"
    # (x + 25) // 13 and (x + 4) % 13: 21 apart, no multiple of 13
    assert show((x + 25) // 13 * 13 + (x + 4) % 13) == "((x + 25) // 13)*13 + ((x + 4) % 13)"


@pytest.mark.parametrize("expr, printed", [
    ((i * 4 + j) // 4, "i"),
    ((i * 4 + j) % 4, "j"),
    ((i * 16 + j * 4 + 3) // 16, "i"),
    ((i * 16 + j * 4 + 3) % 16, "j*4 + 3"),
    # j + 1 reaches 4: its quotient is not known
    ((i * 4 + j + 1) // 4, "i + ((j + 1) // 4)"),
    ((i * 4 + j + 1) % 4, "(j + 1) % 4"),
    # i*4 + j spans [0, 31]: nothing to take out of //8
    ((i * 4 + j) // 8, "(i*4 + j) // 8"),
    ((j + 4) // 4, "1"),                # j + 4 in [4, 7]: the quotient is a known constant
    ((j + 4) % 4, "j"),
    ((j - 4) // 4, "-1"),
    ((j - 4) % 4, "j"),
    (minimum(j, 5), "j"),               # decided by bounds
    (maximum(i, 0), "i"),
    (minimum(i + 1, i + 3), "i + 1"),   # decided by the difference, without bounds
])
def test_floordiv_floormod_min_max_with_bounds(expr, printed):
    assert show(expr, BOUNDS) == printed


def test_unbounded_divmod_keeps_the_division():
    assert show((i * 4 + j) // 4) == "i + (j // 4)"
    assert show((i * 4 + j) % 4) == "j % 4"
    assert show(maximum(i, 0)) == "max(i, 0)"
    assert show((x - 1) // 4, {x: (0, 4)}) == "(x - 1) // 4"
    assert show((x - 1) // 4, {x: (1, 4)}) == "0"


def test_floor_semantics_for_negative_constants():
    assert show(const(-7) // 2) == "-4"
    assert show(const(-7) % 2) == "1"
    assert show(const(7) // 2 + const(-1) % 3) == "5"


@pytest.mark.parametrize("expr, printed", [
    (const(3) + const(4) * const(5), "23"),
    (minimum(const(3), 9) + maximum(const(-2), -5), "1"),
    (Binary("add", const(1.5, "float32"), const(2.0, "float32")), "3.5f"),
    (Binary("mul", const(2.0, "float64"), const(3.0, "float64")), "6.0"),
    (Binary("min", const(2.0, "float32"), const(1.0, "float32")), "1.0f"),
    (Cast("float32", const(3)), "3.0f"),
    (Cast("int64", const(2.9, "float64")), "2"),        # float -> int truncates
    (Cast("int64", const(-2.9, "float64")), "-2"),
    (select(Compare("lt", const(1), const(2)), const(5), const(6)), "5"),
])
def test_constant_folding(expr, printed):
    assert show(expr) == printed


def test_float_arithmetic_is_not_reassociated():
    f = Var("f", "float32")
    # float expressions keep their form: only integer index arithmetic is canonicalized
    assert show(f * 1.0 + 0.0) == "f*1.0f + 0.0f"
    assert show((f + 1.0) + 2.0) == "f + 1.0f + 2.0f"


# ---------------------------------------------------------------------------------------------
# comparisons

@pytest.mark.parametrize("expr, printed", [
    (i < 8, "True"),
    (i < 7, "i < 7"),
    (i <= 7, "True"),
    (i > 7, "False"),
    (i >= 0, "True"),
    (i < 0, "False"),
    (eq(i, 8), "False"),
    (ne(i, 8), "True"),
    (eq(i, 3), "i == 3"),
    (i * 4 + j < 32, "True"),           # the guard of an exact split
    (i * 4 + j < 31, "(i*4 + j) < 31"),  # ... and of one that overhangs
    (i < j + 8, "True"),
    (j - 4 < 0, "True"),
    (x < x + 1, "True"),                # decided by the difference alone
    (eq(x + 2, x + 2), "True"),
    (Logical("and", i < 8, j < 4), "True"),
    (Logical("and", i < 8, j < 2), "j < 2"),
    (Logical("or", i < 3, j < 4), "True"),
    (Logical("or", i < 3, j > 5), "i < 3"),
    (Logical("or", i < 3, j < 2), "(i < 3 || j < 2)"),
    (Logical("not", i < 8), "False"),
    (Logical("not", i < 3), "!(i < 3)"),
    (select(i < 8, x, j), "x"),
    (select(i > 8, x, j), "j"),
])
def test_comparisons_decided_by_bounds(expr, printed):
    assert show(expr, BOUNDS) == printed


# ---------------------------------------------------------------------------------------------
# bounds and linear coefficients

@pytest.mark.parametrize("expr, bounds, interval", [
    (i * 4 + j - 3, BOUNDS, (-3, 28)),
    (x * 2 - i, {x: (0, 3), i: (0, 7)}, (-7, 6)),
    (x % 4, {}, (0, 3)),
    ((x + 5) % 4, {x: (0, 2)}, (1, 3)),        # one period: exact
    (x // 4, {x: (0, 15)}, (0, 3)),
    (x // 4, {x: (-5, 15)}, (-2, 3)),
    (minimum(x, i), {x: (0, 3), i: (0, 7)}, (0, 3)),
    (maximum(x, i), {x: (0, 3), i: (2, 7)}, (2, 7)),
    (select(x < 1, i, x), {x: (0, 3), i: (0, 7)}, (0, 7)),
    (x, {}, (None, None)),
    (x + 1, {}, (None, None)),
    (x * i, {x: (-2, 3), i: (0, 7)}, (-14, 21)),
])
def test_const_bounds(expr, bounds, interval):
    assert const_bounds(expr, bounds) == interval


def test_linear_coeff():
    base, stride = linear_coeff(i * 4 + j * 2 + 3, j)
    assert (format_expr(base), stride) == ("i*4 + 3", 2)
    base, stride = linear_coeff(i * 4 + j * 2 + 3, i)
    assert (format_expr(base), stride) == ("j*2 + 3", 4)
    base, stride = linear_coeff(i + 1, j)          # free of j: stride 0
    assert (format_expr(base), stride) == ("i + 1", 0)
    base, stride = linear_coeff((x // 8) * 8 + x % 8 + i * 16, x)
    assert (format_expr(base), stride) == ("i*16", 1)


def test_linear_coeff_uses_bounds():
    # with j in [0, 3], (i*4 + j) // 4 is i
    assert linear_coeff((i * 4 + j) // 4, j) is None
    base, stride = linear_coeff((i * 4 + j) // 4, i, BOUNDS)
    assert (format_expr(base), stride) == ("0", 1)
    base, stride = linear_coeff((i * 4 + j) // 4 * 8 + j, j, BOUNDS)
    assert (format_expr(base), stride) == ("i*8", 1)


def test_linear_coeff_of_non_affine_is_none():
    assert linear_coeff(i * j, j) is None
    assert linear_coeff((i + j) // 2, j) is None
    assert linear_coeff(maximum(j, 2), j) is None


# ---------------------------------------------------------------------------------------------
# soundness: simplify never changes a value

VARS = (Var("a"), Var("b"), Var("c"))


def evaluate(e: Expr, env: dict):
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Binary):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                "floordiv": lambda: a // b, "floormod": lambda: a % b,
                "min": lambda: min(a, b), "max": lambda: max(a, b)}[e.op]()
    if isinstance(e, Compare):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return {"lt": a < b, "le": a <= b, "eq": a == b, "ne": a != b, "gt": a > b,
                "ge": a >= b}[e.op]
    if isinstance(e, Logical):
        args = [evaluate(a, env) for a in e.args]
        return {"and": lambda: args[0] and args[1], "or": lambda: args[0] or args[1],
                "not": lambda: not args[0]}[e.op]()
    if isinstance(e, Select):
        return evaluate(e.true_value if evaluate(e.cond, env) else e.false_value, env)
    raise TypeError(type(e).__name__)


def int_exprs():
    leaves = st.one_of(st.sampled_from(VARS), st.integers(-9, 9).map(const))
    divisors = st.sampled_from([1, 2, 3, 4, 8, 16, -3]).map(const)

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(["add", "sub", "min", "max"]), children, children),
            st.tuples(st.just("mul"), children, st.integers(-4, 8).map(const)),
            st.tuples(st.just("mul"), children, children),
            st.tuples(st.sampled_from(["floordiv", "floormod"]), children, divisors),
        ).map(lambda t: Binary(*t))

    return st.recursive(leaves, extend, max_leaves=10)


@st.composite
def var_bounds(draw):
    bounds = {}
    for v in VARS:
        if draw(st.booleans()):
            lo = draw(st.integers(-6, 6))
            bounds[v] = (lo, lo + draw(st.integers(0, 9)))
    return bounds


def _points(bounds):
    ranges = [range(bounds[v][0], bounds[v][1] + 1) if v in bounds else range(-12, 13, 5)
              for v in VARS]
    for values in itertools.product(*ranges):
        yield dict(zip(VARS, values))


@settings(max_examples=300, deadline=None)
@given(e=int_exprs(), bounds=var_bounds())
def test_simplify_preserves_values(e, bounds):
    s = simplify(e, bounds)
    for env in _points(bounds):
        assert evaluate(s, env) == evaluate(e, env), (format_expr(e), format_expr(s), env)


@settings(max_examples=300, deadline=None)
@given(a=int_exprs(), b=int_exprs(), op=st.sampled_from(["lt", "le", "eq", "ne", "gt", "ge"]),
       bounds=var_bounds())
def test_simplify_decides_comparisons_soundly(a, b, op, bounds):
    e = Compare(op, a, b)
    s = simplify(e, bounds)
    for env in _points(bounds):
        assert evaluate(s, env) == evaluate(e, env), (format_expr(e), format_expr(s), env)


@settings(max_examples=300, deadline=None)
@given(e=int_exprs(), bounds=var_bounds())
def test_const_bounds_contain_every_value(e, bounds):
    lo, hi = const_bounds(e, bounds)
    for env in _points(bounds):
        v = evaluate(e, env)
        assert (lo is None or lo <= v) and (hi is None or v <= hi), (format_expr(e), v)


@settings(max_examples=200, deadline=None)
@given(e=int_exprs(), bounds=var_bounds(), var=st.sampled_from(VARS))
def test_linear_coeff_is_exact(e, bounds, var):
    lin = linear_coeff(e, var, bounds)
    if lin is None:
        return
    base, stride = lin
    for env in _points(bounds):
        assert evaluate(base, env) + stride * env[var] == evaluate(e, env)


def test_folding_keeps_index_checks():
    """Clamping a checked run-time index into an axis of size 1 is the constant 0, but the
    check must still run: neither the clamp nor a comparison it decides may fold it away
    (the fuzzer found Gather, GatherND and ScatterND on a size-1 axis ignoring bad indices)."""
    checked = Call("check_index", (x, const(1)), "int64")
    clamp = minimum(maximum(checked, 0), 0)
    assert "check_index" in show(clamp)
    assert "check_index" in show(eq(clamp, i), {i: (0, 0)})
    # without a check the same expressions fold as before
    assert show(minimum(maximum(x, 0), 0)) == "0"
    assert show(eq(minimum(maximum(x, 0), 0), i), {i: (0, 0)}) == "True"

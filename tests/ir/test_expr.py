"""Scalar expressions: printing, structural equality, dtype checks."""
from __future__ import annotations

import pytest

from tensorc.ir.arith import simplify
from tensorc.ir.expr import (
    Binary, Call, Compare, Logical, Select, Var, cast, const, format_expr, minimum, same,
    select,
)

i, j, x = Var("i"), Var("j"), Var("x")


# ---------------------------------------------------------------------------------------------
# printing

@pytest.mark.parametrize("expr, printed", [
    (i * (j + 1), "i*(j + 1)"),
    ((i + j) * 2, "(i + j)*2"),
    (i - (j - 1), "i - (j - 1)"),
    ((i - j) - 1, "i - j - 1"),
    (i // (j + 1), "i // (j + 1)"),
    ((i + j) // 2, "(i + j) // 2"),
    (x // 4 // 2, "(x // 4) // 2"),
    (i * j * 2, "i*j*2"),
    (i * (j * 2), "i*(j*2)"),
    (minimum(i, j), "min(i, j)"),
    (Binary("truncdiv", x, const(2)), "truncdiv(x, 2)"),
    (i + 1 < j, "(i + 1) < j"),
    (Logical("and", i < 3, j < 4), "(i < 3 && j < 4)"),
    (Logical("not", i < 3), "!(i < 3)"),
    (Logical("not", Var("b", "bool")), "!b"),
    (select(i < 3, Var("f", "float32"), const(2.0, "float32")), "select(i < 3, f, 2.0f)"),
    (cast("float32", i), "float32(i)"),
    (Call("exp", [Var("f", "float32")], "float32"), "exp(f)"),
    (const(2.5, "float32"), "2.5f"),
    (const(2.5, "float64"), "2.5"),
    (const(True, "bool"), "True"),
    (const(-3), "-3"),
])
def test_printing(expr, printed):
    assert format_expr(expr) == printed
    assert repr(expr) == printed


def test_structural_equality():
    assert same(simplify(i * 2 + j + i), simplify(j + i * 3))
    assert not same(i + 1, i + 2)
    assert not same(i, Var("i"))                # variables by identity, not by name
    assert not same(const(1), const(1, "int32"))


def test_mixed_dtypes_are_rejected():
    with pytest.raises(TypeError, match="dtypes differ"):
        Binary("add", i, const(1, "int32"))
    with pytest.raises(TypeError, match="dtypes differ"):
        Compare("lt", Var("f", "float32"), const(1.0, "float64"))
    with pytest.raises(TypeError, match="dtypes differ"):
        Select(i < 1, const(1.0, "float32"), const(1))

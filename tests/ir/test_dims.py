"""Symbolic dims (tensorc/ir/dims.py) and the graph's dim table (tensorc/ir/dim_table.py):
the algebra, its canonical form, the refusals, the decisions ranges allow, run-time checks."""
from __future__ import annotations

import pickle

import pytest

from tensorc.errors import InputError, ShapeError, SymbolicDimError, TensorcError
from tensorc.ir.arith import simplify, simplify_nonnegative
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import (
    Dim, as_expr, bounds, ceil_div, decide, dim_max, dim_min, evaluate, may_equal,
    provably_equal, provably_not_equal, substitute_dims,
)
from tensorc.ir.expr import Var
from tensorc.ir.types import TensorType, check_type, format_shape

batch, seq, H = Dim("batch"), Dim("seq"), Dim("H")
VALUES = [1, 2, 3, 7, 13, 31, 97, 128]


def test_constant_results_are_plain_ints():
    assert seq - seq == 0 and isinstance(seq - seq, int)
    assert (batch * seq) // seq == batch
    assert (batch * seq * 768) % (seq * 768) == 0
    assert type((seq + 3) - seq) is int


def test_canonical_form_makes_equal_dims_equal_and_hashable():
    assert batch * seq == seq * batch
    assert hash(batch * seq) == hash(seq * batch)
    assert (seq + 1) * batch == batch * seq + batch
    assert {batch * seq: "x"}[seq * batch] == "x"
    assert seq != Dim("seq2") and seq + 1 != seq


def test_printing():
    assert str(batch * seq) == "batch*seq"
    assert str(batch * seq * 768) == "batch*seq*768"
    assert str((H - 3) // 2 + 1) == "(H - 3)//2 + 1"
    assert str(Dim("past") + seq) == "past + seq"
    assert str(-H + 3) == "-H + 3"
    assert str(dim_min(seq, 512)) == "min(seq, 512)"
    assert str(((H - 2) // 2 - 1) // 2 + 1) == "H//4"
    assert repr(seq) == "Dim('seq')"


@pytest.mark.parametrize("build", [
    lambda h, w: (h + 2 * 1 - 3) // 2 + 1,
    lambda h, w: ((h - 2) // 2 - 1) // 2 + 1,
    lambda h, w: h * w // (w * 3) if False else h * w * 6 // (w * 6),
    lambda h, w: ceil_div(h, 4) * 4 - h % 4,
    lambda h, w: (h + w) * (h - 1) - h * h,
    lambda h, w: -(-h // 3),
    lambda h, w: (h // 2) // 3 + h % 5,
])
def test_arithmetic_agrees_with_python_ints(build):
    h, w = Dim("h"), Dim("w")
    symbolic = build(h, w)
    for hv in VALUES:
        for wv in (1, 5, 16):
            assert evaluate(symbolic, {"h": hv, "w": wv}) == build(hv, wv), (hv, wv)


def test_refusals_name_the_dim():
    for attempt in (lambda: bool(seq), lambda: int(seq), lambda: range(seq),
                    lambda: [0, 1][seq], lambda: float(seq)):
        with pytest.raises(SymbolicDimError, match="seq") as info:
            attempt()
        assert isinstance(info.value, TensorcError)
    with pytest.raises(SymbolicDimError, match=r"seq < 4 depends on the run-time value"):
        assert seq < 4


def test_comparisons_the_ranges_decide():
    assert seq + 1 > 0 and seq >= 0 and batch * seq >= 0
    assert not (seq + 1 <= 0)
    table = DimTable()
    table.declare("seq", "ids", 1, 1, 512)
    with table.active():
        assert seq < 600 and seq >= 1
        assert bounds(seq * 2 + 1) == (3, 1025)
        with pytest.raises(SymbolicDimError):
            assert seq < 100


def test_decision_helpers():
    table = DimTable()
    table.declare("seq", "ids", 1)
    table.declare("past", "cache", 2, lo=0)
    with table.active():
        past = Dim("past")
        assert may_equal(seq, 1) and not provably_equal(seq, 1)
        assert provably_not_equal(seq, 0) and not may_equal(seq + 1, 1)
        assert may_equal(past, 0)
        assert provably_equal(past + seq - past, seq)
        assert decide("ge", past + seq, seq) is True
        assert decide("gt", past + seq, seq) is None
        assert dim_max(seq, 1) == seq and dim_min(seq, 0) == 0
        assert str(dim_max(past, 1)) == "max(past, 1)"


def test_expr_substitution_and_pickling():
    assert isinstance(as_expr(seq), Var) and as_expr(seq).dtype == "int64"
    assert as_expr(seq) is Dim("seq").expr  # one Var per name
    assert substitute_dims(seq * 2 + batch, {"seq": 5}) == batch + 10
    assert substitute_dims(seq + 1, {"seq": Dim("past") + 1}) == Dim("past") + 2
    assert pickle.loads(pickle.dumps((H - 3) // 2 + 1)) == (H - 3) // 2 + 1
    with pytest.raises(SymbolicDimError, match="needs a value for seq"):
        evaluate(seq + batch, {"batch": 2})


def test_arith_products_are_canonical_and_divide_exactly():
    b, s = Var("b"), Var("s")
    assert str(simplify(s * b)) == str(simplify(b * s))
    assert str(simplify((b + 1) * s)) == str(simplify(b * s + s))
    assert str(simplify((b * s * 768) // (s * 768))) == "b"
    assert str(simplify((b * s * 6) % (s * 3))) == "0"
    assert str(simplify((b * s + 1) // s)) == str(simplify((b * s + 1) // s))  # no quotient
    w = Var("W")
    assert str(simplify_nonnegative(((w - 2) // 2 - 1) // 2 + 1)) == "W // 4"


def test_tensor_type_with_dims():
    t = TensorType((batch, seq, 768), "float32")
    assert not t.is_static and t.size == batch * seq * 768 and t.nbytes == batch * seq * 3072
    assert str(t) == "float32[batch,seq,768]"
    assert format_shape((1, (H - 3) // 2 + 1)) == "[1,(H - 3)//2 + 1]"
    assert TensorType((2, 3), "float32").is_static
    assert TensorType((batch, seq), "int64") == TensorType((batch, seq), "int64")
    check_type(t, "x")  # unbounded: nothing to check yet
    table = DimTable()
    table.declare("seq", "x", 1, 1, 1 << 40)
    table.declare("batch", "x", 0, 1, 1 << 20)
    with table.active(), pytest.raises(ShapeError, match="largest dims its ranges allow"):
        check_type(t, "x")


def test_unify_keeps_the_first_declared_and_checks_at_run_time():
    table = DimTable()
    table.declare("seq", "ids", 1, 1, 512)
    table.declare("mask_seq", "mask", 1)
    with table.active():
        kept = table.unify(Dim("mask_seq"), seq, "node 'add' broadcasts them")
    assert kept == seq and table.resolve(Dim("mask_seq") + 1) == seq + 1
    assert table.ranges["seq"] == (1, 512)
    assert table.check({"ids": (2, 7), "mask": (2, 7)}) == {"seq": 7, "mask_seq": 7}
    with pytest.raises(InputError, match=r"input 'mask' dim 1 \(mask_seq\) is 6.*seq == "
                                         r"mask_seq|mask_seq == seq"):
        table.check({"ids": (2, 7), "mask": (2, 6)})


def test_unify_with_a_constant_and_impossible_unifications():
    table = DimTable()
    table.declare("n", "x", 0)
    with table.active():
        assert table.unify(Dim("n"), 5, "a broadcast") == 5
        with pytest.raises(ShapeError, match="never"):
            table.unify(Dim("n") + 1, 0, "a concat")
    assert table.ranges["n"] == (5, 5)
    with pytest.raises(InputError, match=r"input 'x' dim 0 \(n\) is 1"):
        table.check({"x": (1,)})


def test_require_records_and_implies_lower_bounds():
    table = DimTable()
    table.declare("H", "x", 2)
    with table.active():
        table.require(H - 3, ">=", 0, "a 3-wide window fits")
        table.require((H - 3) // 2 - 2, ">=", 0, "a pool window fits")
        table.require((H - 3) // 2 - 1, ">=", 0, "implied by the one before")
        assert H >= 7
    assert [str(c) for c in table.constraints] == ["H - 3 >= 0", "(H - 3)//2 - 2 >= 0"]
    table.check({"x": (1, 3, 7)})
    with pytest.raises(InputError, match=r"input 'x' dim 2 \(H\) is 6.*pool window"):
        table.check({"x": (1, 3, 6)})


def test_one_name_on_two_inputs_must_agree():
    table = DimTable()
    table.declare("batch", "a", 0)
    table.declare("batch", "b", 0)
    with pytest.raises(InputError, match=r"input 'b' dim 0 \(batch\) is 3, but input 'a'"):
        table.check({"a": (2,), "b": (3,)})


def test_report():
    table = DimTable()
    table.declare("seq", "ids", 1, 1, 512)
    table.declare("past", "cache", 2, 0, None)
    assert table.describe() == ["seq in [1, 512] (from ids[1])",
                                "past in [0, inf] (from cache[2])"]
    assert table.to_json()["symbols"][1] == {"name": "past", "range": [0, None],
                                              "inputs": [["cache", 2]]}

"""The dim table's data-dependent dims and capacities (ir/dim_table.py), and the runtime
binding that starts them at their bounds, cuts the outputs to their values and grows the
capacities (runtime/dim_binding.py)."""
from __future__ import annotations

import numpy as np
import pytest

from tensorc.errors import ShapeError
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import Dim, dim_min
from tensorc.runtime.dim_binding import INITIAL_CAPACITY, DimBinding


def _table() -> DimTable:
    table = DimTable()
    table.declare("H", "x", 0)
    return table


def test_a_data_dependent_dim_has_its_bound_and_origin():
    table = _table()
    with table.active():
        n = table.declare_data("nonzero", Dim("H") * 4, "where")
        m = table.declare_data("nonzero", dim_min(n * 2, 100), "again")
    assert (str(n), str(m)) == ("nonzero_0.n", "nonzero_1.n")
    assert table.data["nonzero_0.n"] == (Dim("H") * 4, "where")
    # another data-dependent dim in a bound is replaced by its own bound
    assert str(table.data["nonzero_1.n"][0]) == "min(H*8, 100)"
    assert table.ranges["nonzero_0.n"] == (0, None) and table.ranges["nonzero_1.n"] == (0, 100)
    assert str(table.at_bound(n * 3 + m)) == "H*12 + min(H*8, 100)"
    assert table.is_data_dependent(n + 1) and not table.is_data_dependent(Dim("H"))


def test_a_decreasing_bound_is_refused():
    table = _table()
    with table.active(), pytest.raises(ShapeError, match="must not decrease"):
        table.declare_data("odd", 100 - Dim("H"), "n")


def test_unifying_keeps_the_data_dependent_name():
    table = _table()
    with table.active():
        n = table.declare_data("nonzero", Dim("H"), "where")
        assert table.unify(n, Dim("H"), "a broadcast") == n
    assert "nonzero_0.n" not in table.substitutions and table.constraints


def test_state_round_trip_keeps_data_dims_and_capacities():
    table = _table()
    with table.active():
        table.declare_data("nonzero", Dim("H"), "where")
        table.declare_data("range", None, "span")
    back = DimTable.from_state(table.state())
    assert back.data == table.data and back.capacities == ["range_0.cap"]
    assert str(back.at_bound(Dim("range_0.n"))) == "range_0.cap"


def test_binding_starts_at_the_bounds_cuts_and_grows():
    table = _table()
    with table.active():
        n = table.declare_data("nonzero", Dim("H") * 2, "where")
        r = table.declare_data("range", None, "span")
    outputs = [("idx", (2, n), "int64"), ("r", (r,), "float32")]
    binding = DimBinding(table, [("x", (Dim("H"),), "float32")], outputs, 64)
    names = binding.names
    values, shapes, _ = binding.bind([(5,)])
    assert dict(zip(names, values)) == {"H": 5, "nonzero_0.n": 10,
                                        "range_0.cap": INITIAL_CAPACITY,
                                        "range_0.n": INITIAL_CAPACITY}
    assert shapes == [(2, 10), (INITIAL_CAPACITY,)]
    # the kernels wrote 3 and 7: each output is its first elements, in the run's shape
    dims = np.array(values)
    dims[names.index("nonzero_0.n")], dims[names.index("range_0.n")] = 3, 7
    result = {"idx": np.arange(20).reshape(2, 10), "r": np.arange(64.0)}
    cut = binding.cut(result, dims)
    np.testing.assert_array_equal(cut["idx"], np.arange(6).reshape(2, 3))
    assert cut["r"].shape == (7,)
    # a value above the capacity (its check read 100 against cap + 1): it grows
    assert binding.grow(100, INITIAL_CAPACITY + 1)
    assert binding.capacities["range_0.cap"] == 128
    assert not binding.grow(-3, 129) and not binding.grow(5, 17)

"""The unit-dims variant of a kernel over symbolic dims (compiler/variants.py): where each of
its dims is 1 the entry calls the group scheduled as a static build schedules it; its results
match numpy at 1 and around it, and a kernel whose dims cannot all be 1 gets none."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorc
from tensorc.compiler.variants import UNIT_SUFFIX, call_forms
from tensorc.ir.dims import Dim, dim_to_json


def _model(seq_dims=("batch", "seq")):
    """Attention's keys: [batch, seq, 4, 16] -> [batch, 4, 16, seq] (its seq-innermost output
    was masked gathers at seq 1), then a tanh."""
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
         helper.make_node("Tanh", ["t"], ["y"])], "keys",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [*seq_dims, 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 16, "seq"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference(x: np.ndarray) -> np.ndarray:
    return np.tanh(x.transpose(0, 2, 3, 1).astype(np.float64))


def _funcs(loops: str) -> dict[str, str]:
    return {p.split("(")[0].split()[-1]: p for p in re.split(r"(?m)^(?=func )", loops)
            if p.startswith("func")}


def test_unit_variants_are_static_kernels_called_where_every_dim_is_one():
    loops = tensorc.inspect(_model(), stage="loops")
    funcs = _funcs(loops)
    units = [name for name in funcs if name.endswith(UNIT_SUFFIX)]
    assert units, loops
    for name in units:
        header = funcs[name].splitlines()[0]
        assert "batch" not in header and "seq" not in header, header     # every shape static
    entry = funcs["tensorc_entry"]
    for name in units:
        # the first form the entry tries, on its dims equal to 1
        assert re.search(r"if \(\(?batch == 1 && seq == 1\)?\)\n\s+call " + re.escape(name),
                         entry), entry


def test_call_forms_try_the_unit_variant_first():
    """The unit form comes first, on the kernel's own dims (past + seq counts as one) equal
    to 1, and calls a function that takes no dims."""
    past_seq = dim_to_json(Dim("past") + Dim("seq"))
    meta = {"dims": ["batch", "d.0"], "dim_values": {"d.0": past_seq},
            "variants": [{"suffix": "_unit", "dims": [], "dim_values": {}, "unit": True},
                         {"suffix": "_small", "dims": ["batch", "d.0"],
                          "dim_values": {"d.0": past_seq}}]}
    forms = call_forms("k", meta)
    assert [symbol for _, symbol, _ in forms] == ["k_unit", "k_small", "k"]
    assert forms[0][2] == [] and forms[-1][0] is None
    unit, small = str(forms[0][0]), str(forms[1][0])
    assert "batch == 1" in unit and "past + seq == 1" in unit.replace("(", "").replace(
        ")", ""), unit
    assert "<= 8" in small, small


@pytest.fixture(scope="module")
def compiled():
    return tensorc.compile(_model())


@pytest.mark.parametrize("batch,seq", [(1, 1), (1, 2), (2, 1), (1, 1), (3, 5), (1, 1)])
def test_results_at_one_and_around_it(compiled, batch, seq):
    x = np.random.default_rng(batch * 10 + seq).standard_normal(
        (batch, seq, 4, 16)).astype(np.float32)
    for threads in (1, 2):
        compiled.num_threads = threads
        np.testing.assert_allclose(compiled.run({"x": x})["y"], _reference(x), rtol=1e-5,
                                   atol=1e-6)


def test_no_unit_variant_where_a_dim_cannot_be_one():
    loops = tensorc.inspect(_model(), stage="loops", dim_ranges={"seq": (2, 64)})
    units = [name for name in _funcs(loops) if name.endswith(UNIT_SUFFIX)]
    assert not units, loops

"""The tail tile of a split over a symbolic row count (passes/loop/symbolic_tails.py): one copy
per remainder of rows, each against numpy with serial and parallel row blocks, and the copies'
loops of constant extent kept rolled where ROLLED_COPIES asks (LLVM unrolls the whole tiles'
loops, not the copies')."""
import numpy as np
import pytest

from helpers_kernels import symbolic_tiled_matmul

from tensorc.codegen.llvm.codegen import LLVMCodegen
from tensorc.ir import arith
from tensorc.ir.loop import For, IfThenElse, walk_stmts
from tensorc.passes.loop import symbolic_tails
from tensorc.runtime.kernel import build_kernel
from tensorc.target import Target


@pytest.mark.parametrize("rows", [4, 6, 8])
@pytest.mark.parametrize("parallel", [False, True])
def test_each_remainder_of_rows_matches_numpy(rows, parallel):
    kernel = build_kernel(symbolic_tiled_matmul(rows, 16, 24, parallel))
    rng = np.random.default_rng(rows)
    # every remainder 0..rows-1, with no whole tile before it and with some
    for m in [*range(0, 2 * rows + 2), 61]:
        x = rng.standard_normal((m, 16)).astype("float32")
        y = rng.standard_normal((16, 24)).astype("float32")
        out = np.full((m, 24), np.nan, "float32")
        for threads in (1, 2):
            kernel(x, y, out, num_threads=threads)
            np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{m} rows in tiles of {rows}")


def _reductions(s) -> list[For]:
    return [x for x in walk_stmts(s) if isinstance(x, For) and x.kind == "serial" and
            arith.as_const_int(x.extent) == 16]


def test_the_remainder_copies_keep_their_reductions_rolled_when_asked(monkeypatch):
    # (off by default: symbolic_tails.ROLLED_COPIES says why)
    monkeypatch.setattr(symbolic_tails, "ROLLED_COPIES", True)
    func = symbolic_tiled_matmul(6, 16, 24, parallel=True)
    copies = [x for x in walk_stmts(func.body)
              if isinstance(x, IfThenElse) and "%" in str(x.cond) and "==" in str(x.cond)]
    assert len(copies) == 5     # remainders 1..5
    for copy in copies:
        assert [loop.annotations.get("rolled") for loop in _reductions(copy.then_case)] == [True]
    # the whole tiles' reduction (and nothing but the copies') is LLVM's to unroll
    rolled = [loop for loop in _reductions(func.body) if loop.annotations.get("rolled")]
    assert len(rolled) == 5 and len(_reductions(func.body)) == 6
    cg = LLVMCodegen(Target.host())
    cg.add_kernel(func)
    text = str(cg.module)
    # (each copy's reduction, and its stores' loop over 2 rows or more)
    assert text.count("!llvm.loop ") >= 5 and '!"llvm.loop.unroll.disable"' in text

"""The annotation passes that run before the LLVM code generator (passes/loop/annotate.py):
each annotates the loops (or blocks) it decides about and leaves the others bare."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir.loop import (
    Allocate, Buffer, For, IfThenElse, PrimFunc, Store, format_func, walk_stmts,
)
from tensorc.passes.loop.allocations import annotate_allocations
from tensorc.passes.loop.annotate import annotate_for_llvm
from tensorc.passes.loop.parallel_work import annotate_parallel_loops
from tensorc.passes.loop.register_tiles import annotate_register_tiles
from tensorc.passes.loop.vector_loops import annotate_vector_loops

OUTER, J, U = E.Var("i"), E.Var("j"), E.Var("u")
X = Buffer("X", (64,), "float32")
OUT = Buffer("out", (64,), "float32")


def _func(body, *params: Buffer) -> PrimFunc:
    return PrimFunc("k", list(params or (X, OUT)), body)


def _loops(func: PrimFunc) -> dict[str, For]:
    return {s.var.name: s for s in walk_stmts(func.body) if isinstance(s, For)}


def _copy(index: E.Expr) -> Store:
    return Store(OUT, (index,), E.Load(X, (index,)) + E.const(1.0, "float32"))


def test_vector_width_on_a_vectorizable_loop_padded_to_a_power_of_two():
    func = annotate_vector_loops(_func(For(J, E.const(13), "vectorized", _copy(J))))
    assert _loops(func)["j"].annotations == {"vector_width": 16}
    assert "[vector_width=16]" in format_func(func)


def test_no_vector_width_on_a_reduction_over_the_vector_loop():
    acc = Store(OUT, (E.const(0),), E.Load(OUT, (E.const(0),)) + E.Load(X, (J,)))
    func = annotate_vector_loops(_func(For(J, E.const(16), "vectorized", acc)))
    assert _loops(func)["j"].annotations == {}


def test_a_guard_with_a_division_by_a_variable_runs_lane_by_lane():
    # the body divides by a loop variable: it may trap in masked-off lanes, so the loop
    # keeps its odd width and its guard runs lane by lane where it holds on some lanes only
    value = E.Load(X, (E.Binary("floordiv", J + OUTER, OUTER + E.const(1)),))
    guard = IfThenElse(E.Compare("lt", J + OUTER, E.const(60)), Store(OUT, (J,), value))
    inner = For(J, E.const(13), "vectorized", guard)
    func = annotate_vector_loops(_func(For(OUTER, E.const(4), "serial", inner)))
    loop = _loops(func)["j"]
    assert loop.annotations == {"vector_width": 13}
    assert loop.body.annotations == {"lane_by_lane": True}
    assert _loops(func)["i"].annotations == {}


def test_a_transposed_tile_and_a_loop_that_is_none():
    # out[u + 8 v]: contiguous along u, stored transposed; out[8 u + v] is a plain vector store
    tile = For(U, E.const(4), "unrolled",
               For(J, E.const(8), "vectorized", _copy(U + J * E.const(8))))
    plain = For(U, E.const(4), "unrolled",
                For(J, E.const(8), "vectorized", _copy(U * E.const(8) + J)))
    assert _loops(annotate_register_tiles(_func(tile)))["u"].annotations == \
        {"register_tile": "transposed"}
    assert _loops(annotate_register_tiles(_func(plain)))["u"].annotations == {}


def test_an_interleaved_tile():
    # out[u + 4 v] over 4 u: the 4 vectors interleave into 4 whole vectors
    tile = For(U, E.const(4), "unrolled",
               For(J, E.const(16), "vectorized", _copy(U + J * E.const(4))))
    assert _loops(annotate_register_tiles(_func(tile)))["u"].annotations == \
        {"register_tile": "interleaved"}


def test_a_horizontal_reduction_reads_local_partials():
    parts = Buffer("parts", (64,), "float32", scope="local")
    total = Buffer("total", (1,), "float32")
    zero = E.const(0)
    acc = Store(total, (zero,), E.Binary("max", E.Load(total, (zero,)), E.Load(parts, (J,))))
    func = annotate_register_tiles(_func(For(J, E.const(64), "serial", acc), total))
    assert _loops(func)["j"].annotations == {"register_tile": "horizontal_reduction"}
    # the same reduction over a global buffer is no register tile
    acc = Store(total, (zero,), E.Binary("max", E.Load(total, (zero,)), E.Load(X, (J,))))
    func = annotate_register_tiles(_func(For(J, E.const(64), "serial", acc), X, total))
    assert _loops(func)["j"].annotations == {}


def test_iteration_work_on_parallel_loops_only():
    body = For(J, E.const(16), "vectorized", _copy(OUTER * E.const(16) + J))
    func = annotate_parallel_loops(_func(For(OUTER, E.const(4), "parallel", body)))
    assert _loops(func)["i"].annotations == {"iteration_work": 16}
    assert _loops(func)["j"].annotations == {}


def test_allocations_heap_stack_and_zeroed():
    big = Buffer("big", (1 << 15,), "float32")              # 128 KB: malloc'd
    small = Buffer("small", (16,), "float32")
    acc = Buffer("acc", (4, 13), "float32", scope="local")  # rows of 13: padding lanes
    body = Allocate(big, Allocate(small, Allocate(acc, _copy(E.const(0)))))
    func = annotate_allocations(_func(body))
    blocks = {s.buffer.name: s.annotations for s in walk_stmts(func.body)
              if isinstance(s, Allocate)}
    assert blocks == {"big": {"storage": "heap"}, "small": {"storage": "stack"},
                      "acc": {"storage": "stack", "zeroed": True}}


def test_the_passes_leave_their_input_bare():
    loop = For(J, E.const(13), "vectorized", _copy(J))
    func = _func(loop)
    annotate_for_llvm(func)
    assert loop.annotations == {}

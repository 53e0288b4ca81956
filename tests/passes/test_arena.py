"""The arena's plan over symbolic dims (passes/graph/arena.py, plan_memory.py).

Every plan is checked at concrete dims against lifetimes derived here from the fused groups,
independently of the planner: two values alive at the same step never share a byte, and all
fit in the arena. The plans' sizes are compared with the plan of a graph imported at the same
concrete shapes (what a static compile plans), no kernels built."""
from __future__ import annotations

import random

import pytest

from benchmarks.shapes import concrete_inputs
from models.symbolic import SWEEPS, SYMBOLIC_MODELS
from tensorc.compiler.pipeline import optimize_graph
from tensorc.frontend.model import import_model
from tensorc.ir.dims import Dim, evaluator
from tensorc.passes.graph.arena import StorageTokens, sample_points
from tensorc.passes.graph.fuse import fuse
from tensorc.passes.graph.plan_memory import _align, plan_memory
from tensorc.target import Target

TARGET = Target.from_string("llvm")


def _planned(model, shapes=None):
    _, graph = import_model(model, shapes, symbolic=shapes is None)
    with graph.dims.active():
        graph = optimize_graph(graph, TARGET)
        groups = fuse(graph)
        return graph, groups, plan_memory(graph, groups)


def _intervals(groups):
    """Each computed value's first and last step: made by its group, read by later groups
    directly or through views (reshapes share their base's bytes); a concat computed in
    place lives from its first input's step."""
    base = {}
    for g in groups:
        if g.view and g.nodes[0].op != "concat":
            src = g.nodes[0].inputs[0]
            base[g.output] = base.get(src, src)
    first, last = {}, {}
    for step, g in enumerate(groups):
        if not (g.view and g.output in base):
            first.setdefault(g.output, step)
        if g.view and g.nodes[0].op == "concat":
            first[g.output] = min([first.get(v, step) for v in g.nodes[0].inputs] + [step])
        for v in g.inputs:
            last[base.get(v, v)] = step
    return {v: (s, max(last.get(v, s), s)) for v, s in first.items()}, base


def _check_plan(graph, groups, plan, dims: dict[str, int]):
    names = sorted(graph.dims.symbols)
    spans, base = _intervals(groups)
    values = [v for v in spans if plan.places.get(v) and plan.places[v].kind == "arena"]
    sizes = [_align(graph.dims.at_bound(v.type.nbytes)) for v in values]
    evaluate = evaluator([plan.places[v].offset for v in values] + sizes + [plan.arena_size],
                         names)
    got = evaluate([dims[n] for n in names])
    offsets, sizes, arena = got[:len(values)], got[len(values):-1], got[-1]
    concat_inputs = {v: g.output for g in groups if g.view and g.nodes[0].op == "concat"
                     for v in g.nodes[0].inputs}
    for k, v in enumerate(values):
        assert 0 <= offsets[k] and offsets[k] + sizes[k] <= arena, (v, dims)
        for j in range(k):
            w = values[j]
            if concat_inputs.get(v) is w or concat_inputs.get(w) is v:
                continue        # an input computed in its concat's slab
            (a0, a1), (b0, b1) = spans[v], spans[w]
            if a1 < b0 or b1 < a0:
                continue
            disjoint = offsets[k] + sizes[k] <= offsets[j] or offsets[j] + sizes[j] <= offsets[k]
            assert disjoint, f"{v} and {w} overlap at {dims}"
    return arena


@pytest.mark.parametrize("name", sorted(SYMBOLIC_MODELS))
def test_no_two_live_values_share_bytes_at_any_shape(name):
    model = SYMBOLIC_MODELS[name]()
    graph, groups, plan = _planned(model)
    rng = random.Random(7)
    ranges = graph.dims.ranges
    for dims in SWEEPS[name]:
        _check_plan(graph, groups, plan, {**{n: 1 for n in graph.dims.symbols}, **dims})
    # random dims: the plan's places must hold where the model would run, and its offsets
    # are expressions that must stay disjoint at any values of the dims
    for _ in range(20):
        dims = {n: rng.randint(max(lo, 1), min(hi or 300, 300))
                for n, (lo, hi) in ((n, ranges[n]) for n in graph.dims.symbols)}
        _check_plan(graph, groups, plan, dims)


def _bert_table():
    """The BERT encoder's dims (batch, seq) with their ranges and hints."""
    graph, _, _ = _planned(SYMBOLIC_MODELS["bert_encoder"]())
    return graph.dims


def test_a_value_takes_the_freed_token_that_grows_least():
    """Sizes over symbolic dims: a value reuses a freed token, the one that grows least at
    the sample points and then the one with the fewest bytes left over (a [batch, 64] value
    takes the freed [batch, 64] token, not the freed [batch, seq, seq] one); where each
    choice grows the arena alike, a new token; the tokens lie one after another."""
    table = _bert_table()
    batch, seq = Dim("batch"), Dim("seq")
    with table.active():
        tokens = StorageTokens(table, [1] * len(sample_points(table, ["batch", "seq"])))
        small = tokens.allocate(batch * 256, 0)
        big = tokens.allocate(batch * seq * seq * 4, 0)
        assert small[0] != big[0] and small[1] == big[1] == 0
        tokens.release(1)
        assert tokens.allocate(batch * 256, 1) == small
        assert tokens.allocate(batch * seq * seq * 4 + 64, 1) == big
        third = tokens.allocate(seq * 4, 1)
    assert third[0] not in (small[0], big[0])
    at = evaluator([tokens.offset(small), tokens.offset(big), tokens.offset(third),
                    tokens.size()], ["batch", "seq"])
    assert at([3, 5]) == (0, 768, 768 + 364, 768 + 364 + 20)


def test_a_value_stacks_on_a_live_one_inside_a_larger_freed_token():
    """A token whose large value died holds several smaller live values at once, one on
    top of the other (first fit's packing, with offsets that hold at every run)."""
    table = _bert_table()
    batch, seq = Dim("batch"), Dim("seq")
    with table.active():
        tokens = StorageTokens(table, [1] * len(sample_points(table, ["batch", "seq"])))
        big = tokens.allocate(batch * seq * seq * 64, 0)
        tokens.release(1)
        first = tokens.allocate(batch * seq * 4, 2)
        second = tokens.allocate(batch * seq * 4, 2)
    assert first == (big[0], 0) and second[0] == big[0]
    at = evaluator([tokens.offset(second), tokens.size()], ["batch", "seq"])
    assert at([2, 3]) == (24, 2 * 9 * 64)
    assert at([2, 1]) == (8, 2 * 64)        # the token is its largest value's size


def test_sample_points_cover_each_dims_low_end_hint_and_beyond():
    model = SYMBOLIC_MODELS["gpt_decoder_step"]()
    graph, _, _ = _planned(model)
    names = sorted(graph.dims.symbols)
    points = sample_points(graph.dims, names)
    assert len(points) <= 81 and len(set(points)) == len(points)
    for k, name in enumerate(names):
        values = {p[k] for p in points}
        assert min(values) == max(graph.dims.ranges[name][0], 1) and len(values) >= 3


# the bound: a symbolic module's arena at a shape at most 1.2x the static build's
BOUND = 1.2


@pytest.mark.parametrize("name", [
    "cnn", "gpt_decoder_step",
    pytest.param("bert_encoder", marks=pytest.mark.xfail(
        strict=True, reason="1.21x at batch 1, seq 1 (1856 bytes against 1536: position "
                            "ids the static build folds to constants)")),
    pytest.param("ocr_recognizer", marks=pytest.mark.xfail(
        strict=True, reason="1.21x at batch 1, width 4 (12352 bytes against 10240); "
                            "1.00x at its other sweep shapes")),
    pytest.param("detector", marks=pytest.mark.xfail(
        strict=True, reason="its convs read a padded copy of their input (a buffer of its "
                            "own, which the static build does not have): 2.0x on an 8x8 image")),
    pytest.param("segmenter", marks=pytest.mark.xfail(
        strict=True, reason="as the detector's: padded copies of the convs' inputs, 1.40x at "
                            "1x1; 1.01-1.11x at larger images")),
])
def test_symbolic_arena_within_the_bound_of_the_static_plan(name):
    model = SYMBOLIC_MODELS[name]()
    graph, groups, plan = _planned(model)
    names = sorted(graph.dims.symbols)
    size = evaluator([plan.arena_size], names)
    for dims in SWEEPS[name]:
        _, _, static = _planned(model, concrete_inputs(model, dims))
        (symbolic,) = size([dims.get(n, 1) for n in names])
        assert symbolic <= BOUND * static.arena_size, (name, dims, symbolic,
                                                       static.arena_size)

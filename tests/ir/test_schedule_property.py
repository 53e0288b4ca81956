"""A schedule changes how a program runs, never what it computes.

For each definition (an elementwise chain with broadcasting, sum and max reductions, a matmul,
a padded conv2d) hypothesis draws a random legal schedule: splits by any factor (dividing the
extent or not), a permutation of the leaf loops, a fuse of adjacent loops, vectorize, parallel,
unroll, compute_inline, compute_at at any loop of the consumer, cache_read, cache_write. The
compiled kernel must equal the unscheduled program compiled the same way, and numpy.

Inputs are small integers stored as floats, so every sum is exact in any order and the
comparisons are exact: a wrong index, a missed guard or a lost iteration cannot hide in a
tolerance.
"""
from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from helpers_kernels import compile_func, run_kernel
from tensorc.ir.bounds import loop_extents
from tensorc.ir.expr import Load, all_of, maximum, minimum, select, walk
from tensorc.ir.lower import lower
from tensorc.ir.schedule import Schedule, Stage, create_schedule
from tensorc.ir.te import Tensor, compute, max_, placeholder, reduce_axis, sum_
from tensorc.ir.trace import replay, trace_from_json, trace_to_json

# random legal schedules may recompute a whole stage per loop iteration: slow, never wrong
pytestmark = pytest.mark.filterwarnings("ignore::tensorc.ir.lower.RedundantComputeWarning")

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MAX_VECTOR_LANES = 64
MAX_UNROLL = 16


@dataclass
class Program:
    """A tensor-expression program: what the kernel's parameters are and what numpy says."""

    inputs: list[Tensor]
    outputs: list[Tensor]
    inlinable: list[str]                        # elementwise stages compute_inline may take
    reference: Callable[..., list[np.ndarray]]  # numpy: inputs -> outputs

    @property
    def args(self) -> list[Tensor]:
        return [*self.inputs, *self.outputs]


# ---------------------------------------------------------------------------------------------
# definitions

def elementwise(shape: tuple[int, ...]) -> Program:
    """relu((A + B) * C - 0.5) with B broadcast along the last axis, C along the others."""
    A = placeholder(shape, name="A")
    B = placeholder((shape[-1],), name="B")
    C = placeholder((shape[-2], 1), name="C")
    add = compute(shape, lambda *i: A[i] + B[i[-1]], name="add")
    mul = compute(shape, lambda *i: add[i] * C[i[-2], 0] - 0.5, name="mul")
    relu = compute(shape, lambda *i: maximum(mul[i], 0.0), name="relu")

    def reference(a, b, c):
        return [np.maximum((a + b) * c - 0.5, 0.0)]

    return Program([A, B, C], [relu], ["add", "mul"], reference)


def reduction(n: int, k: int, m: int) -> Program:
    """out[i, j] = sum_r A[i, r, j] - max_r B[i, j, r]: a strided and a contiguous reduction."""
    A = placeholder((n, k, m), name="A")
    B = placeholder((n, m, k), name="B")
    r = reduce_axis(k, "r")
    total = compute((n, m), lambda i, j: sum_(A[i, r, j], axis=r), name="total")
    s = reduce_axis(k, "s")
    peak = compute((n, m), lambda i, j: max_(B[i, j, s], axis=s), name="peak")
    out = compute((n, m), lambda i, j: total[i, j] - peak[i, j], name="out")

    def reference(a, b):
        return [a.sum(axis=1) - b.max(axis=2)]

    return Program([A, B], [out], [], reference)


def matmul(m: int, k: int, n: int, with_bias: bool) -> Program:
    """A @ B, plus a bias as a stage of its own when ``with_bias``."""
    A = placeholder((m, k), name="A")
    B = placeholder((k, n), name="B")
    r = reduce_axis(k, "k")
    C = compute((m, n), lambda i, j: sum_(A[i, r] * B[r, j], axis=r), name="C")
    if not with_bias:
        return Program([A, B], [C], [], lambda a, b: [a.astype(np.float64) @ b])
    bias = placeholder((n,), name="bias")
    D = compute((m, n), lambda i, j: C[i, j] + bias[j], name="D")
    return Program([A, B, bias], [D], [], lambda a, b, c: [a.astype(np.float64) @ b + c])


def conv2d(batch: int, channels: int, size: tuple[int, int], filters: int, kernel: int,
           pad: int, stride: int) -> Program:
    """relu(conv2d(pad(data), weight)) in NCHW; the padding is a stage of its own."""
    h, w = size
    data = placeholder((batch, channels, h, w), name="data")
    weight = placeholder((filters, channels, kernel, kernel), name="weight")

    def padded_value(b, c, y, x):
        sy, sx = y - pad, x - pad
        inside = all_of(sy >= 0, sy < h, sx >= 0, sx < w)
        # clamped indices: select evaluates both branches, so the load must stay in bounds
        yy = minimum(maximum(sy, 0), h - 1)
        xx = minimum(maximum(sx, 0), w - 1)
        return select(inside, data[b, c, yy, xx], 0.0)

    padded = compute((batch, channels, h + 2 * pad, w + 2 * pad), padded_value, name="pad")
    oh = (h + 2 * pad - kernel) // stride + 1
    ow = (w + 2 * pad - kernel) // stride + 1
    rc, ry, rx = reduce_axis(channels, "rc"), reduce_axis(kernel, "ry"), \
        reduce_axis(kernel, "rx")
    conv = compute((batch, filters, oh, ow), lambda b, f, y, x: sum_(
        padded[b, rc, y * stride + ry.var, x * stride + rx.var] * weight[f, rc, ry, rx],
        axis=[rc, ry, rx]), name="conv")
    relu = compute(conv.shape, lambda b, f, y, x: maximum(conv[b, f, y, x], 0.0), name="relu")

    def reference(d, wt):
        p = np.pad(d.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        out = np.zeros((batch, filters, oh, ow))
        for dy in range(kernel):
            for dx in range(kernel):
                window = p[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
                out += np.einsum("ncyx,fc->nfyx", window, wt[:, :, dy, dx])
        return [np.maximum(out, 0.0)]

    return Program([data, weight], [relu], ["pad"], reference)


DEFINITIONS: dict[str, Callable[..., Program]] = {
    "elementwise": elementwise, "reduction": reduction, "matmul": matmul, "conv2d": conv2d,
}


# ---------------------------------------------------------------------------------------------
# the oracle: the unscheduled program, compiled once per definition

@functools.lru_cache(maxsize=None)
def unscheduled(definition: str, params: tuple) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, outputs) of the unscheduled program, checked against numpy."""
    prog = DEFINITIONS[definition](*params)
    rng = np.random.default_rng(zlib.crc32(repr((definition, params)).encode()))
    # small integers: every sum and product is exact in float32, in any order
    inputs = [rng.integers(-4, 5, size=t.shape).astype(t.dtype) for t in prog.inputs]
    kernel = compile_func(lower(create_schedule(prog.outputs), prog.args, definition))
    outputs = run_kernel(kernel, inputs)
    for got, want in zip(outputs, prog.reference(*inputs)):
        np.testing.assert_array_equal(got, want.astype(got.dtype))
    return inputs, outputs


# ---------------------------------------------------------------------------------------------
# random legal schedules

def draw_loops(data, stage: Stage) -> None:
    """Split, reorder, fuse and annotate the loops of ``stage``."""
    draw = data.draw
    for _ in range(draw(st.integers(0, 3), label=f"{stage.name}: splits")):
        sv = draw(st.sampled_from(stage.leaf_vars), label="split loop")
        extent = loop_extents(stage)[sv]
        if draw(st.booleans(), label="by nparts"):
            stage.split(sv, nparts=draw(st.integers(1, extent + 3), label="nparts"))
        else:
            stage.split(sv, factor=draw(st.integers(1, extent + 3), label="factor"))
    if draw(st.booleans(), label=f"{stage.name}: reorder"):
        stage.reorder(*draw(st.permutations(stage.leaf_vars), label="order"))
    leaves = stage.leaf_vars
    pairs = [k for k in range(len(leaves) - 1) if leaves[k].kind == leaves[k + 1].kind]
    if pairs and draw(st.booleans(), label=f"{stage.name}: fuse"):
        k = draw(st.sampled_from(pairs), label="fuse at")
        stage.fuse(leaves[k], leaves[k + 1])

    leaves, ext = stage.leaf_vars, loop_extents(stage)
    if ext[leaves[-1]] <= MAX_VECTOR_LANES and draw(st.booleans(), label="vectorize"):
        stage.vectorize(leaves[-1])
    if leaves[0].kind == "spatial" and draw(st.booleans(), label="parallel"):
        stage.parallel(leaves[0])
    small = [sv for sv in leaves if ext[sv] <= MAX_UNROLL]
    if small and draw(st.booleans(), label="unroll"):
        stage.unroll(draw(st.sampled_from(small), label="unroll loop"))


def readers(sch: Schedule, stage: Stage) -> list[Stage]:
    """The stages that read ``stage``'s tensor once inlined stages are substituted."""
    def reads(body, target) -> bool:
        for e in walk(body):
            if isinstance(e, Load) and isinstance(e.source, Tensor):
                if e.source is target:
                    return True
                src = sch.stage_of(e.source)
                if src.attach == "inline" and reads(src.op.body, target):
                    return True
        return False

    return [s for s in sch.compute_stages
            if s.attach != "inline" and s is not stage and reads(s.op.body, stage.tensor)]


def draw_schedule(data, sch: Schedule, prog: Program) -> None:
    """Apply a random legal schedule: caches first, then inlining, loops, and attachments
    (each producer at a loop of the one stage that reads it, or left at the root)."""
    draw = data.draw
    for tensor in prog.inputs:
        if draw(st.booleans(), label=f"cache_read {tensor.name}"):
            sch.cache_read(tensor, "local", [s.tensor for s in sch.compute_stages
                                             if tensor in s.op.input_tensors()])
    # cache_write comes before the stage's loops change
    for stage in list(sch.compute_stages):
        if stage.op.reduce_axis and draw(st.booleans(), label=f"cache_write {stage.name}"):
            sch.cache_write(stage.tensor, "local")
    for name in prog.inlinable:
        if draw(st.booleans(), label=f"compute_inline {name}"):
            sch[name].compute_inline()
    for stage in sch.compute_stages:
        if stage.attach != "inline":
            draw_loops(data, stage)
    for stage in sch.compute_stages:
        if stage.is_output or stage.attach == "inline":
            continue
        (consumer,) = readers(sch, stage)
        if draw(st.booleans(), label=f"compute_at {stage.name}"):
            loop = draw(st.sampled_from(consumer.leaf_vars), label=f"at {consumer.name}")
            stage.compute_at(consumer, loop)


# ---------------------------------------------------------------------------------------------
# the property

def check_random_schedule(data, definition: str, params: tuple) -> None:
    inputs, expected = unscheduled(definition, params)
    prog = DEFINITIONS[definition](*params)
    sch = create_schedule(prog.outputs)
    draw_schedule(data, sch, prog)
    trace = trace_to_json(sch.trace)
    note(f"trace: {trace}")
    func = lower(sch, prog.args, definition)
    note(str(func))

    # the trace alone rebuilds the schedule
    again = DEFINITIONS[definition](*params)
    replayed = replay(create_schedule(again.outputs), trace_from_json(trace))
    assert str(lower(replayed, again.args, definition)) == str(func)

    outputs = run_kernel(compile_func(func), inputs)
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(data=st.data(), shape=st.sampled_from([(7, 13), (1, 9), (3, 5, 6), (2, 1, 17)]))
def test_elementwise(data, shape):
    check_random_schedule(data, "elementwise", (shape,))


@SETTINGS
@given(data=st.data(), sizes=st.sampled_from([(5, 7, 3), (3, 11, 9), (1, 13, 5)]))
def test_reduction(data, sizes):
    check_random_schedule(data, "reduction", sizes)


@SETTINGS
@given(data=st.data(), sizes=st.sampled_from([(17, 23, 9), (5, 3, 16), (1, 7, 11)]),
       with_bias=st.booleans())
def test_matmul(data, sizes, with_bias):
    check_random_schedule(data, "matmul", (*sizes, with_bias))


# The conv's examples are the suite's slowest (about 60 CPU seconds for 100): one item per
# stride, each with half the examples, so that pytest-xdist can run them side by side.
@pytest.mark.parametrize("stride", [1, 2])
@settings(SETTINGS, max_examples=SETTINGS.max_examples // 2)
@given(data=st.data(), shape=st.sampled_from([(1, 3, (7, 7), 4), (2, 2, (6, 5), 3)]))
def test_conv2d(data, stride, shape):
    batch, channels, size, filters = shape
    check_random_schedule(data, "conv2d", (batch, channels, size, filters, 3, 1, stride))

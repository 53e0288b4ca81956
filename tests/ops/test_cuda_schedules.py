"""The GPU templates are correct at every point of their search spaces, not only at the
default: configs drawn at random from each space (as the autotuner draws them) are built into
one CUDA source, run on the CPU emulator and compared with numpy. Shapes are odd, so that
tiles overhang the tensors."""
from __future__ import annotations

import random

import numpy as np
import pytest
from helpers_cuda import CUDA, emulate

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ops.catalog import get_op
from tensorc.ops.schedules import INJECTIVE
from tensorc.passes.loop import optimize

CONFIGS_PER_SPACE = 6


def rand(shape, seed) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def build(template, inputs, out, anchor, attrs, config, name):
    sch = create_schedule(out)
    # what the compiler does first: every stage but the anchor's and the output inline
    for stage in sch.compute_stages:
        if not stage.is_output and not stage.op.reduce_axis and \
                not stage.op.tag.startswith("anchor:"):
            stage.compute_inline()
    template.apply(CUDA, sch, out, anchor, attrs, config)
    return optimize(lower(sch, [*inputs, out], name))


def sampled(space, seed: int):
    rng = random.Random(seed)
    configs = {space.default()}
    for _ in range(50):
        if len(configs) > CONFIGS_PER_SPACE:
            break
        configs.add(space.sample(rng))
    return sorted(configs, key=lambda c: c.to_json())


def matmul_cases():
    A, B = te.placeholder((37, 50), name="A"), te.placeholder((50, 29), name="B")
    mm = get_op("matmul").compute_fn({}, A, B)
    out = te.compute(mm.shape, lambda i, j: E.maximum(mm[i, j], 0.0), name="relu")
    a, b = rand((37, 50), 1), rand((50, 29), 2)
    template = get_op("matmul").template("cuda")
    space = template.search_space(CUDA, out, mm, {})
    for k, config in enumerate(sampled(space, 0)):
        yield (build(template, [A, B], out, mm, {}, config, f"matmul_{k}"), [a, b],
               np.maximum(a @ b, 0), config)


def conv_nchw(x, w, stride: int, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    f, _, kh, kw = w.shape
    ho = (xp.shape[2] - kh) // stride + 1
    wo = (xp.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], f, ho, wo))
    for dy in range(kh):
        for dx in range(kw):
            patch = xp[:, :, dy:dy + stride * (ho - 1) + 1:stride,
                       dx:dx + stride * (wo - 1) + 1:stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, dy, dx])
    return out


def conv_cases():
    for stride in (1, 2):
        attrs = {"strides": (stride, stride), "pads": (1, 1, 1, 1), "dilations": (1, 1),
                 "groups": 1}
        X, W = te.placeholder((1, 6, 11, 9), name="X"), te.placeholder((10, 6, 3, 3), name="W")
        conv = get_op("conv").compute_fn(attrs, X, W)
        x, w = rand((1, 6, 11, 9), 3), rand((10, 6, 3, 3), 4)
        template = get_op("conv").template("cuda")
        space = template.search_space(CUDA, conv, conv, attrs)
        for k, config in enumerate(sampled(space, stride)):
            yield (build(template, [X, W], conv, conv, attrs, config, f"conv_s{stride}_{k}"),
                   [x, w], conv_nchw(x, w, stride, 1), config)


def softmax_cases():
    X = te.placeholder((3, 300), name="X")
    attrs = {"axis": 1}
    out = get_op("softmax").compute_fn(attrs, X)
    x = rand((3, 300), 5) * 4
    e = np.exp(x - x.max(1, keepdims=True))
    template = get_op("softmax").template("cuda")
    space = template.search_space(CUDA, out, out, attrs)
    for k, config in enumerate(sampled(space, 7)):
        yield (build(template, [X], out, out, attrs, config, f"softmax_{k}"), [x],
               e / e.sum(1, keepdims=True), config)


def injective_cases():
    X, Y = te.placeholder((5, 24), name="X"), te.placeholder((24,), name="Y")
    out = te.compute((5, 24), lambda i, j: X[i, j] * Y[j] + 1.0, name="out")
    x, y = rand((5, 24), 8), rand((24,), 9)
    space = INJECTIVE["cuda"].search_space(CUDA, out, None, {})
    for k, config in enumerate(sampled(space, 11)):
        yield (build(INJECTIVE["cuda"], [X, Y], out, None, {}, config, f"injective_{k}"),
               [x, y], x * y + 1, config)


@pytest.fixture(scope="module")
def results():
    cases = [*matmul_cases(), *conv_cases(), *softmax_cases(), *injective_cases()]
    outputs = emulate([(func, inputs) for func, inputs, _, _ in cases])
    return [(func.name, config, got, want)
            for (func, _, want, config), (got,) in zip(cases, outputs)]


@pytest.mark.parametrize("family", ["matmul", "conv", "softmax", "injective"])
def test_sampled_configs_compute_what_numpy_does(results, family: str) -> None:
    mine = [r for r in results if r[0].startswith(family)]
    assert len(mine) >= 3
    for name, config, got, want in mine:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{name} with {config}")

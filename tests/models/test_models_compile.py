"""The bundled models compiled by tensorc against onnxruntime, and the ResNet's fused plan."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import ATOL, RTOL, assert_close, ort_run

import models
import tensorc

RESNET_SHAPES = {"input": (1, 3, 224, 224)}
SHAPES = {"mlp": None, "lenet5": None, "resnet": RESNET_SHAPES}


def feeds_for(mod: tensorc.Module, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(dtype) for name, shape, dtype in mod.inputs}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def compiled(request):
    name = request.param
    model = models.load(name)
    return name, model, tensorc.compile(model, input_shapes=SHAPES[name])


def test_signature(compiled) -> None:
    name, model, mod = compiled
    expected_inputs = {"mlp": [("x", (1, 784), "float32")],
                       "lenet5": [("x", (1, 1, 28, 28), "float32")],
                       "resnet": [("input", (1, 3, 224, 224), "float32")]}[name]
    assert mod.inputs == expected_inputs
    assert [(n, s) for n, s, _ in mod.outputs] == [(o.name, (1, 10 if name != "resnet" else 1000))
                                                   for o in model.graph.output]


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_onnxruntime(compiled, seed) -> None:
    _, model, mod = compiled
    feeds = feeds_for(mod, seed)
    got = mod.run(feeds)
    want = ort_run(model, feeds)
    assert_close(got, want, RTOL, ATOL)
    for value in got.values():
        assert np.isfinite(value).all() and np.abs(value).max() > 0


def test_thread_counts_agree(compiled) -> None:
    _, model, mod = compiled
    feeds = feeds_for(mod, 2)
    want = ort_run(model, feeds)
    results = {}
    try:
        for threads in (1, 2, 0):
            mod.num_threads = threads
            results[threads] = mod.run(feeds)
            assert_close(results[threads], want, RTOL, ATOL)
    finally:
        mod.num_threads = 0
    for name in want:
        np.testing.assert_allclose(results[1][name], results[2][name], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(results[1][name], results[0][name], rtol=1e-6, atol=1e-7)


def test_repeated_runs_are_independent(compiled) -> None:
    # the arena is reused between runs: a second input must not see the first one's data
    _, model, mod = compiled
    first, second = feeds_for(mod, 3), feeds_for(mod, 4)
    out_first = mod.run(first)
    out_second = mod.run(second)
    assert_close(out_second, ort_run(model, second), RTOL, ATOL)
    assert_close(mod.run(first), out_first, 0, 0)


def test_resnet_batch_two_matches_onnxruntime() -> None:
    model = models.load("resnet")
    mod = tensorc.compile(model, input_shapes={"input": (2, 3, 224, 224)})
    assert mod.inputs == [("input", (2, 3, 224, 224), "float32")]
    feeds = feeds_for(mod, 5)
    got = mod.run(feeds)
    assert got["logits"].shape == (2, 1000)
    assert_close(got, ort_run(model, feeds), RTOL, ATOL)
    # the two images are computed independently
    single = tensorc.compile(model, input_shapes=RESNET_SHAPES)
    for k in range(2):
        alone = single.run({"input": feeds["input"][k:k + 1]})["logits"]
        np.testing.assert_allclose(got["logits"][k:k + 1], alone, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------------------------
# the fused plan

def parse_groups(text: str) -> list[tuple[str, str, list[str]]]:
    """(kind, name, ops) per group of ``inspect(stage="fused")``'s text."""
    groups: list[tuple[str, str, list[str]]] = []
    for line in text.splitlines():
        head = re.match(r"(kernel|view) (\w+)\(", line)
        if head:
            groups.append((head.group(1), head.group(2), []))
            continue
        body = re.match(r"\s+%\S+ = (\w+)\(", line)
        if body:
            groups[-1][2].append(body.group(1))
    return groups


def test_resnet_fused_plan_has_one_kernel_per_conv() -> None:
    model = models.load("resnet")
    onnx_ops = [n.op_type for n in model.graph.node]
    text = tensorc.inspect(model, stage="fused", input_shapes=RESNET_SHAPES)
    groups = parse_groups(text)
    assert groups, text
    kernels = [ops for kind, _, ops in groups if kind == "kernel"]
    conv_kernels = [ops for ops in kernels if "conv" in ops]
    # one kernel per ONNX Conv, each holding exactly one conv
    assert len(conv_kernels) == onnx_ops.count("Conv") == 12
    assert all(ops.count("conv") == 1 for ops in conv_kernels)
    all_ops = [op for ops in kernels for op in ops]
    # BatchNormalization folded into the conv weights and bias: no trace of it left
    assert "batch_norm" not in all_ops and "batch_norm" not in text
    # every add (bias, residual) and relu lives in an anchored kernel's epilogue (a conv's,
    # a matmul's, or a layout transform's that ends a blocked chain)
    for ops in kernels:
        if "add" in ops or "relu" in ops:
            assert ops[0] in ("conv", "matmul", "layout_transform"), ops
    standalone_epilogues = [ops for ops in kernels if ops[0] in ("add", "relu")]
    assert standalone_epilogues == []
    # each conv's bias is fused into it, and every Relu of the model into some kernel
    assert all(ops[1] == "add" for ops in conv_kernels)
    assert all_ops.count("relu") == onnx_ops.count("Relu")
    # the residual adds: after their conv's bias, or where a blocked chain's shortcut meets a
    # plain conv's output, in the layout transform's epilogue
    residual = [ops for ops in conv_kernels if ops.count("add") == 2] + \
        [ops for ops in kernels if ops[0] == "layout_transform" and "add" in ops]
    assert len(residual) == onnx_ops.count("Add") == 4
    assert all(ops[-1] == "relu" for ops in residual)
    # the rest: the max pool, the global average pool, the classifier, and the layout
    # transforms at the blocked chains' ends
    others = [ops for ops in kernels if "conv" not in ops and ops[0] != "layout_transform"]
    assert sorted(ops[0] for ops in others) == ["matmul", "max_pool", "reduce_mean"]


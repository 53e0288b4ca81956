"""The bundled test models: valid ONNX, runnable by onnxruntime, checked-in copies up to date,
activations O(1)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import models
from benchmarks.common import count_flops, format_table
from tensorc.reference import random_inputs, run_onnxruntime

SHAPES = {
    "mlp": ({"x": (1, 784)}, {"y": (1, 10)}),
    "lenet5": ({"x": (1, 1, 28, 28)}, {"logits": (1, 10)}),
    "resnet": ({"input": (2, 3, 224, 224)}, {"logits": (2, 1000)}),
    "mobilenetv2": ({"input": (1, 3, 224, 224)}, {"logits": (1, 1000)}),
}


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_model_is_valid_and_runs(name: str) -> None:
    model = models.MODELS[name]()
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    inputs, outputs = SHAPES[name]
    feeds = random_inputs([(n, s, "float32") for n, s in inputs.items()], seed=1)
    result = run_onnxruntime(model, feeds)
    assert {k: v.shape for k, v in result.items()} == outputs
    for value in result.values():
        assert np.isfinite(value).all()
        # Activations O(1): relative-error checks against onnxruntime mean something.
        assert 0.01 < np.sqrt(np.mean(value.astype(np.float64) ** 2)) < 10


@pytest.mark.parametrize("name", ["mlp", "lenet5"])
def test_checked_in_model_is_up_to_date(name: str) -> None:
    assert models.load(name) == models.MODELS[name](), f"run: python -m models.{name}"


def test_mlp_matches_a_numpy_forward_pass() -> None:
    model = models.load("mlp")
    w = [numpy_helper.to_array(t) for t in model.graph.initializer]
    x = np.random.default_rng(3).standard_normal((1, 784)).astype(np.float32)
    h = np.maximum(x @ w[0].T + w[1], 0)
    h = np.maximum(h @ w[2].T + w[3], 0)
    logits = h @ w[4].T + w[5]
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(run_onnxruntime(model, {"x": x})["y"], expected, rtol=1e-4)


def test_resnet_batch_is_symbolic_unless_fixed() -> None:
    dims = models.MODELS["resnet"]().graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N"
    fixed = models.MODELS["resnet"](batch=1).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in fixed] == [1, 3, 224, 224]
    assert models.input_shapes("resnet") == {"input": (1, 3, 224, 224)}
    assert models.input_shapes("mlp") is None


def test_resnet_batch_norm_variances_are_positive() -> None:
    model = models.MODELS["resnet"]()
    variances = [t for t in model.graph.initializer if t.name.startswith("bn_var")]
    assert len(variances) == 1 + 4 * 2 + 3  # stem, two per block, three projections
    assert all((numpy_helper.to_array(v) > 0).all() for v in variances)


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="mlp"):
        models.path("alexnet")


def test_count_flops() -> None:
    assert count_flops(models.load("mlp")) == 2 * (784 * 256 + 256 * 128 + 128 * 10)
    resnet = models.MODELS["resnet"]()
    assert count_flops(resnet, {"input": (1, 3, 224, 224)}) == pytest.approx(1.78e9, rel=0.01)


def test_format_table() -> None:
    table = format_table(["model", "ms"], [["mlp", "0.1"], ["resnet", "12.5"]])
    assert table.splitlines() == [
        "model  |   ms",
        "-------+-----",
        "mlp    |  0.1",
        "resnet | 12.5",
    ]

"""The bundled test models: valid ONNX, runnable by onnxruntime, checked-in copies up to date,
activations O(1)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import models
from benchmarks.common import count_flops, format_table
from benchmarks.latency import DEFAULT_MODELS
from models._builder import GraphBuilder, calibrate_batch_norms, float_input
from tensorc.reference import random_inputs, run_onnxruntime

# input shapes (for the models without example inputs of their own) and output shapes
SHAPES = {
    "mlp": ({"x": (1, 784)}, {"y": (1, 10)}),
    "lenet5": ({"x": (1, 1, 28, 28)}, {"logits": (1, 10)}),
    "resnet": ({"input": (2, 3, 224, 224)}, {"logits": (2, 1000)}),
    "resnet50": ({"input": (1, 3, 224, 224)}, {"logits": (1, 1000)}),
    "mobilenetv2": ({"input": (1, 3, 224, 224)}, {"logits": (1, 1000)}),
    "bert": ({"input_ids": (1, 32), "attention_mask": (1, 32)},
             {"last_hidden_state": (1, 32, 128), "pooled": (1, 128)}),
    "bert_base": ({"input_ids": (1, 128), "attention_mask": (1, 128)},
                  {"last_hidden_state": (1, 128, 768), "pooled": (1, 768)}),
    "gpt2": ({"input_ids": (1, 32)}, {"logits": (1, 32, 1000)}),
    "detector": ({"images": (1, 3, 256, 256)}, {"detections": (1, 960, 13)}),
    "lstm": ({"sequence": (16, 1, 32)}, {"scores": (1, 10)}),
    "squeezenet": ({"input": (1, 3, 224, 224)}, {"logits": (1, 1000)}),
    "inception": ({"input": (1, 3, 299, 299)}, {"logits": (1, 1000)}),
    "efficientnet": ({"input": (1, 3, 224, 224)}, {"logits": (1, 1000)}),
    "yolo": ({"images": (1, 3, 416, 416)}, {"output0": (1, 10647, 85)}),
    "audio": ({"waveform": (1, 1, 16000)}, {"logits": (1, 12)}),
    "vit": ({"pixel_values": (1, 3, 224, 224)}, {"logits": (1, 1000)}),
    "aspp": ({"features": (1, 256, 16, 16)}, {"logits": (1, 21, 256, 256)}),
    "aspp_mid": ({"features": (1, 256, 32, 32)}, {"logits": (1, 21, 256, 256)}),
}
# scripts in models/ that are not models of one shape (symbolic.py builds the models over
# symbolic dims, tested in tests/frontend/test_symbolic_models.py and
# tests/compiler/test_symbolic_compile.py; nms_detector.py the detector with its NMS over
# symbolic height and width, tested in tests/models/test_nms_detector.py; quantized.py the
# int8 models onnxruntime's quantizer makes at test time, tested in
# tests/models/test_quantized_models.py)
HELPERS = {"__init__", "_builder", "demo", "transformer", "symbolic", "nms_detector",
           "quantized"}


def test_every_model_script_is_registered() -> None:
    scripts = {p.stem for p in models.MODELS_DIR.glob("*.py")} - HELPERS
    assert scripts == set(models.MODELS) == set(SHAPES)
    assert models.GENERATED == set(models.MODELS) - {"mlp", "lenet5"}


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_model_is_valid_and_runs(name: str) -> None:
    # the generated file: built once (and again only when its script changes), so that
    # the larger models are not rebuilt by every test that needs them
    model = models.load(name)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    inputs, outputs = SHAPES[name]
    feeds = models.example_inputs(name, seed=1)
    if feeds is None:
        feeds = random_inputs([(n, s, "float32") for n, s in inputs.items()], seed=1)
    assert {k: v.shape for k, v in feeds.items()} == inputs
    result = run_onnxruntime(model, feeds)
    assert {k: v.shape for k, v in result.items()} == outputs
    for value in result.values():
        assert np.isfinite(value).all()
        # Activations O(1): relative-error checks against onnxruntime mean something.
        assert 0.01 < np.sqrt(np.mean(value.astype(np.float64) ** 2)) < 10


def test_bench_times_every_model() -> None:
    assert list(DEFAULT_MODELS) == list(models.MODELS)


def _nodes(name: str, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in models.load(name).graph.node if n.op_type == op_type]


def _attribute(node: onnx.NodeProto, name: str, default=None):
    found = [onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name]
    return found[0] if found else default


def test_models_keep_what_real_exports_have() -> None:
    """The features that make the issue-6 models look like real exports are still there."""
    pools = _nodes("squeezenet", "MaxPool")
    assert len(pools) == 3 and all(_attribute(p, "ceil_mode") == 1 for p in pools)
    assert len(_nodes("squeezenet", "Concat")) == 8

    averages = _nodes("inception", "AveragePool")
    assert {_attribute(p, "count_include_pad") for p in averages} == {0, 1}
    assert all(_attribute(p, "pads") == [1, 1, 1, 1] for p in averages)
    kernels = {tuple(_attribute(c, "kernel_shape")) for c in _nodes("inception", "Conv")}
    assert {(1, 7), (7, 1), (5, 5)} <= kernels

    depthwise = [c for c in _nodes("efficientnet", "Conv") if _attribute(c, "group", 1) > 1]
    assert {tuple(_attribute(c, "kernel_shape")) for c in depthwise} == {(3, 3), (5, 5)}
    assert len(_nodes("efficientnet", "Sigmoid")) == len(_nodes("efficientnet", "Mul"))

    windows = sorted(_attribute(p, "kernel_shape")[0] for p in _nodes("yolo", "MaxPool"))
    assert windows == [5, 9, 13]
    assert all(_attribute(p, "pads") == [k // 2] * 4 for p, k in
               zip(_nodes("yolo", "MaxPool"), (5, 9, 13)))
    assert len(_nodes("yolo", "Resize")) == 2

    front_end = _nodes("audio", "Conv")[0]
    assert (_attribute(front_end, "kernel_shape"), _attribute(front_end, "strides")) == (
        [400], [160])
    assert len(_nodes("audio", "GRU")) == 1 and len(_nodes("audio", "Erf")) == 2


def test_calibrated_batch_norms_normalize_their_inputs() -> None:
    """calibrate_batch_norms measures each running mean and variance on the feeds, so every
    BatchNormalization's output has mean B and deviation scale per channel, the second one
    included (it is measured after the first is calibrated)."""
    b = GraphBuilder(seed=0)
    w = b.constant("w", b.he_normal((4, 3, 3, 3), 27) * 5)
    y = b.batch_norm(b.node("Conv", ["x", w], kernel_shape=[3, 3]), 4)
    w2 = b.constant("w2", b.he_normal((4, 4, 1, 1), 4) * 3)
    b.batch_norm(b.node("Relu", [b.node("Conv", [y, w2], kernel_shape=[1, 1])]), 4,
                 epsilon=1e-3)
    model = b.model("bn", [float_input("x", [1, 3, 16, 16])],
                    [float_input(b.nodes[-1].output[0], [1, 4, 14, 14])])
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, 16, 16), np.float32) + 2}
    model = calibrate_batch_norms(model, feeds)
    out = next(iter(run_onnxruntime(model, feeds).values())).astype(np.float64)
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    scale, bias = init["bn_scale_1"], init["bn_bias_1"]
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), bias, atol=1e-4)
    np.testing.assert_allclose(out.std(axis=(0, 2, 3)), np.abs(scale), rtol=1e-3)


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

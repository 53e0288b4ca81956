"""An int8 model through 'run --check-onnxruntime' and 'bench --vs onnxruntime': held to a
bound in quantization steps of its outputs, with top-k agreement reported (issue 38: a QDQ
ResNet-18 whose top-1 agreed failed the float tolerance with max rel err 325 and no hint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_quantized import quantized_lenet

import tensorc
from tensorc.cli.main import main

pytest.importorskip("onnxruntime.quantization")


@pytest.fixture(scope="module")
def lenet_int8(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """LeNet-5 quantized by onnxruntime's tool, and its compiled module."""
    folder = tmp_path_factory.mktemp("int8")
    model = quantized_lenet(folder / "lenet5_int8.onnx")
    artifact = folder / "lenet5_int8.tcz"
    tensorc.compile(str(model)).save(str(artifact))
    return model, artifact


def test_float_tolerance_alone_rejects_the_int8_model(
        lenet_int8: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The reproduction: with no room for rounding (--steps 0) the check fails, as it did."""
    model, artifact = lenet_int8
    assert main(["run", str(artifact), "--check-onnxruntime", str(model), "--steps", "0"]) == 1
    assert capsys.readouterr().out.rstrip().endswith("FAIL")


def test_run_check_passes_an_int8_model_by_quantization_steps(
        lenet_int8: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    model, artifact = lenet_int8
    assert main(["run", str(artifact), "--check-onnxruntime", str(model)]) == 0
    text = capsys.readouterr().out
    assert "quantized model: or within 8 quantization steps" in text
    assert "PASS by quantization steps" in text
    assert "steps of 0.0312 (the scale of DequantizeLinear" in text
    assert "top-1 agrees in 1/1 rows, top-5 overlap" in text


def test_run_check_json_names_the_deciding_term(
        lenet_int8: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    model, artifact = lenet_int8
    assert main(["run", str(artifact), "--check-onnxruntime", str(model), "--json"]) == 0
    check = json.loads(capsys.readouterr().out)["check"]
    (output,) = check["outputs"]
    assert check["passed"] and check["max_steps"] == 8
    assert output["decided_by"] == "steps" and 0 < output["steps"] <= 8
    assert output["top1_agree"] == 1.0 and output["top5_overlap"] > 0.5


def test_bench_vs_onnxruntime_passes_an_int8_model(
        lenet_int8: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    model, _ = lenet_int8
    assert main(["bench", str(model), "--vs", "onnxruntime", "--threads", "1", "--repeat", "3",
                 "--seconds", "0.1"]) == 0
    text = capsys.readouterr().out
    assert "outputs vs onnxruntime (rtol 0.001, atol 0.0001; quantized model" in text
    assert "PASS by quantization steps" in text and "top-1 agrees" in text

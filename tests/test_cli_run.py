"""``tensorc run``'s inputs and outputs: .npz archives in and out, and random inputs that
respect what an input's name implies (a mask of ones, a sample rate)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import models
import tensorc
from tensorc.cli.main import main
from tensorc.reference import input_rule, random_inputs

MLP = str(models.path("mlp"))


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "mlp.tcz"
    assert main(["compile", MLP, "-o", str(out)]) == 0
    return out


def test_inputs_from_npz_and_outputs_to_npz(mlp_artifact: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    x = np.random.default_rng(3).standard_normal((1, 784)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "sub" / "out"                   # written as named, no .npz added
    capsys.readouterr()
    assert main(["run", str(mlp_artifact), "--inputs", str(tmp_path / "in.npz"),
                 "--outputs", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "random inputs" not in printed and f"wrote the outputs to {out}" in printed
    saved = np.load(out)
    want = tensorc.load(mlp_artifact).run({"x": x})
    assert list(saved.keys()) == list(want) and np.array_equal(saved["y"], want["y"])
    assert main(["run", str(mlp_artifact), "--inputs", str(tmp_path / "in.npz"),
                 "--outputs", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs_file"] == str(out)


def test_npz_errors(mlp_artifact: Path, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    np.savez(tmp_path / "both.npz", a=np.zeros(3), b=np.ones(3))
    assert main(["run", str(mlp_artifact), "--input", f"x={tmp_path / 'both.npz'}"]) == 2
    err = capsys.readouterr().err
    assert "is an .npz archive (arrays a, b), not one array" in err
    assert f"--inputs {tmp_path / 'both.npz'}" in err
    assert main(["run", str(mlp_artifact), "--inputs", str(tmp_path / "both.npz")]) == 2
    assert "has arrays a, b, but the model's inputs are x" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", np.zeros((1, 784), np.float32))
    assert main(["run", str(mlp_artifact), "--inputs", str(tmp_path / "x.npy")]) == 2
    assert "is not an .npz archive" in capsys.readouterr().err
    # an output nobody can write is found before the run
    assert main(["run", str(mlp_artifact), "--outputs", str(tmp_path)]) == 2
    assert "it is a directory" in capsys.readouterr().err


def test_random_inputs_respect_what_names_imply() -> None:
    signature = [("input_ids", (2, 8), "int64"), ("attention_mask", (2, 8), "int64"),
                 ("token_type_ids", (2, 8), "int64"), ("sr", (), "int64"),
                 ("sample_rate", (1,), "int32"), ("k", (), "int64"),
                 ("x", (2, 3), "float32"), ("padding_mask", (2, 8), "bool")]
    feeds = random_inputs(signature, seed=0)
    assert (feeds["attention_mask"] == 1).all() and (feeds["padding_mask"]).all()
    assert (feeds["token_type_ids"] == 0).all()
    assert feeds["sr"] == 16000 and feeds["sample_rate"].tolist() == [16000]
    assert feeds["k"] == 1                                 # a control input: small
    assert feeds["input_ids"].min() >= 0 and feeds["input_ids"].max() < 10
    # the other inputs are what they were: every input draws from the seed in order
    rng = np.random.default_rng(0)
    for _, shape, _ in signature[:6]:
        rng.integers(0, 10, size=shape)
    assert np.array_equal(feeds["x"], rng.standard_normal((2, 3)).astype(np.float32))
    assert input_rule("attention_mask", (2, 8), "int64") == "ones (a mask)"
    assert input_rule("x", (2, 3), "float32") is None


def test_run_says_which_inputs_follow_a_rule(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    model = make_model([helper.make_node("Mul", ["x", "attention_mask"], ["y"])],
                       [tensor_info("x", "float32", [2, 4]),
                        tensor_info("attention_mask", "float32", [2, 4])], ["y"])
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.tcz")]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "m.tcz"), "--check-onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert "random inputs (seed 0): x, attention_mask = ones (a mask)" in out

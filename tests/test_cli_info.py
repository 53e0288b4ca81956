"""A compiled artifact (.tcz) as the commands take it: ``tensorc info`` (and ``inspect``)
show its signature, target, threads and provenance; ``bench`` and ``check`` accept it."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import models
import tensorc
from tensorc.cli.main import main

MLP = str(models.path("mlp"))


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("info")
    paths = {"with": folder / "mlp.tcz", "without": folder / "mlp-nosrc.tcz"}
    assert main(["compile", MLP, "-o", str(paths["with"]), "--threads", "1",
                 "--keep-source"]) == 0
    assert main(["compile", MLP, "-o", str(paths["without"])]) == 0
    copy = folder / "gone.onnx"                 # compiled from a file since removed
    copy.write_bytes(Path(MLP).read_bytes())
    paths["orphan"] = folder / "orphan.tcz"
    assert main(["compile", str(copy), "-o", str(paths["orphan"])]) == 0
    copy.unlink()
    return paths


def test_info_shows_signature_target_threads_and_provenance(
        artifacts: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["info", str(artifacts["with"])]) == 0
    out = capsys.readouterr().out
    module = tensorc.load(artifacts["with"])
    assert "input  x: float32[1,784]" in out and "output y: float32[1,10]" in out
    assert f"target: {module.target}" in out
    assert "threads: 1" in out
    assert f"tensorc {tensorc.__version__}" in out
    digest = hashlib.sha256(Path(MLP).read_bytes()).hexdigest()
    assert f"source: {Path(MLP).resolve()} (sha256 {digest[:16]}" in out
    assert "embeds its source model" in out
    assert main(["info", str(artifacts["with"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["threads"] == 1 and report["target"] == module.target
    assert report["inputs"] == [{"name": "x", "shape": [1, 784], "dtype": "float32"}]
    assert report["source"]["sha256"] == digest and report["embeds_source"] is True
    assert main(["info", str(artifacts["without"])]) == 0
    out = capsys.readouterr().out
    assert "threads: all cores" in out and "does not embed its source model" in out


def test_threads_are_saved(artifacts: dict[str, Path]) -> None:
    assert tensorc.load(artifacts["with"]).num_threads == 1
    assert tensorc.load(artifacts["without"]).num_threads == 0


def test_inspect_an_artifact_shows_its_info(artifacts: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["inspect", str(artifacts["with"])]) == 0
    out = capsys.readouterr().out
    assert "input  x: float32[1,784]" in out and "threads: 1" in out
    assert main(["inspect", str(artifacts["with"]), "--stage", "fused"]) == 0
    assert "matmul" in capsys.readouterr().out           # the embedded model's IR
    assert main(["inspect", str(artifacts["without"]), "--stage", "fused"]) == 0
    assert "matmul" in capsys.readouterr().out           # the model it was compiled from
    assert main(["inspect", str(artifacts["orphan"]), "--stage", "fused"]) == 2
    err = capsys.readouterr().err
    assert "does not embed its source model" in err and "corrupt" not in err


def test_info_on_an_onnx_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", MLP]) == 2
    assert "is an ONNX model, not a compiled module: 'tensorc check" in \
        capsys.readouterr().err


def test_bench_an_artifact(artifacts: dict[str, Path],
                           capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["bench", str(artifacts["with"]), "--repeat", "3", "--seconds", "0.05",
                 "--vs", "onnxruntime", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["check_passed"] and report["threads"] == 1 and report["compile_s"] is None
    assert "compiling" not in captured.err
    assert main(["bench", str(artifacts["orphan"]), "--vs", "onnxruntime"]) == 2
    err = capsys.readouterr().err
    assert "does not embed its source model" in err and "corrupt" not in err
    assert main(["bench", str(artifacts["with"]), "--input-shape", "x=2x784"]) == 2
    assert "is compiled already: --input-shape applies to .onnx models" in \
        capsys.readouterr().err


def test_check_an_artifact(artifacts: dict[str, Path],
                           capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["check", str(artifacts["with"])]) == 0
    out = capsys.readouterr().out
    assert "result: every op is supported" in out and "x: float32[1,784]" in out
    assert main(["check", str(artifacts["orphan"])]) == 2
    err = capsys.readouterr().err
    assert "compiled already" in err and "corrupt" not in err


@pytest.mark.parametrize("command", [["compile"], ["tune", "--trials", "1"]])
def test_an_artifact_where_a_model_is_needed(command: list[str], artifacts: dict[str, Path],
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["-o", str(tmp_path / "again.tcz")] if command == ["compile"] else \
        ["--log", str(tmp_path / "t.jsonl")]
    assert main([command[0], str(artifacts["with"]), *command[1:], *extra]) == 2
    err = capsys.readouterr().err
    assert "is a compiled tensorc module (.tcz), not an ONNX model" in err
    assert "corrupt" not in err

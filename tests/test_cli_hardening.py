"""The ``tensorc`` command on what users get wrong: versions, JSON errors, thread counts,
targets, files it must not touch, models onnxruntime cannot read as written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import models
import tensorc
from tensorc import TensorcError
from tensorc.cli.main import main
from tensorc.reference import for_onnxruntime, run_onnxruntime

MLP = str(models.path("mlp"))


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: "), err
    assert "Traceback" not in err
    return err


def relu_model(opset: int | None = None, op: str = "Relu") -> onnx.ModelProto:
    """A model as the pinned onnx's helper.make_model writes it (IR version 14, its newest
    opset unless ``opset`` is given)."""
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **({"to": 1} if op == "Cast" else {}))], "relu",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])])
    kwargs = {"opset_imports": [helper.make_opsetid("", opset)]} if opset else {}
    return helper.make_model(graph, **kwargs)


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "mlp.tcz"
    assert main(["compile", MLP, "-o", str(out)]) == 0
    return out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tensorc {tensorc.__version__}"


def test_json_error_is_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.tcz"
    bad.write_bytes(b"TCZ4" + b"\0" * 100)
    assert main(["run", str(bad), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["type"] == "ArtifactError" and "corrupt" in report["error"]
    assert main(["check", str(tmp_path / "none.onnx"), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report == {"error": f"model {tmp_path / 'none.onnx'} does not exist",
                      "type": "TensorcError"}


def test_run_an_onnx_model_suggests_compiling_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", MLP]) == 2
    err = _error(capsys)
    stem = MLP[:-len(".onnx")]
    assert "is an ONNX model, not a compiled module" in err
    assert f"tensorc compile {MLP} -o {stem}.tcz" in err


def test_duplicate_input_is_rejected(mlp_artifact: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 784), np.float32))
    assert main(["run", str(mlp_artifact), "--input", f"x={x}", "--input", f"x={x}"]) == 2
    assert "--input x=... is given twice" in _error(capsys)


@pytest.mark.parametrize("threads", ["-1", "100000", str(4 * (os.cpu_count() or 1) + 1)])
@pytest.mark.parametrize("command", ["compile", "run", "bench", "profile"])
def test_thread_count_out_of_range(command: str, threads: str, mlp_artifact: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    model = str(mlp_artifact) if command == "run" else MLP
    with pytest.raises(SystemExit) as info:
        main([command, model, "--threads", threads])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--threads" in err and ("number >= 0" in err or "0 (all cores) to" in err)


@pytest.mark.parametrize("target,expected", [
    ("llvm -mcpu=bogus", "LLVM knows no CPU 'bogus'; valid CPUs: "),
    ("llvm -mtriple=aarch64-linux-gnu", "unknown option -mtriple"),
    ("llvm -mattr=+bogus", "unknown -mattr feature +bogus"),
    ("llvm -opt=3", "llvm takes -mcpu=..."),
])
def test_bad_target(target: str, expected: str, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.tcz"
    assert main(["compile", MLP, "-o", str(out), "--target", target]) == 2
    err = _error(capsys)
    assert expected in err
    assert not out.exists()


def test_bad_target_in_the_api() -> None:
    with pytest.raises(TensorcError, match="znver3"):   # listed among the valid CPUs
        tensorc.compile(MLP, target="llvm -mcpu=zen9")


def test_compile_does_not_overwrite_its_source(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "mlp.onnx"
    source.write_bytes(Path(MLP).read_bytes())
    assert main(["compile", str(source), "-o", str(source)]) == 2
    assert "refusing to overwrite" in _error(capsys)
    assert source.read_bytes() == Path(MLP).read_bytes()


def test_compile_into_a_place_that_cannot_hold_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["compile", MLP, "-o", str(blocker / "mlp.tcz")]) == 2   # not 1: no check failed
    assert "cannot save to" in _error(capsys)
    assert blocker.read_text() == "not a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_compile_into_a_read_only_directory(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path.chmod(0o555)
    try:
        assert main(["compile", MLP, "-o", str(tmp_path / "mlp.tcz")]) == 2
        assert "Permission denied" in _error(capsys)
    finally:
        tmp_path.chmod(0o755)


def test_artifacts_keep_the_source_model_only_when_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Artifacts were 2x the model's size, embedding it by default (issue 38): now only with
    --keep-source; without it, the checks read the file compiled from while it is unchanged."""
    model = tmp_path / "mlp.onnx"
    model.write_bytes(Path(MLP).read_bytes())
    lean, kept = tmp_path / "mlp.tcz", tmp_path / "mlp-kept.tcz"
    assert main(["compile", str(model), "-o", str(lean)]) == 0
    assert main(["compile", str(model), "-o", str(kept), "--keep-source"]) == 0
    assert tensorc.load(lean).source_onnx is None
    assert tensorc.load(kept).source_onnx == model.read_bytes()
    assert kept.stat().st_size - lean.stat().st_size >= model.stat().st_size
    assert main(["compile", str(model), "-o", str(lean), "--no-source"]) == 0   # old scripts
    capsys.readouterr()
    assert main(["run", str(lean), "--check-onnxruntime"]) == 0          # the file, unchanged
    assert capsys.readouterr().out.rstrip().endswith("PASS")
    onnx.save(relu_model(), model)                                       # the file changed
    assert main(["run", str(lean), "--check-onnxruntime"]) == 2
    error = _error(capsys)
    assert "has changed since" in error and "--keep-source" in error
    assert "--check-onnxruntime model.onnx" in error
    assert main(["run", str(kept), "--check-onnxruntime"]) == 0          # embedded: no file
    model.unlink()
    assert main(["bench", str(lean), "--vs", "onnxruntime", "--repeat", "3"]) == 2
    assert f"the model it was compiled from, {model}, is not there" in _error(capsys)


def test_bench_shows_compile_progress(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", MLP, "--repeat", "2", "--seconds", "0.05"]) == 0
    err = capsys.readouterr().err
    assert f"compiling {MLP}" in err and "imported" in err


# --- models the pinned onnx writes, run by the pinned onnxruntime ------------------------------


def test_helper_model_runs_in_onnxruntime() -> None:
    model = relu_model()
    assert model.ir_version > 13           # what onnx 1.23's helper.make_model writes
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    out = run_onnxruntime(model, {"x": x})
    np.testing.assert_array_equal(out["y"], np.maximum(x, 0))
    assert model.ir_version > 13           # the caller's model is not edited


def test_newer_opset_that_changed_an_op_is_a_clear_error() -> None:
    import onnxruntime
    with pytest.raises(TensorcError) as info:
        for_onnxruntime(relu_model(op="Cast"), onnxruntime)
    message = str(info.value)
    assert "reads opsets up to" in message and "Cast changed" in message
    assert "convert_version" in message


def test_check_onnxruntime_on_a_helper_model(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "relu.onnx"
    onnx.save(relu_model(), source)
    out = tmp_path / "relu.tcz"
    assert main(["compile", str(source), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--check-onnxruntime"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["bench", str(source), "--vs", "onnxruntime", "--repeat", "2",
                 "--seconds", "0.05"]) == 0
    assert "PASS" in capsys.readouterr().out

"""Every error of the ``tensorc`` command exits 2 (1 is a failed correctness check), as a
one-line message or, with --json, as JSON, argument errors included; outputs are checked
writable before any work; nonsense values are refused by the argument parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import models
import tensorc
from tensorc.cli.main import main

MLP = str(models.path("mlp"))


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.err.startswith("error: "), captured.err
    assert "Traceback" not in captured.err
    assert "compiling" not in captured.out + captured.err    # refused before the work
    return captured.err


def test_a_binary_tuning_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "model.png"
    log.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    assert main(["compile", MLP, "-o", str(tmp_path / "m.tcz"), "--tuning-log", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{log} is not a tuning log (not UTF-8 text" in err and "Traceback" not in err


def test_an_internal_error_exits_2(monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(tensorc, "compile", broken)
    assert main(["bench", MLP]) == 2                     # not 1, which a failed check means
    err = capsys.readouterr().err
    assert err.rstrip().splitlines()[-1] == (
        "error: internal error (a bug in tensorc: please report it with the traceback "
        "above): ZeroDivisionError: division by zero")
    assert main(["bench", MLP, "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["type"] == "ZeroDivisionError" and "internal error" in report["error"]


def test_argument_errors_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["bench", MLP, "--seconds", "-1", "--json"])
    assert info.value.code == 2
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["type"] == "UsageError"
    assert report["error"] == "argument --seconds: expected a number > 0, got -1.0"
    with pytest.raises(SystemExit) as info:
        main(["bench", "--json"])                       # the model is missing
    report = json.loads(capsys.readouterr().out)
    assert "the following arguments are required: model" in report["error"]
    with pytest.raises(SystemExit) as info:             # without --json: argparse's usage
        main(["bench", MLP, "--seconds", "-1"])
    err = capsys.readouterr().err
    assert err.startswith("usage: tensorc bench") and "--seconds: expected a number > 0" in err


def test_compile_into_a_directory_fails_at_once(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for force in ([], ["--force"]):
        assert main(["compile", MLP, "-o", str(tmp_path), *force]) == 2
        assert f"cannot save to {tmp_path}: it is a directory" in _error(capsys)


@pytest.mark.parametrize("command,flag", [
    ("compile", "-o"), ("profile", "--trace"), ("profile", "--plot"), ("tune", "--log"),
    ("tune", "--plot")])
def test_unwritable_outputs_fail_before_the_work(command: str, flag: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    extra = ["--trials", "1"] if command == "tune" else []
    if (command, flag) == ("tune", "--plot"):         # never the default log in the checkout
        extra += ["--log", str(tmp_path / "t.jsonl")]
    assert main([command, MLP, flag, str(blocker / "out"), *extra]) == 2
    assert f"{blocker} is not a directory" in _error(capsys)
    assert main([command, MLP, flag, str(tmp_path), *extra]) == 2
    assert f"{tmp_path}: it is a directory" in _error(capsys)


@pytest.mark.parametrize("command,flag,value,expected", [
    ("bench", "--seconds", "-1", "expected a number > 0"),
    ("bench", "--seconds", "nan", "expected a number > 0"),
    ("bench", "--rtol", "-1", "expected a number >= 0"),
    ("run", "--atol", "-0.5", "expected a number >= 0"),
    ("run", "--seed", "-1", "expected a number >= 0"),
    ("profile", "--peak-gflops", "0", "expected a number > 0"),
    ("profile", "--bandwidth", "-5", "expected a number > 0"),
    ("profile", "--seconds", "0", "expected a number > 0"),
    ("profile", "--seed", "x", "expected a whole number"),
    ("tune", "--threads", "-1", "expected a number >= 0"),
    ("tune", "--batch", "0", "expected a number >= 1"),
    ("tune", "--build-workers", "-2", "expected a number >= 0"),
    ("tune", "--trials", "0", "expected a number >= 1"),
])
def test_nonsense_values_are_refused(command: str, flag: str, value: str, expected: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    model = "mlp.tcz" if command == "run" else MLP
    with pytest.raises(SystemExit) as info:
        main([command, model, flag, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {expected}" in err, err


def _external_data_model(folder: Path) -> Path:
    """A MatMul whose weight lives in weights.bin beside the model."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [weight])
    path = folder / "ext.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                    str(path), save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    return path


@pytest.mark.parametrize("command", [["compile"], ["check"], ["inspect"], ["bench"]])
def test_a_missing_external_data_file(command: list[str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Reported as the missing file it is, not as a corrupt model (issue 38)."""
    model = _external_data_model(tmp_path)
    (tmp_path / "weights.bin").unlink()
    extra = ["-o", str(tmp_path / "m.tcz")] if command == ["compile"] else []
    assert main([*command, str(model), *extra]) == 2
    err = capsys.readouterr().err
    assert "corrupt" not in err and "Traceback" not in err
    assert f"keeps tensor data in external files, and {tmp_path / 'weights.bin'} is missing " \
           f"(tensor w)" in err
    assert "beside the model" in err
    with pytest.raises(tensorc.TensorcError, match="weights.bin is missing"):
        tensorc.compile(str(model))


def test_a_truncated_external_data_file(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    model = _external_data_model(tmp_path)
    data = tmp_path / "weights.bin"
    data.write_bytes(data.read_bytes()[:100])
    assert main(["compile", str(model), "-o", str(tmp_path / "m.tcz")]) == 2
    err = capsys.readouterr().err
    assert f"{data} is shorter than the tensor data the model reads from it (tensor w" in err

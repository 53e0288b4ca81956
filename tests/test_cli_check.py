"""``tensorc check`` end to end: text and JSON reports, exit codes 0 / 1 / 2, its help."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import branch_on_input_model, make_model, tensor_info
from onnx import helper

import models
from tensorc.cli.main import main

MLP = str(models.path("mlp"))


def _save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def unsupported_model(tmp_path: Path) -> str:
    """Symbolic batch; an unsupported op, a vendor op and a rejected Pad mode."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Det", ["a"], ["b"], name="uniq"),
             helper.make_node("FusedMatMul", ["x", "x"], ["c"], name="fmm",
                              domain="com.microsoft"),
             helper.make_node("Pad", ["x", "p"], ["d"], name="pad", mode="mirror")]
    model = make_model(nodes, [tensor_info("x", "float32", ["batch", 4])], ["b", "c", "d"],
                       opset=13, extra_opsets={"com.microsoft": 1},
                       initializers={"p": np.array([0, 1, 0, 1], np.int64)})
    return _save(model, tmp_path / "bad.onnx")


def test_supported_model_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", MLP]) == 0
    out = capsys.readouterr().out
    assert f"model {MLP!r}: IR version 8, opsets: ai.onnx 17" in out
    assert "x: float32[1,784]  static" in out
    assert "ok          Gemm (opset 17): nodes gemm_0, gemm_1, gemm_2" in out
    assert out.rstrip().endswith("result: every op is supported")


def test_unsupported_model_exits_1(unsupported_model: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", unsupported_model]) == 1
    out = capsys.readouterr().out
    assert "opsets: ai.onnx 13, com.microsoft 1" in out
    assert "x: float32[batch,4]  symbolic: dim 0 'batch' = unbound" in out
    assert "compiling needs their shapes, e.g. --input-shape x=1x4" in out
    assert "UNSUPPORTED Det (opset 13): node uniq" in out
    assert "UNSUPPORTED com.microsoft::FusedMatMul (opset 1): node fmm" in out
    assert "only the default ONNX domain is supported; node fmm" in out
    assert "partial     Pad (opset 13): node pad" in out
    assert "Pad mode 'mirror' is not supported; node pad" in out
    assert "result: NOT SUPPORTED: 3 of 4 op types have problems" in out


def test_json_report(unsupported_model: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", unsupported_model, "--json", "--input-shape", "x=3x4"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["supported"] is False
    assert report["ir_version"] == 8
    assert report["opsets"] == {"ai.onnx": 13, "com.microsoft": 1}
    assert report["inputs"] == [{"name": "x", "dtype": "float32", "dims": ["batch", 4],
                                 "shape": [3, 4], "bound": True,
                                 "symbolic": [{"dim": 0, "symbol": "batch", "value": 3}]}]
    assert report["unbound_inputs"] == []
    ops = {op["op_type"]: op for op in report["ops"]}
    assert ops["Relu"]["ok"] is True
    assert (ops["FusedMatMul"]["domain"], ops["FusedMatMul"]["opset"]) == ("com.microsoft", 1)
    assert ops["Det"]["issues"] == [{"kind": "op", "reason": "not supported",
                                        "nodes": ["uniq"], "certain": True}]
    assert ops["Pad"]["supported"] is True and ops["Pad"]["ok"] is False
    assert ops["Pad"]["issues"][0]["reason"] == "Pad mode 'mirror' is not supported"


def test_json_of_a_supported_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", MLP, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["supported"] is True
    assert [op["op_type"] for op in report["ops"]] == ["Gemm", "Relu", "Softmax"]
    assert all(op["ok"] and not op["issues"] for op in report["ops"])


def test_input_shape_binds_symbolic_dims(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", ["n", 3])], ["y"])
    path = _save(model, tmp_path / "sym.onnx")
    assert main(["check", path, "--input-shape", "x=5x3"]) == 0
    out = capsys.readouterr().out
    assert "x: float32[n,3]  symbolic: dim 0 'n' = 5" in out
    assert "compiling needs" not in out
    assert "with every input shape bound" in out


@pytest.mark.parametrize("argv, message", [
    (["check", "no_such_model.onnx"], "error: model no_such_model.onnx does not exist"),
    (["check", MLP, "--input-shape", "y=1x784"], "input_shapes names 'y'"),
    (["check", MLP, "--input-shape", "x=2x784"], "input 'x' expects shape float32[1,784]"),
])
def test_errors_exit_2(argv: list[str], message: str,
                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err


def test_broken_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(MLP).read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:len(data) // 3])
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "truncated" in err


def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "tensorc check resnet.onnx" in out
    assert "--input-shape" in out and "--json" in out
    assert "Exit status: 0 every op is supported, 1 something is not, 2 error" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "tensorc check mlp.onnx" in capsys.readouterr().out


def test_check_with_input_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "vad.onnx"
    onnx.save(branch_on_input_model(), path)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "--input-value sr=VALUE" in out               # the fix is named
    assert main(["check", str(path), "--input-value", "sr=16000"]) == 0
    assert "result: every op is supported" in capsys.readouterr().out


def test_dim_range_with_odd_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # names holding 'x', '+', ':' and spaces, as exporters write them
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", ["max_x", "past + 1", "a:b"])], ["y"])
    path = _save(model, tmp_path / "odd.onnx")
    argv = ["check", path, "--dim-range", "max_x=2:8", "--dim-range", "past + 1=1:",
            "--dim-range", "a:b=0:3", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    ranges = {d["name"]: d["range"] for d in report["dims"]["symbols"]}
    assert ranges == {"max_x": [2, 8], "past + 1": [1, None], "a:b": [0, 3]}
    assert report["outputs"] == {"y": "float32[max_x,past + 1,a:b]"}
    assert main(["check", path, "--dim-range", "max_x=2:8"]) == 0
    assert "max_x in [2, 8]  (from x[0])" in capsys.readouterr().out


@pytest.mark.parametrize("flag, message", [
    ("seq", "expected NAME=LO:HI"), ("seq=1", "expected NAME=LO:HI"),
    ("seq=a:b", "must be LO:HI with integers"), ("seq=5:2", "needs 0 <= LO <= HI"),
])
def test_bad_dim_range_flags(flag: str, message: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", MLP, "--dim-range", flag])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_dim_range_of_a_dim_the_model_lacks(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", ["n", 3])], ["y"])
    path = _save(model, tmp_path / "sym.onnx")
    assert main(["check", path, "--dim-range", "seq=1:8"]) == 1
    assert "dim_ranges names 'seq', but the model's symbolic dims are 'n'" in \
        capsys.readouterr().out

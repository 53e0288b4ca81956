"""The ``tensorc`` command end to end on the MLP: compile, run, check, inspect, bench, and
every error a user can cause through it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import models
from tensorc.cli.arguments import parse_input_shape
from tensorc.cli.main import build_parser, main
from tensorc.reference import run_onnxruntime
from tensorc.runtime.artifact import is_artifact

MLP = str(models.path("mlp"))


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP compiled once through the CLI."""
    out = tmp_path_factory.mktemp("cli") / "mlp.tcz"
    assert main(["compile", MLP, "-o", str(out)]) == 0
    return out


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """stderr of a command that failed with exit code 2: one 'error:' line, no traceback."""
    err = capsys.readouterr().err
    assert err.startswith("error: "), err
    assert "Traceback" not in err
    return err


# --- compile --------------------------------------------------------------------------------


def test_compile_writes_an_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sub" / "mlp.tcz"
    assert main(["compile", MLP, "-o", str(out), "--threads", "1"]) == 0
    text = capsys.readouterr().out
    assert f"compiling {MLP}" in text
    assert "compiled in" in text and f"saved {out}" in text
    assert "x: float32[1,784]" in text and "y: float32[1,10]" in text
    assert is_artifact(out)


def test_compile_binds_input_shape(tmp_path: Path) -> None:
    out = tmp_path / "mlp.tcz"
    assert main(["compile", MLP, "-o", str(out), "--input-shape", "x=1x784"]) == 0
    assert is_artifact(out)


def test_compile_overwrites_an_artifact(tmp_path: Path, mlp_artifact: Path) -> None:
    out = tmp_path / "again.tcz"
    out.write_bytes(mlp_artifact.read_bytes())
    assert main(["compile", MLP, "-o", str(out)]) == 0


def test_compile_refuses_to_overwrite_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "notes.tcz"
    out.write_text("my notes")
    assert main(["compile", MLP, "-o", str(out)]) == 2
    err = _error(capsys)
    assert "refusing to overwrite" in err and "--force" in err
    assert out.read_text() == "my notes"

    assert main(["compile", MLP, "-o", str(out), "--force"]) == 0
    assert is_artifact(out)


def test_compile_missing_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.onnx"
    assert main(["compile", str(missing), "-o", str(tmp_path / "x.tcz")]) == 2
    assert str(missing) in _error(capsys)


def test_compile_corrupt_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(Path(MLP).read_bytes()[:1000])
    assert main(["compile", str(corrupt), "-o", str(tmp_path / "x.tcz")]) == 2
    _error(capsys)
    assert not (tmp_path / "x.tcz").exists()


def test_compile_rejects_malformed_input_shape(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", MLP, "--input-shape", "x=1xq"])
    assert exit_info.value.code == 2
    assert "--input-shape" in capsys.readouterr().err


# --- run ------------------------------------------------------------------------------------


def test_run_prints_outputs(mlp_artifact: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(mlp_artifact)]) == 0
    text = capsys.readouterr().out
    assert "random inputs (seed 0): x" in text
    assert "y: float32[1,10]" in text


def test_run_json_matches_onnxruntime(
    mlp_artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.random.default_rng(7).standard_normal((1, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    argv = ["run", str(mlp_artifact), "--input", f"x={tmp_path / 'x.npy'}", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["random_inputs"] == []
    (output,) = report["outputs"]
    assert (output["name"], output["shape"], output["dtype"]) == ("y", [1, 10], "float32")
    expected = run_onnxruntime(MLP, {"x": x})["y"]
    np.testing.assert_allclose(output["head"], expected.reshape(-1)[:5], rtol=1e-4, atol=1e-6)
    assert output["mean"] == pytest.approx(0.1, rel=1e-4)  # softmax rows sum to 1


def test_run_check_uses_stored_source_model(
    mlp_artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(mlp_artifact), "--check-onnxruntime"]) == 0
    text = capsys.readouterr().out
    assert "max abs err" in text
    assert text.rstrip().endswith("PASS")


def test_run_check_with_explicit_model_json(
    mlp_artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(mlp_artifact), "--check-onnxruntime", MLP, "--json"]) == 0
    check = json.loads(capsys.readouterr().out)["check"]
    assert check["passed"] is True
    assert check["outputs"][0]["name"] == "y"
    assert check["outputs"][0]["max_abs"] < 1e-4


def test_run_check_fails_on_a_different_model(
    mlp_artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = models.load("mlp")
    weight = model.graph.initializer[0]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 2, weight.name))
    other = tmp_path / "other.onnx"
    onnx.save(model, other)
    assert main(["run", str(mlp_artifact), "--check-onnxruntime", str(other)]) == 1
    assert capsys.readouterr().out.rstrip().endswith("FAIL")


def test_run_unknown_input_name(
    mlp_artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 784), np.float32))
    assert main(["run", str(mlp_artifact), "--input", f"image={tmp_path / 'x.npy'}"]) == 2
    err = _error(capsys)
    assert "'image'" in err and "x" in err


def test_run_wrong_input_shape(
    mlp_artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    assert main(["run", str(mlp_artifact), "--input", f"x={tmp_path / 'x.npy'}"]) == 2
    _error(capsys)


def test_run_missing_input_file(mlp_artifact: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(mlp_artifact), "--input", "x=/nonexistent/x.npy"]) == 2
    assert "/nonexistent/x.npy" in _error(capsys)


def test_run_truncated_artifact(
    mlp_artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = tmp_path / "truncated.tcz"
    data = mlp_artifact.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    assert main(["run", str(truncated)]) == 2
    _error(capsys)


def test_run_an_onnx_file_instead_of_an_artifact(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", MLP]) == 2
    _error(capsys)


# --- inspect and bench ----------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["graph", "fused", "loops", "llvm"])
def test_inspect_prints_each_stage(stage: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", MLP, "--stage", stage]) == 0
    assert capsys.readouterr().out.strip()


def test_inspect_graph_uses_core_ops(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", MLP]) == 0
    assert "matmul" in capsys.readouterr().out  # Gemm becomes matmul + add


def test_bench_vs_onnxruntime(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", MLP, "--vs", "onnxruntime", "--threads", "1", "--repeat", "3"]
    assert main([*argv, "--seconds", "0.1"]) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "onnxruntime / tensorc" in text


def test_bench_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["bench", MLP, "--threads", "1", "--repeat", "3", "--seconds", "0.1", "--json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["threads"] == 1 and report["samples"] == 3
    assert report["results"]["tensorc"]["median_ms"] > 0


# --- parsing --------------------------------------------------------------------------------


def test_parse_input_shape() -> None:
    assert parse_input_shape("x=1x3x224x224") == ("x", (1, 3, 224, 224))
    assert parse_input_shape("a=b=2,3") == ("a=b", (2, 3))
    assert parse_input_shape("scalar=") == ("scalar", ())


@pytest.mark.parametrize("bad", ["1x3", "=1x3", "x=1xq", "x=-1x3"])
def test_parse_input_shape_rejects(bad: str) -> None:
    with pytest.raises(Exception, match="x|NAME"):
        parse_input_shape(bad)


@pytest.mark.parametrize("command", ["compile", "run", "inspect", "bench"])
def test_every_command_has_help_with_an_example(command: str) -> None:
    subparsers = build_parser()._subparsers._group_actions[0].choices
    help_text = subparsers[command].format_help()
    assert "example" in help_text and f"tensorc {command} " in help_text


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "compile" in capsys.readouterr().out


def test_run_with_another_shape_says_how_in_cli_syntax(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    artifact = tmp_path / "mlp.tcz"
    assert main(["compile", MLP, "-o", str(artifact)]) == 0
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 784), np.float32))
    capsys.readouterr()
    assert main(["run", str(artifact), "--input", f"x={x}"]) == 2
    err = capsys.readouterr().err
    assert "compile again with --input-shape x=2x784" in err, err
    assert "input_shapes=" not in err


def test_inspect_const_names_do_not_collide_with_the_models(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torch export names its layers c0, c1 (initializers c1.weight, c1.bias); the graph
    printed %c0 and %c1 for reshaped biases beside them, %c0 holding c1.bias (issue 38)."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("c1.weight", (6, 3, 3, 3)), ("c1.bias", (6,)),
                                 ("c0.weight", (6, 6, 3, 3)), ("c0.bias", (6,)))]
    nodes = [helper.make_node("Conv", ["x", "c1.weight", "c1.bias"], ["a"], pads=[1] * 4),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "c0.weight", "c0.bias"], ["y"], pads=[1] * 4)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8, 8])], inits)
    path = tmp_path / "names.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(["inspect", str(path), "--stage", "graph"]) == 0
    text = capsys.readouterr().out
    names = set(re.findall(r"%([\w.]+)", text))
    stems = {name.split(".")[0] for name in names if "." in name}
    assert stems == {"c0", "c1"}
    assert not names & stems, text              # no %c0 beside %c0.weight


def test_compile_reports_progress_while_kernels_build(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """The LLVM build was 8-20 s of silence (issue 38): it now says how far it is."""
    import tensorc.compiler.kernel_objects as kernel_objects
    monkeypatch.setattr(kernel_objects, "PROGRESS_SECONDS", 0.0)
    assert main(["compile", str(models.path("lenet5")), "-o", str(tmp_path / "l.tcz"),
                 "--no-cache"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    total = int(next(line for line in lines if line.startswith("building")).split()[1])
    built = [line for line in lines if line.startswith("built ")]
    assert [int(line.split()[1]) for line in built] == list(range(1, total + 1))
    assert built[-1].startswith(f"built {total} of {total} kernels (")


def test_scheduling_steps_do_not_skip() -> None:
    """Repeated workloads are scheduled once; the steps counted all groups and skipped
    ([12/20] -> [14/20])."""
    from onnx import TensorProto, helper

    from tensorc.compiler.pipeline import lower_graph
    from tensorc.frontend.model import import_model
    from tensorc.target import Target
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"w{k}")
             for k in range(3)]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("MatMul", ["b", "w1"], ["c"]), helper.make_node("Relu", ["c"], ["d"]),
             helper.make_node("MatMul", ["d", "w2"], ["e"]), helper.make_node("Tanh", ["e"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], inits)
    _, imported = import_model(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)]), None)
    lines: list[str] = []
    lowered = lower_graph(imported, Target.from_string("llvm"), lines.append)
    steps = [line.split("]")[0] + "]" for line in lines if line.startswith("[")]
    assert len(lowered.kernels) == 3 and len(steps) == 2      # two matmul+relu alike
    assert steps == ["[1/2]", "[2/2]"]

"""Real exported models: negative declared dims (Paddle's -1) are symbolic; input_values
(--input-value) fixes an input that decides a shape or an If branch."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import branch_on_input_model, make_model, tensor_info
from onnx import TensorProto, helper

import tensorc
from tensorc.cli.main import main
from tensorc.errors import ConstantRequiredError, ShapeError


def paddle_model() -> onnx.ModelProto:
    """y = relu(x) for x: float32[-1, 3] (how Paddle declares a free batch dim)."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", (1, 3))], ["y"])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    return model


def vad_model() -> onnx.ModelProto:
    """An audio front end whose sample-rate input picks the frame size: sr == 16000 frames x
    into [-1, 160], else into [-1, 80]; the branches' shapes differ."""
    def branch(name: str, shape: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Reshape", ["x", shape], [f"y_{name}"])], name, [],
            [helper.make_tensor_value_info(f"y_{name}", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Equal", ["sr", "k16000"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["frames"], name="pick_frames",
                              then_branch=branch("then", "s160"),
                              else_branch=branch("else", "s80"))]
    return make_model(
        nodes, [tensor_info("x", "float32", (1, 480)), tensor_info("sr", "int64", ())],
        ["frames"], initializers={"k16000": np.array(16000, np.int64),
                                  "s160": np.array([-1, 160], np.int64),
                                  "s80": np.array([-1, 80], np.int64)})


def reshape_model() -> onnx.ModelProto:
    """y = reshape(x, shape) with the shape a graph input."""
    return make_model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="to_rows")],
                      [tensor_info("x", "float32", (2, 6)), tensor_info("shape", "int64", (2,))],
                      ["y"])


X = np.arange(480, dtype=np.float32).reshape(1, 480) - 240


# --- negative dims ------------------------------------------------------------------------------

def test_negative_dim_is_bound_by_input_shapes() -> None:
    mod = tensorc.compile(paddle_model(), input_shapes={"x": (4, 3)})
    assert mod.inputs == [("x", (4, 3), "float32")]
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(mod.run({"x": x})["y"], np.maximum(x, 0))


def test_unbound_negative_dim_says_how_to_bind_it() -> None:
    with pytest.raises(ShapeError) as info:
        tensorc.compile(paddle_model(), target="cuda")       # CUDA binds every dim
    message = str(info.value)
    assert "'x_dim0'" in message and "--input-shape x=1x3" in message


def test_negative_dim_elsewhere_in_the_model_is_left_alone() -> None:
    model = paddle_model()
    mod = tensorc.compile(model, input_shapes={"x": (2, 3)})
    assert mod.inputs[0][1] == (2, 3)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == -1  # not edited


# --- input_values ----------------------------------------------------------------------------

def test_if_on_an_input_with_branches_of_other_sizes_compiles() -> None:
    """Both branches run and the run-time condition picks one: the output's dims are
    data-dependent, cut to the branch taken (ops/branch_select.py)."""
    mod = tensorc.compile(vad_model())
    assert mod.input_names == ["x", "sr"]
    for rate, frame in [(16000, 160), (8000, 80)]:
        frames = mod.run({"x": X, "sr": np.array(rate, np.int64)})["frames"]
        np.testing.assert_array_equal(frames, X.reshape(-1, frame))


def test_if_on_an_input_with_branches_of_other_ranks_needs_its_value() -> None:
    with pytest.raises(ConstantRequiredError) as info:
        tensorc.compile(branch_on_input_model())
    message = str(info.value)
    assert "float32[2,3]" in message and "float32[6]" in message
    assert "input 'sr'" in message and "input_values={'sr': VALUE}" in message
    assert "--input-value sr=VALUE" in message
    assert info.value.inputs == ("sr",)


@pytest.mark.parametrize("rate,frame", [(16000, 160), (8000, 80), (np.int64(16000), 160)])
def test_bound_input_folds_the_if(rate, frame) -> None:
    mod = tensorc.compile(vad_model(), input_values={"sr": rate})
    assert mod.input_names == ["x"]                  # sr left the signature
    assert mod.outputs == [("frames", (480 // frame, frame), "float32")]
    np.testing.assert_array_equal(mod.run({"x": X})["frames"], X.reshape(-1, frame))


def test_bound_shape_input() -> None:
    with pytest.raises(ConstantRequiredError, match="input_values=\\{'shape': VALUE\\}"):
        tensorc.compile(reshape_model())
    mod = tensorc.compile(reshape_model(), input_values={"shape": [3, 4]})
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(mod.run({"x": x})["y"], x.reshape(3, 4))


@pytest.mark.parametrize("values,problem", [
    ({"rate": 16000}, "input_values names 'rate', but the model's inputs are 'x', 'sr'"),
    ({"sr": 16000.5}, "16000.5 is not a whole number, and the input is int64"),
    ({"sr": [16000, 8000]}, "the input is int64[], the value given has shape [2]"),
    ({"sr": "fast"}, "cannot make 'fast' a int64 tensor"),
    ({"k16000": 1}, "input_values names 'k16000'"),     # an initializer is no input
])
def test_bad_input_values(values, problem) -> None:
    with pytest.raises(ShapeError) as info:
        tensorc.compile(vad_model(), input_values=values)
    assert problem in str(info.value)


def test_shape_input_value_of_the_wrong_length() -> None:
    with pytest.raises(ShapeError, match=r"int64\[2\], the value given has shape \[3\]"):
        tensorc.compile(reshape_model(), input_values={"shape": [1, 3, 4]})


def test_inspect_takes_input_values() -> None:
    text = tensorc.inspect(vad_model(), input_values={"sr": 8000})
    assert "6, 80" in text or "6x80" in text or "[6,80]" in text


# --- the command line --------------------------------------------------------------------------

def test_cli_input_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "branch.onnx"
    onnx.save(branch_on_input_model(), source)
    out = tmp_path / "branch.tcz"
    assert main(["compile", str(source), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--input-value sr=VALUE" in err and "Traceback" not in err
    assert not out.exists()
    source = tmp_path / "vad.onnx"
    onnx.save(vad_model(), source)
    out = tmp_path / "vad.tcz"
    assert main(["compile", str(source), "-o", str(out), "--input-value", "sr=8000"]) == 0
    text = capsys.readouterr().out
    assert "output frames: float32[6,80]" in text
    assert "input  x: float32[1,480]" in text and "input  sr" not in text
    assert tensorc.load(out).input_names == ["x"]
    # the artifact's source model has sr bound too, so onnxruntime runs it on the same feeds
    assert main(["run", str(out), "--check-onnxruntime"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["sr", "sr=", "=1", "sr=fast", "sr=[]", "sr={}"])
def test_cli_malformed_input_value(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["compile", "model.onnx", "--input-value", flag])
    assert info.value.code == 2
    assert "--input-value" in capsys.readouterr().err


def test_cli_input_value_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "vad.onnx"
    onnx.save(vad_model(), source)
    assert main(["inspect", str(source), "--input-value", "sr=1",
                 "--input-value", "sr=2"]) == 2
    assert "gives input 'sr' twice" in capsys.readouterr().err

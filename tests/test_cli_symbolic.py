"""The command line with a model over symbolic dims: ``compile`` keeps them (``--dim-range``
narrows them), ``info`` lists them, and ``run``, ``bench`` and ``profile`` of the artifact
take the shape to run with ``--input-shape`` (and say so when it is missing)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import tensorc
from tensorc.cli.main import main


@pytest.fixture(scope="module")
def symbolic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, np.ndarray]:
    """y = relu(x @ w) over x[batch, 6], compiled with batch in [1, 16]."""
    folder = tmp_path_factory.mktemp("symbolic")
    w = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["m"]),
                        helper.make_node("Relu", ["m"], ["y"])],
                       [tensor_info("x", "float32", ("batch", 6))], ["y"],
                       initializers={"w": w}, name="symbolic_mlp")
    source = folder / "m.onnx"
    source.write_bytes(model.SerializeToString())
    artifact = folder / "m.tcz"
    assert main(["compile", str(source), "-o", str(artifact), "--dim-range",
                 "batch=1:16"]) == 0
    return source, artifact, w


def test_compile_keeps_the_dim_and_info_lists_it(symbolic, capsys) -> None:
    _, artifact, w = symbolic
    assert main(["info", str(artifact), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"][0]["shape"] == ["batch", 6]
    assert report["dims"]["symbols"][0]["range"] == [1, 16]
    module = tensorc.load(artifact)
    x = np.linspace(-1, 1, 42, dtype=np.float32).reshape(7, 6)
    np.testing.assert_allclose(module.run({"x": x})["y"], np.maximum(x @ w, 0), rtol=1e-5,
                               atol=1e-6)


def test_run_needs_the_shape_of_a_symbolic_input(symbolic, capsys) -> None:
    _, artifact, _ = symbolic
    assert main(["run", str(artifact)]) == 2
    assert "--input-shape x=Nx6" in capsys.readouterr().err
    assert main(["run", str(artifact), "--input-shape", "x=3x6",
                 "--check-onnxruntime"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["run", str(artifact), "--input-shape", "x=3x7"]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert main(["run", str(artifact), "--input-shape", "x=17x6"]) == 2     # the range
    assert "batch" in capsys.readouterr().err


def test_bench_and_profile_take_the_shape(symbolic, capsys) -> None:
    _, artifact, _ = symbolic
    assert main(["bench", str(artifact), "--input-shape", "x=5x6", "--seconds", "0.1"]) == 0
    assert main(["profile", str(artifact), "--input-shape", "x=5x6", "--seconds", "0.1",
                 "--json"]) == 0
    capsys.readouterr()


def test_run_an_integer_input_over_symbolic_dims(tmp_path: Path, capsys) -> None:
    """The random-feed rules read an integer input's declared shape: one over symbolic dims
    is no one-element control input (its element count was taken as an int, and run
    failed on every token-id model compiled without shapes)."""
    table = np.random.default_rng(1).standard_normal((10, 4)).astype(np.float32)
    model = make_model([helper.make_node("Gather", ["table", "ids"], ["y"])],
                       [tensor_info("ids", "int64", ("batch", "seq"))], ["y"],
                       initializers={"table": table}, name="lookup")
    source = tmp_path / "lookup.onnx"
    source.write_bytes(model.SerializeToString())
    artifact = tmp_path / "lookup.tcz"
    assert main(["compile", str(source), "-o", str(artifact)]) == 0
    assert main(["run", str(artifact), "--input-shape", "ids=2x3", "--check-onnxruntime"]) == 0
    assert "PASS" in capsys.readouterr().out


def _pooled_model(path: Path, metadata: dict | None = None) -> Path:
    """x[N,3,H,W] -> MaxPool 3x3 -> Relu -> y, beside an unrelated input z[M] -> Neg -> w."""
    import onnx
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["p"], ["y"]), helper.make_node("Neg", ["z"], ["w"])]
    model = make_model(nodes, [tensor_info("x", "float32", ("N", 3, "H", "W")),
                               tensor_info("z", "float32", ("M",))],
                       [tensor_info("y", "float32", None), tensor_info("w", "float32", None)])
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, path)
    return path


def test_a_shape_error_downstream_of_a_bound_input_names_it(tmp_path: Path, capsys) -> None:
    """Binding x to 1x3x1x1 (the placeholder a hint gave) ended in a pooling error that did
    not point back to the input (issue 38)."""
    model = _pooled_model(tmp_path / "pool.onnx")
    assert main(["compile", str(model), "-o", str(tmp_path / "p.tcz"), "--input-shape",
                 "x=1x3x1x1", "--input-shape", "z=4"]) == 2
    err = capsys.readouterr().err
    assert "kernel (3, 3) does not fit in input" in err
    assert "it follows from binding input 'x' to [1,3,1,1] (--input-shape x=1x3x1x1; " \
           "declared [N,3,H,W])" in err
    assert "'z'" not in err.split("follows from")[1]       # not upstream: not named
    assert "try the sizes the model is made for" in err
    with pytest.raises(tensorc.TensorcError) as error:
        tensorc.compile(str(model), input_shapes={"x": (1, 3, 1, 1), "z": (4,)})
    assert "input_shapes={'x': (1, 3, 1, 1)}" in str(error.value)


def test_the_hint_after_a_shape_error_uses_the_metadata(tmp_path: Path, capsys) -> None:
    model = _pooled_model(tmp_path / "pool.onnx", {"imgsz": "[320, 320]"})
    assert main(["compile", str(model), "-o", str(tmp_path / "p.tcz"), "--input-shape",
                 "x=1x3x1x1", "--input-shape", "z=4"]) == 2
    assert "e.g. --input-shape x=1x3x320x320 (the image size of 'x' is from the model's " \
           "metadata (imgsz: [320, 320]))" in capsys.readouterr().err


def test_check_names_the_bound_input_behind_a_shape_error(tmp_path: Path, capsys) -> None:
    model = _pooled_model(tmp_path / "pool.onnx")
    assert main(["check", str(model), "--input-shape", "x=1x3x1x1",
                 "--input-shape", "z=4"]) == 1
    out = capsys.readouterr().out
    assert "does not fit in input" in out
    assert "it follows from binding input 'x' to [1,3,1,1] (--input-shape x=1x3x1x1" in out

"""The public surface: tensorc.inspect's stages, tensorc.compile's errors, input_shapes."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import models
import tensorc
from tensorc import ModelLoadError, ShapeError, TensorcError, UnsupportedOpError
from tensorc.target import Target


def conv_gemm_model() -> onnx.ModelProto:
    """conv(8 -> 16 filters, 3x3) + bias + relu on 32x32 (big enough to run in parallel),
    then a global average pool and a Gemm classifier."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv0"),
             helper.make_node("Relu", ["c"], ["r"], name="relu0"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool0"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat0"),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1, name="fc0")]
    inits = {"w": rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.1,
             "b": rng.standard_normal(16).astype(np.float32),
             "fc_w": rng.standard_normal((10, 16)).astype(np.float32),
             "fc_b": rng.standard_normal(10).astype(np.float32)}
    return make_model(nodes, [tensor_info("x", "float32", (1, 8, 32, 32))], ["y"],
                      initializers=inits, name="convnet")


@pytest.fixture(scope="module")
def stages() -> dict[str, str]:
    model = conv_gemm_model()
    return {stage: tensorc.inspect(model, stage=stage) for stage in tensorc.STAGES}


# ---------------------------------------------------------------------------------------------
# inspect

def test_inspect_graph(stages) -> None:
    text = stages["graph"]
    assert text.startswith("graph convnet(%x: float32[1,8,32,32]) -> (%y: float32[1,10])")
    for op in ("conv(", "relu(", "reduce_mean(", "reshape(", "matmul(", "add("):
        assert op in text, op
    assert "float32[1,16,32,32] = conv(%x" in text
    # core ops, not ONNX's
    assert "Conv" not in text and "Gemm" not in text and "Flatten" not in text


def test_inspect_fused(stages) -> None:
    text = stages["fused"]
    heads = re.findall(r"^(kernel|view) (\w+)\(", text, re.M)
    assert ("kernel", "fused_conv_add_relu") in heads
    assert ("kernel", "fused_reduce_mean") in heads
    assert ("kernel", "fused_matmul_add") in heads
    assert ("view", "fused_reshape") in heads
    assert [kind for kind, _ in heads].count("kernel") == 3


def test_inspect_loops(stages) -> None:
    text = stages["loops"]
    assert "for (" in text
    assert re.search(r"for \([\w.]+: parallel, 0, \d+\)", text)
    assert re.search(r"for \([\w.]+: vectorized, 0, \d+\)", text)
    assert "func k0_fused_conv_add_relu(" in text
    assert "func tensorc_entry(" in text


def test_inspect_llvm(stages) -> None:
    text = stages["llvm"]
    assert "define " in text and "@tensorc_entry(" in text
    lanes = Target.host().vector_lanes("float32")
    assert lanes >= 4
    assert f"<{lanes} x float>" in text
    assert "tensorc_parallel" in text  # the parallel loop runs on the runtime's pool


def test_inspect_binds_input_shapes() -> None:
    model = models.load("resnet")
    text = tensorc.inspect(model, stage="graph", input_shapes={"input": (2, 3, 224, 224)})
    assert "%input: float32[2,3,224,224]" in text
    assert "%logits: float32[2,1000]" in text


def test_inspect_unknown_stage() -> None:
    with pytest.raises(TensorcError, match="unknown stage 'asm': choose one of graph, fused"):
        tensorc.inspect(conv_gemm_model(), stage="asm")


def test_inspect_accepts_a_path(tmp_path) -> None:
    path = tmp_path / "convnet.onnx"
    onnx.save(conv_gemm_model(), path)
    assert tensorc.inspect(str(path), stage="fused") == \
        tensorc.inspect(conv_gemm_model(), stage="fused")


# ---------------------------------------------------------------------------------------------
# unsupported ops

def unsupported_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="fine"),
             helper.make_node("Det", ["a"], ["v"], name="det_0"),
             helper.make_node("RandomUniformLike", ["v"], ["e1"], name="random_1"),
             helper.make_node("RandomUniformLike", ["e1"], ["e2"], name="random_2"),
             helper.make_node("Relu", ["e2"], ["y"], name="relu_odd", odd_attribute=3)]
    return make_model(nodes, [tensor_info("x", "float32", (2, 8))], ["y"], opset=17,
                      name="odd_ops")


@pytest.mark.parametrize("entry", ["compile", "inspect"])
def test_unsupported_ops_are_listed_together(entry) -> None:
    model = unsupported_model()
    with pytest.raises(UnsupportedOpError) as info:
        if entry == "compile":
            tensorc.compile(model)
        else:
            tensorc.inspect(model, stage="graph")
    message = str(info.value)
    assert "'odd_ops'" in message                        # the model
    assert "3 unsupported op(s)" in message
    assert "Det (opset 17): not supported; node det_0" in message
    assert "RandomUniformLike (opset 17): not supported; nodes random_1, random_2" in message
    assert "Relu (opset 17): attribute 'odd_attribute' not supported; node relu_odd" in message
    assert "fine" not in message


def test_unsupported_custom_domain() -> None:
    nodes = [helper.make_node("Gelu", ["x"], ["y"], name="gelu0", domain="com.microsoft")]
    model = make_model(nodes, [tensor_info("x", "float32", (4,))], ["y"],
                       extra_opsets={"com.microsoft": 1})
    with pytest.raises(UnsupportedOpError, match=r"com\.microsoft::Gelu \(domain 'com\.microsoft'"
                                                 r" opset 1\).*node gelu0"):
        tensorc.compile(model)


def test_unsupported_error_is_a_tensorc_error() -> None:
    with pytest.raises(TensorcError):
        tensorc.compile(unsupported_model())


# ---------------------------------------------------------------------------------------------
# corrupt and missing files

@pytest.fixture(scope="module")
def lenet_bytes() -> bytes:
    return models.path("lenet5").read_bytes()


@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.5, 0.9, 0.999])
def test_truncated_onnx(tmp_path, lenet_bytes, fraction) -> None:
    path = tmp_path / "lenet_cut.onnx"
    path.write_bytes(lenet_bytes[:int(len(lenet_bytes) * fraction)])
    with pytest.raises(ModelLoadError) as info:
        tensorc.compile(str(path))
    message = str(info.value)
    assert str(path) in message
    assert "truncated" in message or "corrupt" in message


@pytest.mark.parametrize("content", [b"", b"\x00" * 64, b"not an onnx model at all\n",
                                     bytes(range(256)) * 4])
def test_garbage_onnx(tmp_path, content) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelLoadError, match="garbage.onnx"):
        tensorc.compile(path)
    with pytest.raises(ModelLoadError):
        tensorc.inspect(path, stage="graph")


def test_missing_onnx(tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="no such file"):
        tensorc.compile(tmp_path / "missing.onnx")


def test_whole_onnx_file_compiles(tmp_path, lenet_bytes) -> None:
    # the control for the truncation tests: the same file, complete, compiles and runs
    path = tmp_path / "lenet.onnx"
    path.write_bytes(lenet_bytes)
    mod = tensorc.compile(path)
    out = mod.run({"x": np.ones((1, 1, 28, 28), np.float32)})
    assert out["logits"].shape == (1, 10) and np.isfinite(out["logits"]).all()


# ---------------------------------------------------------------------------------------------
# symbolic dims and input_shapes

def symbolic_model() -> onnx.ModelProto:
    """y = x @ w + z, with x[N, 7] and z[N, 5] sharing the symbol N."""
    w = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "z"], ["y"])]
    return make_model(nodes, [tensor_info("x", "float32", ("N", 7)),
                              tensor_info("z", "float32", ("N", 5))], ["y"],
                      initializers={"w": w}, name="symbolic")


def test_unbound_symbolic_dim_stays_symbolic_on_cpus() -> None:
    module = tensorc.compile(symbolic_model())
    assert [str(d) for d in module.inputs[0][1]] == ["N", "7"]
    w = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)
    for n in (1, 4, 9):
        x = np.random.default_rng(n).standard_normal((n, 7)).astype(np.float32)
        z = np.random.default_rng(n + 1).standard_normal((n, 5)).astype(np.float32)
        np.testing.assert_allclose(module.run({"x": x, "z": z})["y"], x @ w + z, rtol=1e-5,
                                   atol=1e-5)


def test_unbound_symbolic_dim_is_listed_for_cuda() -> None:
    # the CUDA back end compiles one shape: it lists the dims to bind
    with pytest.raises(ShapeError) as info:
        tensorc.compile(symbolic_model(), target="cuda")
    message = str(info.value)
    assert "unknown dimensions" in message
    assert "x: float32[N,7]: dim 0 ('N')" in message
    assert "z: float32[N,5]: dim 0 ('N')" in message
    assert "input_shapes={'x': (1, 7)}" in message           # how to fix it


def test_unbound_resnet_batch() -> None:
    # inspect keeps the batch symbolic on CPU targets, as compile does; CUDA binds it
    assert "float32[N,3,224,224]" in tensorc.inspect(models.load("resnet"), stage="graph")
    with pytest.raises(ShapeError, match=r"input: float32\[N,3,224,224\]: dim 0 \('N'\)"):
        tensorc.inspect(models.load("resnet"), stage="cuda")


def test_unnamed_unknown_dim_is_listed() -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", (None, 3))], ["y"])
    with pytest.raises(ShapeError, match=r"x: float32\[\?,3\]: dim 0 \(unnamed\)"):
        tensorc.compile(model, target="cuda")
    module = tensorc.compile(model)         # on CPUs: a generated name, symbolic
    assert str(module.inputs[0][1][0]) == "x_dim0"
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(module.run({"x": x})["y"], np.maximum(x, 0))


@pytest.mark.parametrize("batch", [1, 3, 17])
def test_input_shapes_binding(batch) -> None:
    model = symbolic_model()
    # binding x binds N, which z shares
    mod = tensorc.compile(model, input_shapes={"x": (batch, 7)})
    assert mod.inputs == [("x", (batch, 7), "float32"), ("z", (batch, 5), "float32")]
    assert mod.outputs == [("y", (batch, 5), "float32")]
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 7)).astype(np.float32)
    z = rng.standard_normal((batch, 5)).astype(np.float32)
    w = onnx.numpy_helper.to_array(model.graph.initializer[0])
    got = mod.run({"x": x, "z": z})["y"]
    np.testing.assert_allclose(got, x.astype(np.float64) @ w + z, rtol=1e-4, atol=1e-5)


def test_input_shapes_must_match_fixed_dims() -> None:
    with pytest.raises(ShapeError, match=r"input 'x' expects shape float32\[N,7\], but "
                                         r"input_shapes gives \(2, 8\)"):
        tensorc.compile(symbolic_model(), input_shapes={"x": (2, 8)})
    with pytest.raises(ShapeError, match="expects shape"):
        tensorc.compile(symbolic_model(), input_shapes={"x": (2, 7, 1)})


def test_input_shapes_unknown_name() -> None:
    with pytest.raises(ShapeError, match=r"input_shapes names 'X', but the model's inputs are "
                                         r"'x', 'z'"):
        tensorc.compile(symbolic_model(), input_shapes={"X": (2, 7)})


def test_input_shapes_not_ints() -> None:
    with pytest.raises(ShapeError, match="must be a sequence of ints"):
        tensorc.compile(symbolic_model(), input_shapes={"x": ("two", 7)})


def test_unknown_target() -> None:
    with pytest.raises(TensorcError, match="unknown target 'tpu'"):
        tensorc.compile(symbolic_model(), target="tpu", input_shapes={"x": (1, 7)})

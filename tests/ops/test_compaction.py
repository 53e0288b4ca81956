"""NonZero and Compress, whose output sizes are data-dependent dims: compiled ONNX models
against onnxruntime, at static and symbolic input shapes, with empty results, and with the
sizes flowing into the ops downstream."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorc
from tensorc.errors import TensorcError
from tests.helpers import assert_close, make_model, ort_run, tensor_info


def _nonzero_model(shape, dtype="float32"):
    # the coordinates, and a computation over them downstream (sized by the same dim)
    nodes = [helper.make_node("NonZero", ["x"], ["y"]),
             helper.make_node("Cast", ["y"], ["yc"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["yc"], ["s"], keepdims=0)]
    return make_model(nodes, [tensor_info("x", dtype, shape)],
                      [tensor_info("y", "int64", None), tensor_info("s", "float32", None)],
                      opset=13)


def _check(model, feeds):
    module = tensorc.compile(model, cache=False)
    assert_close(module.run(feeds), ort_run(model, feeds))
    return module


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_nonzero_static_input(dtype):
    rng = np.random.default_rng(0)
    x = (rng.random((3, 4, 5)) > 0.6).astype(dtype)
    if dtype == "float32":
        x[0, 0, 0] = np.nan           # NaN counts as nonzero
    model = _nonzero_model((3, 4, 5), dtype)
    module = _check(model, {"x": x})
    assert any(not isinstance(d, int) for d in module.outputs[0][1])


def test_nonzero_symbolic_input_several_shapes_and_empty():
    model = _nonzero_model(("n", 6))
    module = tensorc.compile(model, dim_ranges={"n": (0, None)}, cache=False)
    rng = np.random.default_rng(1)
    for n in (1, 7, 2, 0, 13):
        for density in (0.0, 0.3, 1.0):
            x = (rng.random((n, 6)) < density).astype(np.float32) * rng.standard_normal(
                (n, 6)).astype(np.float32)
            assert_close(module.run({"x": x}), ort_run(model, {"x": x}))


def test_nonzero_module_saves_and_loads(tmp_path):
    model = _nonzero_model((4, 4))
    module = tensorc.compile(model, cache=False)
    module.save(tmp_path / "m.tcz")
    loaded = tensorc.load(tmp_path / "m.tcz")
    x = np.eye(4, dtype=np.float32)
    assert_close(loaded.run({"x": x}), ort_run(model, {"x": x}))


def test_nonzero_of_a_constant_folds():
    nodes = [helper.make_node("NonZero", ["c"], ["y"]),
             helper.make_node("Add", ["y", "z"], ["out"])]
    model = make_model(nodes, [tensor_info("z", "int64", (2, 1))], ["out"], opset=13,
                       initializers={"c": np.array([[0, 1, 0], [2, 0, 3]], np.float32)})
    module = _check(model, {"z": np.array([[10], [20]], np.int64)})
    assert module.outputs[0][1] == (2, 3)


def _compress_model(shape, cond_len, axis):
    kwargs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("Compress", ["x", "c"], ["y"], **kwargs),
             helper.make_node("Neg", ["y"], ["z"])]
    return make_model(nodes, [tensor_info("x", "float32", shape),
                              tensor_info("c", "bool", (cond_len,))],
                      [tensor_info("y", "float32", None), tensor_info("z", "float32", None)],
                      opset=13)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_matches_onnxruntime(axis):
    shape = (3, 4, 2)
    length = 24 if axis is None else shape[axis]
    model = _compress_model(shape, length, axis)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    for keep in (rng.random(length) < 0.5, np.zeros(length, bool), np.ones(length, bool)):
        feeds = {"x": x, "c": keep}
        assert_close(module.run(feeds), ort_run(model, feeds))


def test_compress_shorter_condition_and_symbolic_axis():
    model = _compress_model(("n", 3), "m", 0)
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(3)
    for n, m in ((5, 2), (4, 4), (1, 1), (6, 3)):
        feeds = {"x": rng.standard_normal((n, 3)).astype(np.float32),
                 "c": rng.random(m) < 0.6}
        got = module.run(feeds)
        want = np.compress(feeds["c"], feeds["x"], axis=0)
        np.testing.assert_array_equal(got["y"], want)
        np.testing.assert_array_equal(got["z"], -want)


def test_compress_with_a_constant_condition_is_a_gather():
    nodes = [helper.make_node("Compress", ["x", "c"], ["y"], axis=1)]
    model = make_model(nodes, [tensor_info("x", "float32", (2, 4))], ["y"], opset=13,
                       initializers={"c": np.array([True, False, True, True])})
    module = _check(model, {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
    assert module.outputs[0][1] == (2, 3)


def test_compress_refuses_a_condition_of_two_axes():
    nodes = [helper.make_node("Compress", ["x", "c"], ["y"], axis=0)]
    model = make_model(nodes, [tensor_info("x", "float32", (2, 4)),
                               tensor_info("c", "bool", (2, 2))], ["y"], opset=13)
    with pytest.raises(TensorcError, match="condition must be 1-D"):
        tensorc.compile(model, cache=False)


def test_cuda_refuses_data_dependent_sizes():
    nodes = [helper.make_node("NonZero", ["x"], ["y"], name="where")]
    model = make_model(nodes, [tensor_info("x", "float32", (3,))], ["y"], opset=13)
    with pytest.raises(TensorcError, match="CUDA back end does not run ops whose output size "
                                           "depends on the data yet \\(nodes 'where'\\)"):
        tensorc.compile(model, target="cuda")


def test_nonzero_whose_count_alone_is_read():
    # only the count is used (Shape -> Gather, a Range over it, a Cast of the shape): the
    # NonZero kernel must still run, before the kernels that read its dim
    nodes = [helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("Shape", ["i"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
             helper.make_node("Cast", ["s"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["f", "b"], ["y"]),
             helper.make_node("Range", ["zero", "n", "one"], ["r"])]
    model = make_model(nodes, [tensor_info("x", "float32", (4, 4)),
                               tensor_info("b", "float32", (2,))], ["y", "r"], opset=13,
                       initializers={"zero": np.array(0, np.int64),
                                     "one": np.array(1, np.int64)})
    module = tensorc.compile(model, cache=False)
    rng = np.random.default_rng(4)
    for density in (0.0, 0.5, 1.0):
        feeds = {"x": (rng.random((4, 4)) < density).astype(np.float32),
                 "b": np.ones(2, np.float32)}
        assert_close(module.run(feeds), ort_run(model, feeds))


def test_profile_of_static_inputs_with_a_data_dependent_size():
    module = tensorc.compile(_nonzero_model((3, 4, 5)), cache=False)
    profile = module.profile(seconds=0.05, min_runs=2)
    assert any("nonzero" in k.info.ops for k in profile.kernels)


def test_the_tuner_leaves_out_kernels_of_data_dependent_sizes():
    from tensorc.autotune.task import extract_tasks
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["y"]),
             helper.make_node("Cast", ["y"], ["f"], to=TensorProto.FLOAT)]
    model = make_model(nodes, [tensor_info("x", "float32", (4, 8))],
                       [tensor_info("f", "float32", None)], opset=13)
    tasks = extract_tasks(model, measure=False)
    assert [t.ops for t in tasks] == [("relu",)]

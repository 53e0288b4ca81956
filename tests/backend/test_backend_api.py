"""tensorc.backend: the ONNX backend interface (prepare/run, run_model, run_node, devices)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model, seq_info, tensor_info
from onnx import TensorProto, helper

from tensorc import InputError, TensorcError, UnsupportedOpError
from tensorc.backend import TensorcBackend


def _add_mul_model(shape=(2, 3)):
    """s = x + y, p = x * y: two inputs, two outputs."""
    nodes = [helper.make_node("Add", ["x", "y"], ["s"]),
             helper.make_node("Mul", ["x", "y"], ["p"])]
    return make_model(nodes, [tensor_info("x", "float32", list(shape)),
                              tensor_info("y", "float32", list(shape))], ["s", "p"])


def test_run_returns_outputs_in_model_order_from_a_list_or_a_dict():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 2.0, np.float32)
    rep = TensorcBackend.prepare(_add_mul_model(), "CPU", num_threads=1)
    assert rep.compiled_count == 1   # static shapes: compiled in prepare
    s, p = rep.run([x, y])
    np.testing.assert_array_equal(s, x + 2)
    np.testing.assert_array_equal(p, x * 2)
    by_name = rep.run({"y": y, "x": x})
    np.testing.assert_array_equal(by_name["p"], x * 2)   # outputs also indexable by name
    np.testing.assert_array_equal(by_name[0], x + 2)
    assert rep.compiled_count == 1


def test_run_model_takes_numpy_scalars_for_0d_inputs():
    model = make_model([helper.make_node("Mul", ["a", "b"], ["c"])],
                       [tensor_info("a", "float32", []), tensor_info("b", "float32", [])], ["c"])
    (c,) = TensorcBackend.run_model(model, [np.float32(1.5), np.array(4.0, np.float32)])
    assert c.shape == () and c.dtype == np.float32 and float(c) == 6.0


def test_symbolic_dims_compile_on_first_run_once_per_shape():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [tensor_info("x", "float32", ["N", 3])], ["y"])
    rep = TensorcBackend.prepare(model)
    assert rep.compiled_count == 0
    a = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    b = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(rep.run([a])[0], np.maximum(a, 0))
    np.testing.assert_array_equal(rep.run([b])[0], np.maximum(b, 0))
    np.testing.assert_array_equal(rep.run(a)[0], np.maximum(a, 0))   # one array, one input
    assert rep.compiled_count == 2


def test_shape_input_given_at_run_time_is_compiled_for_its_value():
    """Reshape's shape as a model input: compiled for each value given, correct each time."""
    model = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                       [tensor_info("x", "float32", [2, 6]), tensor_info("shape", "int64", [2])],
                       ["y"])
    rep = TensorcBackend.prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (y,) = rep.run([x, np.array([3, 4], np.int64)])
    np.testing.assert_array_equal(y, x.reshape(3, 4))
    (y,) = rep.run([x, np.array([4, 3], np.int64)])
    np.testing.assert_array_equal(y, x.reshape(4, 3))
    assert rep.frozen_inputs == ["shape"] and rep.compiled_count == 2


def test_run_node_wraps_one_node():
    node = helper.make_node("Sub", ["a", "b"], ["c"])
    a = np.array([5, 7, 9], np.int64)
    b = np.array([1, 2, 3], np.int64)
    (c,) = TensorcBackend.run_node(node, [a, b], opset_version=13)
    np.testing.assert_array_equal(c, [4, 5, 6])
    assert c.dtype == np.int64


def test_unsupported_op_fails_in_prepare():
    model = make_model([helper.make_node("Det", ["x"], ["y"])],
                       [tensor_info("x", "float32", [4, 4])], ["y"])
    with pytest.raises(UnsupportedOpError, match="Det"):
        TensorcBackend.prepare(model)


def test_cpu_only():
    assert TensorcBackend.supports_device("CPU")
    assert not TensorcBackend.supports_device("CUDA")
    assert not TensorcBackend.supports_device("TPU")
    with pytest.raises(TensorcError, match="device 'CUDA'"):
        TensorcBackend.prepare(_add_mul_model(), "CUDA")


def test_wrong_number_of_inputs_names_the_inputs():
    rep = TensorcBackend.prepare(_add_mul_model())
    with pytest.raises(InputError, match="got 1 input.*takes 2: x, y"):
        rep.run([np.zeros((2, 3), np.float32)])


def _sequence_model():
    """ys = [x * 2 for x in xs]; n = len(xs); opt passes through."""
    body = helper.make_graph([helper.make_node("Add", ["e", "e"], ["d"])], "body",
                             [tensor_info("e", "float32", None)],
                             [tensor_info("d", "float32", None)])
    optional = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    nodes = [helper.make_node("SequenceMap", ["xs"], ["ys"], body=body),
             helper.make_node("SequenceLength", ["xs"], ["n"]),
             helper.make_node("Identity", ["opt"], ["opt_out"])]
    return make_model(nodes, [seq_info("xs", "float32", None),
                              helper.make_value_info("opt", optional)],
                      [seq_info("ys", "float32", None), tensor_info("n", "int64", []),
                       helper.make_value_info("opt_out", optional)])


def test_sequences_and_optionals_as_lists_and_none():
    """A sequence input is a list of arrays, compiled for its length and shapes; a sequence
    output comes back as a list; an optional input may be None, and then its output is."""
    rep = TensorcBackend.prepare(_sequence_model(), num_threads=1)
    xs = [np.arange(3, dtype=np.float32), np.ones((2, 2), np.float32)]
    ys, n, opt = rep.run([xs, np.array([1, 2], np.float32)])
    assert isinstance(ys, list) and len(ys) == 2
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(y, x * 2)
    assert n.item() == 2
    np.testing.assert_array_equal(opt, [1, 2])
    ys, n, opt = rep.run({"xs": xs[:1], "opt": None})
    assert len(ys) == 1 and n.item() == 1 and opt is None
    assert rep.compiled_count == 2      # one module per length and presence
    rep.run({"xs": [xs[1] + 1], "opt": None})
    assert rep.compiled_count == 3      # another element shape


def test_a_sequence_input_takes_a_list():
    rep = TensorcBackend.prepare(_sequence_model(), num_threads=1)
    with pytest.raises(InputError, match="input 'xs' is a sequence: expected a list of arrays, "
                                         "got ndarray"):
        rep.run([np.zeros(3, np.float32), None])


def test_an_optional_input_that_decides_a_shape_is_compiled_in():
    """Reshape to the shape an optional input holds: compiled for the value given."""
    optional = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.INT64, [2]))
    nodes = [helper.make_node("OptionalGetElement", ["shape"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", [2, 3]),
                               helper.make_value_info("shape", optional)], ["y"], opset=18)
    rep = TensorcBackend.prepare(model, num_threads=1)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = rep.run([x, np.array([3, 2], np.int64)])
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    assert rep.frozen_inputs == ["shape"]

"""Ops over symbolic dims that compiled only with concrete shapes, or crashed with a bare
TypeError: each compiled once with its dims symbolic and run at several shapes (1 included)
against onnxruntime. A transposed conv (col2im over a run-time image), an LSTM over a symbolic
batch, a top-k and an argmax along a run-time axis, reflect/edge/wrap padding and Tile of
run-time lengths, and constant indices counting from the end of a run-time axis (a decoder's
last token), a softmax along a run-time axis behind a transpose."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorc
from tensorc.errors import SymbolicDimError

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _weights(name, *shape):
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32) / 3, name)


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(nodes, dims, inits):
    graph = helper.make_graph(
        [helper.make_node(op, i, o, **a) for op, i, o, a in nodes], "g",
        [helper.make_tensor_value_info("x", F, dims)],
        [helper.make_tensor_value_info("y", F, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


# (model, the input's shape at dims (a, b, c))
CASES = {
    "conv_transpose_stride2_padded": (
        _model([("ConvTranspose", ["x", "w"], ["y"], {"strides": [2, 2], "pads": [1] * 4,
                                                      "output_padding": [1, 1]})],
               ["n", 8, "h", "w"], [_weights("w", 8, 4, 3, 3)]),
        lambda a, b, c: (a, 8, b, c)),
    "conv_transpose_2x2": (
        _model([("ConvTranspose", ["x", "w"], ["y"], {"strides": [2, 2]})],
               ["n", 16, "h", "w"], [_weights("w", 16, 8, 2, 2)]),
        lambda a, b, c: (a, 16, b, c)),
    "lstm_over_a_symbolic_batch": (
        _model([("LSTM", ["x", "w", "r", "b"], ["h"], {"hidden_size": 8}),
                ("Squeeze", ["h", "one"], ["y"], {})],
               [5, "n", 4], [_weights("w", 1, 32, 4), _weights("r", 1, 32, 8),
                             _weights("b", 1, 64), _ints("one", [1])]),
        lambda a, b, c: (5, a, 4)),
    "topk_along_a_symbolic_axis": (
        _model([("TopK", ["x", "k"], ["y", "i"], {"axis": 1})], ["n", "t"], [_ints("k", [1])]),
        lambda a, b, c: (a, b)),
    "argmax_along_a_symbolic_axis": (
        _model([("ArgMax", ["x"], ["a"], {"axis": 2, "keepdims": 0}),
                ("Cast", ["a"], ["y"], {"to": F})], ["n", 3, "t"], []),
        lambda a, b, c: (a, 3, b)),
    "pad_reflect": (
        _model([("Pad", ["x", "p"], ["y"], {"mode": "reflect"})], ["n", 3, "h", "w"],
               [_ints("p", [0, 0, 1, 2, 0, 0, 1, 2])]),
        lambda a, b, c: (a, 3, b + 2, c + 2)),
    "pad_edge_then_wrap": (
        _model([("Pad", ["x", "p"], ["e"], {"mode": "edge"}),
                ("Pad", ["e", "p"], ["y"], {"mode": "wrap"})], ["n", 3, "h", "w"],
               [_ints("p", [0, 0, 1, 2, 0, 0, 1, 2])]),
        lambda a, b, c: (a, 3, b, c)),
    "tile": (_model([("Tile", ["x", "r"], ["y"], {})], ["n", "t"], [_ints("r", [2, 3])]),
             lambda a, b, c: (a, b)),
    "last_token_of_a_projection": (
        _model([("MatMul", ["x", "w"], ["m"], {}), ("Gather", ["m", "i"], ["y"], {"axis": 1})],
               ["n", "t", 4], [_weights("w", 4, 6), _ints("i", -1)]),
        lambda a, b, c: (a, b, 4)),
    "negative_and_positive_indices": (
        _model([("Gather", ["x", "i"], ["y"], {"axis": 1})], ["n", "t", 3],
               [_ints("i", [-1, 0, -2])]),
        lambda a, b, c: (a, b + 1, 3)),
    # a negative step over a run-time axis (x[:, ::-1], x[:, -2:1:-3]; start and end clamp
    # into [0, t - 1] and [-1, t - 1])
    "flip_along_a_run_time_axis": (
        _model([("Slice", ["x", "s", "e", "a", "st"], ["y"], {})], ["n", "t", 4],
               [_ints("s", [-1]), _ints("e", [-(2 ** 63)]), _ints("a", [1]),
                _ints("st", [-1])]),
        lambda a, b, c: (a, b, 4)),
    "reverse_slice_by_3": (
        _model([("Slice", ["x", "s", "e", "a", "st"], ["y"], {})], ["n", "t", 4],
               [_ints("s", [-2]), _ints("e", [1]), _ints("a", [1]), _ints("st", [-3])]),
        lambda a, b, c: (a, b + 3, 4)),
    "reverse_slice_from_past_the_end": (
        _model([("Slice", ["x", "s", "e", "a", "st"], ["y"], {})], ["n", "t", 4],
               [_ints("s", [5]), _ints("e", [-100]), _ints("a", [1]), _ints("st", [-2])]),
        lambda a, b, c: (a, b, 4)),
    # SAME padding at a stride of 2: its begin is 0 or 1 by the size's parity, a pad node
    # of run-time amounts before the window
    "conv_same_upper_stride_2": (
        _model([("Conv", ["x", "w"], ["y"], {"strides": [2, 2], "auto_pad": "SAME_UPPER"})],
               ["n", 8, "h", "w"], [_weights("w", 16, 8, 3, 3)]),
        lambda a, b, c: (a, 8, b, c)),
    "conv_same_lower_stride_2_kernel_4": (
        _model([("Conv", ["x", "w"], ["y"], {"strides": [2, 2], "auto_pad": "SAME_LOWER"})],
               ["n", 8, "h", "w"], [_weights("w", 16, 8, 4, 4)]),
        lambda a, b, c: (a, 8, b, c)),
    "max_pool_same_upper_stride_2": (
        _model([("MaxPool", ["x"], ["y"], {"kernel_shape": [3, 3], "strides": [2, 2],
                                            "auto_pad": "SAME_UPPER"})],
               ["n", 8, "h", "w"], []),
        lambda a, b, c: (a, 8, b, c)),
    "lp_pool_same_upper_stride_2": (
        _model([("LpPool", ["x"], ["y"], {"kernel_shape": [3, 3], "strides": [2, 2],
                                           "auto_pad": "SAME_UPPER"})],
               ["n", 8, "h", "w"], []),
        lambda a, b, c: (a, 8, b, c)),
    # H and W divisible by the block: a run-time constraint
    "space_to_depth": (
        _model([("SpaceToDepth", ["x"], ["y"], {"blocksize": 2})], ["n", 2, "h", "w"], []),
        lambda a, b, c: (a, 2, 2 * b, 2 * c)),
    # its rows are a constant axis of 4 inside the batch: a local block of 4 rows of
    # run-time length, malloc'd once per call
    "softmax_of_a_transposed_run_time_axis": (
        _model([("Transpose", ["x"], ["t"], {"perm": [0, 2, 1]}),
                ("Softmax", ["t"], ["y"], {"axis": -1})], ["n", "t", 4], []),
        lambda a, b, c: (a, b, 4)),
}
DIMS = [(1, 1, 1), (2, 3, 5), (3, 7, 4), (1, 13, 9)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_symbolic_op_matches_onnxruntime(case):
    model, shape = CASES[case]
    module = tensorc.compile(model, cache=False)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    for k, dims in enumerate(DIMS):
        x = np.random.default_rng(k).standard_normal(shape(*dims)).astype(np.float32)
        module.num_threads = 1 + k % 2
        (got,) = module.run({"x": x}).values()
        (expected,) = session.run(["y"], {"x": x})
        assert got.shape == expected.shape, (case, dims)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{case} at {x.shape}")


def test_a_constant_index_past_a_run_time_axis_is_refused_at_run():
    model, _ = CASES["negative_and_positive_indices"]
    module = tensorc.compile(model, cache=False)
    with pytest.raises(tensorc.TensorcError, match=r"dim 1 \(t\) is 1.*index -2"):
        module.run({"x": np.zeros((1, 1, 3), np.float32)})


def test_an_average_pool_whose_same_padding_depends_on_a_dim_names_it():
    model = _model([("AveragePool", ["x"], ["y"], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                    "auto_pad": "SAME_UPPER"})],
                   ["n", 8, "h", "w"], [])
    with pytest.raises(SymbolicDimError, match=r"(?s)AveragePool with auto_pad SAME_UPPER.*"
                                               r"symbolic dim.*input_shapes"):
        tensorc.compile(model)

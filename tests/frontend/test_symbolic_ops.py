"""Symbolic shape inference op by op: each one-node (or few-node) model imports with its
input dims symbolic, and its inferred output shape, with the dims given values (1, odd sizes,
primes), equals the shape onnxruntime produces at those input shapes."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import paddle_like_model

from tensorc.errors import ShapeError, SymbolicDimError, TensorcError
from tensorc.frontend.model import import_model
from tensorc.frontend.onnx import import_onnx
from tensorc.frontend.symbolic_inputs import specialize_dims
from tensorc.ops.interpret import run_reference
from tests.frontend.test_symbolic_models import (
    feeds_for, inferred_shapes, onnxruntime_shapes,
)

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, constants=(), opset=17, outputs=("y",)):
    """``nodes`` as (op, inputs, outputs, attrs); ``inputs`` as (name, dtype, dims)."""
    graph = helper.make_graph(
        [helper.make_node(op, i, o, **a) for op, i, o, a in nodes], "ops",
        [helper.make_tensor_value_info(n, t, d) for n, t, d in inputs],
        [helper.make_tensor_value_info(o, F, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in constants])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8)


def ints(name, values):
    return (name, np.array(values, np.int64))


def check_sweep(m, sweep):
    """Shapes, and the numbers of the graph specialized to each sweep shape (numpy
    references), against onnxruntime."""
    graph = import_onnx(m)
    session = onnxruntime.InferenceSession(m.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for dims in sweep:
        feeds = feeds_for(m, dims)
        values = graph.dims.check({n: a.shape for n, a in feeds.items()})
        got = inferred_shapes(graph, values)
        want = onnxruntime_shapes(m, feeds)
        assert {k: got[k] for k in want} == want, dims
        ours = run_reference(specialize_dims(graph, values), feeds)
        for name, expected in zip(names, session.run(names, feeds)):
            np.testing.assert_allclose(ours[name], expected, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{dims} {name}")
    return graph


SWEEP_NK = [{"n": 1, "k": 1}, {"n": 3, "k": 7}, {"n": 13, "k": 2}]
SWEEP_HW = [{"n": 1, "h": 5, "w": 7}, {"n": 2, "h": 13, "w": 31}, {"n": 3, "h": 8, "w": 9}]
SWEEP_HW_NARROW = [*SWEEP_HW, {"n": 2, "h": 1, "w": 1}, {"n": 1, "h": 3, "w": 2},
                   {"n": 2, "h": 11, "w": 4}]

CASES = {
    "add_broadcast_bias": (model([("Add", ["x", "b"], ["y"], {})],
                                 [("x", F, ["n", "k", 4])], [("b", np.ones(4, np.float32))]),
                           SWEEP_NK),
    "mul_same_dims": (model([("Mul", ["x", "z"], ["y"], {})],
                            [("x", F, ["n", "k"]), ("z", F, ["n", 1])]), SWEEP_NK),
    "matmul": (model([("MatMul", ["x", "w"], ["y"], {})], [("x", F, ["n", "k", 6])],
                     [("w", np.ones((6, 5), np.float32))]), SWEEP_NK),
    "matmul_both_symbolic": (model([("MatMul", ["x", "z"], ["y"], {})],
                                   [("x", F, ["n", "k"]), ("z", F, ["k", 3])]), SWEEP_NK),
    "gemm": (model([("Gemm", ["x", "w", "c"], ["y"], {"transB": 1})], [("x", F, ["n", 6])],
                   [("w", np.ones((5, 6), np.float32)), ("c", np.ones(5, np.float32))]),
             SWEEP_NK),
    "conv_strided_padded": (model([("Conv", ["x", "w"], ["y"], {"kernel_shape": [3, 3],
                                                              "strides": [2, 2],
                                                              "pads": [1, 1, 1, 1]})],
                                  [("x", F, ["n", 2, "h", "w"])],
                                  [("w", np.ones((4, 2, 3, 3), np.float32))]), SWEEP_HW),
    "conv_same_upper": (model([("Conv", ["x", "w"], ["y"], {"kernel_shape": [3, 3],
                                                          "strides": [2, 2],
                                                          "auto_pad": "SAME_UPPER"})],
                              [("x", F, ["n", 2, "h", "w"])],
                              [("w", np.ones((4, 2, 3, 3), np.float32))]), SWEEP_HW),
    "maxpool": (model([("MaxPool", ["x"], ["y"], {"kernel_shape": [3, 3], "strides": [2, 2]})],
                      [("x", F, ["n", 2, "h", "w"])]), SWEEP_HW),
    "averagepool_ceil": (model([("AveragePool", ["x"], ["y"], {"kernel_shape": [2, 2],
                                                             "strides": [2, 2],
                                                             "ceil_mode": 1})],
                               [("x", F, ["n", 2, "h", "w"])]), SWEEP_HW),
    # padded windows: the divisor counts live taps (count_include_pad 0) or the padded
    # window, over a run-time size (a 64-bit dim against 32-bit window arithmetic)
    "averagepool_padded": (model([("AveragePool", ["x"], ["y"], {"kernel_shape": [3, 3],
                                                               "strides": [2, 2],
                                                               "pads": [1, 1, 1, 1]})],
                                 [("x", F, ["n", 2, "h", "w"])]), SWEEP_HW_NARROW),
    "averagepool_padded_counted": (model([("AveragePool", ["x"], ["y"],
                                           {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2],
                                            "count_include_pad": 1})],
                                         [("x", F, ["n", 2, "h", "w"])]), SWEEP_HW_NARROW),
    "maxpool_padded": (model([("MaxPool", ["x"], ["y"], {"kernel_shape": [3, 3],
                                                       "pads": [1, 1, 1, 1]})],
                             [("x", F, ["n", 16, "h", "w"])]), SWEEP_HW_NARROW),
    # Resize over symbolic dims (ops/resample.py): the reference's taps and weights
    "resize_linear_half_pixel": (model([("Resize", ["x", "", "s"], ["y"], {"mode": "linear"})],
                                       [("x", F, ["n", 2, "h", "w"])],
                                       [("s", np.array([1, 1, 2, 0.5], np.float32))]),
                                 SWEEP_HW),
    "resize_cubic_align_corners": (model([("Resize", ["x", "", "s"], ["y"], {
        "mode": "cubic", "coordinate_transformation_mode": "align_corners"})],
        [("x", F, ["n", 2, "h", "w"])], [("s", np.array([1, 1, 3, 2], np.float32))]), SWEEP_HW),
    "resize_nearest_shrink": (model([("Resize", ["x", "", "s"], ["y"], {
        "mode": "nearest", "coordinate_transformation_mode": "half_pixel"})],
        [("x", F, ["n", 2, "h", "w"])], [("s", np.array([1, 1, 0.5, 0.25], np.float32))]),
        SWEEP_HW),
    "global_pool_flatten": (model([("GlobalAveragePool", ["x"], ["g"], {}),
                                   ("Flatten", ["g"], ["y"], {})],
                                  [("x", F, ["n", 2, "h", "w"])]), SWEEP_HW),
    "flatten_axis2": (model([("Flatten", ["x"], ["y"], {"axis": 2})],
                            [("x", F, ["n", 2, "h", "w"])]), SWEEP_HW),
    "transpose": (model([("Transpose", ["x"], ["y"], {"perm": [0, 3, 1, 2]})],
                        [("x", F, ["n", 2, "h", "w"])]), SWEEP_HW),
    "reduce_mean_keep": (model([("ReduceMean", ["x"], ["y"], {"axes": [2, 3], "keepdims": 1})],
                               [("x", F, ["n", 2, "h", "w"])], opset=13), SWEEP_HW),
    "reduce_sum_drop": (model([("ReduceSum", ["x", "a"], ["y"], {"keepdims": 0})],
                              [("x", F, ["n", 2, "h", "w"])], [ints("a", [1, 3])]), SWEEP_HW),
    "softmax": (model([("Softmax", ["x"], ["y"], {"axis": -1})], [("x", F, ["n", "k"])]),
                SWEEP_NK),
    "layernorm": (model([("LayerNormalization", ["x", "g", "b"], ["y"], {"axis": -1})],
                        [("x", F, ["n", "k", 4])], [("g", np.ones(4, np.float32)),
                                                    ("b", np.zeros(4, np.float32))]),
                  SWEEP_NK),
    "concat_past_new": (model([("Concat", ["p", "x"], ["y"], {"axis": 1})],
                              [("p", F, ["n", "past", 4]), ("x", F, ["n", "k", 4])]),
                        [{"n": 1, "past": 0, "k": 1}, {"n": 2, "past": 17, "k": 3}]),
    "split_static_parts": (model([("Split", ["x", "s"], ["y", "z"], {"axis": 2})],
                                 [("x", F, ["n", "k", 6])], [ints("s", [2, 4])],
                                 outputs=("y", "z")), SWEEP_NK),
    "split_symbolic_axis_sizes": (model([("Split", ["x", "s"], ["y", "z"], {"axis": 1})],
                                        [("x", F, ["n", "k"])], [ints("s", [2, 3])],
                                        outputs=("y", "z")),
                                  [{"n": 1, "k": 5}, {"n": 3, "k": 5}]),
    "split_symbolic_axis_equal": (model([("Split", ["x"], ["y", "z", "u"],
                                         {"axis": 1, "num_outputs": 3})],
                                        [("x", F, ["n", "k"])], opset=18,
                                        outputs=("y", "z", "u")),
                                  [{"n": 1, "k": 3}, {"n": 2, "k": 7}, {"n": 3, "k": 13}]),
    "squeeze_symbolic_axis": (model([("Squeeze", ["x", "a"], ["y"], {})],
                                    [("x", F, ["n", "k", "one"])], [ints("a", [2])]),
                              [{"n": 2, "k": 3, "one": 1}]),
    "slice_static_bounds": (model([("Slice", ["x", "s", "e", "a"], ["y"], {})],
                                  [("x", F, ["n", "k", 8])],
                                  [ints("s", [1]), ints("e", [5]), ints("a", [2])]), SWEEP_NK),
    "slice_symbolic_axis": (model([("Slice", ["x", "s", "e", "a"], ["y"], {})],
                                  [("x", F, ["n", "k", 8])],
                                  [ints("s", [0]), ints("e", [4]), ints("a", [1])]), SWEEP_NK),
    "slice_from_end": (model([("Slice", ["x", "s", "e", "a"], ["y"], {})],
                             [("x", F, ["n", "k"])],
                             [ints("s", [-1]), ints("e", [2**62]), ints("a", [1])]), SWEEP_NK),
    "gather_rows": (model([("Gather", ["t", "i"], ["y"], {"axis": 0})],
                          [("i", I64, ["n", "k"])], [("t", np.ones((50, 3), np.float32))]),
                    SWEEP_NK),
    "gather_first_token": (model([("Gather", ["x", "i"], ["y"], {"axis": 1})],
                                 [("x", F, ["n", "k", 4])], [("i", np.array(0, np.int64))]),
                           SWEEP_NK),
    "resize_nearest_2x": (model([("Resize", ["x", "", "s"], ["y"],
                                  {"mode": "nearest", "nearest_mode": "floor",
                                   "coordinate_transformation_mode": "asymmetric"})],
                                [("x", F, ["n", 2, "h", "w"])],
                                [("s", np.array([1, 1, 2, 2], np.float32))]), SWEEP_HW),
    "upsample_half_pixel": (model([("Resize", ["x", "", "s"], ["y"], {"mode": "nearest"})],
                                  [("x", F, ["n", 2, "h", "w"])],
                                  [("s", np.array([1, 1, 3, 2], np.float32))]), SWEEP_HW),
    "squeeze_unsqueeze": (model([("Unsqueeze", ["x", "a"], ["u"], {}),
                                 ("Squeeze", ["u", "b"], ["y"], {})],
                                [("x", F, ["n", "k"])], [ints("a", [0, 3]), ints("b", [0])]),
                          SWEEP_NK),
    "expand_from_shape": (model([("Shape", ["x"], ["s"], {}), ("Expand", ["b", "s"], ["y"], {})],
                                [("x", F, ["n", "k", 4])], [("b", np.ones((1, 4), np.float32))]),
                          SWEEP_NK),
    "where_broadcast": (model([("Where", ["c", "x", "z"], ["y"], {})],
                              [("c", TensorProto.BOOL, ["k"]), ("x", F, ["n", "k"])],
                              [("z", np.zeros(1, np.float32))]), SWEEP_NK),
    "cast": (model([("Cast", ["x"], ["y"], {"to": F})], [("x", I64, ["n", "k"])]), SWEEP_NK),
    "constant_of_shape": (model([("Shape", ["x"], ["s"], {}),
                                 ("ConstantOfShape", ["s"], ["y"], {})],
                                [("x", F, ["n", "k"])]), SWEEP_NK),
    "range_over_length": (model([("Shape", ["x"], ["s"], {}), ("Gather", ["s", "one"], ["l"],
                                                               {"axis": 0}),
                                 ("Range", ["zero", "l", "two"], ["r"], {}),
                                 ("Cast", ["r"], ["y"], {"to": F})],
                                [("x", F, ["n", "k"])],
                                [("one", np.array(1, np.int64)), ("zero", np.array(0, np.int64)),
                                 ("two", np.array(2, np.int64))]), SWEEP_NK),
    # position ids past..past+seq-1 as exporters write them: an arange from a dim, computed
    # inside the kernel that reads it
    "range_between_dims": (model([("Shape", ["x"], ["s"], {}),
                                  ("Gather", ["s", "zero"], ["n"], {"axis": 0}),
                                  ("Gather", ["s", "one"], ["k"], {"axis": 0}),
                                  ("Add", ["n", "k"], ["l"], {}),
                                  ("Range", ["k", "l", "one"], ["r"], {}),
                                  ("Cast", ["r"], ["y"], {"to": F})],
                                 [("x", F, ["n", "k"])],
                                 [("one", np.array(1, np.int64)),
                                  ("zero", np.array(0, np.int64))]), SWEEP_NK),
    "reshape_exporter_arithmetic": (model(
        [("Shape", ["x"], ["s"], {}), ("Gather", ["s", "i0"], ["b"], {"axis": 0}),
         ("Gather", ["s", "i1"], ["q"], {"axis": 0}), ("Mul", ["b", "q"], ["bq"], {}),
         ("Unsqueeze", ["bq", "ax"], ["bq1"], {}), ("Concat", ["bq1", "tail"], ["t"], {"axis": 0}),
         ("Reshape", ["x", "t"], ["y"], {})],
        [("x", F, ["n", "k", 6])],
        [("i0", np.array(0, np.int64)), ("i1", np.array(1, np.int64)), ints("ax", [0]),
         ints("tail", [3, 2])]), SWEEP_NK),
    "shape_slice_concat_reshape": (model(
        [("Shape", ["x"], ["s"], {}), ("Slice", ["s", "z", "m1"], ["head"], {}),
         ("Concat", ["head", "tail"], ["t"], {"axis": 0}), ("Reshape", ["x", "t"], ["y"], {})],
        [("x", F, ["n", "k", 6])], [ints("z", [0]), ints("m1", [-1]), ints("tail", [3, 2])]),
        SWEEP_NK),
    "mask_expanded_to_scores": (model(
        [("Unsqueeze", ["m", "ax"], ["m4"], {}), ("Shape", ["m"], ["s"], {}),
         ("Gather", ["s", "i0"], ["b"], {"axis": 0}), ("Gather", ["s", "i1"], ["q"], {"axis": 0}),
         ("Unsqueeze", ["b", "a0"], ["b1"], {}), ("Unsqueeze", ["q", "a0"], ["q1"], {}),
         ("Concat", ["b1", "one", "q1", "q1"], ["t"], {"axis": 0}),
         ("Expand", ["m4", "t"], ["e"], {}), ("Cast", ["e"], ["y"], {"to": F})],
        [("m", I64, ["n", "k"])],
        [ints("ax", [1, 2]), ("i0", np.array(0, np.int64)), ("i1", np.array(1, np.int64)),
         ints("a0", [0]), ints("one", [1])]), SWEEP_NK),
    "reshape_zero_and_minus_one": (model([("Reshape", ["x", "t"], ["y"], {})],
                                         [("x", F, ["n", "k", 6])], [ints("t", [0, -1, 3])]),
                                   SWEEP_NK),
    "size_and_div_mod": (model(
        [("Size", ["x"], ["s"], {}), ("Div", ["s", "two"], ["d"], {}),
         ("Mod", ["s", "three"], ["m"], {}), ("Add", ["d", "m"], ["a"], {}),
         ("Unsqueeze", ["a", "ax"], ["a1"], {}), ("ConstantOfShape", ["a1"], ["y"], {})],
        [("x", F, ["n", "k", 2])],
        [("two", np.array(2, np.int64)), ("three", np.array(3, np.int64)), ints("ax", [0])]),
        SWEEP_NK),
    "equal_where_on_shape": (model(
        [("Shape", ["x"], ["s"], {}), ("Equal", ["s", "zero"], ["e"], {}),
         ("Where", ["e", "one", "s"], ["t"], {}), ("Expand", ["b", "t"], ["y"], {})],
        [("x", F, ["n", "k"])],
        [("zero", np.array([0], np.int64)), ("one", np.array([1], np.int64)),
         ("b", np.ones(1, np.float32))]), SWEEP_NK),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inferred_shape_matches_onnxruntime(name):
    m, sweep = CASES[name]
    graph = check_sweep(m, sweep)
    assert graph.dims.symbols


def test_broadcast_of_two_names_unifies_them():
    m = model([("Add", ["x", "z"], ["y"], {})], [("x", F, ["n", "a"]), ("z", F, ["n", "b"])])
    graph = import_onnx(m)
    assert graph.dims.substitutions == {"b": graph.outputs[0].type.shape[1]}
    assert [str(c) for c in graph.dims.constraints] == ["a == b"]
    check_sweep(m, [{"n": 2, "a": 5, "b": 5}])


def test_window_that_may_not_fit_is_a_run_time_constraint():
    m, _ = CASES["maxpool"]
    graph = import_onnx(m)
    assert [str(c) for c in graph.dims.constraints] == ["h - 3 >= 0", "w - 3 >= 0"]
    assert "MaxPool" in graph.dims.constraints[0].reason


def test_reshape_whose_count_cannot_be_proved_is_a_run_time_constraint():
    m = model([("Reshape", ["x", "t"], ["y"], {})], [("x", F, ["n", "k"])], [ints("t", [6])])
    graph = import_onnx(m)
    assert [str(c) for c in graph.dims.constraints] == ["6 == k*n"]
    graph.dims.check({"x": (2, 3)})
    with pytest.raises(TensorcError, match="element count"):
        graph.dims.check({"x": (2, 4)})


def test_unported_resize_names_the_op_and_the_dim():
    # a scale of 1/3 in float32: floor(scale * h) is no exact integer arithmetic of h
    m = model([("Resize", ["x", "", "s"], ["y"], {"mode": "linear"})],
              [("x", F, ["n", 2, "h", "w"])], [("s", np.array([1, 1, 1 / 3, 1], np.float32))])
    with pytest.raises(SymbolicDimError,
                       match=r"(?s)Resize.*symbolic dim h.*a scale of.*input_shapes"):
        import_onnx(m)


def test_shape_value_needed_as_a_constant_names_the_op():
    m = model([("Shape", ["x"], ["s"], {}), ("Tile", ["x", "s"], ["y"], {})],
              [("x", F, ["k"])])
    with pytest.raises(ShapeError, match=r"Tile.*symbolic dims"):
        import_onnx(m)


def test_unbound_dims_are_refused_where_symbolic_is_off():
    m, _ = CASES["softmax"]
    with pytest.raises(ShapeError, match=r"(?s)unknown dimensions:.*Pass concrete shapes"):
        import_onnx(m, symbolic=False)


def test_dim_ranges_name_only_the_models_dims():
    m, _ = CASES["softmax"]
    with pytest.raises(ShapeError, match=r"dim_ranges names 'seq'.*'n', 'k'"):
        import_onnx(m, dim_ranges={"seq": (1, 8)})
    with pytest.raises(ShapeError, match=r"dim_ranges\['k'\]"):
        import_onnx(m, dim_ranges={"k": (5, 2)})
    graph = import_onnx(m, dim_ranges={"k": (0, None)})
    assert graph.dims.ranges["k"] == (0, None)


def test_unnamed_dims_get_generated_names():
    m = model([("Relu", ["x"], ["y"], {})], [("x", F, [None, 3, ""])])
    m.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    graph = import_onnx(m)
    assert graph.dims.symbols == ["x_dim0", "x_dim2"]
    assert str(graph.outputs[0].type) == "float32[x_dim0,3,x_dim2]"


def test_compiling_still_needs_concrete_shapes():
    m, _ = CASES["softmax"]
    with pytest.raises(ShapeError, match=r"(?s)unknown dimensions:.*--input-shape x=1x1"):
        import_model(m, None)
    _, graph = import_model(m, {"x": (2, 3)})
    assert graph.outputs[0].type.shape == (2, 3)


def test_squeeze_without_axes_over_a_symbolic_dim_is_refused():
    m = model([("Squeeze", ["x"], ["y"], {})], [("x", F, ["n", 1, 4])])
    with pytest.raises(SymbolicDimError, match=r"Squeeze without axes.*dim n is 1"):
        import_onnx(m)


def test_squeezing_a_symbolic_dim_requires_it_to_be_1():
    m, _ = CASES["squeeze_symbolic_axis"]
    graph = import_onnx(m)
    assert [str(c) for c in graph.dims.constraints] == ["one == 1"]
    with pytest.raises(TensorcError, match=r"input 'x' dim 2 \(one\) is 2"):
        graph.dims.check({"x": (2, 3, 2)})


def test_a_converter_not_ported_fails_naming_the_node_and_its_symbolic_inputs():
    # which axes a Squeeze without axes removes depends on run-time sizes: refused by name
    m = model([("Relu", ["x"], ["r"], {}), ("Squeeze", ["r"], ["y"], {})],
              [("x", F, ["t", "n", 4])])
    with pytest.raises(SymbolicDimError, match=r"(?s)Squeeze.*dim t.*"
                                               r"inputs: r: float32\[t,n,4\]"):
        import_onnx(m)


def test_paddle_minus_one_dims_are_symbolic_with_generated_names():
    graph = import_onnx(paddle_like_model())
    assert graph.dims.symbols == ["x_dim0", "x_dim2", "x_dim3"]
    assert str(graph.outputs[0].type) == "float32[x_dim0,4]"
    assert [str(c) for c in graph.dims.constraints] == ["x_dim2 - 2 >= 0", "x_dim3 - 2 >= 0"]

"""Range and ConstantOfShape over values computed at run time: their sizes are data-dependent
dims with a capacity (nothing bounds them) that the runtime grows when a run needs more;
compiled models against onnxruntime, the error for a bad value, and the dim table's record."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import tensorc
from tensorc.errors import KernelRuntimeError
from tensorc.frontend.onnx import import_onnx
from tests.helpers import assert_close, make_model, ort_run, tensor_info


def _range_model(dtype):
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["y"])]
    return make_model(nodes, [tensor_info(n, dtype, ()) for n in "sld"],
                      [tensor_info("r", dtype, None), tensor_info("y", dtype, None)], opset=13)


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32"])
def test_range_of_run_time_values(dtype):
    model = _range_model(dtype)
    module = tensorc.compile(model, cache=False)
    # past the initial capacity (64) and back, negative steps, empty ranges
    for start, limit, delta in ((0, 10, 1), (3, -2, -1), (1, 300, 2), (5, 5, 1),
                                (0, 1000, 1), (2, 9, 3), (4, 0, 1)):
        feeds = {"s": np.array(start, dtype), "l": np.array(limit, dtype),
                 "d": np.array(delta, dtype)}
        assert_close(module.run(feeds), ort_run(model, feeds))


def test_range_with_a_zero_step_is_refused():
    module = tensorc.compile(_range_model("int64"), cache=False)
    feeds = {"s": np.array(0), "l": np.array(3), "d": np.array(0)}
    with pytest.raises(KernelRuntimeError, match="node 'Range_0' was given the size -1"):
        module.run(feeds)


def test_constant_of_a_run_time_shape(tmp_path):
    fill = helper.make_tensor("v", 1, [1], [2.5])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], value=fill)]
    model = make_model(nodes, [tensor_info("shape", "int64", (2,))],
                       [tensor_info("c", "float32", None)], opset=13)
    module = tensorc.compile(model, cache=False)
    module.save(tmp_path / "c.tcz")
    for m in (module, tensorc.load(tmp_path / "c.tcz")):
        for shape in ((2, 3), (0, 5), (100, 70), (1, 1)):
            feeds = {"shape": np.array(shape, np.int64)}
            assert_close(m.run(feeds), ort_run(model, feeds))


def test_the_dim_table_records_each_dim_and_its_bound():
    nodes = [helper.make_node("NonZero", ["x"], ["i"], name="where"),
             helper.make_node("Range", ["s", "l", "d"], ["r"], name="span")]
    model = make_model(nodes, [tensor_info("x", "float32", ("n", 3))] +
                       [tensor_info(n, "int64", ()) for n in "sld"], ["i", "r"], opset=13)
    lines = import_onnx(model).dims.describe()
    assert "nonzero_0.n in [0, inf] (from node 'where' at run time, at most n*3)" in lines
    assert "range_0.n in [0, inf] (from node 'span' at run time, at most range_0.cap)" in lines

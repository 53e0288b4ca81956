"""Shared test helpers: build small ONNX models and run them with onnxruntime (the oracle)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

RTOL, ATOL = 1e-4, 1e-5

_ELEM_TYPES = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
}


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``model`` with onnxruntime on the CPU; return output name -> array."""
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds))))


def tensor_info(
    name: str, dtype: str, shape: Sequence[int | str | None] | None
) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, _ELEM_TYPES[dtype], shape)


def make_model(
    nodes: Iterable[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto] | Sequence[str],
    opset: int = 17,
    initializers: Mapping[str, np.ndarray] | None = None,
    name: str = "test",
    extra_opsets: Mapping[str, int] | None = None,
) -> onnx.ModelProto:
    """A model from nodes; ``outputs`` may be bare names (type left for inference)."""
    outputs = [helper.make_empty_tensor_value_info(o) if isinstance(o, str) else o for o in outputs]
    graph = helper.make_graph(
        list(nodes),
        name,
        list(inputs),
        outputs,
        initializer=[
            numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()
        ],
    )
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    # An IR version onnxruntime accepts for this opset.
    return helper.make_model(graph, opset_imports=opsets, ir_version=8 if opset <= 17 else 10)


def random_feeds(
    model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Random inputs for every non-initializer input of ``model``."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds: dict[str, Any] = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = (shapes or {}).get(value.name) or [d.dim_value for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[value.name] = np.asarray(rng.standard_normal(shape), dtype=dtype)
        else:
            feeds[value.name] = np.asarray(rng.integers(-5, 6, size=shape), dtype=dtype)
    return feeds


def assert_close(
    actual: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    rtol: float = RTOL,
    atol: float = ATOL,
) -> None:
    assert sorted(actual) == sorted(expected)
    for name, want in expected.items():
        got = actual[name]
        assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)


def check_result(got: np.ndarray, want, rtol: float = RTOL, atol: float = ATOL) -> None:
    """``got`` has ``want``'s shape and dtype, and its values: close for floats, equal for the
    other dtypes."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


# --- models real exports look like (Paddle's -1 dims, an If on an input) -------------------


def paddle_like_model() -> onnx.ModelProto:
    """An OCR classifier as Paddle exports it: every free dim declared -1."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]),
             helper.make_node("Flatten", ["g"], ["y"])]
    return make_model(nodes, [tensor_info("x", "float32", [-1, 3, -1, -1])], ["y"],
                      initializers={"w": np.ones((4, 3, 3, 3), np.float32)})


def branch_on_input_model() -> onnx.ModelProto:
    """A voice detector's shape: an If whose condition is an input (the sample rate) and
    whose branches give outputs of different ranks, so it compiles only with the input's
    value (branches of one rank and different sizes compile: ops/branch_select.py)."""
    then_branch = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                                    [tensor_info("t", "float32", [2, 3])])
    else_branch = helper.make_graph(
        [helper.make_node("Reshape", ["x", "flat"], ["e"])], "else", [],
        [tensor_info("e", "float32", [6])],
        initializer=[helper.make_tensor("flat", TensorProto.INT64, [1], [6])])
    nodes = [helper.make_node("Equal", ["sr", "k"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_branch,
                              else_branch=else_branch)]
    return make_model(nodes, [tensor_info("x", "float32", [2, 3]),
                              tensor_info("sr", "int64", [])], ["y"],
                      initializers={"k": np.array(16000, np.int64)})



# --- sequences and optionals ------------------------------------------------------------------


def seq_info(name: str, dtype: str, shape: Sequence[int | str | None] | None
             ) -> onnx.ValueInfoProto:
    """A value info of a sequence of ``dtype`` tensors of ``shape``."""
    elem = helper.make_tensor_type_proto(_ELEM_TYPES[dtype], shape)
    return helper.make_value_info(name, helper.make_sequence_type_proto(elem))


def flat(values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Feeds or outputs as a tensorc module has them: a sequence ``y`` (a list) as ``y[0]``,
    ``y[1]``, ...; None (an empty optional) left out."""
    result: dict[str, np.ndarray] = {}
    for name, value in values.items():
        if isinstance(value, (list, tuple)):
            result.update((f"{name}[{k}]", np.asarray(v)) for k, v in enumerate(value))
        elif value is not None:
            result[name] = np.asarray(value)
    return result

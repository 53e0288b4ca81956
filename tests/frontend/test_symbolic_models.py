"""Symbolic shape inference on the models of models/symbolic.py: the output shapes inferred
with symbolic dims, with each dim given a value, equal the shapes onnxruntime produces at
those input shapes (the independent reference); the dims' ranges and run-time checks."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest

from models.symbolic import SWEEPS, SYMBOLIC_MODELS
from tensorc.errors import InputError
from tensorc.frontend.onnx import import_onnx
from tensorc.frontend.symbolic_inputs import specialize_dims
from tensorc.ir.graph import verify
from tensorc.ops.interpret import run_reference
from tensorc.ir.dims import Dim, evaluate

_DTYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64,
           onnx.TensorProto.BOOL: np.bool_}


def concrete_shape(proto: onnx.ValueInfoProto, dims: dict[str, int]) -> tuple[int, ...]:
    shape = proto.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in shape)


def feeds_for(model: onnx.ModelProto, dims: dict[str, int], seed: int = 0
              ) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        shape = concrete_shape(value, dims)
        dtype = _DTYPES[value.type.tensor_type.elem_type]
        if dtype is np.float32:
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        else:
            high = 2 if "mask" in value.name or dtype is np.bool_ else 50
            feeds[value.name] = rng.integers(0, high, shape).astype(dtype)
    return feeds


def onnxruntime_shapes(model: onnx.ModelProto, feeds: dict[str, np.ndarray]
                       ) -> dict[str, tuple[int, ...]]:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return {n: a.shape for n, a in zip(names, session.run(names, feeds))}


def inferred_shapes(graph, values: dict[str, int]) -> dict[str, tuple[int, ...]]:
    return {v.name: tuple(evaluate(d, values) for d in v.type.shape) for v in graph.outputs}


@pytest.fixture(scope="module", params=sorted(SYMBOLIC_MODELS))
def symbolic_model(request):
    model = SYMBOLIC_MODELS[request.param]()
    return request.param, model, import_onnx(model)


def test_every_sweep_shape_matches_onnxruntime(symbolic_model):
    name, model, graph = symbolic_model
    assert graph.dims.symbols, "the model should import with symbolic dims"
    for dims in SWEEPS[name]:
        feeds = feeds_for(model, dims)
        values = graph.dims.check({n: a.shape for n, a in feeds.items()})
        assert inferred_shapes(graph, values) == onnxruntime_shapes(model, feeds), dims


def test_outputs_are_symbolic_in_the_input_dims(symbolic_model):
    name, model, graph = symbolic_model
    for value in graph.outputs:
        assert any(isinstance(d, Dim) for d in value.type.shape), value
        for d in value.type.shape:
            if isinstance(d, Dim):
                assert set(d.names) <= set(graph.dims.ranges), d


def test_bert_shapes_read_as_exported():
    graph = import_onnx(SYMBOLIC_MODELS["bert_encoder"]())
    shapes = {v.name: str(v.type) for v in graph.outputs}
    assert shapes == {"last_hidden_state": "float32[batch,seq,64]", "pooled": "float32[batch,64]"}
    assert graph.dims.symbols == ["batch", "seq"]
    assert graph.dims.ranges["seq"] == (1, None)


def test_kv_cache_past_accepts_empty_and_concatenates():
    graph = import_onnx(SYMBOLIC_MODELS["gpt_decoder_step"]())
    assert graph.dims.ranges["past"] == (0, None)      # only concatenated along: may be empty
    assert graph.dims.ranges["seq"] == (1, None)
    present = {v.name: str(v.type) for v in graph.outputs}
    assert present["present_key"] == "float32[batch,2,past + seq,16]"
    assert present["logits"] == "float32[batch,seq,100]"


def test_ocr_width_is_an_expression_of_the_input_width():
    graph = import_onnx(SYMBOLIC_MODELS["ocr_recognizer"]())
    (scores,) = graph.outputs
    assert str(scores.type) == "float32[batch,width//4,40]"


def test_detector_records_the_upsample_join_as_a_run_time_constraint():
    model = SYMBOLIC_MODELS["detector"]()
    graph = import_onnx(model)
    texts = [str(c) for c in graph.dims.constraints]
    assert any("height" in t and "==" in t for t in texts), texts
    # a height the skip connection cannot join: onnxruntime fails, the check names the dim
    feeds = feeds_for(model, {"batch": 1, "height": 12, "width": 16})
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="Concat"):
        onnxruntime_shapes(model, feeds)
    with pytest.raises(InputError, match=r"input 'images' dim 2 \(height\) is 12"):
        graph.dims.check({"images": (1, 3, 12, 16)})


def test_dim_ranges_narrow_the_defaults():
    graph = import_onnx(SYMBOLIC_MODELS["bert_encoder"](), dim_ranges={"seq": (1, 64)})
    assert graph.dims.ranges["seq"] == (1, 64)
    with pytest.raises(InputError, match=r"input 'input_ids' dim 1 \(seq\) is 65, outside "
                                         r"its range \[1, 64\]"):
        graph.dims.check({"input_ids": (1, 65), "attention_mask": (1, 65)})


def test_mismatched_mask_is_refused_naming_both_inputs():
    graph = import_onnx(SYMBOLIC_MODELS["bert_encoder"]())
    with pytest.raises(InputError, match="attention_mask"):
        graph.dims.check({"input_ids": (2, 7), "attention_mask": (2, 8)})


def test_concrete_input_shapes_still_build_a_static_graph():
    graph = import_onnx(SYMBOLIC_MODELS["bert_encoder"](),
                        input_shapes={"input_ids": (2, 9), "attention_mask": (2, 9)})
    assert not graph.dims.symbols
    assert all(v.type.is_static for v in graph.values())
    assert [v.type.shape for v in graph.outputs] == [(2, 9, 64), (2, 64)]


def test_symbolic_graph_computes_what_onnxruntime_computes(symbolic_model):
    """The symbolic graph, its dims given one sweep shape's values, evaluated by the numpy
    references, equals onnxruntime's outputs: shape arithmetic folded into Dims, Range as a
    cumulative sum, Resize as repeats compute the right numbers, not only the right shapes."""
    name, model, graph = symbolic_model
    for dims in SWEEPS[name][:3]:
        feeds = feeds_for(model, dims, seed=1)
        values = graph.dims.check({n: a.shape for n, a in feeds.items()})
        static = specialize_dims(graph, values)
        verify(static)
        ours = run_reference(static, feeds)
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        for output, expected in zip(names, session.run(names, feeds)):
            np.testing.assert_allclose(ours[output], expected, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{name} {dims} {output}")

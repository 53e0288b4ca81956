"""One module for every shape: the symbolic models of models/symbolic.py compiled with their
dims symbolic, run at each sweep shape (1, odd sizes, primes, an empty KV cache) and checked
against onnxruntime; the run-time checks of the dims; what input_shapes and dim_ranges
change.

Compiles over the models' own dims go through the session's temporary kernel cache
(tests/conftest.py), so a test that compiles a model again as the fixture did gets its
kernels warm; those with narrower dim ranges compile without it."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import tensorc
from models.symbolic import SWEEPS, SYMBOLIC_MODELS
from tensorc.errors import InputError, TensorcError
from tests.frontend.test_symbolic_models import feeds_for


def _session(model):
    return onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=sorted(SYMBOLIC_MODELS))
def compiled(request):
    model = SYMBOLIC_MODELS[request.param]()
    return request.param, model, tensorc.compile(model)


def test_every_sweep_shape_matches_onnxruntime(compiled):
    name, model, module = compiled
    assert any(not isinstance(d, int) for _, shape, _ in module.inputs for d in shape)
    session = _session(model)
    for k, dims in enumerate(SWEEPS[name]):
        feeds = feeds_for(model, dims, seed=k)
        module.num_threads = 1 + k % 2
        got = module.run(feeds)
        expected = session.run(None, feeds)
        for (out, value), ref in zip(got.items(), expected):
            assert value.shape == ref.shape, (name, dims, out)
            np.testing.assert_allclose(value, ref, rtol=1e-3, atol=1e-4,
                                       err_msg=f"{name} at {dims}: {out}")


def test_a_larger_run_after_a_smaller_one_grows_the_arena():
    model = SYMBOLIC_MODELS["bert_encoder"]()
    module = tensorc.compile(model)
    session = _session(model)
    for dims in ({"batch": 1, "seq": 2}, {"batch": 4, "seq": 57}, {"batch": 1, "seq": 3}):
        feeds = feeds_for(model, dims)
        for value, ref in zip(module.run(feeds).values(), session.run(None, feeds)):
            np.testing.assert_allclose(value, ref, rtol=1e-3, atol=1e-4)


def test_dims_are_checked_at_run_time():
    model = SYMBOLIC_MODELS["bert_encoder"]()
    module = tensorc.compile(model, dim_ranges={"seq": (1, 16)}, cache=False)
    feeds = feeds_for(model, {"batch": 2, "seq": 17})
    with pytest.raises(InputError, match=r"seq.*17.*\[1, 16\]"):
        module.run(feeds)
    feeds = feeds_for(model, {"batch": 2, "seq": 5})
    feeds["attention_mask"] = feeds["attention_mask"][:, :4].copy()
    with pytest.raises(InputError, match="attention_mask"):
        module.run(feeds)
    feeds = feeds_for(model, {"batch": 2, "seq": 5})
    feeds["input_ids"] = feeds["input_ids"].reshape(2, 5, 1)
    with pytest.raises(InputError, match="input_ids"):
        module.run(feeds)


def test_input_shapes_still_build_a_module_of_one_shape():
    model = SYMBOLIC_MODELS["cnn"]()
    module = tensorc.compile(model, input_shapes={"x": (2, 3, 32, 32)})
    assert module.inputs[0][1] == (2, 3, 32, 32)
    feeds = feeds_for(model, {"batch": 2})
    np.testing.assert_allclose(module.run(feeds)["logits"],
                               _session(model).run(None, feeds)[0], rtol=1e-3, atol=1e-4)


def test_a_saved_symbolic_module_keeps_its_dims(tmp_path):
    model = SYMBOLIC_MODELS["gpt_decoder_step"]()
    module = tensorc.compile(model, dim_ranges={"seq": (1, 32), "past": (0, None)},
                             cache=False)
    module.save(tmp_path / "m.tcz")
    loaded = tensorc.load(tmp_path / "m.tcz")
    assert [[str(d) for d in s] for _, s, _ in loaded.inputs] == \
        [[str(d) for d in s] for _, s, _ in module.inputs]
    assert "past + seq" in str(loaded.outputs)
    session = _session(model)
    for k, dims in enumerate(SWEEPS["gpt_decoder_step"]):
        feeds = feeds_for(model, dims, seed=k)
        for value, ref in zip(loaded.run(feeds).values(), session.run(None, feeds)):
            np.testing.assert_allclose(value, ref, rtol=1e-3, atol=1e-4)
    with pytest.raises(InputError, match=r"seq.*33"):          # the range survives too
        loaded.run(feeds_for(model, {"batch": 1, "seq": 33, "past": 2}))


def test_a_saved_symbolic_module_with_a_broken_dim_table_is_refused(tmp_path):
    import json
    module = tensorc.compile(SYMBOLIC_MODELS["cnn"]())
    module.save(tmp_path / "m.tcz")
    from tensorc.runtime import artifact
    header, sections = artifact.read(tmp_path / "m.tcz")
    header["dims"]["constraints"] = [{"lhs": {"dim": ["v", 3]}, "op": "==", "rhs": 1,
                                      "reason": "x"}]
    artifact.write(tmp_path / "bad.tcz", header, {k: bytes(v) for k, v in sections.items()})
    with pytest.raises(TensorcError, match="corrupt"):
        tensorc.load(tmp_path / "bad.tcz")
    assert json.dumps(header["dims"])       # (JSON data)


def test_a_shape_seen_before_runs_again_with_its_own_dims():
    """A module binds each distinct input shape once and keeps it: going back to a shape
    after another must use that shape's dims, outputs and arena, not the last run's."""
    model = SYMBOLIC_MODELS["gpt_decoder_step"]()
    module = tensorc.compile(model)
    session = _session(model)
    sweep = [{"batch": 1, "seq": 1, "past": 5}, {"batch": 3, "seq": 4, "past": 0},
             {"batch": 1, "seq": 1, "past": 5}, {"batch": 3, "seq": 4, "past": 0}]
    for k, dims in enumerate(sweep):
        feeds = feeds_for(model, dims, seed=k)
        for value, ref in zip(module.run(feeds).values(), session.run(None, feeds)):
            assert value.shape == ref.shape
            np.testing.assert_allclose(value, ref, rtol=1e-3, atol=1e-4)


def test_arena_bytes_at_a_shape_against_the_static_plan():
    """The memory plan evaluated at a run's dims: it grows with them, a static module reports
    its own arena, and a symbolic CNN's plan stays within the issue's 1.2x of the static plan
    at the same shape (its convs read their input directly, no patch tensor)."""
    model = SYMBOLIC_MODELS["cnn"]()
    module = tensorc.compile(model)
    small, large = module.arena_bytes({"x": (1, 3, 32, 32)}), \
        module.arena_bytes({"x": (9, 3, 32, 32)})
    assert 0 < small < large
    static = tensorc.compile(model, input_shapes={"x": (9, 3, 32, 32)})
    assert static.arena_bytes() == static.arena_size
    assert large <= 1.2 * static.arena_bytes()
    with pytest.raises(TensorcError, match="symbolic"):
        module.arena_bytes()
    with pytest.raises(InputError):
        module.arena_bytes({"x": (2, 4, 32, 32)})

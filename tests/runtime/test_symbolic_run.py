"""Running a module over symbolic dims: the fast path that reuses a shape's binding (its dims'
values, the outputs' shapes) must give onnxruntime's answers at every shape, after switching
shapes back and forth on one module, and must still refuse what a first run refuses."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import tensorc
from models.symbolic import SYMBOLIC_MODELS
from tensorc.errors import InputError
from tests.frontend.test_symbolic_models import feeds_for


@pytest.fixture(scope="module")
def decoder():
    model = SYMBOLIC_MODELS["gpt_decoder_step"]()
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return model, session, tensorc.compile(model)


def _check(module, session, feeds, label) -> dict:
    got = module.run(feeds)
    for (name, value), ref in zip(got.items(), session.run(None, feeds)):
        assert value.shape == ref.shape, (label, name)
        np.testing.assert_allclose(value, ref, rtol=1e-3, atol=1e-4, err_msg=f"{label} {name}")
    return got


def test_switching_shapes_back_and_forth(decoder):
    """Shapes at 1, an empty KV cache, odd sizes, each revisited with new data: a revisited
    shape runs on the binding kept from its first run, never on the last run's."""
    model, session, module = decoder
    sweep = [{"batch": 1, "seq": 1, "past": 0}, {"batch": 2, "seq": 7, "past": 13},
             {"batch": 1, "seq": 1, "past": 0}, {"batch": 1, "seq": 1, "past": 1},
             {"batch": 3, "seq": 1, "past": 97}, {"batch": 2, "seq": 7, "past": 13},
             {"batch": 1, "seq": 1, "past": 1}, {"batch": 1, "seq": 1, "past": 0}]
    for k, dims in enumerate(sweep):
        module.num_threads = 1 + k % 2
        _check(module, session, feeds_for(model, dims, seed=k), f"{dims} (run {k})")
    assert len(module._bound) == 4


def test_each_run_gets_new_outputs(decoder):
    model, session, module = decoder
    feeds = feeds_for(model, {"batch": 1, "seq": 1, "past": 3}, seed=1)
    first = _check(module, session, feeds, "first")
    kept = {n: v.copy() for n, v in first.items()}
    second = _check(module, session, feeds_for(model, {"batch": 1, "seq": 1, "past": 3}, 2),
                    "second")
    for name in first:
        assert first[name] is not second[name]
        np.testing.assert_array_equal(first[name], kept[name])


def test_a_bound_shape_still_checks_types_and_layout(decoder):
    """After a shape is bound, a feed of that shape in another dtype or a strided view takes
    the checked path: the dtype is refused, the view is run as a contiguous copy."""
    model, session, module = decoder
    dims = {"batch": 2, "seq": 3, "past": 5}
    feeds = feeds_for(model, dims, seed=3)
    _check(module, session, feeds, "bound")
    wrong = dict(feeds, **{k: v.astype(np.float64) for k, v in feeds.items()
                           if v.dtype == np.float32})
    with pytest.raises(InputError):
        module.run(wrong)
    name = next(k for k, v in feeds.items() if v.dtype == np.float32)
    wide = np.zeros(feeds[name].shape[:-1] + (2 * feeds[name].shape[-1],), np.float32)
    wide[..., ::2] = feeds[name]
    strided = dict(feeds, **{name: wide[..., ::2]})
    assert not strided[name].flags.c_contiguous
    _check(module, session, strided, "strided")
    _check(module, session, feeds, "bound again")


def test_a_static_dim_is_checked_after_other_shapes_were_bound(decoder):
    """A wrong static dim (the heads' width) is refused with the input named, whatever
    shapes the module bound before."""
    model, session, module = decoder
    _check(module, session, feeds_for(model, {"batch": 1, "seq": 1, "past": 2}), "good")
    feeds = feeds_for(model, {"batch": 1, "seq": 1, "past": 2})
    name = next(k for k, v in feeds.items() if v.ndim == 4)
    feeds[name] = np.zeros(feeds[name].shape[:-1] + (feeds[name].shape[-1] - 1,), np.float32)
    with pytest.raises(InputError, match=name):
        module.run(feeds)
    _check(module, session, feeds_for(model, {"batch": 1, "seq": 1, "past": 2}, 4), "after")

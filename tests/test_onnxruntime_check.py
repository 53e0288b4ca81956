"""The onnxruntime oracle helpers and the side-by-side timer."""

from __future__ import annotations

import numpy as np
import pytest

import models
from tensorc.benchmark import Timing, time_alternating
from tensorc.errors import TensorcError
from tensorc.reference import compare_outputs, format_comparison, random_inputs, run_onnxruntime


def test_random_inputs_are_seeded_and_typed() -> None:
    signature = [("a", (2, 3), "float32"), ("b", (4,), "int64"), ("c", (), "bool")]
    first, second = random_inputs(signature, seed=5), random_inputs(signature, seed=5)
    for name, shape, dtype in signature:
        assert first[name].shape == shape and first[name].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(first[name], second[name])
    assert not np.array_equal(first["a"], random_inputs(signature, seed=6)["a"])


def test_compare_outputs_passes_within_tolerance() -> None:
    expected = {"y": np.array([1.0, -2.0, 0.0], np.float32)}
    actual = {"y": expected["y"] + np.float32(1e-6)}
    comparison = compare_outputs(actual, expected)
    assert comparison.passed
    assert comparison.max_abs == pytest.approx(1e-6, rel=0.1)
    assert format_comparison(comparison)[0].endswith("PASS")


@pytest.mark.parametrize(
    "actual, problem",
    [
        ({"y": np.array([1.0, 2.5], np.float32)}, ""),
        ({"y": np.array([1.0, 2.0, 3.0], np.float32)}, "shape"),
        ({"y": np.array([1.0, 2.0], np.float64)}, "dtype"),
        ({"y": np.array([1.0, np.nan], np.float32)}, ""),
        ({}, "missing"),
    ],
)
def test_compare_outputs_fails(actual: dict, problem: str) -> None:
    comparison = compare_outputs(actual, {"y": np.array([1.0, 2.0], np.float32)})
    assert not comparison.passed
    assert problem in comparison.outputs[0].problem
    assert "FAIL" in format_comparison(comparison)[0]


def test_compare_outputs_accepts_matching_nans() -> None:
    y = np.array([np.nan, 1.0], np.float32)
    assert compare_outputs({"y": y.copy()}, {"y": y}).passed


def test_run_onnxruntime_reports_bad_feeds_as_tensorc_errors() -> None:
    with pytest.raises(TensorcError, match="onnxruntime"):
        run_onnxruntime(models.path("mlp"), {"x": np.zeros((2, 3), np.float32)})


def test_run_onnxruntime_reports_bad_models_as_tensorc_errors() -> None:
    with pytest.raises(TensorcError, match="cannot load"):
        run_onnxruntime(b"not a model", {})


def test_time_alternating_alternates_and_batches() -> None:
    calls: list[str] = []
    timings = time_alternating(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        seconds=0.02,
        samples=4,
        warmup=2,
    )
    assert set(timings) == {"a", "b"}
    for timing in timings.values():
        assert len(timing.samples_ms) == 4 and timing.calls_per_sample >= 1
        assert timing.min_ms <= timing.median_ms <= timing.max_ms
    # After the warm-up, samples alternate: a batch of a, then a batch of b, ...
    timed = calls[-4 * (timings["a"].calls_per_sample + timings["b"].calls_per_sample) :]
    assert timed[0] == "a" and timed[-1] == "b"


def test_timing_spread() -> None:
    timing = Timing((1.0, 1.0, 1.5), calls_per_sample=1)
    assert timing.median_ms == 1.0
    assert timing.spread == pytest.approx(0.5)
    assert timing.noisy


def test_compare_outputs_takes_scalar_outputs() -> None:
    comparison = compare_outputs({"s": np.array(2.0, np.float32)},
                                 {"s": np.array(2.5, np.float32)})
    assert not comparison.outputs[0].passed and comparison.outputs[0].max_abs == 0.5

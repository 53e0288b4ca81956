"""The onnxruntime oracle helpers and the side-by-side timer."""

from __future__ import annotations

import numpy as np
import pytest

import models
from tensorc.benchmark import Timing, time_alternating
from tensorc.errors import TensorcError
from tensorc.reference import (
    Step, compare_outputs, format_comparison, quantization_steps, random_inputs, run_onnxruntime,
)
from helpers_quantized import qdq_conv_model


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
    assert "PASS by atol" in format_comparison(comparison)[0]   # worst where expected is 0


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


def test_compare_outputs_says_which_term_decided() -> None:
    """rtol decides where |expected| is large, atol where it is near zero (a bench line
    'max rel err 0.00459 PASS' beside rtol 0.001 did not say the atol term let it pass)."""
    expected = {"y": np.array([2.0e-5, 1.0], np.float32)}
    near_zero = compare_outputs({"y": expected["y"] + np.float32([9e-5, 0])}, expected)
    assert near_zero.passed and near_zero.outputs[0].decided_by == "atol"
    assert near_zero.max_rel > 1e-3             # the relative error alone would have failed
    line = format_comparison(near_zero)[0]
    assert "PASS by atol" in line and "|expected| 2e-05" in line
    large = compare_outputs({"y": expected["y"] + np.float32([0, 9e-4])}, expected)
    assert large.passed and large.outputs[0].decided_by == "rtol"
    assert "PASS by rtol" in format_comparison(large)[0]
    exact = compare_outputs(expected, expected)
    assert exact.outputs[0].decided_by == "exact" and "PASS (equal)" in format_comparison(exact)[0]
    failed = compare_outputs({"y": expected["y"] + np.float32([0, 5e-3])}, expected)
    assert not failed.passed and "FAIL worst element off by more than" in \
        format_comparison(failed)[0]


def test_quantization_steps_of_a_qdq_model() -> None:
    """The output's step is the scale of the DequantizeLinear making it, through Identity;
    a float model has none."""
    steps = quantization_steps(qdq_conv_model())
    assert steps is not None
    assert steps["scores"].size == pytest.approx(0.02)
    assert "out_dequantize" in steps["scores"].source
    assert quantization_steps(models.path("mlp")) is None


def test_quantized_outputs_pass_within_steps_and_report_top_k() -> None:
    """A QDQ model's output a few quantization steps off passes (rounding), with the term that
    decided and top-k agreement said; 20 steps off fails."""
    rng = np.random.default_rng(0)
    want = (np.round(rng.standard_normal((4, 10)) / 0.02) * 0.02).astype(np.float32)
    steps = {"scores": Step(0.02, "the scale of DequantizeLinear 'out'")}
    off = want.copy()
    off[0, 0] += 3 * 0.02
    float_only = compare_outputs({"scores": off}, {"scores": want})
    assert not float_only.passed                # the default tolerance rejects rounding
    quantized = compare_outputs({"scores": off}, {"scores": want}, steps=steps)
    diff = quantized.outputs[0]
    assert quantized.passed and diff.decided_by == "steps"
    assert diff.steps == pytest.approx(3.0, rel=1e-4)
    agree = int((off.argmax(-1) == want.argmax(-1)).sum())
    assert diff.top1 == (agree, 4) and diff.top5 is not None
    line = format_comparison(quantized)[0]
    assert "PASS by quantization steps: 3 <= 8 steps" in line and f"top-1 agrees in {agree}/4" \
        in line and "top-5 overlap" in line
    assert "within 8 quantization steps" in quantized.tolerance()
    wrong = want.copy()
    wrong[1, 2] += 20 * 0.02
    failed = compare_outputs({"scores": wrong}, {"scores": want}, steps=steps)
    assert not failed.passed and "20 steps > 8" in format_comparison(failed)[0]
    assert compare_outputs({"scores": wrong}, {"scores": want}, steps=steps,
                           max_steps=25).passed


def test_quantized_output_without_a_constant_scale_takes_its_range() -> None:
    want = np.linspace(-1.0, 1.55, 12, dtype=np.float32).reshape(2, 6)
    off = want + np.float32(0.02)       # 2 steps of 2.55 / 255
    comparison = compare_outputs({"y": off}, {"y": want},
                                 steps={"y": Step(None, "1/255 of the output's range")})
    assert comparison.passed and comparison.outputs[0].step == pytest.approx(0.01)
    assert comparison.outputs[0].steps == pytest.approx(2.0, rel=1e-4)


def test_compare_outputs_takes_scalar_outputs() -> None:
    comparison = compare_outputs({"s": np.array(2.0, np.float32)},
                                 {"s": np.array(2.5, np.float32)})
    assert not comparison.outputs[0].passed and comparison.outputs[0].max_abs == 0.5

"""Comparing a model's outputs with the reference's, under a tolerance that fits the model.

A float model is held to ``np.allclose``'s ``atol + rtol * |expected|``. A quantized model
(QDQ, QLinear*, *Integer ops) rounds to int8 steps at every layer, and two correct runtimes
round a few values differently (onnxruntime differs from itself between its optimization
levels): there an output may also be within ``max_steps`` quantization steps of the
reference, the step being the scale of the DequantizeLinear that makes it (1 for an integer
output, else 1/255 of the output's range). Each output says which term decided, and a
quantized model's score outputs say how often their top-1 and top-5 classes agree.

>>> steps = quantization_steps("resnet18_int8.onnx")      # None for a float model
>>> comparison = compare_outputs(actual, expected, steps=steps)
>>> print("\\n".join(format_comparison(comparison)))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

# Float32 noise through a deep network (different summation orders, folded BatchNorm) stays
# well inside these; a real bug does not.
DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-4
# A quantized output off by a few steps is rounding (each layer may round a value the other
# way and pass it on); a wrong op is off by tens of the 256 steps int8 has.
DEFAULT_STEPS = 8.0

QUANTIZED_OPS = frozenset({
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
    "QLinearMatMul", "ConvInteger", "MatMulInteger", "QLinearAdd", "QLinearMul",
    "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearSigmoid", "QLinearLeakyRelu",
    "QLinearConcat", "QLinearSoftmax", "QGemm", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
})
# Ops through which an output keeps the quantization step of the value they read (layout,
# selection, clipping, monotone squashing to a narrower range).
_STEP_KEEPING = frozenset({
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Gather",
    "MaxPool", "GlobalMaxPool", "Relu", "Clip", "Sigmoid", "Softmax", "Tanh", "Concat",
    "Split", "Pad", "Resize", "Upsample", "AveragePool", "GlobalAveragePool", "ReduceMax",
    "ReduceMin", "ReduceMean", "Cast",
})


@dataclass(frozen=True)
class Step:
    """One output's quantization step and where it comes from (None: its range decides)."""

    size: float | None
    source: str


def quantization_steps(model: str | Path | bytes | onnx.ModelProto) -> dict[str, Step] | None:
    """The quantization step of each output of a quantized model; None for a float model
    (no op of QUANTIZED_OPS in it). An output made by a DequantizeLinear (through ops that
    keep the step, e.g. Flatten or Softmax) has its scale's largest value; an integer output
    1; any other a step of None, which compare_outputs takes as 1/255 of its range."""
    if isinstance(model, (str, Path)):
        proto = onnx.load(str(model), load_external_data=False)
    elif isinstance(model, bytes):
        proto = onnx.ModelProto.FromString(model)
    else:
        proto = model
    graph = proto.graph
    if not any(node.op_type in QUANTIZED_OPS for node in model_nodes(graph)):
        return None
    producer = {out: node for node in graph.node for out in node.output}
    values = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = node.attribute[0].t
    steps = {}
    for output in graph.output:
        elem = output.type.tensor_type.elem_type
        if elem in _INTEGER_TYPES:
            steps[output.name] = Step(1.0, "an integer output")
            continue
        steps[output.name] = _traced_step(output.name, producer, values)
    return steps


_INTEGER_TYPES = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.UINT8,
                            onnx.TensorProto.INT16, onnx.TensorProto.UINT16,
                            onnx.TensorProto.INT32})


def _traced_step(name: str, producer: dict, values: dict) -> Step:
    """The scale of the DequantizeLinear the value ``name`` comes from through ops that keep
    the step; Step(None, ...) where there is none or it is not a constant."""
    for _ in range(1000):       # (a bound, in case of a malformed cyclic graph)
        node = producer.get(name)
        if node is None:
            break
        if node.op_type == "DequantizeLinear":
            scale = values.get(node.input[1]) if len(node.input) > 1 else None
            if scale is None or scale.data_location == onnx.TensorProto.EXTERNAL:
                break
            size = float(np.max(np.abs(numpy_helper.to_array(scale))))
            label = node.name or node.output[0]
            return Step(size, f"the scale of DequantizeLinear {label!r}")
        if node.op_type not in _STEP_KEEPING or not node.input:
            break
        name = node.input[0]
    return Step(None, "1/255 of the output's range (no constant scale makes it)")


def model_nodes(graph: onnx.GraphProto):
    """Every node of ``graph`` and of the subgraphs its nodes hold (If, Loop, Scan)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from model_nodes(attr.g)
            for sub in attr.graphs:
                yield from model_nodes(sub)


@dataclass(frozen=True)
class OutputDiff:
    """How far one output is from its reference.

    ``max_rel`` is max |actual - expected| / (|expected| + atol): bounded where the
    reference is near zero, and close to the plain relative error elsewhere. ``decided_by``
    names the term that decided the verdict at the worst element: "rtol", "atol", "exact"
    (no error), or "steps" (a quantized model's output within ``max_steps`` steps of
    ``step``).
    ``worst_expected`` is |expected| there and ``allowed`` what rtol and atol allowed it.
    """

    name: str
    max_abs: float
    max_rel: float
    passed: bool
    problem: str = ""  # why it failed before any number could be compared (shape, dtype, ...)
    decided_by: str = ""
    worst_expected: float = 0.0
    allowed: float = 0.0
    step: float | None = None           # a quantized model's step for this output
    step_source: str = ""
    steps: float | None = None          # max_abs in steps
    top1: tuple[int, int] | None = None     # rows whose top class agrees, rows
    top5: float | None = None               # mean overlap of the top-5 classes, 0 to 1


@dataclass(frozen=True)
class Comparison:
    """The per-output differences between two runs, and the tolerances they were held to
    (``max_steps`` is None for a float model)."""

    outputs: tuple[OutputDiff, ...]
    rtol: float
    atol: float
    max_steps: float | None = None

    @property
    def passed(self) -> bool:
        return all(diff.passed for diff in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((d.max_abs for d in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((d.max_rel for d in self.outputs), default=0.0)

    def to_json(self) -> dict:
        """The comparison for ``--json`` reports (infinities stay; the CLI maps them)."""
        return {
            "reference": "onnxruntime", "passed": self.passed, "rtol": self.rtol,
            "atol": self.atol, "max_steps": self.max_steps,
            "outputs": [{"name": d.name, "max_abs": d.max_abs, "max_rel": d.max_rel,
                         "passed": d.passed, "problem": d.problem, "decided_by": d.decided_by,
                         "step": d.step, "step_source": d.step_source or None,
                         "steps": d.steps,
                         "top1_agree": None if d.top1 is None else d.top1[0] / d.top1[1],
                         "top5_overlap": d.top5}
                        for d in self.outputs],
        }

    def tolerance(self) -> str:
        """The tolerance in words, for a heading."""
        text = f"rtol {self.rtol:g}, atol {self.atol:g}"
        if self.max_steps is not None:
            text += (f"; quantized model: or within {self.max_steps:g} quantization steps of "
                     f"each output")
        return text


def compare_outputs(
    actual: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    steps: Mapping[str, Step] | None = None,
    max_steps: float = DEFAULT_STEPS,
) -> Comparison:
    """Compare outputs by name; an output passes when ``np.allclose(actual, expected, rtol,
    atol)`` holds with equal shapes and dtypes, and NaNs only where the reference has them,
    or, for a quantized model (``steps`` from :func:`quantization_steps`), when it is within
    ``max_steps`` of its quantization step everywhere."""
    diffs = [_compare_one(name, actual, np.asarray(want), rtol, atol,
                          None if steps is None else steps.get(name, Step(None, "")), max_steps)
             for name, want in expected.items()]
    return Comparison(tuple(diffs), rtol, atol, None if steps is None else max_steps)


def _compare_one(name: str, actual: Mapping[str, np.ndarray], want: np.ndarray, rtol: float,
                 atol: float, step: Step | None, max_steps: float) -> OutputDiff:
    if name not in actual:
        return OutputDiff(name, np.inf, np.inf, False, "missing from tensorc's outputs")
    got = np.asarray(actual[name])
    if got.shape != want.shape:
        return OutputDiff(name, np.inf, np.inf, False,
                          f"shape {got.shape}, expected {want.shape}")
    problem = "" if got.dtype == want.dtype else f"dtype {got.dtype}, expected {want.dtype}"
    if got.size == 0:
        return OutputDiff(name, 0.0, 0.0, not problem, problem)
    # (at least 1-D: a scalar output's error must take item assignment)
    got64, want64 = (np.atleast_1d(a.astype(np.float64)) for a in (got, want))
    with np.errstate(invalid="ignore"):
        error = np.abs(got64 - want64)
    same = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))   # infinities, NaNs
    error[same] = 0.0
    error[np.isnan(error)] = np.inf
    magnitude = np.abs(np.where(np.isfinite(want64), want64, 0.0))
    allowed = atol + rtol * magnitude
    worst = int(np.argmax(error / allowed))
    close = bool(error.flat[worst] <= allowed.flat[worst])
    decided_by = ("exact" if error.flat[worst] == 0 else
                  "atol" if atol >= rtol * magnitude.flat[worst] else "rtol")
    diff = dict(max_abs=float(error.max()),
                max_rel=float((error / (magnitude + atol)).max()),
                decided_by=decided_by, worst_expected=float(magnitude.flat[worst]),
                allowed=float(allowed.flat[worst]))
    if step is not None:
        size = step.size
        if size is None:
            finite = want64[np.isfinite(want64)]
            span = float(finite.max() - finite.min()) if finite.size else 0.0
            size = span / 255 if span > 0 else atol
        steps_off = diff["max_abs"] / size
        diff.update(step=size, step_source=step.source, steps=steps_off,
                    **_top_k(got64, want64))
        if not close and steps_off <= max_steps:
            close, diff["decided_by"] = True, "steps"
    return OutputDiff(name, passed=close and not problem, problem=problem, **diff)


def _top_k(got: np.ndarray, want: np.ndarray) -> dict:
    """How often the top-1 class agrees over the rows of a score output (last axis of 2 or
    more classes), and the mean overlap of the top-5 sets where there are more than 5."""
    if got.ndim == 0 or got.shape[-1] < 2 or not np.isfinite(got).all():
        return {}
    rows_got = got.reshape(-1, got.shape[-1])
    rows_want = want.reshape(-1, want.shape[-1])
    agree = int((rows_got.argmax(-1) == rows_want.argmax(-1)).sum())
    found: dict = {"top1": (agree, rows_got.shape[0])}
    if got.shape[-1] > 5:
        top_got = np.argsort(-rows_got, axis=-1)[:, :5]
        top_want = np.argsort(-rows_want, axis=-1)[:, :5]
        overlap = [len(set(a) & set(b)) / 5 for a, b in zip(top_got, top_want)]
        found["top5"] = float(np.mean(overlap))
    return found


def format_comparison(comparison: Comparison) -> list[str]:
    """One readable line per output: its errors, the verdict and which tolerance term
    decided it (and, for a quantized model, its errors in steps and top-k agreement)."""
    return [_format_one(diff, comparison) for diff in comparison.outputs]


def _format_one(diff: OutputDiff, comparison: Comparison) -> str:
    verdict = "PASS" if diff.passed else "FAIL"
    text = f"{diff.name}: max abs err {diff.max_abs:.3g}"
    if diff.steps is not None and not diff.problem:
        text += f" = {diff.steps:.3g} steps of {diff.step:.3g} ({diff.step_source})"
    text += f", max rel err {diff.max_rel:.3g}"
    if diff.problem:
        return f"{text}  {verdict}  ({diff.problem})"
    if diff.decided_by == "steps":
        why = (f"by quantization steps: {diff.steps:.3g} <= {comparison.max_steps:g} steps "
               f"(rtol/atol alone would fail)")
    elif diff.decided_by == "exact":
        why = "(equal)"
    elif diff.passed:
        why = (f"by {diff.decided_by}: worst element within atol {comparison.atol:g} + rtol "
               f"{comparison.rtol:g} x |expected| {diff.worst_expected:.3g} = "
               f"{diff.allowed:.3g}")
    else:
        why = f"worst element off by more than atol + rtol x |expected| = {diff.allowed:.3g}"
        if diff.steps is not None:
            why += f", and {diff.steps:.3g} steps > {comparison.max_steps:g}"
    text += f"  {verdict} {why}"
    if diff.top1 is not None:
        agree, rows = diff.top1
        text += f"; top-1 agrees in {agree}/{rows} rows"
        if diff.top5 is not None:
            text += f", top-5 overlap {diff.top5:.0%}"
    return text

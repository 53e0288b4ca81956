"""onnxruntime as the oracle for whole models: random feeds, a reference run, a comparison.

onnxruntime is an optional dependency (the ``test`` extra); it is imported only when used.

>>> feeds = random_inputs([("x", (1, 784), "float32")], seed=0)
>>> expected = run_onnxruntime("models/mlp.onnx", feeds)
>>> compare_outputs(expected, expected).passed
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tensorc.errors import TensorcError
from tensorc.reference.compare import (  # noqa: F401  (the package's names)
    DEFAULT_ATOL, DEFAULT_RTOL, DEFAULT_STEPS, Comparison, OutputDiff, Step, compare_outputs,
    format_comparison, model_nodes, quantization_steps,
)


ModelSource = str | Path | bytes | onnx.ModelProto
Signature = Sequence[tuple[str, tuple[int, ...], str]]


SAMPLE_RATE_NAMES = ("sr", "sample_rate", "sampling_rate", "samplerate")
SAMPLE_RATE = 16000  # what speech models (voice detectors, recognizers) take


def _is_mask(name: str, shape: Sequence[int], kind: str) -> bool:
    return "mask" in name


def _is_segment_ids(name: str, shape: Sequence[int], kind: str) -> bool:
    return kind in "iu" and name.endswith(("token_type_ids", "segment_ids"))


def _is_position_ids(name: str, shape: Sequence[int], kind: str) -> bool:
    return kind in "iu" and name.endswith("position_ids") and len(shape) >= 1


def _is_sample_rate(name: str, shape: Sequence[int], kind: str) -> bool:
    return kind in "iu" and name in SAMPLE_RATE_NAMES


def _is_control(name: str, shape: Sequence[int], kind: str) -> bool:
    # (a symbolic dim: not known to be one element)
    return kind in "iu" and all(isinstance(d, int) for d in shape) and \
        int(np.prod(shape, dtype=np.int64)) == 1


# What an input's (lower-case) name implies its random feed should be: the first rule that
# matches decides; (matches, what the feed is, the value it is set to).
INPUT_RULES = (
    (_is_mask, "ones (a mask)", lambda shape: 1),
    (_is_segment_ids, "zeros (segment ids)", lambda shape: 0),
    (_is_position_ids, "0, 1, 2, ... (positions)", lambda shape: np.arange(shape[-1])),
    (_is_sample_rate, f"{SAMPLE_RATE} (a sample rate)", lambda shape: SAMPLE_RATE),
    (_is_control, "1 (a control input)", lambda shape: 1),
)


def _find_rule(name: str, shape: Sequence[int], dtype: str) -> tuple | None:
    kind = np.dtype(dtype).kind
    return next((rule for rule in INPUT_RULES if rule[0](name.lower(), shape, kind)), None)


def input_rule(name: str, shape: Sequence[int], dtype: str) -> str | None:
    """What an input's name implies its random feed should be, or None (plain random):
    a mask is all ones, token type (segment) ids zeros, position ids 0, 1, 2, ... along the
    last axis, an integer sample rate 16000, and any other integer input of one element (a
    control input: a count, a flag, a choice) 1.

    >>> input_rule("attention_mask", (1, 64), "int64")
    'ones (a mask)'
    """
    rule = _find_rule(name, shape, dtype)
    return rule[1] if rule else None


def random_inputs(signature: Signature, seed: int = 0,
                  shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, np.ndarray]:
    """Seeded random feeds for a (name, shape, dtype) signature; ``shapes`` gives the
    shapes of inputs with symbolic dims (a module over symbolic dims runs any of them).

    Floats are standard normal, integers uniform in [0, 10), bools fair coin flips, except
    where a name implies more (:func:`input_rule`: masks of ones, a sample rate of 16000,
    control inputs 1). Every input draws from the seed in order, rule or not, so the others
    do not change with it.
    """
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for name, shape, dtype in signature:
        shape = _concrete_shape(name, shape, (shapes or {}).get(name))
        dt = np.dtype(dtype)
        if dt.kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind in "iu":
            feeds[name] = rng.integers(0, 10, size=shape).astype(dt)
        elif dt.kind == "b":
            feeds[name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise TensorcError(f"cannot make random values for input {name!r} of dtype {dtype}")
        rule = _find_rule(name, shape, dtype)
        if rule is not None:
            feeds[name][...] = rule[2](shape)
    return feeds


def _concrete_shape(name: str, declared, given) -> tuple[int, ...]:
    """The shape random values for input ``name`` take: ``given`` (which must keep the
    declared rank and static dims), else the declared one where it has no symbolic dim."""
    static = all(isinstance(d, int) for d in declared)
    text = f"[{', '.join(str(d) for d in declared)}]"
    if given is None:
        if not static:
            example = "x".join(str(d) if isinstance(d, int) else "N" for d in declared)
            raise TensorcError(f"input {name!r} has symbolic dims {text}: give the shape "
                               f"to run (Python: shapes={{{name!r}: (...)}}; CLI: "
                               f"--input-shape {name}={example}, N a size)")
        return tuple(declared)
    given = tuple(int(d) for d in given)
    if len(given) != len(declared) or any(isinstance(d, int) and d != g
                                          for d, g in zip(declared, given)):
        raise TensorcError(f"--input-shape {name}={'x'.join(map(str, given))} does not fit "
                           f"the input's shape {text}")
    return given


def onnxruntime_session(model: ModelSource, num_threads: int | None = None,
                        spinning: bool = False) -> Any:
    """An onnxruntime CPU session set up for fair comparison: ``num_threads`` intra-op threads
    (None or 0: onnxruntime's default), one inter-op thread, all graph optimizations.

    Idle spinning is off: onnxruntime's workers otherwise keep spinning for long after a run
    (still after 200 ms here) and steal the cores of whatever runs next in the process, which
    made tensorc's 2-thread ResNet 13.6 ms instead of 7.7 ms, while onnxruntime itself ran as
    fast without spinning (4.74 vs 4.68 ms), measured side by side on this 2-core machine.
    ``spinning=True`` keeps onnxruntime's default (spinning workers on), as users get it: the
    benchmarks compare against that."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise TensorcError(
            "onnxruntime is not installed; install it with: pip install 'tensorc[test]'"
        ) from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = num_threads or 0
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if isinstance(model, (str, Path)):
        what = str(model)
    else:
        what = "the model"
    source = for_onnxruntime(model, ort)
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime does not export its exception types
        raise TensorcError(f"onnxruntime cannot load {what}: {error}") from None


_ort_limits: tuple[int, int] | None = None


def onnxruntime_limits(ort: Any) -> tuple[int, int]:
    """The highest IR version and default-domain opset this onnxruntime loads, probed once
    with one-node models (onnxruntime exposes neither as an API)."""
    global _ort_limits
    if _ort_limits is None:
        from onnx import helper

        def loads(ir_version: int, opset: int) -> bool:
            info = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
            graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                                      [info], [helper.make_tensor_value_info(
                                          "y", onnx.TensorProto.FLOAT, [1])])
            probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
            probe.ir_version = ir_version
            options = ort.SessionOptions()
            options.log_severity_level = 4
            try:
                ort.InferenceSession(probe.SerializeToString(), options,
                                     providers=["CPUExecutionProvider"])
                return True
            except Exception:  # noqa: BLE001
                return False
        ir_version = next((v for v in range(onnx.IR_VERSION, 6, -1) if loads(v, 13)), 7)
        newest = onnx.defs.onnx_opset_version()
        opset = next((v for v in range(newest, 12, -1) if loads(ir_version, v)), 13)
        _ort_limits = (ir_version, opset)
    return _ort_limits


def for_onnxruntime(model: ModelSource, ort: Any) -> str | bytes:
    """``model`` as onnxruntime can load it: an IR version or opset newer than it reads (what
    the pinned onnx's ``helper.make_model`` writes) is lowered where that changes nothing
    (every op of the model has the same definition in the lower opset); otherwise a
    TensorcError says which ops stand in the way. A model that needs no change is passed on
    as it was (a path stays a path)."""
    if isinstance(model, (str, Path)):
        try:
            proto = onnx.load(str(model), load_external_data=False)
        except Exception as error:  # noqa: BLE001 (onnx raises several types)
            raise TensorcError(f"cannot read {model} as an ONNX model: {error}") from None
    elif isinstance(model, bytes):
        try:
            proto = onnx.ModelProto.FromString(model)
        except Exception as error:  # noqa: BLE001 (protobuf's DecodeError and others)
            raise TensorcError(f"onnxruntime cannot load the model: it is not an ONNX model "
                               f"({error})") from None
    else:
        proto = model
    max_ir, max_opset = onnxruntime_limits(ort)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if proto.ir_version <= max_ir and (opset is None or opset <= max_opset):
        return str(model) if isinstance(model, (str, Path)) else \
            (model if isinstance(model, bytes) else model.SerializeToString())
    if isinstance(model, (str, Path)):
        proto = onnx.load(str(model))            # now with its external data, if any
    proto = onnx.ModelProto.FromString(proto.SerializeToString())   # never edit the caller's
    if opset is not None and opset > max_opset:
        changed = sorted({node.op_type for node in model_nodes(proto.graph)
                          if node.domain in ("", "ai.onnx")
                          and _since(node.op_type, opset) != _since(node.op_type, max_opset)})
        if changed:
            raise TensorcError(
                f"onnxruntime {ort.__version__} reads opsets up to {max_opset}, and the model "
                f"uses opset {opset}, where {', '.join(changed)} changed: convert the model "
                f"(onnx.version_converter.convert_version(model, {max_opset})) or install a "
                f"newer onnxruntime")
        for entry in proto.opset_import:
            if entry.domain in ("", "ai.onnx"):
                entry.version = max_opset
    proto.ir_version = min(proto.ir_version, max_ir)
    return proto.SerializeToString()


def _since(op_type: str, opset: int) -> int | None:
    try:
        return onnx.defs.get_schema(op_type, opset).since_version
    except Exception:  # noqa: BLE001 (no such op at that opset)
        return None


def run_session(session: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run an onnxruntime session once and return its outputs by name."""
    names = [output.name for output in session.get_outputs()]
    try:
        values = session.run(names, dict(feeds))
    except Exception as error:  # onnxruntime does not export its exception types
        raise TensorcError(f"onnxruntime failed to run the model: {error}") from None
    return dict(zip(names, values, strict=True))


def run_onnxruntime(
    model: ModelSource,
    feeds: Mapping[str, np.ndarray],
    num_threads: int | None = None,
) -> dict[str, np.ndarray]:
    """Run ``model`` once with onnxruntime and return its outputs by name."""
    return run_session(onnxruntime_session(model, num_threads), feeds)

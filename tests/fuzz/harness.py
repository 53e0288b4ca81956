"""Run mutants against the contract in a worker process, so a crash or a hang is an outcome.

The contract: compiling a model (and running it, if it compiles, on random inputs) either
raises a TensorcError or gives what onnxruntime gives, where onnxruntime accepts the model.

A :class:`Worker` is a child process (``python -m fuzz.harness``) that reads serialized
models from its stdin and answers one JSON line per model; the parent enforces a time limit
per model and restarts the child after a crash or a hang. Outcomes:

- ``tensorc_error``: tensorc raised a TensorcError (at compile or run time);
- ``wrapped``: a TensorcError from the importer's last-resort net around a converter (a
  gap in the checks: not a contract violation, but worth a precise message);
- ``match``: tensorc's outputs equal onnxruntime's (allclose);
- ``mismatch``: both ran and the outputs differ;
- ``ort_rejects``: tensorc gave a result for a model onnxruntime rejects (not a contract
  violation, reported to find models tensorc should also reject);
- ``documented``: tensorc gave a result where onnxruntime fails for a reason the README
  lists as a documented leniency ("Validation"; one rule each in DOCUMENTED_LENIENCIES);
- ``unchecked``: tensorc compiled the model, onnxruntime accepts it, but no feed can be made
  (an input dim past 4096), so no output is compared;
- ``ort_crash``: tensorc gave a result, then onnxruntime died or hung on the model: nothing
  to compare with (onnxruntime's bug, or a model both should reject: worth a look);
- ``nonfinite``: the outputs differ, but the model's constants or float attributes hold
  inf, NaN or values past 1e30, where the order of operations decides between inf, NaN and
  a number (0 * NaN in a padded conv, inf - inf in a sum): not held against tensorc;
- ``memory``: tensorc grew the worker's peak memory by more than ``MEMORY_LIMIT_MB`` (an
  allocation a size check should have refused);
- ``other_exception``: tensorc raised something other than a TensorcError;
- ``crash``: the worker died inside tensorc (a signal, an abort);
- ``hang``: tensorc took longer than the time limit.

tensorc runs first; onnxruntime runs only where tensorc gave a result (a TensorcError is
the outcome whatever onnxruntime does with the model).
"""
from __future__ import annotations

import json
import os
import resource
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

FAILURES = ("mismatch", "other_exception", "crash", "hang", "memory")
OUTCOMES = ("tensorc_error", "wrapped", "match", "ort_rejects", "documented", "unchecked",
            "ort_crash", "nonfinite") + FAILURES
MEMORY_LIMIT_MB = 3072
RTOL, ATOL = 1e-3, 1e-4
# half-precision outputs: a few units in their last place (float16's is 2^-10 at 1, bfloat16's
# 2^-7), where the order of a sum's terms decides the rounding
HALF_TOLERANCES = {"float16": (4e-3, 1e-3), "bfloat16": (1.6e-2, 1.6e-2)}
TESTS_DIR = Path(__file__).resolve().parents[1]


# the child ---------------------------------------------------------------------------------
def _feeds(model, seed: int):
    import numpy as np
    from onnx import helper
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        if any(d < 0 or d > 4096 for d in shape):  # a dim of 0 is an empty array
            return None  # no feed to make: onnxruntime cannot run it, nor tensorc
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[value.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            low = -2 if np.issubdtype(dtype, np.signedinteger) else 0
            feeds[value.name] = rng.integers(low, 2, shape).astype(dtype)
        else:
            return None
    return feeds


def _onnxruntime(model, feeds):
    """onnxruntime's outputs (None where it fails on the model or its run) and its message
    when it fails. A session that fails in onnxruntime's graph optimizer (not in its checks
    of the model) is built again without optimizations: a bug of the optimizer is no
    judgement on the model."""
    import onnxruntime
    data = model.SerializeToString()
    session = None
    for level in (onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
                  onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL):
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 4
        options.graph_optimization_level = level
        try:
            session = onnxruntime.InferenceSession(data, options,
                                                   providers=["CPUExecutionProvider"])
            break
        except Exception as error:
            message = _ort_message(error)
            if any(code in message for code in _MODEL_ERRORS):
                break
    if session is None:
        return None, message
    if feeds is None:
        return None, "no feed to run it with"
    try:
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, feeds))), ""
    except Exception as error:
        return None, _ort_message(error)


# onnxruntime's status codes for a model it refuses (rather than a failure of its optimizer)
_MODEL_ERRORS = ("INVALID_GRAPH", "INVALID_PROTOBUF", "NOT_IMPLEMENTED", "INVALID_ARGUMENT")


def _ort_message(error: Exception) -> str:
    message = str(error)
    return message[message.find("Error"):] if "Error" in message else message


def _short(message: str) -> str:
    """onnxruntime's message for a detail line: its start, and its end where the reason is
    (after a C++ source location)."""
    if len(message) <= 300:
        return message
    return f"{message[:150]} ... {message[-140:]}"


def _documented(model, ort_message: str) -> str | None:
    """The README's documented leniency ("Validation") that explains why onnxruntime fails
    where tensorc gives a result, or None."""
    for leniency, applies in DOCUMENTED_LENIENCIES:
        if applies(model, ort_message):
            return leniency
    return None


def _has_zero_dim(model) -> bool:
    return any(d.HasField("dim_value") and d.dim_value == 0
               for v in model.graph.input for d in v.type.tensor_type.shape.dim)


def _numeric_type_leniency(model, message: str) -> bool:
    """onnxruntime's type error names a numeric element type that the schema does not list
    at an input whose schema takes numbers (not integers or booleans alone)."""
    import re
    from onnx import defs
    found = re.search(r"Type 'tensor\((\w+)\)' of input parameter \((.*?)\) of operator "
                      r"\((\w+)\)", message)
    if not found or found.group(1) in ("bool", "string"):
        return False
    name, op_type = found.group(2), found.group(3)
    opset = next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), 0)
    try:
        schema = defs.get_schema(op_type, opset, "")
    except defs.SchemaError:
        return False
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    for node in model.graph.node:
        if node.op_type != op_type or name not in node.input or not schema.inputs:
            continue
        formal = schema.inputs[min(list(node.input).index(name), len(schema.inputs) - 1)]
        types = allowed.get(formal.type_str, [formal.type_str])
        return any(t.startswith("tensor(") and "int" not in t and "bool" not in t
                   for t in types)
    return False


# (the README's words, whether onnxruntime's failure on a model is that leniency)
DOCUMENTED_LENIENCIES = [
    ("numeric element types beyond a schema's list", _numeric_type_leniency),
    ("onnxruntime has no kernel for the op at the model's opset",
     lambda model, message: "NOT_IMPLEMENTED" in message
     and "Could not find an implementation" in message),
    # a node without a name in onnxruntime's message: one of an expanded function body
    ("zero-size tensors (onnxruntime refuses them in pooling, and in ops it expands into "
     "a function)",
     lambda model, message: _has_zero_dim(model)
     and ("Node () " in message or "Name:''" in message or "Only N can be zero" in message)),
    ("Pad mode=reflect with pads as long as the axis, or on an axis of 1",
     lambda model, message: "Pad reflect" in message),
    ("Split with num_outputs and an empty last chunk",
     lambda model, message: "Invalid value in 'split'" in message
     and "remaining size of the selected axis, 0" in message),
    ("an optional input given as '' is omitted",
     lambda model, message: "the 'split' input should not be provided" in message
     and any(n.op_type == "Split" and len(n.input) > 1 and not n.input[1]
             for n in model.graph.node)),
]


def _same(expected, actual) -> str | None:
    import numpy as np
    for name, want in expected.items():
        got = actual.get(name)
        if got is None:
            return f"output {name!r} missing"
        want = np.asarray(want)
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"output {name!r}: {got.dtype}{list(got.shape)} vs {want.dtype}" \
                   f"{list(want.shape)}"
        if want.dtype.kind in "fc" or want.dtype.name == "bfloat16":
            rtol, atol = HALF_TOLERANCES.get(want.dtype.name, (RTOL, ATOL))
            close = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                atol=atol, equal_nan=True)
        else:
            close = np.array_equal(got, want)
        if not close:
            return f"output {name!r} differs (max abs diff " \
                   f"{np.nanmax(np.abs(got.astype(float) - want.astype(float)))})"
    return None


def check_model(data: bytes) -> dict:
    """Compile and run one serialized model; the outcome and a detail line."""
    import onnx
    import tensorc
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as error:
        return {"outcome": "tensorc_error", "detail": f"not parseable: {error}"}
    feeds = _feeds(model, 0)
    _stage("tensorc")
    global _TENSORC_GROWN_MB
    start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        try:
            module = tensorc.compile(model)
            actual = None if feeds is None else module.run(feeds)
        finally:
            _TENSORC_GROWN_MB = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                 - start) // 1024
    except tensorc.TensorcError as error:
        cause = error.__cause__
        wrapped = cause is not None and not isinstance(cause, tensorc.TensorcError)
        return {"outcome": "wrapped" if wrapped else "tensorc_error",
                "detail": f"{type(error).__name__}: {error}"[:400]}
    except Exception as error:
        import traceback
        where = traceback.extract_tb(error.__traceback__)[-1]
        return {"outcome": "other_exception",
                "detail": f"{type(error).__name__}: {error} at {where.filename}:{where.lineno}"
                          [:600]}
    _stage("onnxruntime")
    expected, ort_message = _onnxruntime(model, feeds)
    if expected is None:
        if feeds is None and ort_message == "no feed to run it with":
            return {"outcome": "unchecked", "detail": "compiled; onnxruntime accepts it; no "
                                                      "feed to run it with"}
        documented = _documented(model, ort_message)
        if documented:
            return {"outcome": "documented", "detail": f"{documented}; onnxruntime: "
                                                       f"{_short(ort_message)}"}
        return {"outcome": "ort_rejects", "detail": f"tensorc gave a result; onnxruntime: "
                                                    f"{_short(ort_message)}"}
    problem = _same(expected, actual)
    if problem and _has_nonfinite_constants(model):
        return {"outcome": "nonfinite", "detail": problem}
    return {"outcome": "mismatch" if problem else "match", "detail": problem or ""}


def _has_nonfinite_constants(model) -> bool:
    import numpy as np
    from onnx import numpy_helper

    def extreme(values) -> bool:
        values = np.asarray(values, dtype=np.float64)
        return bool(values.size) and not bool(np.all(np.abs(values) < 1e30))
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind == "f" and extreme(array):
            return True
    for node in model.graph.node:
        for attribute in node.attribute:
            if extreme(list(attribute.floats) + [attribute.f]):
                return True
    return False


_STAGE_FD = None
# how much tensorc grew the worker's peak memory (MB) on the current model; onnxruntime runs
# after it, so its own appetite (16 GB for Split num_outputs=2^31-1) is not counted
_TENSORC_GROWN_MB = 0


def _stage(name: str) -> None:
    """Tell the parent which side runs now (so a crash is blamed on the right one)."""
    if _STAGE_FD is not None:
        os.write(_STAGE_FD, (json.dumps({"stage": name}) + "\n").encode())


def _serve() -> None:
    global _STAGE_FD
    out = os.dup(1)
    os.dup2(2, 1)   # whatever a library prints goes to stderr, not into the answers
    _STAGE_FD = out
    stdin = sys.stdin.buffer
    while True:
        header = stdin.read(4)
        if len(header) < 4:
            return
        (size,) = struct.unpack("<I", header)
        global _TENSORC_GROWN_MB
        _TENSORC_GROWN_MB = 0
        result = check_model(stdin.read(size))
        grown = _TENSORC_GROWN_MB
        if grown > MEMORY_LIMIT_MB and result["outcome"] not in FAILURES:
            result = {"outcome": "memory", "detail": f"peak memory grew by {grown} MB "
                                                     f"({result['outcome']}: "
                                                     f"{result['detail'][:200]})"}
        os.write(out, (json.dumps(result) + "\n").encode())


# the parent --------------------------------------------------------------------------------
class Worker:
    """A child process that checks models one at a time, restarted after a crash or hang."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.process: subprocess.Popen | None = None
        self._buffer = b""

    def _start(self) -> None:
        env = dict(os.environ)
        root = str(TESTS_DIR.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(TESTS_DIR), root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.setdefault("OMP_NUM_THREADS", "1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fuzz.harness"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(TESTS_DIR))
        self._buffer = b""

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def check(self, data: bytes) -> dict:
        if self.process is None or self.process.poll() is not None:
            self._start()
        process = self.process
        try:
            process.stdin.write(struct.pack("<I", len(data)) + data)
            process.stdin.flush()
        except BrokenPipeError:
            self.close()
            return {"outcome": "crash", "detail": "the worker died before reading the model"}
        stage, deadline = "start", time.monotonic() + self.timeout
        fd = process.stdout.fileno()
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                message = json.loads(line)
                if "stage" in message:
                    stage = message["stage"]
                    continue
                return message
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                self.close()
                return {"outcome": _blame(stage, "hang"),
                        "detail": f"no answer within {self.timeout:g} s (in {stage})"}
            chunk = os.read(fd, 65536)
            if not chunk:
                code = process.wait()
                self.close()
                if stage == "onnxruntime":
                    return {"outcome": "ort_crash", "detail": f"tensorc gave a result; "
                                                              f"onnxruntime died ({code})"}
                return {"outcome": "crash", "detail": f"the worker died with status {code}"}
            self._buffer += chunk


def _blame(stage: str, outcome: str) -> str:
    """A crash or a hang is tensorc's unless onnxruntime was running (after tensorc gave a
    result)."""
    return "ort_crash" if stage == "onnxruntime" else outcome


if __name__ == "__main__":
    _serve()

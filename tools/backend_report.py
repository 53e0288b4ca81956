"""Run ONNX's backend node tests against tensorc and say why each failure fails.

    .venv/bin/python tools/backend_report.py            # pass count, rate, failures by cause
    .venv/bin/python tools/backend_report.py --write    # ... and rewrite the expected failures
    .venv/bin/python tools/backend_report.py -k conv    # only the cases whose name matches

Each case runs exactly as in tests/backend/test_onnx_backend.py (the same unittest methods that
``onnx.backend.test.BackendTest`` generates), in worker processes (2 by default) with a time
limit per case, so a hang or a crash in native code costs one case, not the run.
"""
from __future__ import annotations

import argparse
import multiprocessing
import re
import sys
import time
import traceback
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTED_FAILURES = ROOT / "tests" / "backend" / "expected_failures.txt"
HEADER = """\
# ONNX backend node tests that tensorc fails today, grouped by cause; one test per line:
#   <test name without the _cpu suffix> # <reason>
# tests/backend/test_onnx_backend.py marks them xfail(strict=True): a test that starts to pass
# must leave this list, one that starts to fail must join it. Regenerate the whole list with
#   .venv/bin/python tools/backend_report.py --write
# Reasons starting with "not run:" mark cases that hang or kill the process (a segfault in
# compiled code); pytest marks them xfail(run=False) so that they cannot take it down.
"""
NOT_RUN = "not run:"


@dataclass
class Outcome:
    name: str            # without the _cpu suffix
    passed: bool
    cause: str = ""      # the group: "unsupported op NonZero", "wrong numbers", ...
    detail: str = ""     # one line for expected_failures.txt
    subject: str = ""    # the op the failure is about, for the per-op breakdowns
    seconds: float = 0.0
    unsupported: tuple[str, ...] = ()   # every unsupported op of the model


# ---------------------------------------------------------------------------------------------
# the suite

_SUITE = None


def node_suite():
    """(unittest class of ONNX's node tests for tensorc, the CPU method names, sorted)."""
    global _SUITE
    if _SUITE is None:
        import onnx.backend.test

        from tensorc.backend import TensorcBackend

        class SingleThreadBackend(TensorcBackend):
            num_threads = 1   # the workers share the machine's cores

        with warnings.catch_warnings():  # the case generators overflow casts on purpose
            warnings.simplefilter("ignore")
            backend_test = onnx.backend.test.BackendTest(SingleThreadBackend, __name__)
            cls = backend_test.test_cases["OnnxBackendNodeModelTest"]
        names = sorted(n for n in vars(cls) if n.startswith("test_") and n.endswith("_cpu"))
        _SUITE = (cls, names, backend_test)
    return _SUITE


_MODELS: dict[str, object] = {}


def node_models() -> dict[str, object]:
    """Test name (no _cpu suffix) -> its ModelProto."""
    if not _MODELS:
        from onnx.backend.test.loader import load_model_tests
        _MODELS.update((c.name, c.model) for c in load_model_tests(kind="node"))
    return _MODELS


# ---------------------------------------------------------------------------------------------
# classifying a failure from its exception

_PROBLEM = re.compile(r"^\s+(.+?) \(opset (\d+)\): (.*); nodes? ", re.M)
_CUSTOM = re.compile(r"^\s+(\S+) \(domain ", re.M)
_NODE_OP = re.compile(r"\((\w+), opset \d+\)")
_DTYPE = re.compile(r"has element type (\w+), which tensorc does not support"
                    r"|does not support dtype (\w+)")
# "model 'm': node #3 (unnamed) (If, opset 20): " prefixes, nested for subgraphs
_LABEL = re.compile(r"^(model '[^']*'(: node [^:]*?\(\w+, opset \d+\))?:?\s*)+")


def _one_line(text: str, limit: int = 110) -> str:
    text = " ".join(_LABEL.sub("", text.strip()).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _model_op(model) -> str:
    ops = [n.op_type for n in model.graph.node] if model is not None else []
    return ops[0] if len(set(ops)) == 1 else (f"{len(ops)}-node graph" if ops else "?")


def unsupported_ops(error: BaseException) -> tuple[str, ...]:
    """The op types an UnsupportedOpError lists as not supported at all."""
    return tuple(o for o, _, why in _PROBLEM.findall(str(error)) if why == "not supported")


def classify(error: BaseException, model=None) -> tuple[str, str, str]:
    """(cause, one-line detail, op) of one failed case."""
    from tensorc.errors import (
        InputError, ModelLoadError, ShapeError, TensorcError, UnsupportedOpError,
    )
    message = str(error)
    found = _NODE_OP.findall(message.split("\n")[0])
    op = found[-1] if found else _model_op(model)   # the innermost node of a subgraph
    if isinstance(error, UnsupportedOpError):
        problems = _PROBLEM.findall(message)
        if problems:
            o, opset, why = problems[0]
            missing = [p[0] for p in problems if p[2] == "not supported"]
            if why == "not supported":
                cause = f"unsupported op {o}"
            elif why.startswith("attribute"):
                cause = f"unsupported attribute {o}.{why.split(chr(39))[1]}"
            else:
                cause = f"unsupported opset of {o}"
            others = [f"{p[0]}: {p[2]}" for p in problems if p[2] != "not supported"]
            detail = "; ".join(([f"not supported: {', '.join(missing)}"] if missing else [])
                               + others)
            return cause, _one_line(f"{detail} (opset {opset})", 150), o
        custom = _CUSTOM.findall(message)
        if custom:
            return "custom-domain op", f"{custom[0]}: custom domains are not supported", \
                custom[0]
        if "is an output tensorc does not compute" in message:
            return "optional output not computed", _one_line(message), op
        return f"unsupported case of {op}", _one_line(message.split("\n  inputs:")[0]), op
    dtype = _DTYPE.search(message) if isinstance(error, TensorcError) else None
    if dtype:
        name = (dtype.group(1) or dtype.group(2)).upper()
        return f"dtype {name} not supported", _one_line(message.split("\n  inputs:")[0]), op
    if isinstance(error, ShapeError):
        if "is not a tensor" in message:
            return "non-tensor input (sequence/optional)", _one_line(message), op
        if "tensorc needs it to be constant" in message:
            return "needs a constant input", _one_line(message.split("\n  inputs:")[0]), op
        return "shape error", _one_line(message.split("\n  inputs:")[0]), op
    if isinstance(error, ModelLoadError) and "no opset of the default ONNX domain" in message:
        domains = sorted({n.domain for n in model.graph.node}) if model is not None else []
        return "non-default domain only", f"ops of domain {', '.join(domains)} only", op
    if isinstance(error, InputError):
        return "input error", _one_line(message), op
    if isinstance(error, TensorcError):
        return "tensorc error", _one_line(message.split("\n  inputs:")[0]), op
    if isinstance(error, AssertionError):
        if "incorrect shape" in message:
            return "wrong output shape", _one_line(_assert_lines(message)), op
        if "dtype(" in message:
            return "wrong output dtype", _one_line(_assert_lines(message)), op
        if "Not equal to tolerance" in message or "not equal" in message.lower():
            return "wrong numbers", _one_line(_mismatch(message)), op
        return "assertion", _one_line(message), op
    return f"crash: {type(error).__name__}", _crash_line(error), op


def _assert_lines(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    keep = [ln for ln in lines if ln.startswith(("ACTUAL", "DESIRED", "x:", "y:", "(shapes"))]
    return f"{lines[0]} {' '.join(keep)}" if lines else message


def _mismatch(message: str) -> str:
    parts = [ln.strip() for ln in message.splitlines()
             if ln.strip().startswith(("Mismatched elements", "Max absolute", "Max relative"))]
    return "; ".join(parts) or message


def _crash_line(error: BaseException) -> str:
    """Where inside tensorc it broke (the innermost tensorc frame) and the message."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "/tensorc/" in f.filename.replace("\\", "/")]
    where = ours[-1] if ours else (frames[-1] if frames else None)
    at = f"{Path(where.filename).name}:{where.lineno} {where.name}: " if where else ""
    return _one_line(f"{type(error).__name__} at {at}{error}")


# ---------------------------------------------------------------------------------------------
# running cases in worker processes

def run_case(name: str) -> Outcome:
    """Run one case (name with the _cpu suffix) in this process."""
    cls, _, _ = node_suite()
    start = time.perf_counter()
    try:
        getattr(cls(name), name)()
    except Exception as error:  # every failure is data here
        base = name[:-4]
        cause, detail, op = classify(error, node_models().get(base))
        if op.endswith("-node graph"):   # a function expanded into its body: name it
            op = f"{base[5:].split('_')[0]}... (expanded)"
        return Outcome(base, False, cause, detail, op, time.perf_counter() - start,
                       unsupported_ops(error))
    return Outcome(name[:-4], True, seconds=time.perf_counter() - start)


def _worker(conn) -> None:
    warnings.simplefilter("ignore")
    while True:
        name = conn.recv()
        if name is None:
            return
        conn.send(run_case(name))


class _Worker:
    def __init__(self, context):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.case: str | None = None
        self.started = 0.0

    def give(self, name: str) -> None:
        self.case, self.started = name, time.perf_counter()
        self.conn.send(name)

    def stop(self) -> None:
        self.process.kill()
        self.process.join()


def run_all(names: list[str], workers: int, timeout: float,
            progress=None) -> list[Outcome]:
    """Run ``names`` (with _cpu suffixes) on ``workers`` processes; ``timeout`` per case."""
    node_suite()   # built before forking, so that every worker inherits them
    node_models()
    context = multiprocessing.get_context("fork")
    pool = [_Worker(context) for _ in range(max(1, min(workers, len(names))))]
    todo = list(reversed(names))
    results: list[Outcome] = []
    try:
        while todo or any(w.case for w in pool):
            for w in pool:
                if w.case is None and todo:
                    w.give(todo.pop())
            busy = [w for w in pool if w.case]
            ready = wait([w.conn for w in busy], timeout=0.5)
            for k, w in enumerate(pool):
                if not w.case:
                    continue
                outcome = None
                if w.conn in ready:
                    try:
                        outcome = w.conn.recv()
                    except (EOFError, OSError):  # the worker died inside native code
                        w.process.join()
                        outcome = Outcome(w.case[:-4], False, "crash: worker died",
                                          f"{NOT_RUN} the process died (exit code "
                                          f"{w.process.exitcode})")
                elif time.perf_counter() - w.started > timeout:
                    outcome = Outcome(w.case[:-4], False, "timeout",
                                      f"{NOT_RUN} timeout, no result after {timeout:.0f} s")
                if outcome is None:
                    continue
                outcome.seconds = outcome.seconds or time.perf_counter() - w.started
                results.append(outcome)
                if progress:
                    progress(len(results), len(names), outcome)
                if outcome.cause in ("timeout", "crash: worker died"):
                    w.stop()
                    pool[k] = _Worker(context)
                else:
                    w.case = None
    finally:
        for w in pool:
            w.stop()
    return sorted(results, key=lambda o: o.name)


# ---------------------------------------------------------------------------------------------
# reporting

def report(outcomes: list[Outcome], total: int, wall: float, top: int = 0) -> str:
    failed = [o for o in outcomes if not o.passed]
    passed = len(outcomes) - len(failed)
    lines = [f"ONNX node tests: {passed} of {total} passed ({100 * passed / total:.1f}%), "
             f"{len(failed)} failed; {wall:.0f} s wall, {sum(o.seconds for o in outcomes):.0f}"
             f" s in cases", "", "failures by cause:"]
    groups = _group(failed)
    kinds = Counter(_kind(o.cause) for o in failed)
    lines.insert(1, "by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    for cause, items in groups[:top or None]:
        ops = Counter(o.subject for o in items)
        lines.append(f"  {len(items):5d}  {cause}")
        if not cause.startswith(("unsupported op ", "unsupported opset", "unsupported attr")):
            lines.append("         ops: " + ", ".join(f"{op} {n}" for op, n in
                                                       ops.most_common(12)))
    blocked = Counter(op for o in failed for op in o.unsupported)
    alone = Counter(o.unsupported[0] for o in failed if len(o.unsupported) == 1)
    if blocked:
        lines += ["", "unsupported ops by the cases that need them (alone: the only op the "
                  "case lacks / in all):"]
        lines += _wrap([f"{op} {alone[op]}/{n}" for op, n in
                        sorted(blocked.items(), key=lambda kv: (-alone[kv[0]], -kv[1]))])
    slow = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    lines += ["", "slowest cases: " + ", ".join(f"{o.name} {o.seconds:.2f}s" for o in slow)]
    return "\n".join(lines)


def _kind(cause: str) -> str:
    """The coarse kind of a cause: all unsupported ops together, all dtypes, all crashes."""
    for prefix, kind in (("unsupported op", "unsupported op"), ("unsupported attr",
                         "unsupported op"), ("dtype ", "dtype not supported"),
                         ("crash", "crash"), ("unsupported case", "unsupported case")):
        if cause.startswith(prefix):
            return kind
    return cause


def _wrap(items: list[str], width: int = 96) -> list[str]:
    lines, line = [], ""
    for item in items:
        if line and len(line) + len(item) + 2 > width:
            lines.append(f"  {line},")
            line = ""
        line = f"{line}, {item}" if line else item
    return lines + ([f"  {line}"] if line else [])


def _group(failed: list[Outcome]) -> list[tuple[str, list[Outcome]]]:
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in failed:
        groups[o.cause].append(o)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def expected_failures_text(outcomes: list[Outcome]) -> str:
    """The expected-failures file for these outcomes: one section per cause."""
    parts = [HEADER]
    for cause, items in _group([o for o in outcomes if not o.passed]):
        parts.append(f"\n# == {cause} ({len(items)})\n")
        parts.extend(f"{o.name} # {o.detail.replace('#', '')}\n" for o in items)
    return "".join(parts)


def read_expected_failures(path: Path = EXPECTED_FAILURES) -> dict[str, str]:
    """Test name (no _cpu suffix) -> reason, from the expected-failures file."""
    result = {}
    for line in path.read_text().splitlines():
        name, _, reason = line.partition("#")
        if name.strip():
            result[name.strip()] = reason.strip()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true",
                        help=f"rewrite {EXPECTED_FAILURES.relative_to(ROOT)} from this run")
    parser.add_argument("-k", "--filter", default="", help="regex: run matching cases only")
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--top", type=int, default=0, help="show only the N largest causes")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    args = parser.parse_args(argv)
    _, names, _ = node_suite()
    selected = [n for n in names if re.search(args.filter, n[:-4])]
    if args.write and len(selected) != len(names):
        parser.error("--write needs the whole suite (no --filter)")
    start = time.perf_counter()

    def progress(done: int, total: int, outcome: Outcome) -> None:
        if args.verbose and not outcome.passed:
            print(f"FAIL {outcome.name}: [{outcome.cause}] {outcome.detail}", flush=True)
        elif done % 100 == 0:
            print(f"  {done}/{total}", file=sys.stderr, flush=True)

    outcomes = run_all(selected, args.workers, args.timeout, progress)
    print(report(outcomes, len(selected), time.perf_counter() - start, args.top))
    if args.write:
        EXPECTED_FAILURES.write_text(expected_failures_text(outcomes))
        print(f"\nwrote {EXPECTED_FAILURES.relative_to(ROOT)}: "
              f"{sum(not o.passed for o in outcomes)} expected failures")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())

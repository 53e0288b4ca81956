"""ONNX's own backend node tests (generated in memory by ``onnx.backend.test.BackendTest``)
against tensorc, with the cases tensorc fails today listed in ``expected_failures.txt``.

Listed cases are xfail(strict=True): one that starts to pass fails the run until it leaves the
list, and a regression fails as an ordinary test. Regenerate the list in one command:

    .venv/bin/python tools/backend_report.py --write
"""
from __future__ import annotations

import contextlib
import functools
import re
import warnings
from pathlib import Path
from typing import Callable, Iterator

import onnx.backend.test
import onnx.backend.test.case.base as onnx_case_base
import pytest

from tensorc.backend import TensorcBackend
from tensorc.target import Target

EXPECTED_FAILURES = Path(__file__).with_name("expected_failures.txt")
NOT_RUN = "not run:"   # cases that hang or kill the process: marked, never run
_LINE = re.compile(r"^(test_\w+) # \S.*$")


class SingleThreadBackend(TensorcBackend):
    """Each case is tiny and pytest-xdist runs two at once: one thread per case."""

    num_threads = 1


def read_expected_failures(path: Path = EXPECTED_FAILURES) -> dict[str, str]:
    """Test name (without the _cpu suffix) -> reason; comment and blank lines are skipped."""
    result: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition(" # ")
            result[name.strip()] = reason.strip()
    return result


WITHOUT_AVX512 = "without AVX-512:"


def _node_tests() -> type:
    with warnings.catch_warnings(), _no_snippets():
        warnings.simplefilter("ignore")  # ONNX's case generators overflow casts on purpose
        backend_test = onnx.backend.test.BackendTest(SingleThreadBackend, __name__)
        # node tests only; the model tests of other categories download models
        backend_test.include(r"^test_\w+_cpu$")
        cls = backend_test.test_cases["OnnxBackendNodeModelTest"]
    for name in [n for n in vars(cls) if n.startswith("test_") and not n.endswith("_cpu")]:
        delattr(cls, name)   # the CUDA variants: tensorc's backend is CPU only
    for name, reason in read_expected_failures().items():
        method = vars(cls).get(f"{name}_cpu")
        if method is not None:   # unknown names fail test_expected_failures_are_node_tests
            # "without AVX-512:" cases fail only on hosts that lack it (a schedule path
            # of AVX2's 8-lane vectors); elsewhere they pass and must
            mark = pytest.mark.xfail(strict=True, reason=reason,
                                     run=not reason.startswith(NOT_RUN),
                                     condition=not reason.startswith(WITHOUT_AVX512) or
                                     Target.host().vector_bits < 512)
            setattr(cls, f"{name}_cpu", mark(_short_traceback(method)))
    return cls


@contextlib.contextmanager
def _no_snippets() -> Iterator[None]:
    """ONNX generates its node cases when this module is collected, in every xdist worker,
    and reads the source of each of the ~900 case functions (``inspect.getsource``) to keep
    a documentation snippet that no test runs; skipping that saves about a tenth of the
    collection (profiled: 10 of 81 s). The cases, their models and data are unchanged."""
    saved = onnx_case_base.process_snippet
    onnx_case_base.process_snippet = lambda op_name, name, export: (name, "")
    try:
        yield
    finally:
        onnx_case_base.process_snippet = saved


def _short_traceback(method: Callable) -> Callable:
    """``method`` failing with a one-frame traceback. pytest formats the traceback of every
    expected failure, reading and parsing the source of each frame: for a failure from deep
    in the compiler that takes 5x the test itself. The list says why the case fails; the
    report tool shows the details."""
    @functools.wraps(method)
    def run(self) -> None:
        try:
            method(self)
        except Exception as error:
            raise AssertionError(f"{type(error).__name__}: {str(error)[:500]}") from None
    return run


OnnxBackendNodeModelTest = _node_tests()


def test_expected_failures_are_node_tests():
    """Every line of the list is well formed and names a node test, once."""
    names = []
    for number, line in enumerate(EXPECTED_FAILURES.read_text().splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            assert _LINE.match(line), f"line {number}: expected 'test_name # reason': {line!r}"
            names.append(line.split(" # ")[0])
    known = {n[:-4] for n in vars(OnnxBackendNodeModelTest) if n.endswith("_cpu")}
    assert len(known) > 1500   # ONNX's node suite, not some fraction of it
    assert [n for n in names if n not in known] == []
    assert len(names) == len(set(names))

"""pytest puts this directory on sys.path, so tests can ``from helpers import ort_run``.

The whole session caches in a temporary directory (``TENSORC_CACHE_DIR``, which
``tensorc.runtime.cache_dir.cache_root`` reads first), so no test reads a roofline the user
measured or writes one into the user's cache; subprocesses the tests start inherit it. Under
pytest-xdist the workers share the controller's directory (they inherit its environment), so
a kernel one worker compiled is a cache hit for the other: the same models are compiled by
tests in several files, which the two workers run side by side. The kernel cache is safe for
several processes (atomic writes, checksummed entries).

Where the environment says not to write bytecode (PYTHONDONTWRITEBYTECODE), every process a
test starts (the tuner's builders and runner, the CLI, the fuzz harness) compiled tensorc's
sources again: 1-2 s per start, about half of its import. The session's processes write
their bytecode into a temporary directory of the session's instead (PYTHONPYCACHEPREFIX),
removed at its end: nothing lands beside the sources."""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_saved: dict[str, str | None] = {}
_ENVIRONMENT = ("TENSORC_CACHE_DIR", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
# set by the process that made the session's cache directory: its pid (only that process
# removes the directory)
_OWNER = "TENSORC_TEST_CACHE_OWNER"


def pytest_configure(config: pytest.Config) -> None:
    shared = os.environ.get(_OWNER)
    if hasattr(config, "workerinput") and shared and os.environ.get("TENSORC_CACHE_DIR"):
        return      # an xdist worker: the controller's directory
    for name in (*_ENVIRONMENT, _OWNER):
        _saved[name] = os.environ.get(name)
    os.environ["TENSORC_CACHE_DIR"] = tempfile.mkdtemp(prefix="tensorc-test-cache-")
    os.environ[_OWNER] = str(os.getpid())
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        os.environ["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="tensorc-test-bytecode-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get(_OWNER) != str(os.getpid()):
        return
    shutil.rmtree(os.environ["TENSORC_CACHE_DIR"], ignore_errors=True)
    if _saved.get("PYTHONDONTWRITEBYTECODE"):
        shutil.rmtree(os.environ["PYTHONPYCACHEPREFIX"], ignore_errors=True)
    for name in (*_ENVIRONMENT, _OWNER):
        if _saved.get(name) is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = _saved[name]

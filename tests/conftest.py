"""pytest puts this directory on sys.path, so tests can ``from helpers import ort_run``.

The whole session caches in a temporary directory (``TENSORC_CACHE_DIR``, which
``tensorc.runtime.cache_dir.cache_root`` reads first), so no test reads a roofline the user
measured or writes one into the user's cache; subprocesses the tests start inherit it."""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_saved: dict[str, str | None] = {}


def pytest_configure(config: pytest.Config) -> None:
    _saved["TENSORC_CACHE_DIR"] = os.environ.get("TENSORC_CACHE_DIR")
    os.environ["TENSORC_CACHE_DIR"] = tempfile.mkdtemp(prefix="tensorc-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ["TENSORC_CACHE_DIR"], ignore_errors=True)
    if _saved.get("TENSORC_CACHE_DIR") is None:
        os.environ.pop("TENSORC_CACHE_DIR", None)
    else:
        os.environ["TENSORC_CACHE_DIR"] = _saved["TENSORC_CACHE_DIR"]

"""Where tensorc keeps what it caches on this machine (the measured roofline; compiled code).

>>> cache_root()                      # e.g. PosixPath('/home/me/.cache/tensorc')
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$TENSORC_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/tensorc``, else
    ``~/.cache/tensorc``. Read at each call, so a test suite can point it elsewhere."""
    own = os.environ.get("TENSORC_CACHE_DIR")
    if own:
        return Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tensorc"

"""Fixtures of the op tests."""
from __future__ import annotations

import pytest

from tensorc.ops.nn.conv import winograd_cost, winograd_transforms


@pytest.fixture
def force_tile(monkeypatch):
    """Make every eligible float32 conv run as F(m, 3), whatever the heuristic says: the
    kernel is tested on shapes the heuristic leaves to the direct conv."""
    def force(m: int) -> None:
        def tile_size(attrs, x, w, target, model_weight_bytes=0):
            fits = target is not None and x.dtype == "float32" and \
                winograd_transforms.eligible(attrs, x.shape, w.shape)
            return m if fits else 0
        monkeypatch.setattr(winograd_cost, "tile_size", tile_size)
    return force

"""The garbage collector held back while compiling: thresholds and frozen heap restored after
the block (an exception included), and a heap the caller froze itself stays frozen."""
from __future__ import annotations

import gc

import pytest

from tensorc.compiler.collector import YOUNG_THRESHOLD, fewer_collections


def test_thresholds_and_heap_are_restored_after_the_block() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with fewer_collections():
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen
    with pytest.raises(ValueError), fewer_collections():
        raise ValueError("a compile that fails")
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_a_heap_frozen_by_the_caller_stays_frozen(monkeypatch) -> None:
    # (the frozen count itself may drop meanwhile: frozen objects are still freed by
    # reference counting, by the test runner's threads too; so the unfreeze is watched)
    unfrozen = []
    gc.freeze()
    try:
        monkeypatch.setattr(gc, "unfreeze", lambda: unfrozen.append(True))
        with fewer_collections():
            pass
        monkeypatch.undo()
        assert not unfrozen and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()

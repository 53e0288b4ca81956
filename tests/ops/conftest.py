"""Fixtures of the op tests, and the tests that still reason about the host as an AVX-512 one."""
from __future__ import annotations

import pytest

from tensorc.ops.nn.conv import winograd_cost, winograd_transforms
from tensorc.target import Target

# Tests written on AVX-512 hosts that read the host's own schedule as AVX-512's (16-lane
# blocks, 32 registers, the flattened conv that only AVX-512 targets run) or pin knob values
# only AVX-512 allows. On a host without AVX-512 they are skipped, and say so, until each
# checks the AVX-512 decision on a named target and runs its numbers on the host, as
# test_blocked_layout's graph checks and test_conv_filter_lanes now do.
ASSUME_AVX512 = (
    "test_conv_flat.py::test_narrow_conv_is_flattened_and_correct",
    "test_conv_flat.py::test_default_register_tile_of_the_flattened_conv",
    "test_conv_flat.py::test_every_config_of_the_flattened_conv",
    "test_conv_strided.py::test_shallow_gemm_convs_take_tiles_of_eight_filters",
    "test_blocked_layout.py::test_convs_with_their_channel_blocks_outside_match_onnxruntime",
    "test_blocked_layout.py::test_inception_seven_tap_convs_match_onnxruntime",
    "test_blocked_layout.py::test_a_conv_whose_tiles_divide_the_row_reads_its_padding_in_place",
    "test_blocked_layout.py::test_every_config_of_the_blocked_winograd_space",
    "test_pool_separable.py::test_every_config_of_the_separable_space",
)


def pytest_collection_modifyitems(config, items) -> None:
    if Target.host().vector_bits >= 512:
        return
    skip = pytest.mark.skip(reason="reads this host's schedule as AVX-512's; this host has "
                            "no AVX-512 (tests/ops/conftest.py, ASSUME_AVX512)")
    for item in items:
        if item.nodeid.split("tests/ops/")[-1].split("[")[0] in ASSUME_AVX512:
            item.add_marker(skip)


@pytest.fixture
def force_tile(monkeypatch):
    """Make every eligible float32 conv run as F(m, 3), whatever the heuristic says: the
    kernel is tested on shapes the heuristic leaves to the direct conv."""
    def force(m: int) -> None:
        def tile_size(attrs, x, w, target, model_weight_bytes=0, direct=True):
            fits = target is not None and x.dtype == "float32" and \
                winograd_transforms.eligible(attrs, x.shape, w.shape)
            return m if fits else 0
        monkeypatch.setattr(winograd_cost, "tile_size", tile_size)
    return force

"""Which convs run as Winograd, and as which F(m, 3): a cost model in cycles of the direct
(flattened) conv and of F(m, 3), the least wins (``tile_size``, read by ``conv/strategy.py``).
"""
from __future__ import annotations

import numpy as np

from tensorc.ir.types import TensorType
from tensorc.ops.nn.conv.winograd_transforms import (
    KERNEL, TILE_ALIGN, eligible, out_size, padded_tiles, tile_grid,
)
from tensorc.target import Target


# The model's constants were fitted to one-thread timings (Zen 4) of the 3x3 convs of the
# bundled models and 15 more shapes, 16 to 512 channels on maps of 7 to 149 (ff3e164); on
# small maps it errs towards the direct conv, which ran slower than its FMAs say.
MIN_CHANNELS = 16   # fewer channels or filters: too little GEMM per transformed element
MIN_VECTOR_BITS = 256
TILE_SIZES = (4, 2)
# The fraction of one FMA a cycle per lane that the direct (flattened) conv and the Winograd
# GEMMs reach (ff3e164).
DIRECT_EFFICIENCY = 0.95
GEMM_EFFICIENCY = 0.9
# Cycles per vector of tiles of each transform (input, output), per channel or filter, and a
# fixed cost (the stages' passes and threads), fitted to the same timings (ff3e164).
TRANSFORM_CYCLES = {4: (600, 350), 2: (60, 60)}
WINOGRAD_CYCLES = 5_000
# Small channel counts over large maps are bound by the transformed tiles' trip through
# memory (V and M, each written once and read once), which the cycles above do not see:
# where V and M exceed STREAM_BYTES, the GEMM must do at least MIN_FLOPS_PER_BYTE per byte
# of them (ad19dff).
STREAM_BYTES = 8 << 20
MIN_FLOPS_PER_BYTE = 6
# The transformed weights are (m + 2)^2 / 9 times the direct conv's and a small map reuses
# each over few tiles; in a model they come from memory, so a conv's time is at least its
# weights' bytes at WEIGHT_BYTES_PER_CYCLE, for weights above COLD_WEIGHT_BYTES (fitted in
# ResNet-50, 48d89d8) ...
WEIGHT_BYTES_PER_CYCLE = 1.5
COLD_WEIGHT_BYTES = 4 << 20
# ... unless the whole model's weights take at most HOT_MODEL_BYTES: they stay in the
# last-level cache between runs, even transformed, and its convs are bound by their
# arithmetic (d425c53).
HOT_MODEL_BYTES = 8 << 20


def tile_size(attrs: dict, x: TensorType, w: TensorType, target: Target | None,
              model_weight_bytes: int = 0, direct: bool = True) -> int:
    """m of the F(m x m, 3 x 3) a conv (OIHW weights ``w``) runs as, or 0 (the direct conv):
    float32 convs that ``eligible`` admits, with at least MIN_CHANNELS channels and filters,
    on CPU targets with 256-bit vectors or wider (weights of a conv compiled without a target
    stay OIHW) and not ``-winograd=0``, where the cost model estimates F(m, 3) fastest.
    ``model_weight_bytes``: all the model's weights (0: unknown), which say whether they stay
    in the caches between runs. ``direct=False``: the fastest F(m, 3) where Winograd may run
    (0 where none may), for the tuner to weigh against the direct conv.

    >>> tile_size({"strides": (1, 1), "dilations": (1, 1), "groups": 1, "pads": (1,) * 4},
    ...           TensorType((1, 64, 56, 56), "float32"),
    ...           TensorType((64, 64, 3, 3), "float32"), Target.from_string("llvm -mcpu=znver4"))
    4
    """
    if target is None or target.options.get("winograd") == "0" or \
            target.vector_bits < MIN_VECTOR_BITS or x.dtype != "float32" or \
            w.dtype != "float32" or not eligible(attrs, x.shape, w.shape):
        return 0
    filters, channels = w.shape[:2]
    if min(channels, filters) < MIN_CHANNELS:
        return 0
    lanes = target.vector_lanes("float32")
    hot = 0 < model_weight_bytes <= HOT_MODEL_BYTES
    costs = {0: _weights_bound(_direct_cycles(attrs, x.shape, filters, lanes),
                               KERNEL * KERNEL * filters * channels, hot)} if direct else {}
    for m in TILE_SIZES:
        if not _streams(attrs, x.shape, filters, m):
            costs[m] = _weights_bound(_winograd_cycles(attrs, x.shape, filters, m, lanes),
                                      (m + KERNEL - 1) ** 2 * filters * channels, hot)
    return min(costs, key=costs.get) if costs else 0


def _weights_bound(cycles: float, weights: int, hot: bool) -> float:
    """The time of a conv that reads ``weights`` float32 weights once per run: more than
    COLD_WEIGHT_BYTES of them come from memory (ResNet-50's 100 MB outgrow any cache), so
    at least their bytes at WEIGHT_BYTES_PER_CYCLE; unless the whole model's are ``hot``."""
    if weights * 4 <= COLD_WEIGHT_BYTES or hot:
        return cycles
    return max(cycles, weights * 4 / WEIGHT_BYTES_PER_CYCLE)


def _direct_cycles(attrs: dict, x_shape, filters: int, lanes: int) -> float:
    """The direct conv's FMAs over its flattened rows (``conv/flattened.py``: the padded
    row's garbage columns computed, q in whole vectors)."""
    out = out_size(attrs, x_shape)
    pitch = x_shape[3] + attrs["pads"][1] + attrs["pads"][3]
    steps = -(-out[0] * pitch // lanes) * lanes
    fmas = x_shape[0] * filters * x_shape[1] * KERNEL * KERNEL * steps
    return fmas / lanes / DIRECT_EFFICIENCY


def _winograd_cycles(attrs: dict, x_shape, filters: int, m: int, lanes: int) -> float:
    """The GEMMs' FMAs (over the padded tiles; a few tiles on a half-empty vector) and the
    transforms' vectors of tiles (a tile row per vector)."""
    n_batch, channels = x_shape[:2]
    tile_rows, tile_cols = tile_grid(m, out_size(attrs, x_shape))
    tiles = padded_tiles(n_batch * tile_rows * tile_cols)
    alpha2 = (m + KERNEL - 1) ** 2
    gemm = alpha2 * filters * channels * max(tiles, TILE_ALIGN // 2) / lanes / GEMM_EFFICIENCY
    per_row = -(-tile_cols // lanes)
    rows_in = -(-tiles // tile_cols)
    cycles_in, cycles_out = TRANSFORM_CYCLES[m]
    transforms = channels * rows_in * per_row * cycles_in + \
        filters * n_batch * tile_rows * per_row * cycles_out
    return gemm + transforms + WINOGRAD_CYCLES


def _streams(attrs: dict, x_shape, filters: int, m: int) -> bool:
    """Whether V and M would stream through memory with too little GEMM per byte."""
    n_batch, channels = x_shape[:2]
    tiles = padded_tiles(n_batch * int(np.prod(tile_grid(m, out_size(attrs, x_shape)))))
    alpha2 = (m + KERNEL - 1) ** 2
    streamed = 2 * alpha2 * (channels + filters) * tiles * 4        # V and M, out and back
    flops = 2 * alpha2 * filters * channels * tiles
    return streamed > 2 * STREAM_BYTES and flops < MIN_FLOPS_PER_BYTE * streamed

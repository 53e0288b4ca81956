"""The GEMM micro-kernel's register tile and the packed panels of B it reads.

A constant right operand ``B[K, N]`` is repacked at compile time (``passes/graph/
alter_layout.py``) into column panels ``[ceil(N/nr), K, nr]``: one panel is what the register
tile (``rows x nr``) reads per step of k, contiguous.
"""
from __future__ import annotations

import numpy as np

from tensorc.target import Target

# A matmul's constant B, on AVX-512, is packed in panels of this many vectors: a 6 x 4 tile
# loads 10 vectors per 24 FMAs, a 14 x 2 tile 16 per 28 (measured in 3a4fd88).
PACKED_PANEL_VECTORS = 4
GEMV_VECTORS = 4     # a one-row product: 4 accumulator chains hide the FMA latency (902d975)
# the panel widths (in vectors) a tuning config may repack a constant B into
PANEL_VECTOR_CHOICES = (1, 2, 3, 4)


def pack_b_panels(b: np.ndarray, nr: int) -> np.ndarray:
    """``B[K, N]`` as column panels ``[ceil(N/nr), K, nr]``, the last one padded with zeros.

    >>> pack_b_panels(np.arange(6.).reshape(2, 3), 2)[:, :, 0].tolist()
    [[0.0, 3.0], [2.0, 5.0]]
    """
    k, n = b.shape
    panels = -(-n // nr)
    padded = np.zeros((k, panels * nr), b.dtype)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, panels, nr).transpose(1, 0, 2))


def unpack_b_panels(packed: np.ndarray, n: int) -> np.ndarray:
    """The inverse of :func:`pack_b_panels`: ``B[K, n]`` without the padding."""
    panels, k, nr = packed.shape
    return packed.transpose(1, 0, 2).reshape(k, panels * nr)[:, :n]


def micro_tile(target: Target, vectors: int = 2) -> tuple[int, int]:
    """The micro-kernel's register tile (rows, vectors) for the target's vector registers:
    rows x vectors accumulators, plus the vectors of B and one broadcast of A, fit the
    register file with none to spill (AVX2: 16 ymm -> 6 x 2; AVX-512: 32 zmm -> 14 x 2, or
    6 x 4 for panels of 4 vectors)."""
    rows = (target.vector_registers - vectors - 1) // vectors
    return rows, vectors


def panel_width(target: Target, n: int, m: int = 2) -> int:
    """Columns of a packed B panel: the register tile's width (one vector for narrow B; a
    one-row A (GEMV) has a one-row tile and takes wider panels, for more FMA chains)."""
    lanes = target.vector_lanes("float32")
    if n <= lanes:
        return lanes
    if m == 1:
        vectors = GEMV_VECTORS
    elif target.vector_bits >= 512:
        vectors = PACKED_PANEL_VECTORS
    else:
        vectors = micro_tile(target)[1]
    return lanes * min(vectors, -(-n // lanes))


def tile_columns(n: int, lanes: int, nr: int, vectors: int) -> int:
    """The register tile's columns: a packed B's panel width ``nr``, else ``vectors`` vectors;
    over fewer columns, one vector (or all ``n`` where that is less)."""
    width = nr if nr else lanes * vectors
    return width if n >= width else (lanes if n >= lanes and not nr else n)

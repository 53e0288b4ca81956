"""numpy helpers for sliding-window references (conv, pooling)."""
from __future__ import annotations

import itertools
from typing import Iterator, Sequence

import numpy as np


def window_slices(padded: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int], out_shape: Sequence[int]
                  ) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """Yield ``(offset, view)`` for every kernel offset; ``view[..., o]`` is the input element
    that offset contributes to output position ``o``. Axes 0 and 1 (N, C) are kept whole.

    Looping over the (few) kernel offsets rather than the (many) output positions keeps the
    reference vectorized.
    """
    for offset in itertools.product(*(range(k) for k in kernel)):
        index = [slice(None), slice(None)]
        for k, s, d, o in zip(offset, strides, dilations, out_shape):
            start = k * d
            index.append(slice(start, start + (o - 1) * s + 1, s))
        yield offset, padded[tuple(index)]


def pad_spatial(x: np.ndarray, pads: Sequence[int], value: float, extra_end: Sequence[int] = ()
                ) -> np.ndarray:
    """Pad the spatial dims of ``x`` (ONNX pads: all begins, then all ends) with ``value``.

    ``extra_end`` adds room past the end padding for ceil-mode pooling windows.
    """
    spatial = x.ndim - 2
    extra = tuple(extra_end) or (0,) * spatial
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial] + extra[i]) for i in range(spatial)]
    return np.pad(x, widths, mode="constant", constant_values=value)

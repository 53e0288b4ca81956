"""Which formulation a max or average pool runs as (``pool/formulations.py``): the one place
that decides, from the pool's attrs and input. Blocked pools (attr ``layout_block``, set by
``passes/graph/alter_layout.py``) run on the blocks; float max pools whose two passes save
taps split each plane on its NaN (``nan_split``); other large windows run as two passes
(``separable``); the rest in one pass over each window (``window``).
"""
from __future__ import annotations

import math

# The two passes take KW * sy + KH taps per output (the row pass runs on sy input rows per
# output row), twice that for float max pooling (each row's NaN mark beside its maximum),
# plus about TWO_PASS_OVERHEAD for the copies of the row pass's results and the NaN marks;
# one pass takes KH * KW. Fitted to single-pass timings on Zen 4 (9797a95).
TWO_PASS_OVERHEAD = 6

# Both passes keep a channel's whole plane (its padded input, the row pass's results) in
# local buffers on the stack: planes (volumes) of more elements take the single pass.
SEPARABLE_MAX_PLANE = 16384

# The NaN-split form takes KW * sy + KH taps per output on planes without NaN, plus about
# NAN_SPLIT_OVERHEAD for the NaN test, the copies of the row pass's results and the choice
# between the two paths' planes. Fitted on Zen 4 (72f24ae).
NAN_SPLIT_OVERHEAD = 6


def formulation(kind: str, attrs: dict, x_shape: tuple[int, ...], is_float: bool) -> str:
    """The formulation of a ``kind`` ("max_pool" or "avg_pool") pool over input ``x_shape``.

    >>> formulation("max_pool", {"kernel_shape": (5, 5), "strides": (1, 1), "pads": (2,) * 4},
    ...             (1, 64, 13, 13), is_float=True)
    'nan_split'
    """
    if attrs.get("layout_block"):
        return "blocked"
    if not all(isinstance(d, int) for d in x_shape):
        return "window"     # symbolic dims: the one-pass window takes run-time extents
    if kind == "max_pool":
        if is_float and nan_split(attrs, x_shape):
            return "nan_split"
        return "separable" if separable(attrs, x_shape, 2 if is_float else 1) else "window"
    return "separable" if separable(attrs, x_shape, 1) else "window"


def separable(attrs: dict, x_shape: tuple[int, ...], values_per_row: int) -> bool:
    """Whether a pooling window over input ``x_shape`` is computed in two passes: where it
    has more than one tap along the rows and across them, the padded plane has at most
    SEPARABLE_MAX_PLANE elements and the two passes take fewer taps per output than one
    (``values_per_row``: what the pass across rows folds per row, 2 for float max pooling's
    NaN mark and maximum, 1 for sums and integer maxima).

    >>> separable({"kernel_shape": (9, 9), "strides": (1, 1), "pads": (4,) * 4},
    ...           (1, 64, 13, 13), values_per_row=2)
    True
    """
    return _two_passes_win(attrs, x_shape, values_per_row, TWO_PASS_OVERHEAD)


def nan_split(attrs: dict, x_shape: tuple[int, ...]) -> bool:
    """Whether float max pooling over input ``x_shape`` takes the NaN-split form: where the
    window is separable (as for :func:`separable`) and the two passes without NaN marks take
    fewer taps per output than one pass.

    >>> nan_split({"kernel_shape": (5, 5), "strides": (1, 1), "pads": (2,) * 4}, (1, 64, 13, 13))
    True
    """
    return _two_passes_win(attrs, x_shape, 1, NAN_SPLIT_OVERHEAD)


def _two_passes_win(attrs: dict, x_shape: tuple[int, ...], values_per_row: int,
                    overhead: int) -> bool:
    """Whether the window has more than one tap along the rows and across them, its padded
    plane at most SEPARABLE_MAX_PLANE elements, and two passes folding ``values_per_row``
    values per tap, plus ``overhead``, take fewer taps per output than one pass."""
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    spatial = len(x_shape) - 2
    along, across = kernel[-1], math.prod(kernel[:-1])
    if spatial < 2 or along < 2 or across < 2:
        return False
    plane = math.prod(x_shape[2 + d] + pads[d] + pads[d + spatial] for d in range(spatial))
    if plane > SEPARABLE_MAX_PLANE:
        return False
    rows_per_output_row = math.prod(strides[:-1])
    two_pass = values_per_row * (along * rows_per_output_row + across) + overhead
    return along * across > two_pass


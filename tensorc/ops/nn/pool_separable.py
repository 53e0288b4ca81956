"""Separable pooling windows: a window's maximum or sum as a pass along the rows and a pass
across them, about KH + KW taps per output instead of KH * KW (twice that for float max
pooling, see below).

    pool_rows[n, c, y, x] = max over kx of padded[n, c, y + pad_top, x*sx + kx*dx]
    out[n, c, y, x]       = max over ky of pool_rows_padded[n, c, y*sy + ky*dy, x]

The row pass covers the input's rows, and its result is padded across the rows as the input
is (-inf for max, 0 for sums, the ceil-mode overhang too); where that copy costs more than
running the row pass over the padding rows as well (small windows on tall maps), the row
pass runs over the padded rows instead. With 3 spatial dims the row pass runs along the last
one and the second pass over the other two.

Max pooling folds ``acc > v ? acc : v`` (te.max_ordered) over the window in row-major order,
and that fold splits into rows exactly only with one more value per row. A NaN tap makes
the next tap restart the running maximum, so folding a row into ``acc`` gives
``fold(acc, row maximum)`` for a row without NaN, but the row's own fold (whatever ``acc``
was) for a row with one. The row pass therefore also sums ``isnan(v) ? NaN : -inf`` over
each row (``pool_row_nans``: NaN where the row holds a NaN, else -inf; sums of these two
values are exact in any order), and the pass across rows folds each row's mark just before
its maximum: a NaN mark makes the fold restart at the row's maximum, a -inf mark changes
nothing (``fold(acc, -inf)`` is ``acc``; after a NaN it is -inf, which the row's maximum
then replaces as it would have replaced the NaN). So every window gives exactly what the
single pass gives, NaN, -inf padding and all, at 2 (KH + KW) taps per output.

Float max pooling takes the NaN-split form instead (:func:`nan_split_max`) wherever it
costs fewer taps than one pass, which is everywhere the form with marks would: each
channel's plane is tested for NaN first (a vector of counts, then their sum), a plane
without NaN takes the two passes without marks (KH + KW taps: on NaN-free values the ordered
fold is the maximum, the last of equal values in window order, which the rows' maxima and
then their maximum keep, -0 and +0 included), and a plane with a NaN the single pass
(``Stage.compute_if``), exact whatever its NaN. The form with marks stays the exact two-pass
form that the cycle model's constants select where the split form is turned off.
"""
from __future__ import annotations

import math

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ops.nn.conv import padded_input

# The two passes take KW * sy + KH taps per output (the row pass runs on sy input rows per
# output row), twice that for float max pooling (each row's NaN mark beside its maximum),
# plus about TWO_PASS_OVERHEAD for the copies of the row pass's results and the NaN marks;
# one pass takes KH * KW. Measured on one thread of Zen 4 beside the single pass: max pools
# 5x5 (25 taps against 26) from 28% faster (7x7 maps) to 18% slower (28x28), 7x7 (49
# against 34) 1.4-2.2x faster, 5x5 stride 2 (25 against 36) 10-20% slower, 7x7 stride 2 (49
# against 48) 1.2-1.4x faster; average pools 3x3 (9 against 12) up to 1.4x slower, 4x4 (16
# against 14) 1.25x faster, 5x5 (25 against 16) 1.4x faster.
TWO_PASS_OVERHEAD = 6

# Both passes keep a channel's whole plane (its padded input, the row pass's results) in
# local buffers on the stack: planes (volumes) of more elements take the single pass.
SEPARABLE_MAX_PLANE = 16384

ROWS = ("pool_rows", "pool_row_sums")     # the names of the row pass's results


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


# The NaN-split form (float max pooling, :func:`nan_split_max`) takes KW * sy + KH taps per
# output on planes without NaN, plus about NAN_SPLIT_OVERHEAD for the NaN test, the copies of
# the row pass's results and the choice between the two paths' planes. Measured on one
# thread of Zen 4 beside the single pass (and the form with marks for 9x9 and 13x13), kernel
# times: max pools 5x5 stride 1 1.4-1.6x faster on 13x13 and 14x14 maps, 1.25x on 28x28,
# even on 7x7; 9x9 1.35-1.7x faster, 13x13 1.6-2.3x.
NAN_SPLIT_OVERHEAD = 6


def nan_split(attrs: dict, x_shape: tuple[int, ...]) -> bool:
    """Whether float max pooling over input ``x_shape`` takes the NaN-split form: where the
    window is separable (as for :func:`separable`) and the two passes without NaN marks take
    fewer taps per output than one pass.

    >>> nan_split({"kernel_shape": (5, 5), "strides": (1, 1), "pads": (2,) * 4}, (1, 64, 13, 13))
    True
    """
    return _two_passes_win(attrs, x_shape, 1, NAN_SPLIT_OVERHEAD)


def _row_pass(padded: te.Tensor, attrs: dict, rows: tuple[int, ...], offsets: tuple[int, ...],
              width: int, reducer, name: str) -> te.Tensor:
    """``reducer`` over each output column's taps along the row, for the ``rows`` (leading
    spatial extents) starting at ``offsets`` in ``padded``."""
    spatial = len(rows) + 1
    stride = attrs["strides"][-1]
    dilation = tuple(attrs.get("dilations", (1,) * spatial))[-1]
    rx = te.reduce_axis(attrs["kernel_shape"][-1], "rx")

    def body(n, c, *index):
        *lead, x = index
        at = [i + o for i, o in zip(lead, offsets)]
        return reducer(padded[(n, c, *at, x * stride + rx.var * dilation)], axis=[rx])
    return te.compute(padded.shape[:2] + rows + (width,), body, name=name,
                      axis_names=["n", "c", *"zy"[3 - spatial:], "x"])


def _across(shape: tuple[int, ...], attrs: dict, value_at, reducer, name: str, tag: str = "",
            extra_axes: tuple = ()) -> te.Tensor:
    """``reducer`` over the window's taps across the rows: ``value_at(n, c, index)`` is the
    row pass's value at padded row position ``index`` (its last entry the output column)."""
    spatial = len(shape) - 2
    strides = attrs["strides"]
    dilations = tuple(attrs.get("dilations", (1,) * spatial))
    rk = [te.reduce_axis(k, f"r{'zy'[3 - spatial + d]}")
          for d, k in enumerate(attrs["kernel_shape"][:-1])]

    def body(n, c, *o):
        index = [o[d] * strides[d] + rk[d].var * dilations[d] for d in range(spatial - 1)]
        return reducer(value_at(n, c, (*index, o[-1])), axis=[*rk, *extra_axes])
    return te.compute(shape, body, name=name, tag=tag,
                      axis_names=["n", "c", *"zyx"[3 - spatial:]])


class _Rows:
    """The row pass over a padded input, its results padded across the rows."""

    def __init__(self, x_shape: tuple[int, ...], padded_shape: tuple[int, ...], attrs: dict,
                 extra: tuple[int, ...], width: int):
        spatial = len(x_shape) - 2
        self.attrs, self.width = attrs, width
        pads = attrs["pads"]
        self.lead_pads = tuple(pads[:spatial - 1]) + (0,) + \
            tuple(pads[spatial:2 * spatial - 1]) + (0,)
        self.lead_extra = tuple(extra[:-1]) + (0,)
        inner, outer = x_shape[2:-1], padded_shape[2:-1]
        # a row pass over the padding rows too (their taps all padding) costs more taps per
        # padding row than a copy of the row pass's result costs per row
        kernel_along = attrs["kernel_shape"][-1]
        self.over_padding = (math.prod(outer) - math.prod(inner)) * kernel_along < \
            math.prod(outer)
        self.rows = outer if self.over_padding else inner
        self.offsets = (0,) * len(inner) if self.over_padding else tuple(pads[:spatial - 1])

    def __call__(self, source: te.Tensor, reducer, name: str, value: float) -> te.Tensor:
        rows = _row_pass(source, self.attrs, self.rows, self.offsets, self.width, reducer,
                         name)
        if self.over_padding:
            return rows
        return padded_input(rows, self.lead_pads, self.lead_extra, value,
                            name=f"{name}_padded")


def separable_max(x: te.Tensor, attrs: dict, out: tuple[int, ...], extra: tuple[int, ...]
                  ) -> te.Tensor:
    """max_pool in two passes (see the module docstring); ``extra``: the ceil-mode
    overhang per spatial dim."""
    lowest = te.min_value(x.dtype).value
    padded = padded_input(x, attrs["pads"], extra, lowest)
    row_pass = _Rows(x.shape, padded.shape, attrs, extra, out[-1])
    shape = x.shape[:2] + tuple(out)
    rows = row_pass(padded, te.max_ordered, "pool_rows", lowest)
    if not E.is_float(x.dtype):       # no NaN: the maximum of the rows' maxima
        return _across(shape, attrs, lambda n, c, i: rows[(n, c, *i)], te.max_ordered,
                       "max_pool")
    nan, inf = E.Const(float("nan"), x.dtype), E.Const(float("-inf"), x.dtype)
    marks = te.compute(padded.shape, lambda *i: E.select(
        E.Call("isnan", (padded[i],), "bool"), nan, inf), name="pool_nan_marks")
    nans = row_pass(marks, te.sum_, "pool_row_nans", lowest)
    # each row's NaN mark, then its maximum: the innermost reduction axis picks which
    part = te.reduce_axis(2, "rp")
    mark = E.Compare("eq", part.var, E.const(0))
    return _across(shape, attrs, lambda n, c, i: E.select(mark, nans[(n, c, *i)],
                                                          rows[(n, c, *i)]),
                   te.max_ordered, "max_pool", extra_axes=(part,))


def separable_sum(x: te.Tensor, attrs: dict, out: tuple[int, ...], extra: tuple[int, ...]
                  ) -> te.Tensor:
    """The window sums of avg_pool in two passes (zero padding)."""
    padded = padded_input(x, attrs["pads"], extra, 0.0)
    rows = _Rows(x.shape, padded.shape, attrs, extra, out[-1])(padded, te.sum_,
                                                               "pool_row_sums", 0.0)
    return _across(x.shape[:2] + tuple(out), attrs, lambda n, c, i: rows[(n, c, *i)],
                   te.sum_, "pool_sum", tag="anchor:pool_sum")


def nan_split_max(x: te.Tensor, attrs: dict, out: tuple[int, ...], extra: tuple[int, ...]
                  ) -> te.Tensor:
    """Float max pooling in two forms chosen per channel plane: the two passes without NaN
    marks where the plane holds no NaN (on NaN-free values the fold is the maximum, last of
    equals in window order, which any grouping of the taps keeps: the rows' maxima, then
    their maximum), and the single pass over each window, exact for any input, where it
    holds one. ``pool_has_nan[n, c]`` counts the plane's NaN; the schedule computes the
    single pass only for the planes it counts NaN in (``Stage.compute_if``).

        pool_has_nan[n, c]      = sum over the plane of isnan(x)
        max_pool_exact          = the single pass (te.max_ordered over each window)
        max_pool_fast           = the pass across rows of the row pass's maxima
        max_pool[n, c, ...]     = pool_has_nan[n, c] > 0 ? max_pool_exact : max_pool_fast
    """
    spatial = x.ndim - 2
    lowest = te.min_value(x.dtype).value
    # (each path its own padded copy, computed inside it: the single pass's only for the
    # planes that take it)
    padded = padded_input(x, attrs["pads"], extra, lowest, name="pad_exact")
    shape = x.shape[:2] + tuple(out)
    planes = [te.reduce_axis(n, f"h{d}") for d, n in enumerate(x.shape[2:])]
    one, zero = E.Const(1.0, x.dtype), E.Const(0.0, x.dtype)
    has_nan = te.compute(x.shape[:2], lambda n, c: te.sum_(E.select(
        E.Call("isnan", (x[(n, c, *(r.var for r in planes))],), "bool"), one, zero),
        axis=planes), name="pool_has_nan", tag="anchor:pool_has_nan")
    strides, kernel = attrs["strides"], attrs["kernel_shape"]
    dilations = tuple(attrs.get("dilations", (1,) * spatial))
    taps = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(kernel)]

    def window(n, c, *o):
        at = [o[d] * strides[d] + taps[d].var * dilations[d] for d in range(spatial)]
        return te.max_ordered(padded[(n, c, *at)], axis=taps)
    exact = te.compute(shape, window, name="max_pool_exact", tag="anchor:max_pool_exact")
    padded = padded_input(x, attrs["pads"], extra, lowest)
    rows = _Rows(x.shape, padded.shape, attrs, extra, out[-1])(padded, te.max_ordered,
                                                               "pool_rows", lowest)
    fast = _across(shape, attrs, lambda n, c, i: rows[(n, c, *i)], te.max_ordered,
                   "max_pool_fast", tag="anchor:max_pool_fast")
    return te.compute(shape, lambda n, c, *o: E.select(
        E.Compare("gt", has_nan[n, c], zero), exact[(n, c, *o)], fast[(n, c, *o)]),
        name="max_pool")

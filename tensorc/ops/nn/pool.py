"""max_pool and avg_pool over 1 to 3 spatial dims, NCHW layout, with ONNX's ceil_mode rule.

max_pool attrs: kernel_shape, strides, pads, dilations, ceil_mode.
avg_pool attrs: kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad.

Large windows are computed in two passes, along the rows and then across them
(pool_separable.py, scheduled by :func:`schedule_separable`), float max pooling's only for
the channel planes without NaN (:func:`schedule_nan_split`); the others in one pass over each
window (:func:`schedule_window`).
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.types import TensorType
from tensorc.ops.nn import blocked
from tensorc.ops.nn.conv import padded_input
from tensorc.ops.nn.pool_separable import (
    ROWS, nan_split, nan_split_max, separable, separable_max, separable_sum,
)
from tensorc.ops.nn.windows import pad_spatial, window_slices
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import PARALLEL_MIN_ELEMENTS, parallel_outer, vector_block
from tensorc.ops.space import Knob, SearchSpace, divisors
from tensorc.ops.shape_rules import (
    check_window_attrs,
    expect_arity,
    expect_float,
    window_output_size,
)
from tensorc.target import Target

max_pool = define("max_pool", Pattern.REDUCTION)
avg_pool = define("avg_pool", Pattern.REDUCTION)


def _dilations(attrs: dict, spatial: int) -> tuple[int, ...]:
    return tuple(attrs.get("dilations", (1,) * spatial))


def output_spatial(attrs: dict, shape: tuple[int, ...]) -> tuple[int, ...]:
    spatial = len(shape) - 2
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    dilations = _dilations(attrs, spatial)
    return tuple(window_output_size(shape[2 + i], kernel[i], strides[i], dilations[i], pads[i],
                                    pads[i + spatial], bool(attrs["ceil_mode"]))
                 for i in range(spatial))


def overhang(attrs: dict, shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """How far the last ceil-mode window reaches past the end padding, per spatial dim."""
    spatial = len(shape) - 2
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    dilations = _dilations(attrs, spatial)
    return tuple(max(0, (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                     - (shape[2 + i] + pads[i] + pads[i + spatial]))
                 for i in range(spatial))


def infer_pool(name: str, attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity(name, input_types, 1)
    (x,) = input_types
    if attrs.get("layout_block"):     # blocked activations: the plain pool's rule, blocked
        b = attrs["layout_block"]
        plain = infer_pool(name, {**attrs, "layout_block": 0}, [blocked.plain_type(x, b)])
        return [blocked.blocked_type(plain[0], b)]
    spatial = x.ndim - 2
    if not 1 <= spatial <= 3:
        raise ShapeError(f"{name}: input must be [N, C, spatial...] with 1 to 3 spatial dims, "
                         f"got {x}")
    check_window_attrs(name, x, attrs["kernel_shape"], attrs["strides"], attrs["pads"],
                       _dilations(attrs, spatial))
    out = output_spatial(attrs, x.shape)
    if min(out) < 1:
        raise ShapeError(f"{name}: kernel {attrs['kernel_shape']} does not fit in input {x} "
                         f"padded by {attrs['pads']}")
    return [TensorType(x.shape[:2] + out, x.dtype)]


@max_pool.infer
def _max_pool_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    return infer_pool("max_pool", attrs, input_types)


@avg_pool.infer
def _avg_pool_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("avg_pool", input_types, 1)
    expect_float("avg_pool", input_types[0])
    return infer_pool("avg_pool", attrs, input_types)


def _blocked_reference(reference):
    """A pool's reference that also takes blocked tensors (attr layout_block)."""
    def on_blocks(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
        b = attrs.get("layout_block")
        if not b:
            return reference(attrs, x)
        return [blocked.block(reference(attrs, blocked.unblock(x, b))[0], b)]
    return on_blocks


@max_pool.reference
@_blocked_reference
def _max_pool_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    out = output_spatial(attrs, x.shape)
    lowest = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    padded = pad_spatial(x, attrs["pads"], lowest, overhang(attrs, x.shape, out))
    result = np.full(x.shape[:2] + out, lowest, dtype=x.dtype)
    for _, view in window_slices(padded, attrs["kernel_shape"], attrs["strides"],
                                 _dilations(attrs, x.ndim - 2), out):
        # acc > x ? acc : x, as the kernel and onnxruntime (see te.max_ordered)
        result = np.where(result > view, result, view)
    return [result]


@avg_pool.reference
@_blocked_reference
def _avg_pool_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    out = output_spatial(attrs, x.shape)
    pads, extra = attrs["pads"], overhang(attrs, x.shape, out)
    spatial = x.ndim - 2
    padded = pad_spatial(x.astype(np.float64), pads, 0.0, extra)
    # The divisor counts the window's input elements, plus its explicit padding with
    # count_include_pad; the ceil-mode overhang never counts.
    ones = np.ones((1, 1) + x.shape[2:])
    counted = pad_spatial(ones, pads, float(bool(attrs["count_include_pad"])))
    counted = pad_spatial(counted, (0,) * spatial + tuple(extra), 0.0)
    total = np.zeros(x.shape[:2] + out)
    count = np.zeros((1, 1) + out)
    strides, dilations = attrs["strides"], _dilations(attrs, spatial)
    for _, view in window_slices(padded, attrs["kernel_shape"], strides, dilations, out):
        total += view
    for _, view in window_slices(counted, attrs["kernel_shape"], strides, dilations, out):
        count += view
    return [(total / np.maximum(count, 1)).astype(x.dtype)]


# ---------------------------------------------------------------------------------------------
# kernel: compute (windows over a padded input) and the generic reduction schedule

def _window_positions(attrs: dict, spatial: int, out_index, reduce_axes) -> list[E.Expr]:
    strides, dilations = attrs["strides"], _dilations(attrs, spatial)
    return [out_index[d] * strides[d] + reduce_axes[d].var * dilations[d]
            for d in range(spatial)]


@max_pool.compute
def _max_pool_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    if attrs.get("layout_block"):
        return _pool_blocked("max_pool", attrs, x)
    spatial = x.ndim - 2
    out = output_spatial(attrs, x.shape)
    if E.is_float(x.dtype) and nan_split(attrs, x.shape):
        return nan_split_max(x, attrs, out, overhang(attrs, x.shape, out))
    if separable(attrs, x.shape, 2 if E.is_float(x.dtype) else 1):
        return separable_max(x, attrs, out, overhang(attrs, x.shape, out))
    lowest = te.min_value(x.dtype).value
    padded = padded_input(x, attrs["pads"], overhang(attrs, x.shape, out), lowest)
    rk = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(attrs["kernel_shape"])]

    def body(n, c, *o):
        pos = _window_positions(attrs, spatial, o, rk)
        return te.max_ordered(padded[(n, c, *pos)], axis=rk)
    return te.compute(x.shape[:2] + out, body, name="max_pool")


@avg_pool.compute
def _avg_pool_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    if attrs.get("layout_block"):
        return _pool_blocked("avg_pool", attrs, x)
    spatial = x.ndim - 2
    out = output_spatial(attrs, x.shape)
    pads, kernel = attrs["pads"], attrs["kernel_shape"]
    if separable(attrs, x.shape, 1):
        total = separable_sum(x, attrs, out, overhang(attrs, x.shape, out))
    else:
        padded = padded_input(x, pads, overhang(attrs, x.shape, out), 0.0)
        rk = [te.reduce_axis(k, f"r{d}") for d, k in enumerate(kernel)]
        total = te.compute(x.shape[:2] + out, lambda n, c, *o: te.sum_(
            padded[(n, c, *_window_positions(attrs, spatial, o, rk))], axis=rk),
            name="pool_sum", tag="anchor:pool_sum")
    return te.compute(x.shape[:2] + out, lambda n, c, *o: total[(n, c, *o)] /
                      _window_count(attrs, x.shape[2:], x.dtype, o), name="avg_pool")


def _window_count(attrs: dict, size: tuple[int, ...], dtype: str, o) -> E.Expr:
    """avg_pool's divisor at output position ``o`` (of an input of spatial ``size``): the
    window's elements inside the input (or inside input + explicit padding, with
    count_include_pad): the k in [0, K) with low <= start + k*dilation < high; in 32-bit
    integers, which vector units have min, max and conversion to float for (64-bit ones are
    scalarized on AVX2, which made this divisor cost more than the window sum)."""
    spatial = len(size)
    pads, strides, kernel = attrs["pads"], attrs["strides"], attrs["kernel_shape"]
    include = bool(attrs["count_include_pad"])
    dilations = _dilations(attrs, spatial)
    count = None
    for d in range(spatial):
        start = E.cast("int32", o[d]) * strides[d] - pads[d]
        low = -pads[d] if include else 0
        high = size[d] + (pads[d + spatial] if include else 0)
        step = dilations[d]
        first = E.maximum((low - start + step - 1) // step, 0)     # ceil division
        last = E.minimum((high - 1 - start) // step, kernel[d] - 1)
        n = E.maximum(last - first + 1, 0)
        count = n if count is None else count * n
    return E.cast(dtype, E.maximum(count, 1))


def _pool_blocked(kind: str, attrs: dict, x: te.Tensor) -> te.Tensor:
    """A 2-D pool of a blocked tensor (see ops/nn/blocked.py)."""
    plain = blocked.plain_type(TensorType(x.shape, x.dtype), attrs["layout_block"]).shape
    out = output_spatial(attrs, plain)
    value = te.min_value(x.dtype).value if kind == "max_pool" else 0.0
    padded = padded_input(x, attrs["pads"], overhang(attrs, plain, out), value, blocked=True)
    return blocked.pool_blocked(kind, attrs, padded, out,
                                lambda o: _window_count(attrs, plain[2:], x.dtype, o))


PLANE_BUFFER = 4096     # padded planes up to this many elements are buffered whole


def _padded_input_of(window: te.Tensor) -> te.Tensor | None:
    return next((t for t in window.op.input_tensors() if getattr(t.op, "tag", "") == "pad"),
                None)


def window_space(target: Target, out: te.Tensor, anchor: te.Tensor, attrs: dict
                 ) -> SearchSpace:
    """buffer: where the padded input is copied to a local buffer (each output row's input
    rows, or a channel's whole padded plane, which small maps reuse across their rows);
    registers: vector registers per output block; parallel."""
    window = anchor if anchor.op.reduce_axis else anchor.op.input_tensors()[0]
    pad = _padded_input_of(window)
    plane = int(np.prod(pad.shape[2:])) if pad is not None else 0
    choices = ("rows", "plane", "none") if pad is not None and len(out.shape) > 3 else \
        (("rows", "none") if pad is not None else ("none",))
    default = choices[0] if plane > PLANE_BUFFER or "plane" not in choices else "plane"
    height = out.shape[-2] if len(out.shape) > 3 else 1
    rows = _default_rows(target, out, window, default)
    unroll = _default_unroll(target, out, window, rows)
    row_choices = sorted({r for r in (1, 2, 3, 4, 7, 8) if r <= height} | {rows})
    knobs = [Knob("buffer", choices, default, "where the padded input is buffered")]
    if out.shape[-1] > target.vector_lanes(out.dtype):     # (else a row is one block)
        knobs.append(Knob("registers", (1, 2, 4), 4, "vector registers per output block (at "
                          "most): 1, a register-wide vector; 2, a vector of up to two "
                          "registers; 4, up to four such vectors accumulated side by side"))
    if len(row_choices) > 1 and _row_stride(window) == 1 and choices != ("none",):
        knobs.append(Knob("rows", tuple(row_choices), rows, "output rows accumulated side "
                          "by side (the input buffered, stride 1): rows x blocks chains"))
    knobs.append(Knob("unroll_taps", (False, True), unroll, "the window's taps unrolled"))
    if np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS:         # (else one thread in any case)
        knobs.append(Knob("parallel", (True, False), True, "output rows on threads"))
    return SearchSpace(knobs, name="pool")


def _default_rows(target: Target, out: te.Tensor, window: te.Tensor, buffer: str) -> int:
    """Output rows accumulated side by side: enough chains of dependent operations to hide
    their latency (a multiply-add's is 4 cycles, a max's or an add's 1 to 3), few enough to
    keep the loads flowing; the rows a block does not divide are computed twice."""
    if buffer == "none" or len(out.shape) < 4 or _row_stride(window) > 1:
        return 1
    lanes = target.vector_lanes(out.dtype)
    width, height = out.shape[-1], out.shape[-2]
    _, vectors, _, whole_row = _row_blocks(target, out, window, 4)
    per_row = -(-width // lanes) if whole_row else vectors
    if width <= lanes // 2:
        per_row = 0.5        # half a register
    chains = 8 if _weighted(window) and (per_row <= 1 or _taps(window) <= 9) else 4
    limit = max(1, min(height, int(chains / per_row)))
    # (with each band of rows buffered, the bands run in parallel: whole ones)
    waste = ROW_WASTE if buffer == "plane" else 0
    return max(r for r in range(1, limit + 1)
               if -(-height // r) * r - height <= height * waste)


def _default_unroll(target: Target, out: te.Tensor, window: te.Tensor, rows: int) -> bool:
    """Whether the taps of a window of up to 25 accumulated in blocks of rows are unrolled:
    pooling windows, and convs on rows of one whole register (measured on Zen 4, 5x5
    depthwise convs on 13x13 and 14x14 maps 1.3-1.4x faster, max pools 2-12%; 5x5 depthwise
    convs on 7x7 maps, rows of half a register, 13-15% slower, and no change with rows of
    two registers)."""
    if rows < 2 or _taps(window) > 25:
        return False
    lanes = target.vector_lanes(out.dtype)
    return not _weighted(window) or lanes // 2 < out.shape[-1] <= lanes


def _taps(window: te.Tensor) -> int:
    return math.prod(iv.extent for iv in window.op.reduce_axis)


def _weighted(window: te.Tensor) -> bool:
    """Whether the window multiplies its taps by weights (a depthwise conv: chains of
    multiply-adds, 4 cycles each) rather than taking their maximum or sum."""
    return any(isinstance(e, E.Binary) and e.op == "mul" and E.is_float(e.dtype)
               for e in E.walk(window.op.body))


ROW_WASTE = 0.125       # rows computed twice, at most, as a part of the height


def _row_stride(window: te.Tensor) -> int:
    """How far apart in its input the window's consecutive outputs along the row start."""
    x = window.op.axis[-1].var
    strides = [arith.linear_coeff(load.indices[-1], x) for load in E.walk(window.op.body)
               if isinstance(load, E.Load) and len(load.indices) == len(window.shape)]
    return max([abs(s[1]) for s in strides if s is not None] or [1])


def schedule_window(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                    config=None) -> None:
    """Pooling (a reduction over a window of a padded input, ``window``; depthwise convs
    too) on any shape.

    Output rows (n, c, leading spatial dims) run in parallel; the padded input is copied into
    a local buffer once (the padding decided there, not at every tap): each output row's
    input rows, or for a small map the channel's whole padded plane; the output row is split
    into blocks of up to four vectors (the last block of a row they do not divide overlaps
    the one before it), each accumulated in registers over the window with unconditional
    loads from that buffer:

        for (n.c.y: parallel)
          pad_rows[K, Wp] = padded input rows y*s .. y*s+K-1      (masked loads at the edges)
          for (x.o)  [for (ry, rx)  for (x.i: vectorized)  acc = max(acc, pad_rows[ry, ...])]
    """
    config = config or window_space(target, out, window, {}).default()
    stage, plane, window = _window_blocks(target, sch, out, window,
                                          config.get("registers", 4),
                                          config.get("parallel", False), config["buffer"],
                                          rows_per_block=config.get("rows", 1),
                                          unroll_taps=config["unroll_taps"])
    pad = _padded_input_of(window)
    if pad is not None and config["buffer"] != "none":
        _buffer_at(target, sch[pad], stage, plane)


def _buffer_at(target: Target, st, stage, loop) -> None:
    """A copy (padding) stage computed once per iteration of ``stage``'s ``loop``, in a
    register-wide block with a masked tail."""
    st.compute_at(stage, loop)
    st.vectorize(st.split(st.op_axis[-1], target.vector_lanes(st.tensor.dtype))[1])


def _row_blocks(target: Target, out: te.Tensor, window: te.Tensor, registers: int
                ) -> tuple[int, int, bool, bool]:
    """How an output row is split into blocks accumulated in registers: (elements per
    block, vectors per block, whether the last block overlaps the one before it, whether
    the row is one block)."""
    lanes = target.vector_lanes(out.dtype)
    width = out.shape[-1]
    block = vector_block(width, lanes) if registers >= 2 else \
        (width if width <= lanes else lanes)
    vectors, shift = 1, False
    if registers == 4 and width % block == 0 and block % lanes == 0:
        # several vectors per output block, each its own accumulator: the window's taps are
        # a chain of dependent adds (or maxes) per accumulator, and one chain leaves the
        # vector units idle for most of each add's latency
        vectors = max(d for d in range(1, 5) if (width // block) % d == 0)
        block *= vectors
    strided = _row_stride(window) > 1
    whole = width % block == 0 and block >= lanes
    if registers == 4 and width > 2 * lanes and not (whole and strided):
        # else blocks of whole registers, up to four side by side, as few vector operations
        # per row as can be: a row of 110 is 7 blocks of two vectors, not 22 chains of 5
        # lanes. A block that does not divide the row ends the row overlapping the one
        # before it: a guarded last block runs masked loads and stores at every tap, as
        # slow as several blocks. (Strided windows keep whole blocks of 9 lanes: a strided
        # vector load is a shuffle of two, and the overlap would add shuffles.)
        vectors = min(range(1, min(4, width // lanes) + 1),
                      key=lambda v: (-(-width // (v * lanes)) * v, -v))
        block = vectors * lanes
        shift = width % block != 0
    return block, vectors, shift, block >= width


def _window_blocks(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                   registers: int, parallel: bool, buffer: str, row_registers: int | None = None,
                   rows_per_block: int = 1, unroll_taps: bool = False):
    """The output's loops and the window's accumulation in registers (see
    :func:`schedule_window`): ``rows_per_block`` output rows side by side (stride 1, the
    input buffered), or as many as make ``row_registers`` vector registers; the window's
    taps unrolled with ``unroll_taps``. Returns the output stage, the loop per buffered input
    (a channel's plane with ``buffer`` "plane", else a block of output rows) and the tensor
    that accumulates the window."""
    if out is window:
        window = sch.cache_write(window, "local")
    lanes = target.vector_lanes(out.dtype)
    stage = sch[out]
    *rows, x = stage.op_axis
    width = out.shape[-1]
    block, vectors, shift, whole_row = _row_blocks(target, out, window, registers)
    if not whole_row:
        x_outer, x_inner = stage.split(x, block, shift_tail=shift)
    else:
        x_outer, x_inner = None, x
    stage.vectorize(x_inner)
    work = int(np.prod(out.shape)) if parallel else 0
    row_block = 1
    height = out.shape[-2]
    if buffer != "none" and len(rows) >= 3 and _row_stride(window) == 1:
        row_block = min(rows_per_block, height)
        if row_registers is not None:
            if x_outer is None:
                row_block = min(max(1, row_registers // -(-width // lanes)), height)
            else:
                row_block = divisors(height, max(1, row_registers // vectors))[-1]
    y_inner = None
    if row_block > 1:
        rows[-1], y_inner = stage.split(rows[-1], row_block,
                                        shift_tail=height % row_block != 0)
        if x_outer is not None:
            stage.reorder(*rows, x_outer, y_inner, x_inner)
    if buffer == "plane":
        # (n, c) in parallel, the leading spatial loops inside: the plane is reused by them
        plane = parallel_outer(stage, rows[:2], work)
        row = rows[-1]
    else:
        plane = row = parallel_outer(stage, rows, work)
    acc = sch[window]
    acc.compute_at(stage, x_outer if x_outer is not None else row)
    *acc_rows, acc_x = acc.op_axis
    if y_inner is not None:
        *acc_rows, acc_y = acc_rows
        if vectors > 1:
            acc_o, acc_x = acc.split(acc_x, block // vectors)
            acc.reorder(*acc_rows, *acc.reduce_axis, acc_y, acc_o, acc_x)
            acc.unroll(acc_o)
        else:
            acc.reorder(*acc_rows, *acc.reduce_axis, acc_y, acc_x)
        acc.unroll(acc_y)
        acc.vectorize(acc_x)
    elif vectors > 1:
        acc_o, acc_i = acc.split(acc_x, block // vectors)
        acc.reorder(*acc_rows, *acc.reduce_axis, acc_o, acc_i)
        acc.unroll(acc_o)
        acc.vectorize(acc_i)
    else:
        acc.reorder(*acc_rows, *acc.reduce_axis, acc_x)
        acc.vectorize(acc_x)
    if unroll_taps:
        for r in acc.reduce_axis:
            acc.unroll(r)
    return stage, plane, window


# ---------------------------------------------------------------------------------------------
# the separable form (pool_separable.py): a pass along the rows, then one across them

def separable_space(target: Target, out: te.Tensor, anchor: te.Tensor, attrs: dict
                    ) -> SearchSpace:
    """registers: vector registers per block of either pass; across_rows: how many
    registers' worth of output rows the pass across rows accumulates side by side (each row
    of the row pass's result it loads serves them all); parallel."""
    knobs = [
        Knob("registers", (1, 2, 4), 4, "vector registers per block of either pass (at "
             "most): 1, a register-wide vector; 2, a vector of up to two registers; 4, up to "
             "four such vectors (or rows of the row pass) accumulated side by side"),
        Knob("across_rows", (1, 4, 8), 8, "vector registers of output rows accumulated "
             "side by side in the pass across rows"),
    ]
    if np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS:     # (else one thread in any case)
        knobs.append(Knob("parallel", (True, False), True, "channels on threads"))
    return SearchSpace(knobs, name="pool (separable)")


def _separable_window(anchor: te.Tensor) -> te.Tensor | None:
    """The pass across the rows of a separable pooling group, or None for a single pass."""
    window = anchor if anchor.op.reduce_axis else anchor.op.input_tensors()[0]
    frontier = list(window.op.input_tensors())
    while frontier:         # the row pass's result, padded or not
        t = frontier.pop()
        if t.op.name in ROWS:
            return window
        if isinstance(t.op, te.ComputeOp) and not t.op.reduce_axis:
            frontier += t.op.input_tensors()
    return None


def schedule_separable(target: Target, sch: Schedule, out: te.Tensor, window: te.Tensor,
                       config) -> None:
    """The two passes of a separable window, both once per channel plane, so that the row
    pass's result stays in cache for the pass across rows:

        for (n.c: parallel)
          padded[H, Wp]                the input rows, padded along the row
          rows[H, OW] = max over kx    (a few rows side by side, each in vector registers)
          rows_padded[Hp, OW]          padded across the rows (or the row pass ran over
                                       the padding rows too)
          for (y.o)  for (x.o)  [for (ry)  for (y.i: unrolled)  for (x.i: vectorized)
                                    acc[y.i] = max(acc[y.i], rows_padded[y*sy + ry, x])]

    Max pooling carries each row's NaN marks the same way (see pool_separable.py), folded
    just before the row's maximum (the unrolled ``rp`` loop inside ``ry``). Every stage is a
    plane's buffer, none the whole tensor.
    """
    stage, plane, window = _window_blocks(target, sch, out, window, config["registers"],
                                          config.get("parallel", False), "plane",
                                          config["across_rows"])
    acc = sch[window]
    for sv in acc.reduce_axis:
        if sv.name == "rp":
            acc.unroll(sv)
    _plane_producers_at(target, sch, window, stage, plane, config["registers"])


def _plane_producers_at(target: Target, sch: Schedule, window: te.Tensor, stage: Stage,
                        plane, registers: int) -> None:
    """Every stage between the input and the pass across rows ``window``, computed per
    plane at ``stage``'s loop ``plane``: the row pass in register blocks, the paddings and
    copies as plane buffers."""
    producers, frontier = [], [window]
    while frontier:
        for t in frontier.pop().op.input_tensors():
            if isinstance(t.op, te.ComputeOp) and all(t is not p for p in producers):
                producers.append(t)
                frontier.append(t)
    for t in sorted(producers, key=lambda t: sch.stages.index(sch[t])):
        if t.op.reduce_axis:
            _schedule_row_pass(target, sch[t], stage, plane, registers)
        else:
            _buffer_at(target, sch[t], stage, plane)


def _schedule_row_pass(target: Target, st: Stage, stage: Stage, plane, registers: int
                       ) -> None:
    """The pass along the rows, computed once per plane: each block of an output row (up to
    ``registers`` vectors, the last block of a row they do not divide overlapping the one
    before it) accumulates over the row's taps in registers, beside the same block of the
    next rows up to ``registers`` vectors in all (independent chains of maxes or adds)."""
    st.compute_at(stage, plane)
    *lead, x = st.op_axis[2:]
    lanes = target.vector_lanes(st.tensor.dtype)
    width = st.tensor.shape[-1]
    if width <= 2 * lanes or registers == 1:
        block = width if registers >= 2 or width <= lanes else lanes
        vectors = 1
    else:
        vectors = min(range(1, min(registers, width // lanes) + 1),
                      key=lambda v: (-(-width // (v * lanes)) * v, -v))
        block = vectors * lanes
    x_outer = x_vector = y_inner = None
    if block < width:
        x_outer, x = st.split(x, block, shift_tail=width % block != 0)
    if vectors > 1:
        x_vector, x = st.split(x, lanes)
    per_row = vectors if vectors > 1 else -(-min(block, width) // lanes)
    height = st.tensor.shape[-2]
    row_block = min(max(1, registers // per_row), height)
    if row_block > 1:
        lead[-1], y_inner = st.split(lead[-1], row_block, shift_tail=height % row_block != 0)
    inner = [v for v in (y_inner, x_vector) if v is not None]
    st.reorder(*lead, *([x_outer] if x_outer is not None else []), *st.reduce_axis, *inner, x)
    for v in inner:
        st.unroll(v)
    st.vectorize(x)


# ---------------------------------------------------------------------------------------------
# the NaN-split form (pool_separable.py): the two passes for planes without NaN, the single
# pass for the others

def _nan_split_parts(anchor: te.Tensor) -> dict[str, te.Tensor] | None:
    """The NaN count, single pass and two passes that a NaN-split max pool chooses from
    (by name), or None for another form."""
    parts = {t.op.name: t for t in anchor.op.input_tensors()}
    names = ("pool_has_nan", "max_pool_exact", "max_pool_fast")
    return parts if not anchor.op.reduce_axis and all(n in parts for n in names) else None


def schedule_nan_split(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                       config) -> None:
    """Each channel's plane at a time (channels in parallel): the plane's NaN count, the
    single pass only if it counts any, the two passes (as :func:`schedule_separable`), then
    the output picks one of them:

        for (n.c: parallel)
          has_nan.rf[16]  = isnan counts, a vector of partial counts   (then summed)
          padded[Hp, Wp]
          if (has_nan > 0)  exact[H, OW] = the single pass   (as schedule_window's blocks)
          rows[H, OW] = max over kx;  rows_padded[Hp, OW]
          fast[OH, OW] = max over ky of rows_padded            (as schedule_separable's)
          for (y)  for (x: vectorized)  out = has_nan > 0 ? exact : fast
    """
    parts = _nan_split_parts(anchor)
    lanes = target.vector_lanes(out.dtype)
    stage = sch[out]
    n, c, *rows, x = stage.op_axis
    width = out.shape[-1]
    if width > lanes:
        _, x = stage.split(x, lanes, shift_tail=width % lanes != 0)
    stage.vectorize(x)
    work = int(np.prod(out.shape)) if config.get("parallel", False) else 0
    plane = parallel_outer(stage, [n, c], work)

    has_nan = parts["pool_has_nan"]
    counts = sch.rfactor(has_nan, lanes)
    sch[counts].compute_at(stage, plane)
    sch[counts].reorder(*sch[counts].reduce_axis, sch[counts].op_axis[-1])
    sch[counts].vectorize(sch[counts].op_axis[-1])
    sch[has_nan].compute_at(stage, plane)

    # each path's stages computed inside its plane loop (one iteration), its padded input too
    exact = parts["max_pool_exact"]
    rows_per_block = _default_rows(target, exact, exact, "plane")
    exact_stage, exact_plane, _ = _window_blocks(
        target, sch, exact, exact, config["registers"], False, "plane",
        rows_per_block=rows_per_block,
        unroll_taps=_default_unroll(target, exact, exact, rows_per_block))
    sch[exact].compute_at(stage, plane)
    sch[exact].compute_if(has_nan)
    padded = _padded_input_of(exact)
    if padded is not None:
        _buffer_at(target, sch[padded], exact_stage, exact_plane)

    fast = parts["max_pool_fast"]
    fast_stage, fast_plane, across = _window_blocks(
        target, sch, fast, fast, config["registers"], False, "plane", config["across_rows"])
    sch[fast].compute_at(stage, plane)
    _plane_producers_at(target, sch, across, fast_stage, fast_plane, config["registers"])


def pool_space(target: Target, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> SearchSpace:
    """The separable and NaN-split forms' space, or the single pass's
    (:func:`window_space`); blocked pools have no knobs."""
    if attrs.get("layout_block"):
        return blocked.window_blocked_space(target, out)
    if _separable_window(anchor) is not None or _nan_split_parts(anchor) is not None:
        return separable_space(target, out, anchor, attrs)
    return window_space(target, out, anchor, attrs)


@max_pool.schedule(space=pool_space)
def _max_pool_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                       attrs: dict, config) -> None:
    if attrs.get("layout_block"):
        blocked.schedule_window_blocked(target, sch, out, anchor, config)
        return
    if _nan_split_parts(anchor) is not None:
        schedule_nan_split(target, sch, out, anchor, config)
        return
    if _separable_window(anchor) is not None:
        schedule_separable(target, sch, out, anchor, config)
        return
    schedule_window(target, sch, out, anchor, config)


@avg_pool.schedule(space=pool_space)
def _avg_pool_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                       attrs: dict, config) -> None:
    window = anchor.op.input_tensors()[0]
    if attrs.get("layout_block"):
        blocked.schedule_window_blocked(target, sch, out, window, config)
        return
    if _separable_window(anchor) is not None:
        schedule_separable(target, sch, out, window, config)
        return
    schedule_window(target, sch, out, window, config)

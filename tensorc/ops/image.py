"""Image ops that read pixels at computed positions: grid_sample and col2im.

grid_sample{mode, padding_mode, align_corners}(x, grid): ONNX GridSample (opset 20 names:
    mode "linear" / "nearest" / "cubic"; padding_mode "zeros" / "border" / "reflection").
    x is (N, C, D1, ..., Dk), grid (N, O1, ..., Ok, k) holds normalized coordinates in
    [-1, 1], innermost spatial dim first (x, y, z); out is (N, C, O1, ..., Ok).
col2im{image_shape, block_shape, strides, pads, dilations}(x): ONNX Col2Im; x is
    (N, C * prod(block_shape), L) with L the number of sliding blocks; out is
    (N, C, *image_shape), each pixel the sum of the block entries that cover it.

grid_sample's positions come from data, so its loads are clamped into the buffer and masked
(zeros padding) by selects; col2im's positions are affine in the output index, so it is a
reduction over the block offsets, each kept only where the stride divides the distance.
"""
from __future__ import annotations

import itertools
import math
import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import arith
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import clamp, in_range, schedule_injective, schedule_reduction
from tensorc.ops.shape_rules import expect_arity, expect_float, require_dims
from tensorc.ops.symbolic import PARALLEL_MIN_ELEMENTS
from tensorc.target import Target

grid_sample = define("grid_sample", Pattern.OUT_ELEMWISE_FUSABLE)
col2im = define("col2im", Pattern.REDUCTION)

MODES = ("linear", "nearest", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_ALPHA = -0.75  # Keys' cubic convolution, as PyTorch and ONNX use


# ---------------------------------------------------------------------------------------------
# grid_sample

@grid_sample.infer
def _grid_sample_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("grid_sample", input_types, 2)
    x, grid = input_types
    expect_float("grid_sample", x)
    expect_float("grid_sample", grid, "the grid")
    spatial = x.ndim - 2
    if (spatial < 1 or grid.ndim != x.ndim or grid.shape[0] != x.shape[0]
            or grid.shape[-1] != spatial):
        raise ShapeError(f"grid_sample: grid {grid} does not fit input {x}; it must be "
                         f"(N, O1, ..., O{spatial}, {spatial})")
    if attrs["mode"] not in MODES or attrs["padding_mode"] not in PADDING_MODES:
        raise ShapeError(f"grid_sample: mode {attrs['mode']!r} / padding_mode "
                         f"{attrs['padding_mode']!r} is not one of {MODES} / {PADDING_MODES}")
    return [TensorType(x.shape[:2] + grid.shape[1:-1], x.dtype)]


def _coordinate_dtype(x: str, grid: str) -> str:
    """Coordinates and weights are computed in float32 (float64 when an input is)."""
    return "float64" if "float64" in (x, grid) else "float32"


def _bounds(size: int, align_corners: bool) -> tuple[float, float]:
    """The coordinate range that [-1, 1] maps onto: pixel centers, or pixel edges."""
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


def _cubic_weights(t):
    """Keys' cubic weights of the taps at -1, 0, 1, 2 for a fraction ``t`` in [0, 1)."""
    a = CUBIC_ALPHA

    def far(d):  # 1 <= |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d):  # |d| < 1
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


# numpy reference (constant folding, tests) ----------------------------------------------------
def _reflect_np(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    below, above = lo - v, v - hi
    out = v.copy()
    for outside, dist, near, far in ((below > 0, below, lo, hi), (above > 0, above, hi, lo)):
        flips = np.floor(dist / span) if span > 0 else np.zeros_like(dist)
        rest = dist - flips * span if span > 0 else np.zeros_like(dist)
        even = np.mod(flips, 2) == 0
        toward = 1.0 if near == lo else -1.0
        moved = np.where(even, near + toward * rest, far - toward * rest)
        out = np.where(outside, moved, out)
    return out


@grid_sample.reference
def _grid_sample_reference(attrs: dict, x: np.ndarray, grid: np.ndarray) -> list[np.ndarray]:
    mode, padding, align = attrs["mode"], attrs["padding_mode"], bool(attrs["align_corners"])
    ctype = np.dtype(_coordinate_dtype(x.dtype.name, grid.dtype.name))
    n_batch, channels, *sizes = x.shape
    k = len(sizes)
    out_spatial = grid.shape[1:-1]
    coords = []  # per spatial dim of x: (N, O...) unnormalized coordinates
    for j, size in enumerate(sizes):
        g = grid[..., k - 1 - j].astype(ctype)
        v = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
        if mode == "nearest":
            v = np.rint(v)
        lo, hi = _bounds(size, align)
        if padding == "border":
            v = np.where((v < lo) | (v > hi), np.clip(v, 0, size - 1), v)
        elif padding == "reflection":
            v = _reflect_np(v, lo, hi)
        coords.append(v)

    def taps(v: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        if mode == "nearest":
            return [(v.astype(np.int64), np.ones_like(v))]
        base = np.floor(v)
        t = v - base
        if mode == "linear":
            return [(base.astype(np.int64), 1 - t), (base.astype(np.int64) + 1, t)]
        return [(base.astype(np.int64) + d - 1, w) for d, w in enumerate(_cubic_weights(t))]

    def resolve(i: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        if padding == "reflection":
            lo, hi = _bounds(size, align)
            i = _reflect_np(i.astype(ctype), lo, hi).astype(np.int64)
        valid = (i >= 0) & (i < size) if padding == "zeros" else np.ones(i.shape, bool)
        return np.clip(i, 0, size - 1), valid

    # fancy indices that broadcast to (N, C, O...)
    batch = np.arange(n_batch).reshape((n_batch, 1) + (1,) * len(out_spatial))
    channel = np.arange(channels).reshape((1, channels) + (1,) * len(out_spatial))
    out = np.zeros((n_batch, channels) + out_spatial, ctype)
    for combo in itertools.product(*(taps(v) for v in coords)):
        weight = np.ones(grid.shape[:-1], ctype)
        valid = np.ones(grid.shape[:-1], bool)
        index = []
        for (i, w), size in zip(combo, sizes):
            i, ok = resolve(i, size)
            weight, valid = weight * w, valid & ok
            index.append(i)
        pixels = x[(batch, channel) + tuple(i[:, None] for i in index)].astype(ctype)
        out += np.where(valid, weight, 0)[:, None] * pixels
    return [out.astype(x.dtype)]


# tensor expression ----------------------------------------------------------------------------
def _reflect(v: E.Expr, lo: float, hi: float) -> E.Expr:
    """``v`` folded back into [lo, hi] by reflecting off the borders as often as needed: a
    triangle wave of period 2 (hi - lo), with ``v`` itself kept where it is inside (exact)."""
    dtype = v.dtype
    span = hi - lo
    if span <= 0:  # a one-pixel axis with aligned corners: every position is that pixel
        return E.Const(lo, dtype)
    period = E.Const(2.0 * span, dtype)
    u = v - E.Const(lo, dtype)
    phase = u - E.call("floor", u / period) * period   # in [0, 2 span)
    folded = E.Const(hi, dtype) - E.call("fabs", phase - E.Const(span, dtype))
    outside = E.Logical("or", E.Compare("lt", v, E.Const(lo, dtype)),
                        E.Compare("gt", v, E.Const(hi, dtype)))
    return E.select(outside, folded, v)


def _reflect_index(i: E.Expr, size: int, align_corners: bool) -> E.Expr:
    """An integer index reflected into [0, size) as :func:`_reflect` reflects positions: about
    the first and last pixel centers (aligned corners) or the image edges."""
    period = 2 * (size - 1) if align_corners else 2 * size
    if period == 0:
        return E.const(0)
    phase = i % period
    mirrored = (period - phase) if align_corners else (period - 1 - phase)
    return E.select(E.Compare("lt", phase, E.const(size)), phase, mirrored)


def _to_index(v: E.Expr, size: int) -> E.Expr:
    """A float position as an int64 index; clamped first to a few pixels around the axis so
    that a wild grid value cannot overflow the conversion (the taps there read zeros or the
    border either way)."""
    v = E.minimum(E.maximum(v, E.Const(-4.0, v.dtype)), E.Const(size + 3.0, v.dtype))
    return E.Cast(E.INDEX, v)


def _pick(selector: E.Expr, variants: list[E.Expr]) -> E.Expr:
    """``variants[selector]`` for a loop variable ``selector``."""
    out = variants[-1]
    for d in range(len(variants) - 2, -1, -1):
        out = E.select(E.eq(selector, d), variants[d], out)
    return out


def _taps(mode: str) -> tuple[int, int]:
    """(taps per spatial dim, offset of the first tap from the floor of the position)."""
    return {"nearest": (1, 0), "linear": (2, 0), "cubic": (4, -1)}[mode]


@grid_sample.compute
def _grid_sample_compute(attrs: dict, x: te.Tensor, grid: te.Tensor) -> te.Tensor:
    # Three small tables, once per output position (not per channel), keep the sampling
    # kernel short: per spatial dim the position, then per tap the index to read (-1 where a
    # zeros-padded tap falls outside) and the weight. The kernel sums the taps one dim at a
    # time, as the ONNX reference does: a bicubic sample is 16 loads and 4 + 16 weights.
    mode, padding, align = attrs["mode"], attrs["padding_mode"], bool(attrs["align_corners"])
    ctype = _coordinate_dtype(x.dtype, grid.dtype)
    sizes = x.shape[2:]
    k = len(sizes)
    positions = grid.shape[:-1]          # (N, O1, ..., Ok)
    count, first = _taps(mode)

    def c(value: float) -> E.Expr:
        return E.Const(value, ctype)

    def coordinate(g: E.Expr, size: int) -> E.Expr:
        v = ((g + c(1.0)) * c(0.5) * c(size - 1.0) if align
             else ((g + c(1.0)) * c(float(size)) - c(1.0)) * c(0.5))
        if mode == "nearest":
            v = E.call("round", v)  # ties to even, as PyTorch and ONNX
        lo, hi = _bounds(size, align)
        if padding == "border":
            outside = E.Logical("or", E.Compare("lt", v, c(lo)), E.Compare("gt", v, c(hi)))
            v = E.select(outside, E.minimum(E.maximum(v, c(0.0)), c(size - 1.0)), v)
        elif padding == "reflection":
            v = _reflect(v, lo, hi)
        return v

    def coord_body(*p):
        *o, j = p
        return _pick(j, [coordinate(E.cast(ctype, grid[(*o, E.const(k - 1 - jj))]), size)
                         for jj, size in enumerate(sizes)])
    coord = te.compute((*positions, k), coord_body, name="grid_sample_coord",
                       tag="anchor:grid_sample_coord")

    def index_body(*p):
        *o, j, d = p
        v = coord[(*o, j)]
        base = v if mode == "nearest" else E.call("floor", v)
        variants = []
        for size in sizes:
            i = _to_index(base, size) + (d + first)
            if padding == "zeros":
                i = E.select(in_range(i, size), i, E.const(-1))
            elif padding == "reflection":
                i = clamp(_reflect_index(i, size, align), size)
            else:
                i = clamp(i, size)
            variants.append(i)
        return _pick(j, variants)
    index = te.compute((*positions, k, count), index_body, name="grid_sample_index",
                       tag="anchor:grid_sample_index")

    weight = None
    if mode != "nearest":
        def weight_body(*p):
            *o, j, d = p
            v = coord[(*o, j)]
            t = v - E.call("floor", v)
            return _pick(d, [c(1.0) - t, t] if mode == "linear" else _cubic_weights(t))
        weight = te.compute((*positions, k, count), weight_body, name="grid_sample_weight",
                            tag="anchor:grid_sample_weight")

    def body(n, ch, *o):
        def interpolate(j: int, taps: tuple) -> E.Expr:
            if j == k:
                at = tuple(clamp(i, size) if padding == "zeros" else i
                           for i, size in zip(taps, sizes))
                value = E.cast(ctype, x[(n, ch, *at)])
                if padding != "zeros":
                    return value
                inside = E.all_of(*(E.Compare("ge", i, E.const(0)) for i in taps))
                return E.select(inside, value, c(0.0))
            total = None
            for d in range(count):
                where = (n, *o, E.const(j), E.const(d))
                term = interpolate(j + 1, taps + (index[where],))
                if weight is not None:
                    term = weight[where] * term
                total = term if total is None else total + term
            return total
        return E.cast(x.dtype, interpolate(0, ()))
    return te.compute(x.shape[:2] + grid.shape[1:-1], body, name="grid_sample")


@grid_sample.schedule
def _grid_sample_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                          attrs: dict, config) -> None:
    # the tables stay whole-tensor stages before the kernel (they are C times smaller)
    schedule_injective(target, sch, out)


# ---------------------------------------------------------------------------------------------
# col2im

def _col2im_blocks(attrs: dict) -> tuple[int, ...]:
    """The number of sliding blocks along each image axis."""
    image, block = attrs["image_shape"], attrs["block_shape"]
    strides, pads, dilations = attrs["strides"], attrs["pads"], attrs["dilations"]
    k = len(image)
    return tuple((image[j] + pads[j] + pads[j + k] - dilations[j] * (block[j] - 1) - 1)
                 // strides[j] + 1 for j in range(k))


@col2im.infer
def _col2im_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("col2im", input_types, 1)
    (x,) = input_types
    image, block = tuple(attrs["image_shape"]), tuple(attrs["block_shape"])
    k = len(image)
    if not (len(block) == len(attrs["strides"]) == len(attrs["dilations"]) == k
            and len(attrs["pads"]) == 2 * k):
        raise ShapeError(f"col2im: image_shape {image}, block_shape {block}, strides, pads and "
                         f"dilations must agree in rank")
    blocks = _col2im_blocks(attrs)
    kernel = math.prod(block)
    if x.ndim == 3 and not x.is_static:
        # run-time sizes (a transposed conv over symbolic dims): checked when bound
        require_dims(math.prod(blocks), "==", x.shape[2],
                     f"col2im: the blocks of {block} over image {image} are x's columns")
        for size in blocks:
            require_dims(size, ">=", 1, f"col2im: a block of {block} fits in image {image}")
        return [TensorType((x.shape[0], x.shape[1] // kernel) + image, x.dtype)]
    if (x.ndim != 3 or x.shape[1] % kernel or min(blocks) < 1
            or x.shape[2] != math.prod(blocks)):
        raise ShapeError(f"col2im: input {x} must be (N, C * {kernel}, {math.prod(blocks)}) "
                         f"for blocks {block} over image {image}")
    return [TensorType((x.shape[0], x.shape[1] // kernel) + image, x.dtype)]


@col2im.reference
def _col2im_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    image, block = tuple(attrs["image_shape"]), tuple(attrs["block_shape"])
    strides, pads, dilations = attrs["strides"], attrs["pads"], attrs["dilations"]
    k, blocks = len(image), _col2im_blocks(attrs)
    n, channels = x.shape[0], x.shape[1] // math.prod(block)
    cols = x.reshape((n, channels) + block + blocks)
    padded = np.zeros((n, channels) + tuple(image[j] + pads[j] + pads[j + k]
                                            for j in range(k)), x.dtype)
    for offset in itertools.product(*(range(b) for b in block)):
        # block offset r covers padded positions r * dilation + l * stride, l over the blocks
        window = tuple(slice(offset[j] * dilations[j],
                             offset[j] * dilations[j] + (blocks[j] - 1) * strides[j] + 1,
                             strides[j]) for j in range(k))
        padded[(slice(None), slice(None)) + window] += cols[(slice(None), slice(None)) + offset]
    inner = tuple(slice(pads[j], pads[j] + image[j]) for j in range(k))
    return [np.ascontiguousarray(padded[(slice(None), slice(None)) + inner])]


def _blocks_cover(image, blocks, block: int, stride: int, pad: int) -> bool:
    """Whether every pixel of a run-time ``image`` axis reads a block in range: one block
    offset per pixel (block <= stride, so the block read is (pixel + pad) // stride, never
    negative) and the last pixel's block below ``blocks``, as the dims' arithmetic proves (a
    transposed conv's own output: its blocks are its input's pixels). The range test and
    the clamp then leave the kernel's inner loop. Static sizes keep them (the loop
    simplifier decides them per constant)."""
    if isinstance(image, int) and isinstance(blocks, int) or block > stride:
        return False
    slack = arith.simplify_nonnegative(E.as_expr(blocks) - 1 -
                                       (E.as_expr(image) - 1 + pad) // stride)
    low, _ = arith.const_bounds(slack, {})
    return low is not None and low >= 0


@col2im.compute
def _col2im_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    image, block = tuple(attrs["image_shape"]), tuple(attrs["block_shape"])
    strides, pads, dilations = attrs["strides"], attrs["pads"], attrs["dilations"]
    k, blocks = len(image), _col2im_blocks(attrs)
    kernel = math.prod(block)
    zero = E.Const(0, x.dtype)
    by_phase = all(d == 1 for d in dilations) and any(s > 1 for s in strides)
    if by_phase:
        # without dilation, a pixel at padded position q is covered by the block offsets
        # r = q mod s + a * s (a = 0, 1, ... while r < block), the block at q // s - a: a
        # reduction over ceil(block / s) offsets per axis, not over all of them with a
        # stride test each (a 4x4 stride-2 block: 4 terms per pixel, not 16)
        axes = [te.reduce_axis(-(-b // s), f"a{j}") for j, (b, s) in
                enumerate(zip(block, strides))]
    else:
        axes = [te.reduce_axis(b, f"r{j}") for j, b in enumerate(block)]

    def place(j: int, p: E.Expr, a: E.Expr) -> tuple[E.Expr, E.Expr, list]:
        """(the block offset read, the block's position, the conditions that it covers
        pixel p) along axis j, for the reduction variable a."""
        s, q = strides[j], p + pads[j]
        if by_phase:
            offset = q % s + a * s if s > 1 else a
            conds = [E.Compare("lt", offset, E.const(block[j]))] if block[j] % s else []
            return clamp(offset, block[j]), (q // s if s > 1 else q) - a, conds
        # the block index l with l * stride + r * dilation == p + pad, when there is one
        distance = q - a * dilations[j]
        return a, distance // s if s > 1 else distance, \
            [E.eq(distance % s, 0)] if s > 1 else []

    inside = [by_phase and _blocks_cover(image[j], blocks[j], block[j], strides[j], pads[j])
              for j in range(k)]

    def body(n, c, *p):
        conds, column, channel = [], E.const(0), c * kernel
        for j in range(k):
            offset, position, covers = place(j, p[j], axes[j].var)
            if inside[j]:
                conds += covers
                column = column * blocks[j] + position
            else:
                conds += [*covers, in_range(position, blocks[j])]
                column = column * blocks[j] + clamp(position, blocks[j])
            channel = channel + offset * math.prod(block[j + 1:])
        value = x[(n, channel, column)]
        return te.sum_(E.select(E.all_of(*conds), value, zero) if conds else value, axis=axes)
    return te.compute((x.shape[0], x.shape[1] // kernel) + image, body, name="col2im")


@col2im.schedule(symbolic=True)
def _col2im_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                     attrs: dict, config) -> None:
    """The generic reduction schedule; over run-time sizes (a transposed conv over symbolic
    H and W) the same loop nest with constant vectors:

        for (n.c: parallel)  for y  for x.o:
            acc[lanes] = 0;  for (taps)  for (x.i: vectorized)  acc[x.i] += x[...]
            for (x.i: vectorized)  out[...] = epilogue(acc[x.i])

    its whole vectors unguarded and a row's partial vector masked
    (passes/loop/symbolic_tails.py). The generic schedule ran each pixel alone, its
    intermediate a whole global tensor."""
    if te.is_static(out.shape) and te.is_static(anchor.op.input_tensors()[0].shape):
        schedule_reduction(target, sch, out, anchor)
        return
    lanes = target.vector_lanes(out.dtype)
    if out is anchor:
        anchor = sch.cache_write(anchor, "local")
    stage = sch[out]
    n, c, *rows, x = stage.op_axis
    x_outer, x_inner = stage.split(x, lanes)
    stage.vectorize(x_inner)
    # (n and c fused: a constant divisor; the image rows stay loops of their own)
    planes = stage.fuse(n, c)
    if math.prod(te.hint_shape(out.shape)) >= PARALLEL_MIN_ELEMENTS:
        stage.parallel(planes)
    sch[anchor].compute_at(stage, x_outer)
    acc = sch[anchor]
    *acc_rows, acc_x = acc.op_axis
    acc.reorder(*acc_rows, *acc.reduce_axis, acc_x)
    acc.vectorize(acc_x)


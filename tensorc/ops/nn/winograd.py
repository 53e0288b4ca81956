"""Winograd convolution F(m x m, 3 x 3) (Lavin & Gray, "Fast Algorithms for Convolutional
Neural Networks", 2015) for stride-1, dilation-1, one-group 3x3 2-D convs in float32.

The output is cut into m x m tiles; tile t of channel c reads an alpha x alpha patch d
(alpha = m + 2) of the padded input. With the transforms of Toom-Cook interpolation at
alpha - 1 points and infinity, each tile of each filter f is

    Y = A^T [ sum over c of (G W[f, c] G^T) . (B^T d B) ] A          (. : elementwise)

so the alpha^2 elementwise products, summed over channels, are alpha^2 independent GEMMs
M[ab] = U[ab] (filters x channels) @ V[ab] (channels x tiles): per tile, filter and channel
36 multiplications instead of the direct conv's 144 (F(4, 3), 4x fewer; F(2, 3): 16 instead
of 36, 2.25x); the transforms add O(C + F) per tile.

The weight transform U = G W G^T runs once, at compile time (``transform_weight``, called
by ``passes/graph/alter_layout.py``), into the GEMM's A panels [alpha^2, ceil(F/mr), C, mr].
The conv node then carries attrs ``winograd`` (m), ``kernel_block`` (mr) and ``filters``
(F). G has full column rank, so ``untransform_weight`` recovers W exactly (up to rounding)
with G's left inverse: the op's shape rule and numpy reference keep reading OIHW weights.

The kernel (``winograd_conv``) has five stages:

    pad[n, c, p, i, j]      the padded input split into its m column phases (column m*j + p):
                            a tile row's patches are contiguous along the tiles
    rows[c, a, k, t]        B^T d: the input transform's first pass (over patch rows)
    V[ab, c, t]             (B^T d) B: its second pass (over patch columns)
    M[ab, f, t]             sum_c U[ab, f, c] V[ab, c, t]: alpha^2 GEMMs (ops/matmul.py)
    cols[n, f, ty, i, b, tx]  A^T M: the output transform's first pass
    conv[n, f, y, x]        (A^T M) A at (y % m, x % m): its second pass, the conv's output,
                            into which the epilogue (bias, activation, residual) fuses

Each transform pass is an explicit sparse sum per row of its matrix (no multiplications by
0 or +-1); a select on the row index picks the row, and folds away once the schedule
unrolls that index.
"""
from __future__ import annotations

import functools
from fractions import Fraction
from math import gcd, lcm

import numpy as np

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.schedule import schedule_gemm
from tensorc.ops.matmul.space import gemm_space
from tensorc.ops.schedules import RegisterTileFits, clamp, in_range
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

KERNEL = 3                                   # the kernel size Winograd serves here
# Interpolation points of F(m, 3) (and infinity). For F(4, 3), 0, +-1, 1/2 and -2 rather than
# Lavin's 0, +-1, +-2: the same cost (their transforms are a little denser, which measured
# within noise), but half the rounding error (max abs error against float64 on ResNet's
# 3x3 layers 1.9e-5 to 3.0e-5 instead of 4.3e-5 to 9.1e-5, at most a quarter of the model
# tests' tolerance instead of 0.55 of it on 512 channels). F(6, 3) adds +-1/2 to Lavin's.
POINTS = {
    2: (0, 1, -1),
    4: (0, 1, -1, Fraction(1, 2), -2),
    6: (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)),
}


@functools.lru_cache(maxsize=None)
def transforms(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T [m, alpha], G [alpha, 3], B^T [alpha, alpha]) of F(m, 3), exact rationals as
    float64. Toom-Cook at the points p_k and infinity: A^T[i, k] = p_k^i, G[k, j] = p_k^j /
    N_k, and row k of B^T holds N_k times the coefficients of the Lagrange polynomial of p_k
    (the product of x - p_l over the other points), rows scaled to small integers.

    >>> transforms(2)[2].tolist()
    [[-1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, -1.0, 1.0, 0.0], [0.0, -1.0, 0.0, 1.0]]
    """
    points = [Fraction(p) for p in POINTS[m]]
    alpha = m + KERNEL - 1
    at = [[points[k] ** i if k < alpha - 1 else Fraction(int(i == m - 1))
           for k in range(alpha)] for i in range(m)]
    g = [[points[k] ** j if k < alpha - 1 else Fraction(int(j == KERNEL - 1))
          for j in range(KERNEL)] for k in range(alpha)]
    bt = []
    for k in range(alpha):
        others = [p for q, p in enumerate(points) if q != k] if k < alpha - 1 else points
        row = _poly_from_roots(others)
        scale = Fraction(1)
        if k < alpha - 1:
            for p in others:
                scale /= points[k] - p
        row += [Fraction(0)] * (alpha - len(row))
        # small integers: clear the denominators, divide out the common factor
        den = functools.reduce(lcm, (c.denominator for c in row), 1)
        num = functools.reduce(gcd, ((c * den).numerator for c in row if c), 0)
        factor = Fraction(den, num)
        bt.append([c * factor for c in row])
        g[k] = [c * scale / factor for c in g[k]]
    return tuple(np.array([[float(c) for c in r] for r in mat]) for mat in (at, g, bt))


def _poly_from_roots(roots: list[Fraction]) -> list[Fraction]:
    """Coefficients (lowest first) of the product of (x - r) over ``roots``."""
    coeffs = [Fraction(1)]
    for r in roots:
        shifted = [Fraction(0)] + coeffs
        for i in range(len(coeffs)):
            shifted[i] -= r * coeffs[i]
        coeffs = shifted
    return coeffs


def transform_weight(w: np.ndarray, m: int, panel: int) -> np.ndarray:
    """OIHW 3x3 weights [F, C, 3, 3] -> U = G W G^T as the GEMM's A panels,
    [alpha^2, ceil(F/panel), C, panel] (index ab = a * alpha + b), the last panel padded with
    zero filters. Computed in float64, rounded once.

    >>> transform_weight(np.ones((3, 2, 3, 3), np.float32), 4, 2).shape
    (36, 2, 2, 2)
    """
    _, g, _ = transforms(m)
    filters, channels = w.shape[:2]
    alpha = m + KERNEL - 1
    u = np.einsum("ai,fcij,bj->abfc", g, w.astype(np.float64), g)
    u = u.reshape(alpha * alpha, filters, channels)
    panels = -(-filters // panel)
    padded = np.zeros((alpha * alpha, panels * panel, channels))
    padded[:, :filters] = u
    blocks = padded.reshape(alpha * alpha, panels, panel, channels).transpose(0, 1, 3, 2)
    return np.ascontiguousarray(blocks).astype(w.dtype)


def untransform_weight(u: np.ndarray, m: int, filters: int) -> np.ndarray:
    """The OIHW weights of transformed ones: W = G+ U G+^T, G+ = G's left inverse."""
    _, g, _ = transforms(m)
    left = np.linalg.pinv(g)                               # [3, alpha], left @ g = I
    alpha = m + KERNEL - 1
    n_ab, panels, channels, panel = u.shape
    flat = u.astype(np.float64).transpose(0, 1, 3, 2).reshape(n_ab, panels * panel, channels)
    flat = flat[:, :filters].reshape(alpha, alpha, filters, channels)
    return np.einsum("ia,abfc,jb->fcij", left, flat, left).astype(u.dtype)


def transformed_weight_shape(attrs: dict, w_shape) -> tuple[int, ...]:
    """The OIHW shape of transformed weights [alpha^2, F/mr, C, mr]."""
    return (attrs["filters"], w_shape[2], KERNEL, KERNEL)


def eligible(attrs: dict, x_shape, w_shape) -> bool:
    """Whether a conv (OIHW weight shape) can run as Winograd F(m, 3): 2-D, a 3x3 kernel,
    stride 1, dilation 1, one group."""
    return len(x_shape) == 4 and tuple(w_shape[2:]) == (KERNEL, KERNEL) and \
        attrs["groups"] == 1 and tuple(attrs["strides"]) == (1, 1) and \
        tuple(attrs["dilations"]) == (1, 1)


# ---------------------------------------------------------------------------------------------
# compute

def _row_sum(coeffs: np.ndarray, terms: list[E.Expr]) -> E.Expr:
    """sum(c * t) over the nonzero coefficients, +-1 as an add or a subtract."""
    total = None
    for c, term in zip(coeffs, terms):
        if c == 0:
            continue
        sign = 1.0 if c > 0 else -1.0
        part = term if abs(c) == 1 else E.Const(float(abs(c)), term.dtype) * term
        if total is None:
            total = part if sign > 0 else E.Const(0.0, term.dtype) - part
        else:
            total = total + part if sign > 0 else total - part
    return total if total is not None else E.Const(0.0, terms[0].dtype)


def _pick(index: E.Expr, rows: list[E.Expr]) -> E.Expr:
    """rows[index] as a chain of selects (one row once the schedule unrolls ``index``)."""
    value = rows[-1]
    for k in range(len(rows) - 2, -1, -1):
        value = E.select(E.eq(index, k), rows[k], value)
    return value


def tile_grid(m: int, out: tuple[int, int]) -> tuple[int, int]:
    """Tile rows and columns that cover an output map."""
    return -(-out[0] // m), -(-out[1] // m)


# The GEMM's columns (tiles) are padded to whole vectors, so that B's rows are aligned and no
# tile needs a mask; up to half a vector of tiles is computed on a vector that short.
TILE_ALIGN = 16


def padded_tiles(tiles: int) -> int:
    if tiles <= TILE_ALIGN // 2:
        return tiles
    return -(-tiles // TILE_ALIGN) * TILE_ALIGN


def winograd_conv(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, int]
                  ) -> te.Tensor:
    """The conv as F(m x m, 3 x 3) on transformed weights ``w`` [alpha^2, F/mr, C, mr]."""
    m = attrs["winograd"]
    alpha = m + KERNEL - 1
    at, _, bt = transforms(m)
    n_batch, channels = x.shape[:2]
    filters, panel = attrs["filters"], attrs["kernel_block"]
    tile_rows, tile_cols = tile_grid(m, out)
    tiles = padded_tiles(n_batch * tile_rows * tile_cols)
    top, left = attrs["pads"][0], attrs["pads"][1]

    def in_bounds(n, c, i, j):
        inside = E.all_of(in_range(i, x.shape[2]), in_range(j, x.shape[3]))
        load = x[n, c, clamp(i, x.shape[2]), clamp(j, x.shape[3])]
        return E.select(inside, load, E.Const(0.0, x.dtype))

    # the padded input in m column phases: pad[n, c, p, i, j] = padded[n, c, i, m * j + p]
    pad = te.compute((n_batch, channels, m, m * tile_rows + KERNEL - 1, tile_cols + 1),
                     lambda n, c, p, i, j: in_bounds(n, c, i - top, j * m + p - left),
                     name="pad", tag="pad")

    def tile_of(t):
        # the padding tiles past the last (whole vectors for the GEMM) repeat the last
        # image's: finite values, which no output reads
        row = t // tile_cols
        n = E.minimum(row // tile_rows, n_batch - 1) if n_batch > 1 else E.const(0)
        return n, row % tile_rows, t % tile_cols

    def rows_pass(c, a, k, t):
        n, ty, tx = tile_of(t)
        patch = [pad[n, c, k % m, ty * m + i, tx + k // m] for i in range(alpha)]
        return _pick(a, [_row_sum(bt[r], patch) for r in range(alpha)])
    rows = te.compute((channels, alpha, alpha, tiles), rows_pass, name="winograd_rows",
                      tag="anchor:winograd_rows", axis_names=["c", "a", "k", "t"])

    def input_pass(ab, c, t):
        terms = [rows[c, ab // alpha, k, t] for k in range(alpha)]
        return _pick(ab % alpha, [_row_sum(bt[b], terms) for b in range(alpha)])
    v = te.compute((alpha * alpha, channels, tiles), input_pass, name="winograd_input",
                   tag="anchor:winograd_input", axis_names=["ab", "c", "t"])

    rc = te.reduce_axis(channels, "rc")
    gemm = te.compute((alpha * alpha, filters, tiles),
                      lambda ab, f, t: te.sum_(w[ab, f // panel, rc, f % panel] * v[ab, rc, t],
                                               axis=rc),
                      name="winograd_gemm", tag="anchor:winograd_gemm",
                      axis_names=["ab", "f", "t"])

    def cols_pass(n, f, ty, i, b, tx):
        t = (n * tile_rows + ty) * tile_cols + tx
        terms = [gemm[a * alpha + b, f, t] for a in range(alpha)]
        return _pick(i, [_row_sum(at[r], terms) for r in range(m)])
    cols = te.compute((n_batch, filters, tile_rows, m, alpha, tile_cols), cols_pass,
                      name="winograd_output", tag="anchor:winograd_output",
                      axis_names=["n", "f", "ty", "i", "b", "tx"])

    def output_pass(n, f, y, xx):
        terms = [cols[n, f, y // m, y % m, b, xx // m] for b in range(alpha)]
        return _pick(xx % m, [_row_sum(at[r], terms) for r in range(m)])
    return te.compute((n_batch, filters, *out), output_pass, name="conv",
                      axis_names=["n", "f", "y", "x"])


# ---------------------------------------------------------------------------------------------
# schedule

def stages(conv_t: te.Tensor) -> dict[str, te.Tensor]:
    """The Winograd kernel's tensors by role, from its output stage ``conv``."""
    found = {"conv": conv_t}
    frontier = [conv_t]
    names = {"winograd_output": "cols", "winograd_gemm": "gemm", "winograd_input": "input",
             "winograd_rows": "rows", "pad": "pad"}
    while frontier:
        t = frontier.pop()
        for inp in t.op.input_tensors():
            role = names.get(inp.op.name)
            if role and role not in found:
                found[role] = inp
                frontier.append(inp)
    return found


def gemm_of(attrs: dict, gemm: te.Tensor) -> Gemm:
    """The alpha^2 GEMMs: M = filters, N = tiles, K = channels, A the weight panels."""
    n_ab, filters, tiles = gemm.shape
    return Gemm(filters, tiles, gemm.op.reduce_axis[0].extent, batched=True,
                a_panel=attrs["kernel_block"], k_blockable=True)


def winograd_space(target: Target, attrs: dict, conv_t: te.Tensor) -> SearchSpace:
    """The GEMMs' knobs (``ops/matmul.py``'s ``gemm_space``): the register tile's column
    vectors (its rows are the weight panels'), the cache blocks, the loop order. The
    transforms' schedules are fixed; whether a conv runs as Winograd at all is decided with
    its weight layout, at graph level (``tile_size``)."""
    space = gemm_space(target, gemm_of(attrs, stages(conv_t)["gemm"]), conv_t.dtype)
    return SearchSpace(list(space.knobs.values()), space.constraints, name="conv (winograd)")


def _pass_in_registers(sch: Schedule, t: te.Tensor, stage, at) -> None:
    """A transform's pass ``t`` computed at ``stage``'s loop ``at``: its two innermost
    index axes (the transform matrix's rows and columns) unrolled, so each select on them
    folds to one row, and its last axis (tiles, channels or filters) in vectors."""
    ts = sch[t]
    ts.compute_at(stage, at)
    *_, rows, cols, lanes = ts.op_axis
    ts.unroll(rows)
    ts.unroll(cols)
    ts.vectorize(lanes)


def schedule_winograd(target: Target, sch: Schedule, out: te.Tensor, conv_t: te.Tensor,
                      attrs: dict, config) -> None:
    """The five stages, each at the root but the transforms' first passes (computed per
    row of tiles, in registers):

        pad                                  (planes in parallel, rows vectorized)
        for (c: parallel) for (tile row)     rows[a, k, tiles] = B^T d   (vectorized: tiles)
          for a, b (unrolled)                V[ab, c, tiles] = rows B
        M = U @ V                            (schedule_gemm: the alpha^2 GEMMs in parallel)
        for (n, f: parallel) for (tile row) for (block of L tiles)
          cols[i, b, tiles] = A^T M          (vectorized: tiles)
          for i, j (unrolled): out[n, f, m*ty + i, m*tx + j] = epilogue(cols A)
                                             (the j vectors interleaved into whole rows)
    """
    m = attrs["winograd"]
    lanes = target.vector_lanes(out.dtype)
    found = stages(conv_t)
    pad, rows, v, gemm, cols = (found[k] for k in ("pad", "rows", "input", "gemm", "cols"))
    tile_cols = cols.shape[-1]

    st = sch[pad]
    st.compute_root()
    n, c, p, i, j = st.op_axis
    _, ji = st.split(j, lanes)
    st.vectorize(ji)
    st.parallel(st.fuse(n, c, p))

    st = sch[v]
    ab, c, t = st.op_axis
    to, ti = st.split(t, tile_cols)
    # a tile row in vectors of at most one register (the rows pass keeps alpha^2 of them)
    tio, tii = st.split(ti, lanes)
    a, b = st.split(ab, m + KERNEL - 1)
    st.reorder(c, to, tio, a, b, tii)
    st.unroll(b)
    st.vectorize(tii)
    st.parallel(c)
    _pass_in_registers(sch, rows, st, tio)

    schedule_gemm(target, sch, gemm, gemm, gemm_of(attrs, gemm), config)

    st = sch[out]
    n, f, y, x = st.op_axis
    width = min(lanes, 1 << (tile_cols - 1).bit_length())
    yo, yi = st.split(y, m)
    xo, xi = st.split(x, m)
    xoo, xoi = st.split(xo, width)
    st.reorder(n, f, yo, xoo, yi, xi, xoi)
    st.unroll(yi)
    st.unroll(xi)
    st.vectorize(xoi)
    st.parallel(st.fuse(n, f))
    _pass_in_registers(sch, cols, st, xoo)


# Which convs run as Winograd, and as which F(m, 3): the estimated time of each (a cost model
# in cycles, fitted to measurements on Zen 4, one thread, of the 3x3 convs of the bundled
# models and 15 more shapes, 16 to 512 channels on maps of 7 to 149), the least wins. On
# small maps it errs towards the direct conv, which measured slower than its FMAs say
# (64 -> 64 on 7x7: 1.5x by F(2, 3), estimated 1.4x).
MIN_CHANNELS = 16   # fewer channels or filters: too little GEMM per transformed element
MIN_VECTOR_BITS = 256
TILE_SIZES = (4, 2)
# FMA lanes per cycle (AVX-512 on Zen 4: one 16-lane FMA a cycle) and the fraction of it the
# direct (flattened) conv and the Winograd GEMMs reach.
DIRECT_EFFICIENCY = 0.95
GEMM_EFFICIENCY = 0.9
# Cycles per vector of tiles of each transform (input, output), per channel or filter
# (F(4, 3): 6x6 patches, two passes of up to 5 multiply-adds a row and element, 36 loads and
# stores; F(2, 3): 4x4 patches of additions), and a fixed cost (the stages' passes and
# threads): fitted to the measurements, the model picks the fastest of the three on 27 of
# 29 shapes and is within 11% of it on the other two (near ties).
TRANSFORM_CYCLES = {4: (600, 350), 2: (60, 60)}
WINOGRAD_CYCLES = 5_000
# Small channel counts over large maps are bound by the transformed tiles' trip through
# memory (V and M, 36 (C + F) floats a tile, each written once and read once), which the
# model above does not see: 32 -> 32 on 147x147 (12.7 MB of V and M) ran no faster than the
# direct conv, 32 -> 64 1.2x, while 80 -> 192 on 71x71 (13 MB) ran 2.9x and 16 -> 64 on 55x55
# (2.4 MB) 1.5x. Where V and M exceed STREAM_BYTES, the GEMM must do at least
# MIN_FLOPS_PER_BYTE per byte of them.
STREAM_BYTES = 8 << 20
MIN_FLOPS_PER_BYTE = 6
# The transformed weights U are (m + 2)^2 / 9 times the direct conv's (F(4, 3): 4x; F(2, 3):
# 1.8x), and a small map reuses each of them over few tiles: F(4, 3) on 14x14 does 8 FLOPs
# per byte of U. In a model the weights come from memory, so such a conv waits for them:
# measured in ResNet-50 (weights cold; Xeon, ms per conv, 1 thread / 2 threads), 256 -> 256
# on 14x14: F(4, 3) 1.47 / 0.97, F(2, 3) 1.29 / 0.77, direct 1.77 / 0.93; 512 -> 512 on 7x7:
# F(2, 3) 2.12 / 1.45, direct 2.05 / 1.10; single convs, their weights hot in the cache,
# are 2x faster by F(4, 3). A conv's time is at least its weights' bytes at this rate (in
# the model's cycles), fitted to those two and to F(4, 3) staying fastest on 128 -> 128 at
# 28x28 and 64 -> 64 at 56x56. Smaller weights stay in the caches between runs of a small
# model: SqueezeNet's 48 -> 192 and 64 -> 256 on 13x13 (1.3 and 2.4 MB by F(4, 3)) ran 4%
# slower by F(2, 3).
WEIGHT_BYTES_PER_CYCLE = 1.5
COLD_WEIGHT_BYTES = 4 << 20
# ... but a model whose weights (as imported) take at most HOT_MODEL_BYTES finds them in the
# last-level cache on every run but the first, even transformed (F(4, 3) at most 4x: half of
# a Zen 4 or Zen 5 CCD's 32 MB L3 or less), and its convs are bound by their arithmetic. A
# 256 -> 512 conv onto 13x13 (4.7 MB of weights, 18.9 MB as F(4, 3)), ms at 1 / 2 threads
# (Xeon): F(2, 3) 2.76 / 1.64, F(4, 3) 1.67 / 0.92, direct 2.99 / 1.64 (onnxruntime 2.70 /
# 1.40). A ResNet-18 (21.7 MB) keeps the bound: its convs by arithmetic alone took 2.5%
# longer.
HOT_MODEL_BYTES = 8 << 20


def tile_size(attrs: dict, x: TensorType, w: TensorType, target: Target | None,
              model_weight_bytes: int = 0) -> int:
    """m of the F(m x m, 3 x 3) a conv (OIHW weights ``w``) runs as, or 0 (the direct conv):
    float32 convs that ``eligible`` admits, with at least MIN_CHANNELS channels and filters,
    on CPU targets with 256-bit vectors or wider (weights of a conv compiled without a target
    stay OIHW) and not ``-winograd=0``, where the cost model estimates F(m, 3) fastest.
    ``model_weight_bytes``: all the model's weights (0: unknown), which say whether they stay
    in the caches between runs.

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
                               KERNEL * KERNEL * filters * channels, hot)}
    for m in TILE_SIZES:
        if not _streams(attrs, x.shape, filters, m):
            costs[m] = _weights_bound(_winograd_cycles(attrs, x.shape, filters, m, lanes),
                                      (m + KERNEL - 1) ** 2 * filters * channels, hot)
    return min(costs, key=costs.get)


def _weights_bound(cycles: float, weights: int, hot: bool) -> float:
    """The time of a conv that reads ``weights`` float32 weights once per run: more than
    COLD_WEIGHT_BYTES of them come from memory (ResNet-50's 100 MB outgrow any cache), so
    at least their bytes at WEIGHT_BYTES_PER_CYCLE; unless the whole model's are ``hot``."""
    if weights * 4 <= COLD_WEIGHT_BYTES or hot:
        return cycles
    return max(cycles, weights * 4 / WEIGHT_BYTES_PER_CYCLE)


def _out_size(attrs: dict, x_shape) -> tuple[int, int]:
    pads = attrs["pads"]
    return (x_shape[2] + pads[0] + pads[2] - KERNEL + 1,
            x_shape[3] + pads[1] + pads[3] - KERNEL + 1)


def _direct_cycles(attrs: dict, x_shape, filters: int, lanes: int) -> float:
    """The direct conv's FMAs over its flattened rows (conv.py ``_conv_flat``: the padded
    row's garbage columns computed, q in whole vectors)."""
    out = _out_size(attrs, x_shape)
    pitch = x_shape[3] + attrs["pads"][1] + attrs["pads"][3]
    steps = -(-out[0] * pitch // lanes) * lanes
    fmas = x_shape[0] * filters * x_shape[1] * KERNEL * KERNEL * steps
    return fmas / lanes / DIRECT_EFFICIENCY


def _winograd_cycles(attrs: dict, x_shape, filters: int, m: int, lanes: int) -> float:
    """The GEMMs' FMAs (over the padded tiles; a few tiles on a half-empty vector) and the
    transforms' vectors of tiles (a tile row per vector)."""
    n_batch, channels = x_shape[:2]
    tile_rows, tile_cols = tile_grid(m, _out_size(attrs, x_shape))
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
    tiles = padded_tiles(n_batch * int(np.prod(tile_grid(m, _out_size(attrs, x_shape)))))
    alpha2 = (m + KERNEL - 1) ** 2
    streamed = 2 * alpha2 * (channels + filters) * tiles * 4        # V and M, out and back
    flops = 2 * alpha2 * filters * channels * tiles
    return streamed > 2 * STREAM_BYTES and flops < MIN_FLOPS_PER_BYTE * streamed


# ---------------------------------------------------------------------------------------------
# on blocked tensors

# Transformed weights larger than this are read as few times as the bands allow (the bands
# as large as BAND_BUFFER_BYTES lets them); smaller ones (in L2) once per tile row, each
# band's transformed tiles staying in L2
BAND_WEIGHT_BYTES = 1 << 20
# A band's transformed input and GEMM results (on the stack of the thread that runs it) take
# at most this
BAND_BUFFER_BYTES = 2 << 20


def band_rows(attrs: dict, x_shape, filters: int, m: int) -> tuple[int, int]:
    """(default, most) tile rows per band of a blocked F(m, 3) conv on a plain-shaped input
    ``x_shape``: the most whose transformed tiles fit BAND_BUFFER_BYTES (0: not even one
    tile row's), and the default: one tile row where the transformed weights stay in L2,
    else the most (the weights read once per band)."""
    tile_rows, tile_cols = tile_grid(m, _out_size(attrs, x_shape))
    alpha2 = (m + KERNEL - 1) ** 2
    per_row = alpha2 * tile_cols * (x_shape[1] + filters) * 4
    most = min(tile_rows, BAND_BUFFER_BYTES // per_row)
    weights = alpha2 * x_shape[1] * filters * 4
    return (most if weights > BAND_WEIGHT_BYTES else min(1, most)), most


def blocked_panel(filters: int, lanes: int) -> int:
    """nr: the filters per panel of a blocked Winograd conv's transformed weights (the B
    of its GEMMs): up to four vectors, a divisor of the filter count."""
    return next(v * lanes for v in (4, 2, 1) if filters % (v * lanes) == 0)


def winograd_blocked(attrs: dict, x: te.Tensor, w: te.Tensor, out: tuple[int, int]
                     ) -> te.Tensor:
    """F(m x m, 3 x 3) on blocked tensors (``ops/nn/blocked.py``): x [N, C/b, H, W, b] ->
    [N, F/b, Ho, Wo, b], transformed weights ``w`` [alpha^2, F/nr, C, nr] (B panels of nr
    filters). The tiles are indexed (tile row, tile column); the transforms run on vectors
    of b channels (or filters), no padded copy of the input and no layout transform:

        rows[n, ty, tx, cb, a, k, ci]    B^T d over the patch rows (the input read in place,
                                         zero outside it)
        V[n, ab, t, c]                   (B^T d) B, t = ty * (tile columns) + tx
        M[n, ab, t, f]                   sum_c V[.., c] U[ab, c, f]: per band of tile rows,
                                         alpha^2 GEMMs of (tiles x C) @ (C x F)
        cols[n, ty, tx, fb, i, b, fi]    A^T M
        conv[n, fb, y, x, fi]            (A^T M) A"""
    m = attrs["winograd"]
    alpha = m + KERNEL - 1
    at, _, bt = transforms(m)
    b, nr, filters = attrs["layout_block"], attrs["kernel_block"], attrs["filters"]
    n_batch, cblocks, height, width = x.shape[:4]
    tile_rows, tile_cols = tile_grid(m, out)
    top, left = attrs["pads"][0], attrs["pads"][1]

    def pixel(n, cb, i, j, ci):
        inside = E.all_of(in_range(i, height), in_range(j, width))
        load = x[n, cb, clamp(i, height), clamp(j, width), ci]
        return E.select(inside, load, E.Const(0.0, x.dtype))

    def rows_pass(n, ty, tx, cb, a, k, ci):
        patch = [pixel(n, cb, ty * m + i - top, tx * m + k - left, ci) for i in range(alpha)]
        return _pick(a, [_row_sum(bt[r], patch) for r in range(alpha)])
    rows = te.compute((n_batch, tile_rows, tile_cols, cblocks, alpha, alpha, b), rows_pass,
                      name="winograd_rows", tag="anchor:winograd_rows")

    def input_pass(n, ab, t, c):
        ty, tx = t // tile_cols, t % tile_cols
        terms = [rows[n, ty, tx, c // b, ab // alpha, k, c % b] for k in range(alpha)]
        return _pick(ab % alpha, [_row_sum(bt[r], terms) for r in range(alpha)])
    v = te.compute((n_batch, alpha * alpha, tile_rows * tile_cols, cblocks * b), input_pass,
                   name="winograd_input", tag="anchor:winograd_input")

    rc = te.reduce_axis(cblocks * b, "rc")
    gemm = te.compute((n_batch, alpha * alpha, tile_rows * tile_cols, filters),
                      lambda n, ab, t, f: te.sum_(v[n, ab, t, rc] * w[ab, f // nr, rc, f % nr],
                                                  axis=rc),
                      name="winograd_gemm", tag="anchor:winograd_gemm")

    def cols_pass(n, ty, tx, fb, i, bb, fi):
        terms = [gemm[n, a * alpha + bb, ty * tile_cols + tx, fb * b + fi]
                 for a in range(alpha)]
        return _pick(i, [_row_sum(at[r], terms) for r in range(m)])
    cols = te.compute((n_batch, tile_rows, tile_cols, filters // b, m, alpha, b), cols_pass,
                      name="winograd_output", tag="anchor:winograd_output")

    def output_pass(n, fb, y, xx, fi):
        terms = [cols[n, y // m, xx // m, fb, y % m, bb, fi] for bb in range(alpha)]
        return _pick(xx % m, [_row_sum(at[r], terms) for r in range(m)])
    return te.compute((n_batch, filters // b, *out, b), output_pass, name="conv",
                      axis_names=["n", "f", "y", "x", "lane"])


def winograd_blocked_space(target: Target, attrs: dict, conv_t: te.Tensor) -> SearchSpace:
    """tiles: the band's tiles per register tile (its rows; the last tile shifted back to end
    with the band); filter_vectors: vectors of filters per register tile (a divisor of the
    weight panel's); band: tile rows per band (each band's transformed input and GEMM
    results computed together, the transformed weights read once per band; one band: the
    stages' own loops on threads)."""
    found = stages(conv_t)
    filters = found["gemm"].shape[-1]
    tile_cols = found["cols"].shape[2]
    lanes = target.vector_lanes(conv_t.dtype)
    fits = RegisterTileFits(32 if target.vector_bits >= 512 else 16, rows_knob="tiles")
    vectors = tuple(v for v in (1, 2, 3, 4) if attrs["kernel_block"] // lanes % v == 0)
    x = found["rows"].op.input_tensors()[0]          # [N, C/b, H, W, b]
    plain = (x.shape[0], x.shape[1] * x.shape[4], x.shape[2], x.shape[3])
    band, most = band_rows(attrs, plain, filters, attrs["winograd"])
    bands = tuple(sorted({1, band, most}))
    tiles = band * tile_cols
    rows, vecs = register_tile_of(tiles, vectors, fits)
    return SearchSpace([
        Knob("tiles", tuple(range(1, min(tiles, 16) + 1)), rows, "tiles per register tile"),
        Knob("filter_vectors", vectors, vecs, "filter vectors per register tile"),
        Knob("band", bands, band, "tile rows per band"),
        Knob("parallel", (True, False), True, "bands (or one band's loops) on threads"),
    ], [fits], name="conv (winograd, blocked)")


# A register tile keeps both FMA pipes busy with at least BUSY_ACCUMULATORS accumulators and
# FMAS_PER_LOAD FMAs per load (r tiles x v filter vectors: r * v FMAs per r broadcasts and v
# weight vectors). Fitted on ResNet's bands, ms at one thread (Xeon), 14 x 2 / 6 x 4 / 5 x 4:
# 64 -> 64 on 56x56 (14 tiles a band) 0.53 / 0.59 / 0.53; 128 -> 128 on 28x28 (49) 0.73 /
# 0.63 / 0.60; 256 -> 256 on 14x14 (16) 1.10 / 0.90 / 0.94
BUSY_ACCUMULATORS = 24
FMAS_PER_LOAD = 2.2


def register_tile_of(tiles: int, vectors: tuple[int, ...], fits) -> tuple[int, int]:
    """(rows, filter vectors) of a band of ``tiles``: the tile that wastes least, counting
    rows computed twice (the last tile shifted back), fewer than BUSY_ACCUMULATORS
    accumulators and fewer than FMAS_PER_LOAD FMAs per load; then the most accumulators."""
    best = None
    for v in vectors:
        for r in range(1, min(tiles, 16) + 1):
            if not fits.holds(r, v):
                continue
            useful = tiles / (-(-tiles // r) * r) * \
                min(r * v, BUSY_ACCUMULATORS) / BUSY_ACCUMULATORS * \
                min(1.0, r * v / (r + v) / FMAS_PER_LOAD)
            key = (round(useful, 3), r * v)
            if best is None or key > best[0]:
                best = (key, r, v)
    _, rows, vecs = best            # (a row of one vector always fits)
    return rows, vecs


def schedule_winograd_blocked(target: Target, sch: Schedule, out: te.Tensor,
                              conv_t: te.Tensor, attrs: dict, config) -> None:
    """for (n.band: parallel)
         for (t, c.o): rows = B^T d (36 vectors of channels); V[ab, t, c] = rows B
         for (ab, panel, f.o, t.o): acc[t.i, f.v, lane] over c (register tile); M = acc
         for (f.b, ty, tx): cols = A^T M; out[.., lane] = epilogue(cols A) (vectors of
                                                                          filters)
    (one band: the t, the (ab, panel) and the (f.b, ty) loops on threads instead)."""
    m = attrs["winograd"]
    lanes = target.vector_lanes(out.dtype)
    found = stages(conv_t)
    rows, v, gemm, cols = (found[k] for k in ("rows", "input", "gemm", "cols"))
    tile_rows, tile_cols = cols.shape[1:3]

    st = sch[out]
    n, fb, y, x, lane = st.op_axis
    ty, yi = st.split(y, m)
    tx, xi = st.split(x, m)
    band, ty = st.split(ty, config["band"])
    st.reorder(n, band, fb, ty, tx, yi, xi, lane)
    outer = st.fuse(n, band)
    st.unroll(yi)
    st.unroll(xi)
    st.vectorize(lane)
    # one band: its stages' own loops on threads instead
    inside = config["parallel"] and out.shape[0] * -(-tile_rows // config["band"]) == 1
    if config["parallel"] and not inside:
        st.parallel(outer)
    elif inside:
        st.parallel(st.fuse(fb, ty))
    _pass_in_registers(sch, cols, st, tx)

    # the band's GEMMs: each weight panel read once per band, a register tile of tile
    # columns x filter vectors accumulating over the channels
    gs = sch[gemm]
    gs.compute_at(st, outer)
    local = sch.cache_write(gemm, "local")
    _, gab, gt, gf = gs.op_axis
    # within a weight panel (its index f // nr then constant across the tile: no gathers)
    panel, within = gs.split(gf, attrs["kernel_block"])
    fo, fi = gs.split(within, config["filter_vectors"] * lanes)
    count = config["band"] * tile_cols
    per_tile = min(config["tiles"], count)
    to, ti = gs.split(gt, per_tile, shift_tail=count % per_tile != 0)
    fvo, fvi = gs.split(fi, lanes)
    gs.reorder(gab, panel, fo, to, ti, fvo, fvi)
    if inside:
        gs.parallel(gs.fuse(gab, panel))
    gs.unroll(ti)
    gs.unroll(fvo)
    gs.vectorize(fvi)
    ls = sch[local]
    ls.compute_at(gs, to)
    *_, lt, lf = ls.op_axis
    lfo, lfi = ls.split(lf, lanes)
    ls.reorder(*ls.reduce_axis, lt, lfo, lfi)
    ls.unroll(lt)
    ls.unroll(lfo)
    ls.vectorize(lfi)

    # the band's transformed input
    vs = sch[v]
    vs.compute_at(st, outer)
    _, vab, vt, vc = vs.op_axis
    vcb, vci = vs.split(vc, lanes)
    vs.reorder(vt, vcb, vab, vci)
    if inside:
        vs.parallel(vt)
    vs.unroll(vab)
    vs.vectorize(vci)
    _pass_in_registers(sch, rows, vs, vcb)

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
by ``passes/graph/alter_layout.py`` through ``conv/formulations.py``), into the GEMM's A
panels [alpha^2, ceil(F/mr), C, mr]. The conv node then carries attrs ``winograd`` (m),
``kernel_block`` (mr) and ``filters`` (F). G has full column rank, so
``untransform_weight`` recovers W exactly (up to rounding) with G's left inverse: the op's
shape rule and numpy reference keep reading OIHW weights.

This file holds the transforms and what both kernels share; the kernels are
``conv/winograd.py`` (NCHW, below) and ``conv/winograd_blocked.py`` (NCHW[b]c), the choice
of m ``conv/winograd_cost.py``. The NCHW kernel has five stages:

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

KERNEL = 3                                   # the kernel size Winograd serves here
# Interpolation points of F(m, 3) (and infinity). For F(4, 3), 0, +-1, 1/2 and -2 rather than
# Lavin's 0, +-1, +-2: the same cost, but half the rounding error on ResNet's 3x3 layers
# (ad19dff). F(6, 3) adds +-1/2 to Lavin's.
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
# shared by the kernels

def row_sum(coeffs: np.ndarray, terms: list[E.Expr]) -> E.Expr:
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


def pick(index: E.Expr, rows: list[E.Expr]) -> E.Expr:
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



def stages(conv_t: te.Tensor) -> dict[str, te.Tensor]:
    """The Winograd kernel's tensors by role, from its output stage ``conv``."""
    found = {"conv": conv_t}
    frontier = [conv_t]
    names = {"winograd_output": "cols", "winograd_gemm": "gemm", "winograd_input": "input",
             "winograd_rows": "rows", "winograd_patch": "patch", "pad": "pad"}
    while frontier:
        t = frontier.pop()
        for inp in t.op.input_tensors():
            role = names.get(inp.op.name)
            if role and role not in found:
                found[role] = inp
                frontier.append(inp)
    return found



def out_size(attrs: dict, x_shape) -> tuple[int, int]:
    pads = attrs["pads"]
    return (x_shape[2] + pads[0] + pads[2] - KERNEL + 1,
            x_shape[3] + pads[1] + pads[3] - KERNEL + 1)


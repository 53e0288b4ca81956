"""Padded inputs as tensor expressions, shared by the conv and pooling kernels: a spatial pad
with any value (loads clamped, so never out of bounds), and a padded input split into the
phases of a stride."""
from __future__ import annotations

from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ops.schedules import clamp, in_range


def padded_input(x: te.Tensor, pads: tuple[int, ...], overhang: tuple[int, ...] = (),
                 value: float = 0.0, name: str = "pad", blocked: bool = False) -> te.Tensor:
    """x with its spatial dims padded by ``value`` (loads clamped, so never out of bounds);
    ``blocked``: x is [N, C/b, *S, b] (ops/nn/blocked_layout.py), its lanes axis not padded.

    >>> padded_input(te.placeholder((1, 2, 5, 5), "float32", "x"), (1, 1, 1, 1)).shape
    (1, 2, 7, 7)
    """
    spatial = x.ndim - 2 - blocked
    extra = tuple(overhang) or (0,) * spatial
    if not any(pads) and not any(extra):
        return x
    shape = x.shape[:2] + tuple(x.shape[2 + d] + pads[d] + pads[d + spatial] + extra[d]
                                for d in range(spatial)) + x.shape[2 + spatial:]

    def body(n, c, *pos):
        return load_or(x, n, c, [p - pads[d] for d, p in enumerate(pos[:spatial])], value,
                       pos[spatial:])
    return te.compute(shape, body, name=name, tag="pad")


def load_or(x: te.Tensor, n, c, src: list, value: float, lanes: tuple = ()) -> E.Expr:
    """x[n, c, *src, *lanes] where src is inside x's spatial extent, else ``value`` (the
    load clamped, so never out of bounds)."""
    conds = [in_range(s, x.shape[2 + d]) for d, s in enumerate(src)]
    load = x[(n, c, *[clamp(s, x.shape[2 + d]) for d, s in enumerate(src)], *lanes)]
    return E.select(E.all_of(*conds), load, E.Const(value, x.dtype))


def phase_split(x: te.Tensor, pads: tuple[int, ...], strides: tuple[int, int],
                phases: tuple[int, int]) -> te.Tensor:
    """x [N, C, H, W] padded by ``pads`` (the padded sizes multiples of ``strides``) and split
    into its first ``phases`` phases: out[n, c, a, b, i, j] = padded[n, c, i*sh + a, j*sw + b],
    so that a stride-s window's taps read each phase plane with stride 1."""
    sh, sw = strides
    height = (x.shape[2] + pads[0] + pads[2]) // sh
    width = (x.shape[3] + pads[1] + pads[3]) // sw

    def body(n, c, a, b, i, j):
        return load_or(x, n, c, [i * sh + a - pads[0], j * sw + b - pads[1]], 0.0)
    return te.compute(x.shape[:2] + tuple(phases) + (height, width), body, name="pad",
                      tag="pad")

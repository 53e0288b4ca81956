"""The blocked activation layout NCHW[b]c and ``layout_transform``, the op that converts to it.

A blocked tensor holds the channels of an NCHW tensor in blocks of ``b`` (the target's
float32 vector lanes), the block innermost: ``[N, C/b, H, W, b]``, element (n, c, y, x) at
``[n, c // b, y, x, c % b]``. Each (y, x) position's ``b`` channels are one vector, so

- a conv computes a vector of ``b`` filters per output position and stores it whole (in
  NCHW the same register tile is stored transposed or lane by lane), and its epilogue and
  the next op read it as whole vectors;
- pooling and elementwise ops work on whole vectors whatever the map's width (13, 27, 55:
  no half-empty vector at each row's end).

``passes/graph/alter_layout.py`` carries the layout across chains of convs, pools and
elementwise ops and inserts ``layout_transform`` only at the chain's boundaries:

    %t = layout_transform(%x) {block=16, to="blocked"}     # [1,64,28,28] -> [1,4,28,28,16]
    %y = conv(%t, %w) {layout_block=16, kernel_block=16}   # -> [1,8,14,14,16]
    %z = relu(%y)
    %o = layout_transform(%z) {block=16, to="plain"}       # -> [1,128,14,14]

Ops on blocked tensors carry attr ``layout_block = b``; their shape rules and numpy
references are the plain op's through :func:`plain_type` / :func:`blocked_type` and
:func:`unblock` / :func:`block`. The kernels on blocked tensors live with their ops:
``ops/nn/conv/blocked.py``, ``conv/blocked_window.py``, ``pool/blocked.py``.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import te
from tensorc.ir.schedule import Schedule
from tensorc.ir.types import TensorType
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import PARALLEL_MIN_ELEMENTS, injective_space, schedule_injective
from tensorc.ops.shape_rules import expect_arity
from tensorc.target import Target

# an anchor: its own schedule (below), elementwise consumers fused after it
layout_transform = define("layout_transform", Pattern.OUT_ELEMWISE_FUSABLE)


# ---------------------------------------------------------------------------------------------
# the layout: numpy and types

def block(x: np.ndarray, b: int) -> np.ndarray:
    """[N, C, *S] -> [N, C/b, *S, b] (C a multiple of b).

    >>> block(np.arange(4.).reshape(1, 4, 1), 2)[0, :, 0].tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    n, c = x.shape[:2]
    grouped = x.reshape((n, c // b, b) + x.shape[2:])
    return np.ascontiguousarray(np.moveaxis(grouped, 2, -1))


def unblock(x: np.ndarray, b: int) -> np.ndarray:
    """[N, C/b, *S, b] -> [N, C, *S] (the inverse of :func:`block`)."""
    n, blocks = x.shape[:2]
    return np.ascontiguousarray(np.moveaxis(x, -1, 2)).reshape((n, blocks * b) + x.shape[2:-1])


def blocked_type(t: TensorType, b: int) -> TensorType:
    return TensorType((t.shape[0], t.shape[1] // b, *t.shape[2:], b), t.dtype)


def plain_type(t: TensorType, b: int) -> TensorType:
    if t.ndim < 3 or t.shape[-1] != b:
        raise ShapeError(f"expected a blocked tensor [N, C/{b}, *S, {b}], got {t}")
    return TensorType((t.shape[0], t.shape[1] * b, *t.shape[2:-1]), t.dtype)


def blocked_constant(array: np.ndarray, channels: int, b: int) -> np.ndarray | None:
    """A constant operand of an elementwise op on an [N, C, *S] tensor, for the same op on
    the blocked tensor: per-channel values ([C, 1, 1], [1, C, 1, 1]) and values the same for
    every channel (scalars, [1, 1, H, W]) broadcast the same way against [N, C/b, *S, b].
    None where the array varies along another axis too and has no blocked form here."""
    ndim = 4
    if array.ndim > ndim:
        return None
    full = array.reshape((1,) * (ndim - array.ndim) + array.shape)
    if full.shape[1] == 1:
        return full[:, :, ..., None]
    if full.shape[1] != channels or any(d != 1 for d in full.shape[2:]):
        return None
    return block(full, b)


# ---------------------------------------------------------------------------------------------
# layout_transform{block, to}: to="blocked" [N, C, *S] -> [N, C/b, *S, b]; to="plain" back

@layout_transform.infer
def _transform_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("layout_transform", input_types, 1)
    (x,) = input_types
    b = attrs["block"]
    if attrs["to"] == "plain":
        return [plain_type(x, b)]
    if x.ndim < 3 or x.shape[1] % b:
        raise ShapeError(f"layout_transform: {x} has no blocks of {b} channels")
    return [blocked_type(x, b)]


@layout_transform.reference
def _transform_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    convert = unblock if attrs["to"] == "plain" else block
    return [convert(x, attrs["block"])]


@layout_transform.compute
def _transform_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    b = attrs["block"]
    if attrs["to"] == "plain":
        shape = plain_type(TensorType(x.shape, x.dtype), b).shape
        return te.compute(shape, lambda n, c, *s: x[(n, c // b, *s, c % b)],
                          name="layout_transform")
    shape = blocked_type(TensorType(x.shape, x.dtype), b).shape
    return te.compute(shape, lambda n, c, *s: x[(n, c * b + s[-1], *s[:-1])],
                      name="layout_transform")


@layout_transform.schedule(space=injective_space, symbolic=True)
def _transform_schedule(target: Target, sch: Schedule, out: te.Tensor, anchor: te.Tensor,
                        attrs: dict, config) -> None:
    """To blocked, the injective schedule (it finds the transposition: vectors along each
    channel's row, stored transposed into the blocks). To plain, each block's [H*W, b] is
    transposed into [b, H*W] in tiles of lanes x b: a vector of b channels loaded whole per
    position (unrolled over ``lanes`` positions), stored transposed as vectors along the
    row (codegen's transposed tile); the index c // b, c % b is not linear in c, so the
    injective schedule's search for the contiguous axis does not see it."""
    if not te.is_static(out.shape) and len(out.shape) in (4, 5):
        _symbolic_schedule(target, sch, out, attrs, config)
        return
    if attrs["to"] == "blocked" or len(out.shape) != 4:
        schedule_injective(target, sch, out, anchor, attrs, config)
        return
    b, lanes = attrs["block"], target.vector_lanes(out.dtype)
    st = sch[out]
    n, c, y, x = st.op_axis
    position = st.fuse(y, x)
    co, ci = st.split(c, b)
    po, pi = st.split(position, lanes)
    st.reorder(n, co, po, pi, ci)
    st.unroll(pi)
    st.vectorize(ci)
    if config["parallel"] and np.prod(out.shape) >= PARALLEL_MIN_ELEMENTS:
        st.parallel(st.fuse(n, co))


def _symbolic_schedule(target: Target, sch: Schedule, out: te.Tensor, attrs: dict,
                       config) -> None:
    """Over symbolic dims, either way: a map's positions (H x W, one run-time extent) in
    tiles of ``lanes``, each position's b channels one vector, the tile unrolled (so the
    plain side is read or written as vectors along the row, transposed in registers); the
    batch and channel blocks on threads. A partial tile of positions is guarded (and copied
    per remainder by passes/loop/symbolic_tails.py)."""
    b, lanes = attrs["block"], target.vector_lanes(out.dtype)
    st = sch[out]
    if attrs["to"] == "plain":
        n, c, y, x = st.op_axis
        co, ci = st.split(c, b)
    else:
        n, co, y, x, ci = st.op_axis
    position = st.fuse(y, x)
    po, pi = st.split(position, lanes)
    st.reorder(n, co, po, pi, ci)
    st.unroll(pi)
    st.vectorize(ci)
    if config["parallel"]:
        st.parallel(st.fuse(n, co))

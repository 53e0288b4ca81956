"""Shape and dtype rules shared by several op families (arity, broadcasting, windows).

Every check raises :class:`ShapeError` with the op name and the offending input, so that the
frontend only has to add which node of the model was being converted.
"""
from __future__ import annotations

from typing import Sequence

from tensorc.errors import ShapeError
from tensorc.ir.types import DTYPES, TensorType

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def expect_arity(op: str, types: Sequence[TensorType], count: int) -> None:
    if len(types) != count:
        raise ShapeError(f"{op}: expects {count} input(s), got {len(types)}")


def expect_same_dtype(op: str, types: Sequence[TensorType]) -> str:
    """All inputs share one dtype; return it."""
    dtype = types[0].dtype
    for i, t in enumerate(types[1:], start=1):
        if t.dtype != dtype:
            raise ShapeError(f"{op}: input {i} has dtype {t.dtype} but input 0 has {dtype}; "
                             f"insert a cast")
    return dtype


def expect_float(op: str, t: TensorType, which: str = "input 0") -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise ShapeError(f"{op}: {which} must be a float tensor, got {t}")


def expect_rank(op: str, t: TensorType, rank: int | Sequence[int], which: str = "input 0"
                ) -> None:
    ranks = (rank,) if isinstance(rank, int) else tuple(rank)
    if t.ndim not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ShapeError(f"{op}: {which} must have rank {want}, got {t}")


def expect_dtype_name(op: str, dtype: str) -> None:
    if dtype not in DTYPES:
        raise ShapeError(f"{op}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")


def expect_axis(op: str, axis: int, ndim: int, what: str = "axis") -> None:
    if not 0 <= axis < ndim:
        raise ShapeError(f"{op}: {what} {axis} is out of range for rank {ndim} "
                         f"(axes must be normalized to 0..{ndim - 1})")


def broadcast_shapes(op: str, types: Sequence[TensorType]) -> tuple[int, ...]:
    """numpy broadcasting of all input shapes, naming the inputs that disagree."""
    ndim = max(t.ndim for t in types)
    out = [1] * ndim
    owner = [0] * ndim  # which input fixed each output dim, for the error message
    for i, t in enumerate(types):
        padded = (1,) * (ndim - t.ndim) + t.shape
        for axis, dim in enumerate(padded):
            if dim == 1 or dim == out[axis]:
                continue
            if out[axis] != 1:
                raise ShapeError(f"{op}: cannot broadcast input {owner[axis]} "
                                 f"{types[owner[axis]]} with input {i} {t} "
                                 f"(dimension {axis - (ndim - t.ndim)} of input {i})")
            out[axis], owner[axis] = dim, i
    return tuple(out)


def window_output_size(in_size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                       pad_end: int, ceil_mode: bool = False) -> int:
    """Output length of a sliding window (conv, pooling) along one spatial dim, as ONNX.

    With ceil_mode a last, partial window is kept, unless it would start in the end padding.
    """
    span = (kernel - 1) * dilation + 1
    room = in_size + pad_begin + pad_end - span
    if room < 0:
        return 0
    if not ceil_mode:
        return room // stride + 1
    out = -(-room // stride) + 1
    if (out - 1) * stride >= in_size + pad_begin:
        out -= 1
    return out


def check_window_attrs(op: str, x: TensorType, kernel: Sequence[int], strides: Sequence[int],
                       pads: Sequence[int], dilations: Sequence[int]) -> int:
    """Validate the window attributes of an N-D conv or pool; return the spatial rank."""
    spatial = x.ndim - 2
    if spatial < 1:
        raise ShapeError(f"{op}: input must be [N, C, spatial...] with 1 to 3 spatial dims, "
                         f"got {x}")
    for name, values, size in (("kernel", kernel, spatial), ("strides", strides, spatial),
                               ("dilations", dilations, spatial), ("pads", pads, 2 * spatial)):
        if len(values) != size:
            raise ShapeError(f"{op}: {name} {tuple(values)} must have {size} entries for "
                             f"input {x}")
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1 or min(pads) < 0:
        raise ShapeError(f"{op}: kernel, strides and dilations must be positive and pads "
                         f"non-negative, got kernel={tuple(kernel)} strides={tuple(strides)} "
                         f"dilations={tuple(dilations)} pads={tuple(pads)}")
    return spatial

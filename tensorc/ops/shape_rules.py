"""Shape and dtype rules shared by several op families (arity, broadcasting, windows).

Every check raises :class:`ShapeError` with the op name and the offending input, so that the
frontend only has to add which node of the model was being converted.
"""
from __future__ import annotations

from typing import Sequence

from tensorc.errors import ShapeError, SymbolicDimError
from tensorc.ir.dim_table import active_table
from tensorc.ir.dims import Dim, DimLike, decide, may_equal
from tensorc.ir.expr import Expr
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


def require_dims(lhs: DimLike, op: str, rhs: DimLike, reason: str) -> None:
    """``lhs op rhs`` (op ``==``, ``>=``, ``<=``) must hold: nothing where it is decided
    true, ShapeError where false, a run-time constraint in the graph's dim table otherwise
    (SymbolicDimError where no table is active to record it)."""
    table = active_table()
    if table is not None:
        table.require(lhs, op, rhs, reason)
        return
    decided = decide({"==": "eq", ">=": "ge", "<=": "le"}[op], lhs, rhs)
    if decided is False:
        raise ShapeError(f"{reason}: it needs {lhs} {op} {rhs}, which never holds")
    if decided is None:
        raise SymbolicDimError(f"{reason}: it needs {lhs} {op} {rhs}, known only at run time "
                               f"(no dim table is active to record the constraint)", lhs)


def unify_dims(a: DimLike, b: DimLike, reason: str) -> DimLike:
    """One dim for two the graph needs equal: the representative; the equality becomes a
    run-time constraint (see DimTable.unify)."""
    table = active_table()
    if table is not None:
        return table.unify(a, b, reason)
    if a == b:
        return a
    raise SymbolicDimError(f"{reason}: dims {a} and {b} must be equal, known only at run "
                           f"time (no dim table is active to record the constraint)",
                           a if isinstance(a, Dim) else b)


def _resolved(d: DimLike) -> DimLike:
    table = active_table()
    return table.resolve(d) if table is not None else d


def broadcast_shapes(op: str, types: Sequence[TensorType]) -> tuple[DimLike, ...]:
    """numpy broadcasting of all input shapes, naming the inputs that disagree. A symbolic
    dim meets a 1 as itself; two dims not provably equal (and neither the constant 1) are
    unified: the graph needs them equal, checked at run time (a symbolic dim that is 1 at
    run time where the other is not is refused then, never broadcast by assumption)."""
    ndim = max(t.ndim for t in types)
    out: list[DimLike] = [1] * ndim
    owner = [0] * ndim  # which input fixed each output dim, for the error message
    for i, t in enumerate(types):
        padded = (1,) * (ndim - t.ndim) + tuple(_resolved(d) for d in t.shape)
        for axis, dim in enumerate(padded):
            if dim == 1 or dim == out[axis]:
                continue
            if isinstance(out[axis], int) and out[axis] == 1:
                out[axis], owner[axis] = dim, i
                continue
            if isinstance(dim, int) and isinstance(out[axis], int) or \
                    not may_equal(dim, out[axis]):
                raise ShapeError(f"{op}: cannot broadcast input {owner[axis]} "
                                 f"{types[owner[axis]]} with input {i} {t} "
                                 f"(dimension {axis - (ndim - t.ndim)} of input {i})")
            out[axis] = unify_dims(out[axis], dim, f"{op} broadcasts dim "
                                   f"{axis - (ndim - t.ndim)} of input {i} {t} with input "
                                   f"{owner[axis]} {types[owner[axis]]}")
    return tuple(out)


def window_output_size(in_size: DimLike, kernel: int, stride: int, dilation: int,
                       pad_begin: int, pad_end: int, ceil_mode: bool = False) -> DimLike:
    """Output length of a sliding window (conv, pooling) along one spatial dim, as ONNX.

    With ceil_mode a last, partial window is kept, unless it would start in the end padding.
    A symbolic ``in_size`` gives ``(H + p - span)//s + 1``, with ``H + p >= span`` (one window
    at least) a run-time constraint where the ranges do not prove it.
    """
    if isinstance(in_size, Expr):      # a tensor expression's extent
        in_size = Dim.of(in_size)
    span = (kernel - 1) * dilation + 1
    room = in_size + pad_begin + pad_end - span
    if isinstance(room, Dim):
        require_dims(room, ">=", 0, f"a window of {span} (kernel {kernel}, dilation "
                     f"{dilation}, pads {pad_begin}+{pad_end}) fits in a dim of {in_size}")
        if not ceil_mode:
            return room // stride + 1
        if pad_end + stride <= span:  # the last window cannot start in the end padding
            return (room + stride - 1) // stride + 1
        raise SymbolicDimError(f"a ceil_mode window over a symbolic dim {in_size} with "
                               f"stride {stride} and end pad {pad_end}: whether its last "
                               f"window starts in the padding is known only at run time",
                               in_size)
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
    # pads may be symbolic (the frontend's auto_pad SAME over a symbolic dim: halves of a
    # max(0, ...), never negative)
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1 or \
            any(isinstance(p, int) and p < 0 for p in pads):
        raise ShapeError(f"{op}: kernel, strides and dilations must be positive and pads "
                         f"non-negative, got kernel={tuple(kernel)} strides={tuple(strides)} "
                         f"dilations={tuple(dilations)} pads={tuple(pads)}")
    return spatial

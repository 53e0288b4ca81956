"""Tensor types of the graph IR."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import math
import os

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy: np.dtype("bfloat16"))
import numpy as np

from tensorc.errors import ShapeError, SizeLimitError
from tensorc.ir.dims import Dim, DimLike, bounds
from tensorc.ir.expr import Expr

# dtype names are numpy's names; bool is "bool"; bfloat16 arrays are ml_dtypes.bfloat16.
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool",
          # one byte per element in memory, as ml_dtypes lays them out (codegen/narrow_dtypes.py)
          "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn",
          "float8_e8m0fnu", "int4", "uint4", "int2", "uint2")


def dtype_of(array: np.ndarray) -> str:
    return np.dtype(array.dtype).name


def format_shape(shape: Sequence[DimLike]) -> str:
    """A shape as tensorc prints it everywhere (messages, the CLI, reports): ``[1,3,224,224]``,
    ``[]`` for a scalar, symbolic dims by their names (``[batch,seq*12,64]``). (Flags that
    take a shape spell it ``1x3x224x224``.)

    >>> format_shape((1, 784))
    '[1,784]'
    """
    return f"[{','.join(str(d) for d in shape)}]"


@dataclass(frozen=True)
class TensorType:
    """The type of a tensor value: a shape and a dtype name. A dim is an int or a symbolic
    :class:`~tensorc.ir.dims.Dim` (known at run time only).

    >>> TensorType((1, 3, 224, 224), "float32")
    float32[1,3,224,224]
    """

    shape: tuple[DimLike, ...]
    dtype: str

    def __post_init__(self):
        # a tensor expression's symbolic extent (an index Expr) is a Dim here
        object.__setattr__(self, "shape", tuple(
            d if isinstance(d, Dim) else Dim.of(d) if isinstance(d, Expr) else int(d)
            for d in self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """Whether every dim is an int."""
        return not any(isinstance(d, Dim) for d in self.shape)

    @property
    def size(self) -> DimLike:
        """The element count (a Dim where the shape is symbolic)."""
        n = 1
        for d in self.shape:
            n = n * d
        return n

    @property
    def nbytes(self) -> DimLike:
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}{format_shape(self.shape)}"

    __repr__ = __str__


def _default_limit() -> int:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 16 << 30
    return min(16 << 30, memory // 2)


# The largest tensor (and, in plan_memory, the largest arena) tensorc will plan, in bytes:
# 16 GiB or half the machine's memory, whichever is less. Bigger ones come from a wrong dim
# or attribute far more often than from a real model; the check runs before anything is
# allocated. Raise it (tensorc.ir.types.MAX_TENSOR_BYTES = ...) for a model that needs more.
MAX_TENSOR_BYTES = _default_limit()


def check_type(type: TensorType, what: str) -> None:
    """Raise ShapeError for a negative dim, SizeLimitError for a tensor over the limit. A
    symbolic dim is checked where its range decides (never negative; its upper bound, where
    finite, within the size limit)."""
    if any(bounds(d)[1] is not None and bounds(d)[1] < 0 for d in type.shape):
        raise ShapeError(f"{what} would have a negative dimension: {type}")
    if not type.is_static:
        highs = [bounds(d)[1] for d in type.shape]
        if any(h == 0 for h in highs) or None in highs:
            return
        type = TensorType(tuple(highs), type.dtype)
        what = f"{what} (at the largest dims its ranges allow)"
    nbytes = math.prod(type.shape) * np.dtype(type.dtype).itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise SizeLimitError(
            f"{what} would be {type} ({_gib(nbytes)}), over the limit of "
            f"{_gib(MAX_TENSOR_BYTES)} per tensor; check the input shapes and the attributes "
            f"that decide this size (or raise tensorc.ir.types.MAX_TENSOR_BYTES)")


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.3g} GiB"

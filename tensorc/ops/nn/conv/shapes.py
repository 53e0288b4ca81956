"""A conv's shapes: its output size, and its weights' layouts (OIHW, packed in blocks of
filters, Winograd-transformed) with the conversions between them."""
from __future__ import annotations

import numpy as np

from tensorc.ir.types import TensorType
from tensorc.ops.nn.conv import winograd_transforms
from tensorc.ops.shape_rules import window_output_size


def output_spatial(attrs: dict, x: TensorType, w: TensorType) -> tuple[int, ...]:
    spatial = x.ndim - 2
    pads = attrs["pads"]
    return tuple(window_output_size(x.shape[2 + i], w.shape[2 + i], attrs["strides"][i],
                                    attrs["dilations"][i], pads[i], pads[i + spatial])
                 for i in range(spatial))


def unpacked_weight_shape(attrs: dict, w_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The OIHW weight shape; packed weights are [ceil(F/b), C/g, *K, b] (kernel_block b;
    ``filters`` F where zero filters pad the last block)."""
    if attrs.get("winograd"):
        return winograd_transforms.transformed_weight_shape(attrs, w_shape)
    block = attrs.get("kernel_block", 0)
    if not block:
        return tuple(w_shape)
    return (attrs.get("filters", w_shape[0] * block), *w_shape[1:-1])


def pack_weight(w: np.ndarray, block: int) -> np.ndarray:
    """OIHW weights in blocks of ``block`` filters, [ceil(F/b), C/g, *K, b], the last block
    padded with zero filters.

    >>> pack_weight(np.arange(3.).reshape(3, 1, 1, 1), 2)[:, 0, 0, 0].tolist()
    [[0.0, 1.0], [2.0, 0.0]]
    """
    f = w.shape[0]
    padded = np.zeros((-(-f // block) * block,) + w.shape[1:], w.dtype)
    padded[:f] = w
    blocks = padded.reshape((-1, block) + w.shape[1:])
    return np.ascontiguousarray(np.moveaxis(blocks, 1, -1))


def unpack_weight(attrs: dict, w: np.ndarray) -> np.ndarray:
    """The OIHW weights of packed ones (see :func:`pack_weight`) or Winograd-transformed ones
    (see ``winograd_transforms.transform_weight``)."""
    if attrs.get("winograd"):
        return winograd_transforms.untransform_weight(w, attrs["winograd"], attrs["filters"])
    flat = np.moveaxis(w, -1, 1).reshape((w.shape[0] * w.shape[-1],) + w.shape[1:-1])
    return flat[:unpacked_weight_shape(attrs, w.shape)[0]]

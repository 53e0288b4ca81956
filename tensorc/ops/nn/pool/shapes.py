"""The shape rules that every pooling window shares (max, average and Lp pools): the output
size with ONNX's ceil_mode rule, and how far the last ceil-mode window reaches past the
padding."""
from __future__ import annotations

from tensorc.errors import ShapeError
from tensorc.ir.dims import is_symbolic
from tensorc.ir.types import TensorType
from tensorc.ops.nn import blocked_layout
from tensorc.ops.shape_rules import check_window_attrs, expect_arity, window_output_size


def dilations(attrs: dict, spatial: int) -> tuple[int, ...]:
    return tuple(attrs.get("dilations", (1,) * spatial))


def output_spatial(attrs: dict, shape: tuple[int, ...]) -> tuple[int, ...]:
    spatial = len(shape) - 2
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    dilation = dilations(attrs, spatial)
    return tuple(window_output_size(shape[2 + i], kernel[i], strides[i], dilation[i], pads[i],
                                    pads[i + spatial], bool(attrs["ceil_mode"]))
                 for i in range(spatial))


def overhang(attrs: dict, shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """How far the last ceil-mode window reaches past the end padding, per spatial dim."""
    spatial = len(shape) - 2
    if not attrs["ceil_mode"]:
        return (0,) * spatial       # floor mode: every window ends inside the padding
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    dilation = dilations(attrs, spatial)

    def reach(i: int) -> int:
        if is_symbolic(shape[2 + i]) or is_symbolic(out[i]):
            # over a run-time size, its bound: the last window starts at most a stride less
            # one past where a floor-mode window would (the padded input is read through
            # clamped loads, so a longer overhang only pads more)
            return strides[i] - 1
        return max(0, (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilation[i] + 1
                   - (shape[2 + i] + pads[i] + pads[i + spatial]))
    return tuple(reach(i) for i in range(spatial))


def infer_pool(name: str, attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity(name, input_types, 1)
    (x,) = input_types
    if attrs.get("layout_block"):     # blocked activations: the plain pool's rule, blocked
        b = attrs["layout_block"]
        plain = infer_pool(name, {**attrs, "layout_block": 0},
                           [blocked_layout.plain_type(x, b)])
        return [blocked_layout.blocked_type(plain[0], b)]
    spatial = x.ndim - 2
    if not 1 <= spatial <= 3:
        raise ShapeError(f"{name}: input must be [N, C, spatial...] with 1 to 3 spatial dims, "
                         f"got {x}")
    check_window_attrs(name, x, attrs["kernel_shape"], attrs["strides"], attrs["pads"],
                       dilations(attrs, spatial))
    out = output_spatial(attrs, x.shape)
    if any(isinstance(d, int) and d < 1 for d in out):  # symbolic: window_output_size checks
        raise ShapeError(f"{name}: kernel {attrs['kernel_shape']} does not fit in input {x} "
                         f"padded by {attrs['pads']}")
    return [TensorType(x.shape[:2] + out, x.dtype)]


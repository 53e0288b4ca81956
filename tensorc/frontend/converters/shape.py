"""Converters of ONNX shape and data-movement ops (and constants)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from tensorc.errors import InvalidModelError, ShapeError, SymbolicDimError, UnsupportedOpError
from tensorc.frontend.converters.common import normalize_axis, reshape
from tensorc.frontend.context import ImportContext
from tensorc.frontend.converters.data_dependent import runtime_constant_of_shape, runtime_range
from tensorc.frontend.registry import converter
from tensorc.ir.dims import Dim, DimLike, ceil_div, dim_max, dim_min, may_equal
from tensorc.ir.graph import Value
from tensorc.ir.types import TensorType
from tensorc.ops.shape_rules import broadcast_shapes, require_dims


@converter("Flatten", since=1)
def flatten(ctx: ImportContext, inputs: list[Value], *, axis: int = 1) -> Value:
    x = inputs[0]
    shape = x.type.shape
    ndim = x.type.ndim
    if not -ndim <= axis <= ndim:  # axis == ndim is allowed: everything goes to the first dim
        raise ShapeError(f"Flatten axis {axis} is out of range for rank {ndim}")
    axis = axis + ndim if axis < 0 else axis
    return reshape(ctx, x, (math.prod(shape[:axis]), math.prod(shape[axis:])))


def resolve_shape(input_shape: Sequence[DimLike], target: Sequence[DimLike], allowzero: bool
                  ) -> tuple[DimLike, ...]:
    """ONNX Reshape's target: 0 copies the input dim (unless allowzero), -1 is inferred.
    Dims may be symbolic: -1 is then the element count divided by the other dims', and an
    element count the ranges cannot prove equal becomes a run-time constraint."""
    dims = [d if isinstance(d, Dim) else int(d) for d in target]
    if not allowzero:
        for i, d in enumerate(dims):
            if isinstance(d, int) and d == 0:
                if i >= len(input_shape):
                    raise ShapeError(f"Reshape target {_text(target)} copies dim {i} that "
                                     f"input {_text(input_shape)} does not have")
                dims[i] = input_shape[i]
    if [d for d in dims if isinstance(d, int)].count(-1) > 1 or \
            any(isinstance(d, int) and d < -1 for d in dims):
        raise ShapeError(f"Reshape target {_text(target)} is invalid")
    total = math.prod(input_shape)
    if any(isinstance(d, int) and d == -1 for d in dims):
        index = next(i for i, d in enumerate(dims) if isinstance(d, int) and d == -1)
        known = math.prod(d for i, d in enumerate(dims) if i != index)
        if isinstance(known, int) and isinstance(total, int):
            if known == 0 or total % known:
                raise ShapeError(f"cannot reshape {_text(input_shape)} to {_text(target)}")
        dims[index] = total // known
    if not (isinstance(total, int) and all(isinstance(d, int) for d in dims)):
        require_dims(math.prod(dims), "==", total,
                     f"Reshape of {_text(input_shape)} to {_text(target)} keeps the "
                     f"element count")
    return tuple(dims)


def _text(shape: Sequence[DimLike]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


@converter("Reshape", since=1, until=4)
def reshape_attribute(ctx: ImportContext, inputs: list[Value], *, shape: Sequence[int],
                      consumed_inputs: Sequence[int] = ()) -> Value:
    x = inputs[0]
    return reshape(ctx, x, resolve_shape(x.type.shape, shape, False))


@converter("Reshape", since=5)
def reshape_input(ctx: ImportContext, inputs: list[Value], *, allowzero: int = 0) -> Value:
    x, target = inputs
    shape = ctx.require_dims(target, "shape")
    return reshape(ctx, x, resolve_shape(x.type.shape, shape, bool(allowzero)))


@converter("Transpose", since=1)
def transpose(ctx: ImportContext, inputs: list[Value], *, perm: Sequence[int] | None = None
              ) -> Value:
    x = inputs[0]
    ndim = x.type.ndim
    if perm is not None and sorted(perm) != list(range(ndim)):
        raise ShapeError(f"Transpose perm {list(perm)} is not a permutation of the axes "
                         f"0..{ndim - 1} of x {x.type}")
    perm = tuple(range(ndim))[::-1] if perm is None else tuple(perm)
    return x if perm == tuple(range(ndim)) else ctx.emit("transpose", [x], perm=perm)


@converter("Concat", since=1)
def concat(ctx: ImportContext, inputs: list[Value], *, axis: int = 1) -> Value:
    present = [v for v in inputs if v is not None]
    axis = normalize_axis(axis, present[0].type.ndim)
    return present[0] if len(present) == 1 else ctx.emit("concat", present, axis=axis)


@converter("Identity", since=1, containers=True)  # a sequence or optional passes through
def identity(ctx: ImportContext, inputs: list[Value]) -> Value:
    return inputs[0]


@converter("Dropout", since=1)
def dropout(ctx: ImportContext, inputs: list[Value], *, ratio: float = 0.5, seed: int = 0,
            is_test: int = 0, consumed_inputs: Sequence[int] = ()) -> tuple[Value, Value]:
    x = inputs[0]
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and ctx.require_constant(training, "training_mode").item():
        raise UnsupportedOpError("Dropout in training mode is not supported")
    # At inference Dropout is the identity and its mask all ones (bool from opset 12 on).
    mask_dtype = bool if ctx.opset >= 12 else x.type.dtype
    return x, ctx.const(np.ones(x.type.shape, dtype=mask_dtype))


@converter("Constant", since=1)
def constant(ctx: ImportContext, inputs: list[Value], *, value: np.ndarray | None = None,
             value_float: float | None = None, value_floats: Sequence[float] | None = None,
             value_int: int | None = None, value_ints: Sequence[int] | None = None,
             value_string: str | None = None, value_strings: Sequence[str] | None = None,
             sparse_value: object = None) -> Value:
    forms = ((value, None), (value_float, np.float32), (value_floats, np.float32),
             (value_int, np.int64), (value_ints, np.int64))
    for raw, dtype in forms:
        if raw is not None:
            return ctx.const(np.array(raw, dtype=dtype))
    raise UnsupportedOpError("Constant holds a string or sparse tensor, which is not supported")


@converter("ConstantOfShape", since=9)
def constant_of_shape(ctx: ImportContext, inputs: list[Value], *,
                      value: np.ndarray | None = None) -> Value:
    fill = np.zeros(1, np.float32) if value is None else value.reshape(-1)
    if ctx.value_of(inputs[0]) is None:     # a shape computed at run time
        return runtime_constant_of_shape(ctx, inputs[0], fill)
    shape = ctx.require_dims(inputs[0], "shape")
    if any(isinstance(d, Dim) for d in shape):  # filled at run time: a broadcast scalar
        return ctx.emit("broadcast_to", [ctx.const(fill[:1].reshape(()))], shape=tuple(shape))
    return ctx.const(np.full(shape, fill[0], dtype=fill.dtype))


@converter("Shape", since=1)
def shape(ctx: ImportContext, inputs: list[Value], *, start: int = 0, end: int | None = None
          ) -> Value:
    # A static shape is a constant (clamped like ONNX); a symbolic one a shape value.
    dims = inputs[0].type.shape[slice(start, end)]
    if inputs[0].type.is_static:
        return ctx.const(np.array(dims, dtype=np.int64))
    return ctx.shape_value(np.array(list(dims) + [None], dtype=object)[:-1])


def _unsqueeze(ctx: ImportContext, x: Value, axes: Sequence[int]) -> Value:
    ndim = x.type.ndim + len(axes)
    axes = sorted(normalize_axis(a, ndim) for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"Unsqueeze axes {tuple(axes)} repeat an axis")
    dims = list(x.type.shape)
    for axis in axes:
        dims.insert(axis, 1)
    return reshape(ctx, x, dims)


def _squeeze(ctx: ImportContext, x: Value, axes: Sequence[int] | None) -> Value:
    shape = x.type.shape
    if axes is None:
        unknown = [d for d in shape if isinstance(d, Dim) and may_equal(d, 1)]
        if unknown:  # which axes go depends on the run-time sizes: never guessed
            raise SymbolicDimError(f"Squeeze without axes of {x.type}: whether dim "
                                   f"{unknown[0]} is 1 is known only at run time; give the "
                                   f"axes, or concrete input_shapes", unknown[0])
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = {normalize_axis(a, x.type.ndim) for a in axes}
    for a in axes:
        if isinstance(shape[a], Dim):
            require_dims(shape[a], "==", 1, f"Squeeze removes axis {a} of {x.type}")
    bad = [a for a in axes if not isinstance(shape[a], Dim) and shape[a] != 1]
    if bad:
        raise ShapeError(f"Squeeze axes {sorted(bad)} of {x.type} are not 1")
    return reshape(ctx, x, [d for i, d in enumerate(shape) if i not in axes])


def _symbolic_split_sizes(n: Dim, sizes: Sequence[int] | None, count: int, axis: int,
                          x: Value) -> list:
    """Split sizes over an axis of symbolic length: given sizes must add up to it (a run-time
    constraint), equal parts are ceil(n / count) with the last one the rest."""
    if sizes is not None:
        require_dims(sum(int(s) for s in sizes), "==", n, f"Split sizes {list(sizes)} add up "
                     f"to axis {axis} of {x.type}")
        return [int(s) for s in sizes]
    if count < 1:
        raise ShapeError("Split has no outputs")
    part = ceil_div(n, count)
    last = n - part * (count - 1)
    require_dims(last, ">=", 0, f"Split of axis {axis} of {x.type} into {count} parts")
    return [part] * (count - 1) + [last]


@converter("Unsqueeze", since=1, until=12)
def unsqueeze_attribute(ctx: ImportContext, inputs: list[Value], *, axes: Sequence[int]
                        ) -> Value:
    return _unsqueeze(ctx, inputs[0], axes)


@converter("Unsqueeze", since=13)
def unsqueeze_input(ctx: ImportContext, inputs: list[Value]) -> Value:
    return _unsqueeze(ctx, inputs[0], ctx.require_constant(inputs[1], "axes").reshape(-1).tolist())


@converter("Squeeze", since=1, until=12)
def squeeze_attribute(ctx: ImportContext, inputs: list[Value], *,
                      axes: Sequence[int] | None = None) -> Value:
    return _squeeze(ctx, inputs[0], axes)


@converter("Squeeze", since=13)
def squeeze_input(ctx: ImportContext, inputs: list[Value]) -> Value:
    axes = inputs[1] if len(inputs) > 1 else None
    listed = None if axes is None else ctx.require_constant(axes, "axes").reshape(-1).tolist()
    return _squeeze(ctx, inputs[0], listed)


@converter("Size", since=1)
def size(ctx: ImportContext, inputs: list[Value]) -> Value:
    size = inputs[0].type.size
    if isinstance(size, int):
        return ctx.const(np.array(size, dtype=np.int64))
    array = np.empty((), object)
    array[()] = size
    return ctx.shape_value(array)


@converter("Range", since=11)
def range_(ctx: ImportContext, inputs: list[Value], *, stash_type: int | None = None) -> Value:
    if any(ctx.value_of(v) is None for v in inputs):     # values computed at run time
        return runtime_range(ctx, inputs)
    if any(v in ctx.known for v in inputs):
        return _symbolic_range(ctx, inputs)
    # The output length depends on the values, so they must be known: Range always folds.
    start, limit, delta = (ctx.require_constant(v, name)
                           for v, name in zip(inputs, ("start", "limit", "delta")))
    if delta.item() == 0:
        raise ShapeError("Range delta is 0")
    dtype = start.dtype
    if stash_type is not None and dtype.name in ("float16", "bfloat16"):
        # low-precision ranges may be counted in float32 or float64 (opset 27)
        wide = ctx.dtype_name(stash_type)
        start, limit, delta = (a.astype(wide) for a in (start, limit, delta))
    return ctx.const(np.arange(start.item(), limit.item(), delta.item()).astype(dtype))


def _symbolic_range(ctx: ImportContext, inputs: list[Value]) -> Value:
    """Range whose start or limit is a symbolic dim (position ids ``Range(past, past + seq,
    1)``): its length ``ceil((limit - start) / delta)``, at least 0, is a Dim; its values,
    ``start + delta * (0, 1, ...)``, are computed where they are read (an ``arange`` fuses
    into the gather of the position embeddings)."""
    start, limit, delta = (ctx.require_dims(v, name)[0]
                           for v, name in zip(inputs, ("start", "limit", "delta")))
    if isinstance(delta, Dim) or delta <= 0:
        raise UnsupportedOpError(f"Range with a symbolic bound needs a constant positive "
                                 f"delta, got {delta}")
    length = dim_max(ceil_div(limit - start, delta), 0)
    return ctx.emit("arange", [reshape(ctx, inputs[0], ())], length=length, delta=delta)


@converter("EyeLike", since=9)
def eye_like(ctx: ImportContext, inputs: list[Value], *, dtype: int | None = None, k: int = 0
             ) -> Value:
    x = inputs[0]
    if x.type.ndim != 2:
        raise ShapeError(f"EyeLike needs a 2-D input, got {x.type}")
    name = x.type.dtype if dtype is None else ctx.dtype_name(dtype)
    # Only the input's shape matters, and shapes are static: the result is a constant.
    return ctx.const(np.eye(*x.type.shape, k=k, dtype=name))


@converter("Expand", since=8)
def expand(ctx: ImportContext, inputs: list[Value]) -> Value:
    x = inputs[0]
    target = ctx.require_dims(inputs[1], "shape")
    # ONNX Expand broadcasts both ways: a target dim of 1 keeps the input's dim.
    ndim = max(len(target), x.type.ndim)
    ours = (1,) * (ndim - x.type.ndim) + x.type.shape
    theirs = (1,) * (ndim - len(target)) + tuple(target)
    shape = []
    for a, b in zip(ours, theirs):
        if isinstance(a, Dim) or isinstance(b, Dim):  # symbolic: broadcasting's own rule
            shape.append(broadcast_shapes("Expand", [TensorType((a,), x.type.dtype),
                                                     TensorType((b,), x.type.dtype)])[0])
            continue
        if a != b and 1 not in (a, b):
            raise ShapeError(f"Expand cannot broadcast {x.type} to {_text(target)}")
        shape.append(a if b == 1 else b)
    if tuple(shape) == x.type.shape:
        return x
    return ctx.emit("broadcast_to", [x], shape=tuple(shape))


@converter("Tile", since=6)
def tile(ctx: ImportContext, inputs: list[Value]) -> Value:
    x = inputs[0]
    repeats = tuple(int(r) for r in ctx.require_constant(inputs[1], "repeats").reshape(-1))
    if len(repeats) != x.type.ndim:
        raise ShapeError(f"Tile repeats {repeats} must have one entry per axis of {x.type}")
    return x if all(r == 1 for r in repeats) else ctx.emit("tile", [x], repeats=repeats)


def slice_axes(ctx: ImportContext, x: Value, starts: Sequence[int], ends: Sequence[int],
               axes: Sequence[int] | None = None, steps: Sequence[int] | None = None
               ) -> Value:
    """ONNX slicing: negative bounds count from the end, out-of-range bounds clamp."""
    shape = x.type.shape
    if axes is None and len(starts) > len(shape):
        raise ShapeError(f"Slice has {len(starts)} starts but no axes, and x {x.type} has only "
                         f"{len(shape)} axes; give one start per axis, or axes")
    axes = range(len(starts)) if axes is None else [normalize_axis(a, x.type.ndim)
                                                    for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise ShapeError(f"Slice starts {list(starts)}, ends {list(ends)}, axes {list(axes)} "
                         f"and steps {list(steps)} must match in length, axes distinct")
    begin, stride, size = [0] * len(shape), [1] * len(shape), list(shape)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if isinstance(step, Dim) or step == 0:
            raise ShapeError(f"Slice step is {step}; it must be a constant other than 0")
        if any(isinstance(v, Dim) for v in (start, end, shape[axis])):
            begin[axis], stride[axis], size[axis] = symbolic_slice(start, end, step,
                                                                   shape[axis])
            continue
        # Python's slice clamps exactly as ONNX does (INT_MAX ends included)
        picked = range(*slice(int(start), int(end), int(step)).indices(shape[axis]))
        begin[axis], stride[axis], size[axis] = picked.start, picked.step, len(picked)
        if not picked:
            begin[axis] = 0
    if tuple(size) == shape and all(s == 1 for s in stride):
        return x
    return ctx.emit("slice", [x], starts=tuple(begin), steps=tuple(stride), shape=tuple(size))


def symbolic_slice(start: DimLike, end: DimLike, step: int, n: DimLike
                   ) -> tuple[DimLike, int, DimLike]:
    """(first index, step, length) of ONNX's clamped slice ``start:end:step`` of an axis of
    ``n`` where a bound or ``n`` is symbolic: clamps the ranges decide fold away, the others
    stay ``min``/``max`` expressions (never assumed)."""
    if step < 0:
        return _symbolic_reverse_slice(start, end, step, n)

    def clamp(v: DimLike) -> DimLike:
        if isinstance(v, int) and v >= (1 << 62):   # INT_MAX-style "to the end"
            return n
        if isinstance(v, int) and v < 0:
            return dim_max(n + v, 0)
        return dim_min(v, n)

    first, last = clamp(start), clamp(end)
    length = dim_max(ceil_div(last - first, step), 0)
    return (first if not (isinstance(length, int) and length == 0) else 0), step, length


def _symbolic_reverse_slice(start: DimLike, end: DimLike, step: int, n: DimLike
                            ) -> tuple[DimLike, int, DimLike]:
    """:func:`symbolic_slice` for a negative step (x[::-1], a flip): ONNX clamps the start
    into [0, n - 1] and the end into [-1, n - 1], negative bounds counting from the end."""
    def clamp(v: DimLike, low: int) -> DimLike:
        if isinstance(v, int) and v >= (1 << 62):
            return n - 1
        if isinstance(v, int) and v <= -(1 << 62):   # INT_MIN-style "past the front"
            return low
        if isinstance(v, int) and v < 0:
            return dim_max(n + v, low)
        return dim_min(v, n - 1)

    first, last = clamp(start, 0), clamp(end, -1)
    length = dim_max(ceil_div(first - last, -step), 0)
    return (first if not (isinstance(length, int) and length == 0) else 0), step, length


@converter("Slice", since=1, until=9)
def slice_attribute(ctx: ImportContext, inputs: list[Value], *, starts: Sequence[int],
                    ends: Sequence[int], axes: Sequence[int] | None = None) -> Value:
    return slice_axes(ctx, inputs[0], starts, ends, axes)


@converter("Slice", since=10)
def slice_input(ctx: ImportContext, inputs: list[Value]) -> Value:
    names = ("starts", "ends", "axes", "steps")
    given = [None if v is None else ctx.require_dims(v, name)
             for v, name in zip(inputs[1:], names)]
    given += [None] * (4 - len(given))
    return slice_axes(ctx, inputs[0], *given)


def _split(ctx: ImportContext, x: Value, axis: int, sizes: Sequence[int] | None,
           count: int, even: bool = False) -> tuple[Value, ...]:
    """One slice per output: fusion wants single-output nodes, and each part is a view.
    Without sizes the parts are equal, the last one smaller unless ``even`` (before opset
    18, the axis must divide evenly)."""
    axis = normalize_axis(axis, x.type.ndim)
    n = x.type.shape[axis]
    if isinstance(n, Dim):
        parts = _symbolic_split_sizes(n, sizes, count, axis, x)
        offsets = [0]
        for size in parts:
            offsets.append(offsets[-1] + size)
        return tuple(slice_axes(ctx, x, [offsets[k]], [offsets[k + 1]], [axis])
                     for k in range(len(parts)))
    if sizes is None:
        if count < 1:
            raise ShapeError("Split has no outputs")
        if even and n % count:
            raise InvalidModelError(
                f"Split into {count} equal parts, but axis {axis} of {x.type} has {n} "
                f"elements, which {count} does not divide (before opset 18 the parts must be "
                f"equal); give the split sizes, or as many outputs as divide {n}")
        part = -(-n // count)  # ONNX: equal parts, the last one smaller when n % count
        sizes = [part] * (count - 1) + [n - part * (count - 1)]
        if sizes[-1] < 0:
            raise ShapeError(f"Split cannot cut an axis of {n} into {count} parts")
    sizes = [int(s) for s in sizes]
    if sum(sizes) != n or min(sizes, default=0) < 0:
        raise ShapeError(f"Split sizes {sizes} do not add up to axis {axis} of {x.type}")
    offsets = np.cumsum([0] + sizes)
    return tuple(slice_axes(ctx, x, [int(offsets[k])], [int(offsets[k + 1])], [axis])
                 for k in range(len(sizes)))


@converter("Split", since=1, until=12)
def split_attribute(ctx: ImportContext, inputs: list[Value], *, axis: int = 0,
                    split: Sequence[int] | None = None) -> tuple[Value, ...]:
    if split is None and len(inputs) > 1 and inputs[1] is not None:  # opset 1's split input
        split = ctx.require_constant(inputs[1], "split").tolist()
    return _split(ctx, inputs[0], axis, split, ctx.num_outputs, even=True)


@converter("Split", since=13)
def split_input(ctx: ImportContext, inputs: list[Value], *, axis: int = 0,
                num_outputs: int | None = None) -> tuple[Value, ...]:
    sizes = inputs[1] if len(inputs) > 1 else None
    sizes = None if sizes is None else ctx.require_constant(sizes, "split").tolist()
    if num_outputs is not None and num_outputs != ctx.num_outputs:
        raise ShapeError(f"Split num_outputs={num_outputs}, but the node has "
                         f"{ctx.num_outputs} outputs; make them agree")
    if ctx.opset >= 18 and sizes is None:
        if num_outputs is None:
            raise ShapeError("Split has neither a split input nor num_outputs (one is "
                             "required from opset 18); give num_outputs")
        size = inputs[0].type.shape[normalize_axis(axis, inputs[0].type.ndim)]
        if isinstance(size, Dim):
            require_dims(size, ">=", num_outputs, f"Split of an axis of {size} into "
                         f"num_outputs={num_outputs} parts")
        elif num_outputs > size:
            raise ShapeError(f"Split num_outputs={num_outputs} is more than the size {size} "
                             f"of the axis it splits")
    return _split(ctx, inputs[0], axis, sizes, num_outputs or ctx.num_outputs,
                  even=ctx.opset < 18)


def _pad(ctx: ImportContext, x: Value, mode: str, pads: Sequence[int], value: float,
         axes: Sequence[int] | None = None) -> Value:
    ndim = x.type.ndim
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise UnsupportedOpError(f"Pad mode {mode!r} is not supported")
    if len(pads) != 2 * (ndim if axes is None else len(axes)):
        raise ShapeError(f"Pad pads {tuple(pads)} must hold a begin and an end per axis")
    if axes is not None:  # pads given for some axes only (opset 18)
        full = [0] * (2 * ndim)
        axes = [normalize_axis(a, ndim) for a in axes]
        for i, axis in enumerate(axes):
            full[axis], full[axis + ndim] = pads[i], pads[i + len(axes)]
        pads = full
    pads = [int(p) for p in pads]
    # Negative pads crop: pad by the positive parts, then slice the negative ones off.
    grow = tuple(max(p, 0) for p in pads)
    if any(grow):
        x = ctx.emit("pad", [x], pads=grow, value=float(value), mode=mode)
    if any(p < 0 for p in pads):
        shape = x.type.shape
        starts = [max(-pads[d], 0) for d in range(ndim)]
        ends = [shape[d] - max(-pads[d + ndim], 0) for d in range(ndim)]
        if any(e < s for s, e in zip(starts, ends)):
            raise ShapeError(f"Pad pads {tuple(pads)} crop more than {x.type} holds")
        x = slice_axes(ctx, x, starts, ends)
    return x


@converter("Pad", since=2, until=10)
def pad_attribute(ctx: ImportContext, inputs: list[Value], *, mode: str = "constant",
                  pads: Sequence[int], value: float = 0.0) -> Value:
    return _pad(ctx, inputs[0], mode, pads, value)


@converter("Pad", since=11)
def pad_input(ctx: ImportContext, inputs: list[Value], *, mode: str = "constant") -> Value:
    x, pads = inputs[:2]
    fill = inputs[2] if len(inputs) > 2 else None
    axes = inputs[3] if len(inputs) > 3 else None
    value = 0.0 if fill is None else ctx.require_constant(fill, "constant_value").item()
    return _pad(ctx, x, mode, ctx.require_constant(pads, "pads").reshape(-1).tolist(), value,
                None if axes is None else ctx.require_constant(axes, "axes").reshape(-1).tolist())


def _permute_blocks(ctx: ImportContext, x: Value, split: Sequence[int], perm: Sequence[int],
                    out: Sequence[int]) -> Value:
    """Reshape to ``split``, transpose by ``perm``, reshape to ``out``: a block shuffle."""
    return reshape(ctx, ctx.emit("transpose", [reshape(ctx, x, split)], perm=tuple(perm)), out)


@converter("DepthToSpace", since=1)
def depth_to_space(ctx: ImportContext, inputs: list[Value], *, blocksize: int,
                   mode: str = "DCR") -> Value:
    x = inputs[0]
    if x.type.ndim != 4 or x.type.shape[1] % (blocksize * blocksize):
        raise ShapeError(f"DepthToSpace needs [N, C, H, W] with C divisible by "
                         f"{blocksize}^2, got {x.type}")
    n, c, h, w = x.type.shape
    b, depth = blocksize, c // (blocksize * blocksize)
    out = (n, depth, h * b, w * b)
    if mode == "DCR":  # channels ordered (row offset, column offset, depth)
        return _permute_blocks(ctx, x, (n, b, b, depth, h, w), (0, 3, 4, 1, 5, 2), out)
    if mode == "CRD":  # channels ordered (depth, row offset, column offset)
        return _permute_blocks(ctx, x, (n, depth, b, b, h, w), (0, 1, 4, 2, 5, 3), out)
    raise UnsupportedOpError(f"DepthToSpace mode {mode!r} is not DCR or CRD")


@converter("SpaceToDepth", since=1)
def space_to_depth(ctx: ImportContext, inputs: list[Value], *, blocksize: int,
                   mode: str = "DCR") -> Value:
    x = inputs[0]
    n, c, h, w = x.type.shape if x.type.ndim == 4 else (0, 0, -1, -1)
    b = blocksize
    for size in (h, w):
        if isinstance(size, Dim):       # a run-time size: divisible when the dims are bound
            require_dims(size % b, "==", 0, f"SpaceToDepth of {x.type} by blocks of {b}")
    if x.type.ndim != 4 or any(isinstance(v, int) and v % b for v in (h, w)):
        raise ShapeError(f"SpaceToDepth needs [N, C, H, W] with H and W divisible by {b}, "
                         f"got {x.type}")
    # DCR: channels ordered (row offset, column offset, depth); CRD: (depth, row, column)
    perm = {"DCR": (0, 3, 5, 1, 2, 4), "CRD": (0, 1, 3, 5, 2, 4)}.get(mode)
    if perm is None:
        raise UnsupportedOpError(f"SpaceToDepth mode {mode!r} is not DCR or CRD")
    return _permute_blocks(ctx, x, (n, c, h // b, b, w // b, b), perm,
                           (n, c * b * b, h // b, w // b))

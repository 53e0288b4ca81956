"""Data movement ops: reshape, transpose, concat, pad, slice, broadcast_to, tile.

reshape{shape}: concrete non-negative dims with the same element count.
transpose{perm}: a permutation of the axes.
concat{axis}: one or more inputs equal in every dim but ``axis``.
pad{pads, value, mode}: ONNX pad order (all begins, then all ends), non-negative; mode is
    "constant" (fill with value, the default), "reflect", "edge" or "wrap".
slice{starts, steps, shape}: ``out[o] = x[starts + o * steps]`` per axis; every index in range
    (the frontend resolves ONNX's negative and out-of-range bounds); steps may be negative.
broadcast_to{shape}: numpy broadcasting of the input to ``shape`` (ONNX Expand).
tile{repeats}: the input repeated ``repeats[d]`` times along each axis d.
arange{length, delta}: ``out[i] = start + i * delta`` for i < length (a Dim: position ids
    over a symbolic sequence), ``start`` a scalar input; computed where it is read.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.dims import Dim, as_expr, may_equal
from tensorc.ir.types import TensorType, format_shape
from tensorc.ops.registry import Pattern, define
from tensorc.ops.schedules import (
    clamp,
    in_range,
)
from tensorc.ops.shape_rules import (
    expect_arity, expect_axis, expect_same_dtype, require_dims, unify_dims,
)

reshape = define("reshape", Pattern.INJECTIVE)
transpose = define("transpose", Pattern.INJECTIVE)
concat = define("concat", Pattern.INJECTIVE)
pad = define("pad", Pattern.INJECTIVE)
slice_ = define("slice", Pattern.INJECTIVE)
broadcast_to = define("broadcast_to", Pattern.INJECTIVE)  # grows data: no epilogue
tile = define("tile", Pattern.INJECTIVE)
arange = define("arange", Pattern.INJECTIVE)

PAD_MODES = ("constant", "reflect", "edge", "wrap")


@reshape.infer
def _reshape_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("reshape", input_types, 1)
    (x,) = input_types
    shape = tuple(attrs["shape"])
    if any(not isinstance(d, (int, Dim)) or isinstance(d, int) and d < 0 for d in shape):
        raise ShapeError(f"reshape: target shape {shape} must be concrete non-negative ints "
                         f"or symbolic Dims (the frontend resolves 0 and -1)")
    if not (x.is_static and all(isinstance(d, int) for d in shape)):
        require_dims(math.prod(shape), "==", x.size, f"reshape of {x} to "
                     f"{format_shape(shape)} keeps the element count")
    elif math.prod(shape) != x.size:
        raise ShapeError(f"reshape: cannot reshape {x} ({x.size} elements) to {list(shape)} "
                         f"({math.prod(shape)} elements)")
    return [TensorType(shape, x.dtype)]


@reshape.reference
def _reshape_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return [x.reshape(attrs["shape"])]


@transpose.infer
def _transpose_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("transpose", input_types, 1)
    (x,) = input_types
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: perm {perm} is not a permutation of the {x.ndim} axes "
                         f"of {x}")
    return [TensorType(tuple(x.shape[p] for p in perm), x.dtype)]


@transpose.reference
def _transpose_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(np.transpose(x, attrs["perm"]), order="C")]


@concat.infer
def _concat_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    if not input_types:
        raise ShapeError("concat: expects at least one input")
    first = input_types[0]
    dtype = expect_same_dtype("concat", input_types)
    axis = attrs["axis"]
    expect_axis("concat", axis, first.ndim)
    shape = list(first.shape)
    for i, t in enumerate(input_types[1:], start=1):
        same = t.ndim == first.ndim and all(
            may_equal(a, b) for k, (a, b) in enumerate(zip(t.shape, shape)) if k != axis)
        if not same:
            raise ShapeError(f"concat: input {i} {t} must match input 0 {first} in every "
                             f"dimension but axis {axis}")
        for k, (a, b) in enumerate(zip(t.shape, shape)):
            if k != axis and a != b:  # symbolic: the graph needs them equal
                shape[k] = unify_dims(b, a, f"concat joins input {i} {t} to input 0 "
                                      f"{first} along axis {axis}")
    total = 0
    for t in input_types:
        total = total + t.shape[axis]
    return [TensorType(tuple(shape[:axis]) + (total,) + tuple(shape[axis + 1:]), dtype)]


@concat.reference
def _concat_reference(attrs: dict, *arrays: np.ndarray) -> list[np.ndarray]:
    return [np.concatenate(arrays, axis=attrs["axis"])]


@pad.infer
def _pad_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("pad", input_types, 1)
    (x,) = input_types
    pads = tuple(attrs["pads"])
    if len(pads) != 2 * x.ndim or min((p for p in pads if isinstance(p, int)), default=0) < 0:
        raise ShapeError(f"pad: pads {pads} must be {2 * x.ndim} non-negative ints or dims "
                         f"(all begins, then all ends) for {x}")
    mode = attrs.get("mode", "constant")
    if mode not in PAD_MODES:
        raise ShapeError(f"pad: mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    if mode != "constant" and any(isinstance(p, Dim) for p in pads):
        raise ShapeError(f"pad: {mode} padding by run-time amounts {pads} is not supported")
    padded = [d for d in range(x.ndim) if _pads_axis(pads, d, x.ndim)]
    if mode != "constant" and any(x.shape[d] == 0 for d in padded):
        raise ShapeError(f"pad: {mode} padding needs a non-empty axis, got {x}")
    for d in padded:
        if mode != "constant" and isinstance(x.shape[d], Dim):
            require_dims(x.shape[d], ">=", 1, f"{mode} padding of axis {d} of {x} needs a "
                         f"non-empty axis")
    shape = tuple(d + pads[i] + pads[i + x.ndim] for i, d in enumerate(x.shape))
    return [TensorType(shape, x.dtype)]


def _pads_axis(pads: tuple, d: int, ndim: int) -> bool:
    """Whether ``pads`` pad axis ``d`` (an amount over symbolic dims, a SAME padding's
    begin at a stride of 2, may be 0 or not at run time: it pads)."""
    return any(isinstance(p, Dim) or p for p in (pads[d], pads[d + ndim]))


@pad.reference
def _pad_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    pads = attrs["pads"]
    widths = [(pads[i], pads[i + x.ndim]) for i in range(x.ndim)]
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        return [np.pad(x, widths, mode=mode)]
    value = np.asarray(attrs["value"]).astype(x.dtype)
    return [np.pad(x, widths, mode="constant", constant_values=value)]


@slice_.infer
def _slice_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("slice", input_types, 1)
    (x,) = input_types
    starts, steps, shape = (tuple(attrs[k]) for k in ("starts", "steps", "shape"))
    if not len(starts) == len(steps) == len(shape) == x.ndim:
        raise ShapeError(f"slice: starts {starts}, steps {steps} and shape {shape} must have "
                         f"one entry per axis of {x}")
    for d, (start, step, size) in enumerate(zip(starts, steps, shape)):
        if any(isinstance(v, Dim) for v in (start, size, x.shape[d])):
            _check_symbolic_slice(x, d, start, step, size)
            continue
        last = start + (size - 1) * step
        if step == 0 or size < 0 or (size and not (0 <= start < x.shape[d]
                                                   and 0 <= last < x.shape[d])):
            raise ShapeError(f"slice: axis {d} of {x}: start {start}, step {step} and size "
                             f"{size} leave the axis (the frontend clamps ONNX bounds)")
    return [TensorType(shape, x.dtype)]


def _check_symbolic_slice(x: TensorType, d: int, start, step: int, size) -> None:
    """A slice whose start, size or axis is symbolic stays in the axis (the frontend's
    clamping makes it so; checked where the ranges decide, required at run time else)."""
    if step == 0:
        raise ShapeError(f"slice: axis {d} of {x}: step 0")
    reason = f"slice of axis {d} of {x} (start {start}, step {step}, size {size})"
    require_dims(size, ">=", 0, reason)
    if not (isinstance(size, int) and size == 0):
        last = start + (size - 1) * step
        for bound in (start, last):
            require_dims(bound, ">=", 0, reason)
            require_dims(bound, "<=", x.shape[d] - 1, reason)


@slice_.reference
def _slice_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    index = tuple(np.arange(size) * step + start for start, step, size in
                  zip(attrs["starts"], attrs["steps"], attrs["shape"]))
    return [x[np.ix_(*index)] if index else x.copy()]


@broadcast_to.infer
def _broadcast_to_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("broadcast_to", input_types, 1)
    (x,) = input_types
    shape = tuple(attrs["shape"])
    offset = len(shape) - x.ndim
    if offset < 0 or any(not (isinstance(d, int) and d == 1) and not may_equal(
            d, shape[offset + k]) for k, d in enumerate(x.shape)):
        raise ShapeError(f"broadcast_to: cannot broadcast {x} to {format_shape(shape)}")
    shape = list(shape)
    for k, d in enumerate(x.shape):
        if not (isinstance(d, int) and d == 1) and d != shape[offset + k]:
            shape[offset + k] = unify_dims(shape[offset + k], d, f"broadcast_to of {x} to "
                                           f"{format_shape(attrs['shape'])}")
    return [TensorType(tuple(shape), x.dtype)]


@broadcast_to.reference
def _broadcast_to_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return [np.broadcast_to(x, attrs["shape"]).copy()]


@tile.infer
def _tile_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("tile", input_types, 1)
    (x,) = input_types
    repeats = tuple(attrs["repeats"])
    if len(repeats) != x.ndim or any(isinstance(r, int) and r < 0 for r in repeats):
        raise ShapeError(f"tile: repeats {repeats} must be {x.ndim} non-negative ints for {x}")
    return [TensorType(tuple(d * r for d, r in zip(x.shape, repeats)), x.dtype)]


@tile.reference
def _tile_reference(attrs: dict, x: np.ndarray) -> list[np.ndarray]:
    return [np.tile(x, attrs["repeats"]) if x.ndim else x.copy()]


@arange.infer
def _arange_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("arange", input_types, 1)
    (start,) = input_types
    if start.ndim != 0:
        raise ShapeError(f"arange: start must be a scalar, got {start}")
    return [TensorType((attrs["length"],), start.dtype)]


@arange.reference
def _arange_reference(attrs: dict, start: np.ndarray) -> list[np.ndarray]:
    steps = np.arange(attrs["length"], dtype=start.dtype) * start.dtype.type(attrs["delta"])
    return [(start + steps).astype(start.dtype)]


# ---------------------------------------------------------------------------------------------
# kernels: index remappings (inlined into their consumers, or run as copies)

def _unravel(flat: E.Expr, shape: tuple[int, ...]) -> list[E.Expr]:
    index = []
    for d in reversed(shape):
        index.append(flat % d if d != 1 else E.const(0))
        flat = flat // d
    return list(reversed(index))


@reshape.compute
def _reshape_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    shape = tuple(attrs["shape"])

    def body(*o):
        flat = None
        for i, d in zip(o, shape):
            flat = i if flat is None else flat * d + i
        return x[tuple(_unravel(flat if flat is not None else E.const(0), x.shape))]
    return te.compute(shape, body, name="reshape")


@transpose.compute
def _transpose_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    perm = attrs["perm"]
    shape = tuple(x.shape[p] for p in perm)

    def body(*o):
        index = [None] * x.ndim
        for d, p in enumerate(perm):
            index[p] = o[d]
        return x[tuple(index)]
    return te.compute(shape, body, name="transpose")


@concat.compute
def _concat_compute(attrs: dict, *xs: te.Tensor) -> te.Tensor:
    axis = attrs["axis"]
    shape = list(xs[0].shape)
    shape[axis] = te.extent_of(sum(t.shape[axis] for t in xs))

    def body(*o):
        # the last input's value, replaced by earlier inputs where the index falls in them
        # (offsets along a symbolic axis are expressions of its dims)
        offsets = [0]
        for t in xs:
            offsets.append(te.extent_of(offsets[-1] + t.shape[axis]))
        value = None
        for t, start in reversed(list(zip(xs, offsets[:-1]))):
            local = o[axis] - start
            index = tuple(E.guarded_clamp(local, t.shape[axis]) if d == axis else o[d]
                          for d in range(len(shape)))
            if value is None:
                value = t[index]
            else:
                end = te.extent_of(start + t.shape[axis])
                value = E.select(E.Compare("lt", o[axis], E.as_expr(end)), t[index], value)
        return value
    return te.compute(tuple(shape), body, name="concat")


def _pad_source(mode: str, src: E.Expr, n: int) -> E.Expr:
    """The input index that padding mode ``mode`` reads for position ``src`` (in [-pad,
    n + pad)); numpy's rules, which repeat the reflection or wrap when a pad exceeds n."""
    if mode == "edge":
        return clamp(src, n)
    if mode == "wrap":
        return src % n
    if not isinstance(n, int):
        # a run-time length: the period max(2(n - 1), 1) folds every position onto 0 where
        # n is 1, as the constant case below does
        period = E.maximum(2 * (n - 1), E.const(1, n.dtype))
        folded = src % period
        return E.select(E.Compare("lt", folded, n), folded, period - folded)
    if n == 1:  # reflect over one element: it is every position's mirror
        return E.const(0)
    period = 2 * (n - 1)
    folded = src % period
    return E.select(E.Compare("lt", folded, E.const(n)), folded, E.const(period) - folded)


@pad.compute
def _pad_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    pads, value = attrs["pads"], attrs.get("value", 0.0)
    nd = x.ndim
    shape = tuple(x.shape[d] + pads[d] + pads[d + nd] for d in range(nd))
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        def mirrored(*o):
            return x[tuple(_pad_source(mode, o[d] - pads[d], x.shape[d])
                           if pads[d] or pads[d + nd] else o[d] for d in range(nd))]
        return te.compute(shape, mirrored, name="pad")

    def body(*o):
        src = [o[d] - (as_expr(pads[d]) if isinstance(pads[d], Dim) else pads[d])
               for d in range(nd)]
        padded = [_pads_axis(pads, d, nd) for d in range(nd)]
        conds = [in_range(s, x.shape[d]) for d, s in enumerate(src) if padded[d]]
        load = x[tuple(clamp(s, x.shape[d]) if padded[d] else s for d, s in enumerate(src))]
        cond = E.all_of(*conds)
        return load if cond is None else E.select(cond, load, E.Const(value, x.dtype))
    return te.compute(shape, body, name="pad")


@slice_.compute
def _slice_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    starts, steps = attrs["starts"], attrs["steps"]
    return te.compute(attrs["shape"], lambda *o: x[tuple(
        o[d] * steps[d] + starts[d] for d in range(x.ndim))], name="slice")


@broadcast_to.compute
def _broadcast_to_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    shape = tuple(attrs["shape"])
    offset = len(shape) - x.ndim
    return te.compute(shape, lambda *o: x[tuple(
        E.const(0) if d == 1 else o[offset + k] for k, d in enumerate(x.shape))],
        name="broadcast_to")


@tile.compute
def _tile_compute(attrs: dict, x: te.Tensor) -> te.Tensor:
    shape = tuple(d * r for d, r in zip(x.shape, attrs["repeats"]))

    def source(o, n, repeats):
        if not isinstance(n, int):      # a run-time length (o % n is 0 where n is 1)
            return o % n if repeats > 1 else o
        return o % n if repeats > 1 and n > 1 else (E.const(0) if n == 1 else o)
    return te.compute(shape, lambda *o: x[tuple(
        source(o[d], n, attrs["repeats"][d]) for d, n in enumerate(x.shape))], name="tile")


@arange.compute
def _arange_compute(attrs: dict, start: te.Tensor) -> te.Tensor:
    delta = E.const(attrs["delta"], start.dtype)
    return te.compute((attrs["length"],), lambda i: start[()] + E.cast(start.dtype, i) * delta,
                      name="arange")

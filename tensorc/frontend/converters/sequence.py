"""Converters of ONNX sequence ops, resolved at import: a sequence is a
:class:`~tensorc.frontend.containers.TensorSequence` (a tuple of tensor Values), so these
converters emit no core op but the slices, concats and subgraphs of the tensors themselves.

What a sequence's length depends on must be known when compiling: SequenceAt, SequenceInsert
and SequenceErase take constant positions (or positions computed from shapes), SplitToSequence
a constant split, SequenceMap imports its body once per element. Exporters write list code
this way (``torch.split`` into a list, a list comprehension, ``torch.stack`` of a list).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx

from tensorc.errors import ConstantRequiredError, InvalidModelError, ShapeError, SymbolicDimError
from tensorc.frontend.containers import (
    EmptyOptional, ImportValue, TensorSequence, describe, is_container,
)
from tensorc.frontend.context import ImportContext, element_dtype, graph_inputs_of
from tensorc.frontend.converters.common import normalize_axis, reshape
from tensorc.frontend.converters.shape import slice_axes
from tensorc.frontend.registry import converter
from tensorc.ir.dims import Dim
from tensorc.ir.graph import Value
from tensorc.ops.shape_rules import require_dims


def _sequence(value: ImportValue | None, what: str) -> TensorSequence:
    if not isinstance(value, TensorSequence):
        raise InvalidModelError(f"its {what} is {describe(value)}, not a sequence; make it a "
                                f"sequence (SequenceConstruct, SplitToSequence)")
    return value


def _position(ctx: ImportContext, value: Value, length: int, insert: bool = False) -> int:
    """A position in a sequence of ``length`` (negative counts from the end; an insertion
    may also go at the end), which must be known when compiling."""
    if not isinstance(value, Value):
        raise InvalidModelError(f"its position is {describe(value)}; it must be a tensor "
                                f"holding one integer")
    if ctx.value_of(value) is None:
        raise ConstantRequiredError(
            f"its position input %{value.name} ({value.type}) is computed at run time; "
            f"tensorc resolves sequences while compiling, so a position must be a constant "
            f"(or computed from shapes only): make it a constant, or fix the inputs it is "
            f"computed from at compile time with input_values", graph_inputs_of(value))
    positions = ctx.require_dims(value, "position")
    if len(positions) != 1:
        raise ShapeError(f"the position must hold one integer, got {value.type}")
    (position,) = positions
    if isinstance(position, Dim):
        raise SymbolicDimError(f"the position is {position}, a symbolic dim; tensorc needs "
                               f"it known when compiling: give concrete input_shapes",
                               position)
    high = length if insert else length - 1
    if not -length <= position <= high:
        raise ShapeError(f"position {position} is out of range for a sequence of {length} "
                         f"element(s) (from {-length} to {high})")
    return position + length if position < 0 else position


@converter("SequenceConstruct", since=11)
def sequence_construct(ctx: ImportContext, inputs: list[Value]) -> TensorSequence:
    return TensorSequence(tuple(inputs), inputs[0].type.dtype)


@converter("SequenceEmpty", since=11)
def sequence_empty(ctx: ImportContext, inputs: list[Value], *,
                   dtype: int = onnx.TensorProto.FLOAT) -> TensorSequence:
    return TensorSequence((), element_dtype(dtype, ctx.label, "SequenceEmpty's dtype"))


@converter("SequenceLength", since=11, containers=True)
def sequence_length(ctx: ImportContext, inputs: list[ImportValue]) -> Value:
    sequence = _sequence(inputs[0], "input")
    return ctx.const(np.array(len(sequence.items), np.int64))


@converter("SequenceAt", since=11, containers=True)
def sequence_at(ctx: ImportContext, inputs: list[ImportValue]) -> Value:
    sequence = _sequence(inputs[0], "input")
    return sequence.items[_position(ctx, inputs[1], len(sequence.items))]


@converter("SequenceInsert", since=11, containers=True)
def sequence_insert(ctx: ImportContext, inputs: list[ImportValue]) -> TensorSequence:
    sequence, tensor = _sequence(inputs[0], "input"), inputs[1]
    if not isinstance(tensor, Value):
        raise InvalidModelError(f"the value inserted is {describe(tensor)}; a sequence holds "
                                f"tensors only")
    if sequence.dtype is not None and tensor.type.dtype != sequence.dtype:
        raise InvalidModelError(f"the tensor inserted is {tensor.type}, the sequence holds "
                                f"{sequence.dtype} tensors; cast it (Cast) to "
                                f"{sequence.dtype}")
    length = len(sequence.items)
    position = length if len(inputs) < 3 or inputs[2] is None else \
        _position(ctx, inputs[2], length, insert=True)
    return sequence.inserted(position, tensor)


@converter("SequenceErase", since=11, containers=True)
def sequence_erase(ctx: ImportContext, inputs: list[ImportValue]) -> TensorSequence:
    sequence = _sequence(inputs[0], "input")
    length = len(sequence.items)
    if not length:
        raise ShapeError("SequenceErase of an empty sequence: there is nothing to erase")
    position = length - 1 if len(inputs) < 2 or inputs[1] is None else \
        _position(ctx, inputs[1], length)
    return sequence.erased(position)


@converter("SplitToSequence", since=11)
def split_to_sequence(ctx: ImportContext, inputs: list[Value], *, axis: int = 0,
                      keepdims: int = 1) -> TensorSequence:
    x = inputs[0]
    split = inputs[1] if len(inputs) > 1 else None
    axis = normalize_axis(axis, x.type.ndim)
    n = x.type.shape[axis]
    sizes = None if split is None else ctx.require_dims(split, "split")
    if split is not None and split.type.ndim == 1:  # the parts' sizes
        if any(isinstance(s, Dim) for s in sizes):
            raise SymbolicDimError(f"the split sizes {[str(s) for s in sizes]} are symbolic; "
                                   f"tensorc needs the number and sizes of the parts when "
                                   f"compiling: give concrete input_shapes")
        sizes = [int(s) for s in sizes]
        if min(sizes, default=0) < 0:
            raise ShapeError(f"split sizes {sizes} must not be negative")
        require_dims(sum(sizes), "==", n, f"SplitToSequence sizes {sizes} add up to axis "
                     f"{axis} of {x.type}")
        parts = _slices(ctx, x, axis, sizes)
    else:
        if isinstance(n, Dim):
            raise SymbolicDimError(f"SplitToSequence cuts axis {axis} of {x.type} into parts "
                                   f"of a fixed size: the number of parts depends on the "
                                   f"symbolic dim {n}; give concrete input_shapes", n)
        size = 1 if split is None else sizes[0]
        if isinstance(size, Dim) or size < 1:
            raise ShapeError(f"the split size must be a positive constant, got {size}")
        sizes = [min(size, n - start) for start in range(0, n, size)]
        parts = _slices(ctx, x, axis, sizes)
        if split is None and not keepdims:
            shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
            parts = [reshape(ctx, part, shape) for part in parts]
    return TensorSequence(tuple(parts), x.type.dtype)


def _slices(ctx: ImportContext, x: Value, axis: int, sizes: Sequence[int]) -> list[Value]:
    parts, start = [], 0
    for size in sizes:
        parts.append(slice_axes(ctx, x, [start], [start + size], [axis]))
        start += size
    return parts


@converter("ConcatFromSequence", since=11, containers=True)
def concat_from_sequence(ctx: ImportContext, inputs: list[ImportValue], *, axis: int,
                         new_axis: int = 0) -> Value:
    sequence = _sequence(inputs[0], "input")
    if not sequence.items:
        raise ShapeError("ConcatFromSequence of an empty sequence: the result has no shape "
                         "tensorc can know; make sure the sequence has elements")
    values = list(sequence.items)
    rank = values[0].type.ndim
    if new_axis:  # stack: each element gets a new axis of size 1 at ``axis``
        axis = normalize_axis(axis, rank + 1)
        values = [reshape(ctx, v, v.type.shape[:axis] + (1,) + v.type.shape[axis:])
                  for v in values]
    else:
        axis = normalize_axis(axis, rank)
    return values[0] if len(values) == 1 else ctx.emit("concat", values, axis=axis)


@converter("SequenceMap", since=17, containers=True)
def sequence_map(ctx: ImportContext, inputs: list[ImportValue], *, body: onnx.GraphProto
                 ) -> tuple[TensorSequence, ...]:
    first = _sequence(inputs[0], "first input")
    length = len(first.items)
    for k, value in enumerate(inputs[1:], 1):
        if isinstance(value, EmptyOptional):
            raise InvalidModelError(f"its input {k} is {describe(value)}; SequenceMap takes "
                                    f"sequences and tensors")
        if isinstance(value, TensorSequence) and len(value.items) != length:
            raise ShapeError(f"its input {k} is a sequence of {len(value.items)} elements, "
                             f"the first one of {length}; SequenceMap needs them equally long")
    results: list[list[Value]] = [[] for _ in body.output]
    for i in range(length):  # the body once per element
        args = [v.items[i] if isinstance(v, TensorSequence) else v for v in inputs]
        for k, out in enumerate(ctx.inline_graph(body, args)):
            if is_container(out):
                raise InvalidModelError(f"its body's output {k} is {describe(out)}; the body "
                                        f"of SequenceMap computes tensors")
            results[k].append(out)
    dtypes = [element_dtype(o.type.tensor_type.elem_type, ctx.label, f"output {o.name!r}")
              if o.type.tensor_type.elem_type else None for o in body.output]
    return tuple(TensorSequence(tuple(values), values[0].type.dtype if values else dtype)
                 for values, dtype in zip(results, dtypes))


def where_branches(ctx: ImportContext, flag: Value, a: ImportValue, b: ImportValue
                   ) -> ImportValue | None:
    """``where(flag, a, b)`` of two If branches' sequences or optionals, element by element,
    where they agree in length, presence and element types; None where they do not (then
    the branch must be known when compiling)."""
    if isinstance(a, EmptyOptional) or isinstance(b, EmptyOptional):
        return a if a == b else None
    if not (isinstance(a, TensorSequence) and isinstance(b, TensorSequence)):
        return None
    if len(a.items) != len(b.items) or any(x.type != y.type for x, y in zip(a.items, b.items)):
        return None
    return TensorSequence(tuple(ctx.emit("where", [flag, x, y]) for x, y in zip(a.items, b.items)),
                          a.dtype or b.dtype)

"""Converters of ONNX optional ops, resolved at import: a present optional is its element
(a tensor Value or a sequence), an empty one an
:class:`~tensorc.frontend.containers.EmptyOptional`, so whether an optional holds something
is known when compiling and OptionalHasElement is a constant. Exporters write these for
``Optional[Tensor]`` arguments and ``None`` defaults; a model input that is an optional is
present, or fixed empty with ``input_values={name: None}`` (frontend/container_inputs.py).
"""
from __future__ import annotations

import numpy as np
import onnx

from tensorc.errors import InvalidModelError, ShapeError
from tensorc.frontend.containers import EmptyOptional, ImportValue
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value


@converter("Optional", since=15, containers=True)
def optional(ctx: ImportContext, inputs: list[ImportValue | None], *,
             type: onnx.TypeProto | None = None) -> ImportValue:
    value = inputs[0] if inputs else None
    if value is not None:
        if isinstance(value, EmptyOptional):
            raise InvalidModelError("its input is an optional; an optional holds a tensor or "
                                    "a sequence, not another optional")
        return value
    if type is None:
        raise InvalidModelError("it has neither an input nor the 'type' attribute; an empty "
                                "optional needs its type: set 'type'")
    return EmptyOptional("sequence" if type.HasField("sequence_type") else "tensor")


@converter("OptionalHasElement", since=15, containers=True)
def optional_has_element(ctx: ImportContext, inputs: list[ImportValue | None]) -> Value:
    value = inputs[0] if inputs else None
    present = value is not None and not isinstance(value, EmptyOptional)
    return ctx.const(np.array(present))


@converter("OptionalGetElement", since=15, containers=True)
def optional_get_element(ctx: ImportContext, inputs: list[ImportValue]) -> ImportValue:
    if isinstance(inputs[0], EmptyOptional):
        raise ShapeError("its input is an empty optional (known when compiling), so there is "
                         "no element to get; onnxruntime fails here at run time too. Check "
                         "with OptionalHasElement and an If first, or give the optional a value")
    return inputs[0]

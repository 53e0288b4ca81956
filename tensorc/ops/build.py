"""Build graphs from core ops: infer the output types, then add the node."""
from __future__ import annotations

from typing import Any

from tensorc.errors import ShapeError
from tensorc.ir.dim_table import active_table
from tensorc.ir.graph import Graph, Value
from tensorc.ir.types import TensorType, check_type
from tensorc.ops.catalog import get_op

def infer_types(op: str, attrs: dict[str, Any], input_types: list[TensorType]
                ) -> list[TensorType]:
    """The output types of core op ``op``; raises ShapeError (KeyError for an unknown op)."""
    opdef = get_op(op)
    if opdef.infer_fn is None:
        raise ShapeError(f"{op}: the op has no shape rule")
    types = list(opdef.infer_fn(attrs, input_types))
    table = active_table()
    if table is not None and table.substitutions:  # one name per dim once unified
        types = [TensorType(table.resolve_shape(t.shape), t.dtype) for t in types]
    for k, type in enumerate(types):
        check_type(type, f"{op}: output {k}")
    return types


def emit(graph: Graph, op: str, inputs: list[Value], **attrs: Any) -> Value | list[Value]:
    """Append ``op(inputs) {attrs}`` to ``graph``; a single output is returned as a Value.

    >>> y = emit(g, "conv", [x, w], strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1),
    ...          groups=1)    # doctest: +SKIP
    """
    types = infer_types(op, attrs, [v.type for v in inputs])
    outputs = graph.add_node(op, inputs, attrs, types)
    return outputs[0] if len(outputs) == 1 else outputs

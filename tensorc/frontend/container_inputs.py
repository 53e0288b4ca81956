"""Model inputs that are ONNX sequences or optionals, made tensor inputs before import.

tensorc resolves sequences while compiling (frontend/containers.py), so a sequence input has
a length fixed at compile time: ``input_shapes`` gives one shape per element, and the module
takes one tensor input per element, ``x[0]``, ``x[1]``, ... . An optional input is present
(the module takes its tensor, or its sequence's elements) unless ``input_values`` fixes it
empty with ``None``. The rewrite happens on the ModelProto: the element inputs replace the
sequence input, and a SequenceConstruct node (an ``Optional`` node for an empty optional) at
the top of the graph rebuilds the value the model's nodes read, so every later step sees
tensor inputs only.

>>> proto, shapes, values = flatten_container_inputs(
...     proto, {"boxes": [(4, 3), (2, 3)]}, None, "model 'm'")  # doctest: +SKIP
>>> [i.name for i in proto.graph.input]  # doctest: +SKIP
['boxes[0]', 'boxes[1]']
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import onnx
from onnx import helper

from tensorc.errors import ShapeError
from tensorc.frontend.containers import element_name


def flatten_container_inputs(proto: onnx.ModelProto,
                             input_shapes: Mapping[str, Any] | None,
                             input_values: Mapping[str, Any] | None, label: str
                             ) -> tuple[onnx.ModelProto, dict[str, Any], dict[str, Any]]:
    """``proto`` with its sequence and optional inputs made tensor inputs (a copy; ``proto``
    itself where it has none), and ``input_shapes`` and ``input_values`` without the entries
    this used up. ``input_shapes[name]`` of a sequence input is a list of its elements'
    shapes (an element's shape None: the declared element type); ``input_values[name] =
    None`` makes an optional input empty. Raises ShapeError where a sequence input's length
    is not given."""
    shapes, values = dict(input_shapes or {}), dict(input_values or {})
    initializers = {t.name for t in proto.graph.initializer}
    containers = [v for v in proto.graph.input if v.name not in initializers
                  and not v.type.HasField("tensor_type")]
    if not containers:
        return proto, shapes, values
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graph = copy.graph
    inputs: list[onnx.ValueInfoProto] = []
    nodes: list[onnx.NodeProto] = []
    for spec in graph.input:
        if spec.name in initializers or spec.type.HasField("tensor_type"):
            inputs.append(spec)
        elif spec.type.HasField("sequence_type"):
            elements, node = _sequence_input(spec.name, spec.type.sequence_type.elem_type,
                                             shapes, values, label)
            inputs += elements
            nodes.append(node)
        elif spec.type.HasField("optional_type"):
            elements, node = _optional_input(spec, shapes, values, label)
            inputs += elements
            nodes += [node] if node is not None else []
        else:
            raise ShapeError(f"{label}: input {spec.name!r} is a {spec.type.WhichOneof('value')}"
                             f"; tensorc takes tensors, sequences of tensors and optionals")
    taken = {v.name for v in inputs} & {o for n in graph.node for o in n.output}
    if taken:
        raise ShapeError(f"{label}: the element inputs {sorted(taken)} of a sequence input "
                         f"have the names of values the model computes; rename those values")
    del graph.input[:]
    graph.input.extend(inputs)
    rest = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + rest)
    return copy, shapes, values


# the names of the nodes this module puts at the top of the graph: "<input> (sequence input)"
_MADE_HERE = (" (sequence input)", " (empty optional)")


def numbered_nodes(graph: onnx.GraphProto) -> Iterator[tuple[int, onnx.NodeProto]]:
    """(index, node) for the nodes of ``graph``, each numbered as in the model as given: the
    nodes :func:`flatten_container_inputs` put first get negative numbers, so that an
    unnamed node keeps the number ("#3") a message names it by."""
    made = 0
    for node in graph.node:
        if not (len(node.output) == 1 and
                any(node.name == node.output[0] + suffix for suffix in _MADE_HERE)):
            break
        made += 1
    return enumerate(graph.node, start=-made)


def _sequence_input(name: str, elem: onnx.TypeProto, shapes: dict[str, Any],
                    values: dict[str, Any], label: str
                    ) -> tuple[list[onnx.ValueInfoProto], onnx.NodeProto]:
    """The element inputs of sequence input ``name``, and the node that makes them the
    sequence."""
    where = f"{label}: input {name!r}"
    if not elem.HasField("tensor_type"):
        raise ShapeError(f"{where} is a sequence of {elem.WhichOneof('value')}s; tensorc "
                         f"takes sequences of tensors only")
    if name in values:
        raise ShapeError(f"{where} is a sequence; input_values cannot fix it: give its "
                         f"elements' shapes with input_shapes, e.g. {{{name!r}: [(2, 3), "
                         f"(4, 3)]}}")
    given = shapes.pop(name, None)
    if given is None:
        raise ShapeError(f"{where} is a sequence of {_describe_tensor(elem)} tensors; tensorc "
                         f"resolves sequences while compiling and needs its length: give one "
                         f"shape per element with input_shapes, e.g. {{{name!r}: [(2, 3), "
                         f"(4, 3)]}} (None for an element of the declared type)")
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise ShapeError(f"input_shapes[{name!r}] must be a list of shapes, one per element of "
                         f"the sequence, got {given!r}")
    elements = []
    for k, shape in enumerate(given):
        element = onnx.ValueInfoProto(name=element_name(name, k))
        element.type.CopyFrom(elem)
        if shape is not None:
            _set_shape(element.type.tensor_type, _element_shape(name, k, shape, elem, label))
        elements.append(element)
    if elements:
        node = helper.make_node("SequenceConstruct", [e.name for e in elements], [name],
                                name=name + _MADE_HERE[0])
    else:
        node = helper.make_node("SequenceEmpty", [], [name], name=name + _MADE_HERE[0],
                                dtype=elem.tensor_type.elem_type)
    return elements, node


def _optional_input(spec: onnx.ValueInfoProto, shapes: dict[str, Any], values: dict[str, Any],
                    label: str) -> tuple[list[onnx.ValueInfoProto], onnx.NodeProto | None]:
    """A present optional input is its tensor (same name) or its sequence's elements; one
    ``input_values`` fixes to None is an Optional node holding nothing."""
    name, elem = spec.name, spec.type.optional_type.elem_type
    if name in values and values[name] is None:
        del values[name]
        if name in shapes:
            raise ShapeError(f"{label}: input {name!r}: input_values makes the optional "
                             f"empty (None), but input_shapes gives it a shape; drop one")
        return [], helper.make_node("Optional", [], [name], name=name + _MADE_HERE[1],
                                    type=elem)
    if elem.HasField("sequence_type"):
        return _sequence_input(name, elem.sequence_type.elem_type, shapes, values, label)
    if not elem.HasField("tensor_type"):
        raise ShapeError(f"{label}: input {name!r} is an optional {elem.WhichOneof('value')}; "
                         f"tensorc takes optional tensors and sequences only")
    tensor = onnx.ValueInfoProto(name=name)
    tensor.type.CopyFrom(elem)
    return [tensor], None


def _element_shape(name: str, index: int, shape: Any, elem: onnx.TypeProto, label: str
                   ) -> list[int]:
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        raise ShapeError(f"input_shapes[{name!r}][{index}] must be a shape (a sequence of "
                         f"ints) or None, got {shape!r}") from None
    tensor = elem.tensor_type
    if tensor.HasField("shape"):
        declared = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if len(declared) != len(dims) or any(d is not None and d >= 0 and d != s
                                             for d, s in zip(declared, dims)) \
                or min(dims, default=0) < 0:
            raise ShapeError(f"{label}: input {name!r}: element {index} has shape "
                             f"{tuple(dims)} in input_shapes, but the model declares its "
                             f"elements {_describe_tensor(elem)}")
    return dims


def _set_shape(tensor: onnx.TypeProto.Tensor, dims: list[int]) -> None:
    tensor.ClearField("shape")
    tensor.shape.SetInParent()  # a scalar element: a shape with no dims, not an unknown one
    for d in dims:
        tensor.shape.dim.add().dim_value = d


def _describe_tensor(elem: onnx.TypeProto) -> str:
    tensor = elem.tensor_type
    dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type).name \
        if tensor.elem_type else "?"
    if not tensor.HasField("shape"):
        return dtype
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tensor.shape.dim]
    return f"{dtype}[{','.join(dims)}]"

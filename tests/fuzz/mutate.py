"""Mutations of ONNX models: what a wrong exporter, a hand edit or a hostile file gives.

``mutate(model, rng)`` returns a mutated copy and a one-line description per mutation. The
mutations drop or rename node inputs, add extra ones, set attributes to random, negative,
huge, float-for-int or out-of-range values, set input dims to 0, -1 or 10^9, retype, reshape
or delete initializers, change the opset and the declared output types.
"""
from __future__ import annotations

import random

import onnx
from onnx import AttributeProto, TensorProto

HUGE = (2 ** 31 - 1, 2 ** 63 - 1, 10 ** 9, 2 ** 31, 2 ** 32 + 1)
INTERESTING_INTS = (0, 1, 2, -1, -2, 3, 7, -7, 100) + HUGE + (-(2 ** 31), -(10 ** 9))
INTERESTING_FLOATS = (0.0, -1.0, 1.5, 1e-30, 1e30, float("inf"), float("-inf"), float("nan"))
ELEM_TYPES = (TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.DOUBLE,
              TensorProto.FLOAT16, TensorProto.BOOL, TensorProto.UINT8, TensorProto.STRING,
              TensorProto.INT8)


def _int(rng: random.Random) -> int:
    return rng.choice(INTERESTING_INTS) if rng.random() < 0.7 else rng.randint(-10, 10)


def _float(rng: random.Random) -> float:
    return rng.choice(INTERESTING_FLOATS) if rng.random() < 0.6 else rng.uniform(-5, 5)


def _names_defined(graph: onnx.GraphProto) -> list[str]:
    names = [v.name for v in graph.input] + [t.name for t in graph.initializer]
    for node in graph.node:
        names.extend(o for o in node.output if o)
    return names


def _node(model, rng):
    return rng.choice(model.graph.node) if model.graph.node else None


def drop_input(model, rng):
    node = _node(model, rng)
    if node is None or not node.input:
        return None
    k = rng.randrange(len(node.input))
    if rng.random() < 0.5:
        node.input[k] = ""
        return f"{node.op_type}: input {k} set to ''"
    del node.input[k]
    return f"{node.op_type}: input {k} removed"


def rename_input(model, rng):
    node = _node(model, rng)
    if node is None or not node.input:
        return None
    k = rng.randrange(len(node.input))
    name = rng.choice(_names_defined(model.graph) + ["no_such_tensor"])
    node.input[k] = name
    return f"{node.op_type}: input {k} renamed to {name!r}"


def extra_input(model, rng):
    node = _node(model, rng)
    if node is None:
        return None
    name = rng.choice([v.name for v in model.graph.input] or [""])
    node.input.append(name)
    return f"{node.op_type}: extra input {name!r}"


def extra_output(model, rng):
    node = _node(model, rng)
    if node is None:
        return None
    node.output.append(f"extra_{rng.randrange(100)}")
    return f"{node.op_type}: extra output"


def _set_attribute(attribute: onnx.AttributeProto, rng: random.Random) -> str:
    kind = rng.random()
    if attribute.type == AttributeProto.INT:
        if kind < 0.2:  # float for int
            value = rng.choice((1.5, 0.5, -2.5, 1.0))
            attribute.ClearField("i")
            attribute.type, attribute.f = AttributeProto.FLOAT, value
            return f"float {value}"
        if kind < 0.25:
            attribute.ClearField("i")
            attribute.type = AttributeProto.INTS
            attribute.ints.extend([1])
            return "ints [1]"
        attribute.i = _int(rng)
        return str(attribute.i)
    if attribute.type == AttributeProto.FLOAT:
        if kind < 0.2:
            attribute.ClearField("f")
            attribute.type, attribute.i = AttributeProto.INT, _int(rng)
            return f"int {attribute.i}"
        attribute.f = _float(rng)
        return str(attribute.f)
    if attribute.type == AttributeProto.INTS:
        values = list(attribute.ints)
        if kind < 0.15 or not values:
            values = [_int(rng) for _ in range(rng.randrange(0, 5))]
        elif kind < 0.25:
            values.append(_int(rng))
        elif kind < 0.35:
            values.pop(rng.randrange(len(values)))
        else:
            values[rng.randrange(len(values))] = _int(rng)
        del attribute.ints[:]
        attribute.ints.extend(values)
        return str(values)
    if attribute.type == AttributeProto.STRING:
        attribute.s = rng.choice([b"", b"bogus", b"SAME_UPPER", b"VALID", b"constant",
                                  b"reflect", b"NOTSET"])
        return repr(attribute.s)
    if attribute.type == AttributeProto.FLOATS:
        del attribute.floats[:]
        attribute.floats.extend(_float(rng) for _ in range(rng.randrange(0, 4)))
        return str(list(attribute.floats))
    return None


def mutate_attribute(model, rng):
    node = _node(model, rng)
    if node is None:
        return None
    if node.attribute and rng.random() < 0.8:
        attribute = rng.choice(node.attribute)
        what = _set_attribute(attribute, rng)
        return None if what is None else f"{node.op_type}: {attribute.name} = {what}"
    if node.attribute and rng.random() < 0.5:
        attribute = rng.choice(node.attribute)
        node.attribute.remove(attribute)
        return f"{node.op_type}: attribute {attribute.name} removed"
    name = rng.choice(["axis", "keepdims", "num_outputs", "group", "alpha", "bogus",
                       "hidden_size", "perm", "axes", "num_groups"])
    value = rng.choice([_int(rng), _float(rng), [_int(rng), _int(rng)]])
    node.attribute.append(onnx.helper.make_attribute(name, value))
    return f"{node.op_type}: attribute {name} = {value} added"


def mutate_dim(model, rng):
    inputs = [v for v in model.graph.input if v.type.tensor_type.shape.dim]
    if not inputs:
        return None
    value = rng.choice(inputs)
    dims = value.type.tensor_type.shape.dim
    k = rng.randrange(len(dims))
    size = rng.choice([0, -1, 10 ** 9, 1, 2, 3, 5, 2 ** 31])
    dims[k].Clear()
    dims[k].dim_value = size
    return f"input {value.name}: dim {k} = {size}"


def mutate_rank(model, rng):
    inputs = [v for v in model.graph.input if v.type.HasField("tensor_type")]
    if not inputs:
        return None
    value = rng.choice(inputs)
    shape = value.type.tensor_type.shape
    if shape.dim and rng.random() < 0.5:
        del shape.dim[rng.randrange(len(shape.dim))]
        return f"input {value.name}: a dim removed"
    shape.dim.add().dim_value = rng.choice([1, 2])
    return f"input {value.name}: a dim added"


def mutate_input_type(model, rng):
    inputs = list(model.graph.input) + list(model.graph.output)
    value = rng.choice(inputs)
    elem = rng.choice(ELEM_TYPES)
    value.type.tensor_type.elem_type = elem
    return f"{value.name}: declared element type {TensorProto.DataType.Name(elem)}"


def mutate_initializer(model, rng):
    if not model.graph.initializer:
        return None
    tensor = rng.choice(model.graph.initializer)
    kind = rng.random()
    if kind < 0.3:
        model.graph.initializer.remove(tensor)
        return f"initializer {tensor.name} deleted"
    if kind < 0.55:
        tensor.data_type = rng.choice(ELEM_TYPES)
        return f"initializer {tensor.name} retyped {tensor.data_type}"
    if kind < 0.8 and tensor.dims:
        k = rng.randrange(len(tensor.dims))
        tensor.dims[k] = rng.choice([-1, 0, 10 ** 9, tensor.dims[k] + 1])
        return f"initializer {tensor.name} dim {k} = {tensor.dims[k]}"
    import numpy as np
    from onnx import numpy_helper
    try:
        array = numpy_helper.to_array(tensor)
    except Exception:  # an earlier mutation broke it already
        return None
    if array.size:
        flat = array.reshape(-1).copy()
        if np.issubdtype(flat.dtype, np.integer):
            flat[rng.randrange(flat.size)] = _int(rng) % (2 ** 31) * rng.choice([1, -1])
        elif np.issubdtype(flat.dtype, np.floating):
            flat[rng.randrange(flat.size)] = _float(rng)
        tensor.CopyFrom(numpy_helper.from_array(flat.reshape(array.shape), tensor.name))
        return f"initializer {tensor.name} value changed"
    return None


def mutate_opset(model, rng):
    version = rng.choice([1, 6, 9, 11, 13, 99, 0, -1, 23, 25])
    model.opset_import[0].version = version
    return f"opset {version}"


MUTATIONS = [drop_input, rename_input, extra_input, extra_output, mutate_attribute,
             mutate_attribute, mutate_attribute, mutate_dim, mutate_dim, mutate_rank,
             mutate_input_type, mutate_initializer, mutate_initializer, mutate_opset]


def mutate(model: onnx.ModelProto, rng: random.Random, count: int | None = None
           ) -> tuple[onnx.ModelProto, list[str]]:
    """A mutated copy of ``model`` (1 to 3 mutations unless ``count``) and what was done."""
    mutant = onnx.ModelProto()
    mutant.CopyFrom(model)
    done: list[str] = []
    for _ in range(count or rng.choice([1, 1, 1, 2, 2, 3])):
        for _attempt in range(5):
            what = rng.choice(MUTATIONS)(mutant, rng)
            if what:
                done.append(what)
                break
    return mutant, done

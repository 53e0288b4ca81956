"""Checks every node against its ONNX schema before any converter runs.

The converters trust what this module checked: the input and output counts are within the
schema's range, every required input is given (not the empty name), every attribute has the
schema's type and is given once, required attributes are present, boolean attributes are 0
or 1, and sizes read from attributes are not absurd. What fails is an
:class:`InvalidModelError` naming the model, the node (name, op type, opset), the problem
and the fix; onnxruntime rejects all of these models as invalid too, except boolean
attributes outside {0, 1}: onnxruntime reads ``keepdims=2`` as false but ``transB=2`` as
true, an inconsistency tensorc refuses to guess at. The README's "Validation" lists what
the importer checks and where it is more lenient than onnxruntime, on purpose.

>>> check_node(node, opset=17, where="model 'm': node 'relu1' (Relu, opset 17)")  # doctest: +SKIP
"""
from __future__ import annotations

import onnx
from onnx import defs

from tensorc.errors import InvalidModelError

# Attributes that the ONNX spec defines as booleans (an INT that is 0 or 1).
BOOLEAN_ATTRIBUTES = frozenset({
    "keepdims", "transA", "transB", "is_causal", "select_last_index", "noop_with_empty_axes",
    "exclusive", "reverse", "upper", "ceil_mode", "count_include_pad", "detect_negative",
    "detect_positive", "input_forget", "linear_before_reset", "exclude_outside", "sorted",
    "largest", "fmod", "interleaved", "training_mode", "new_axis", "onesided", "normalized",
    "center_point_box", "storage_order",
})

# tensorc's dtype names as ONNX's type strings write them
_ONNX_TYPE_NAMES = {"float32": "float", "float64": "double", "float4_e2m1fn": "float4e2m1",
                    "float8_e4m3fn": "float8e4m3fn", "float8_e4m3fnuz": "float8e4m3fnuz",
                    "float8_e5m2": "float8e5m2", "float8_e5m2fnuz": "float8e5m2fnuz",
                    "float8_e8m0fnu": "float8e8m0"}

_FORMAL = defs.OpSchema.FormalParameterOption
_ATTRIBUTE_TYPE_NAMES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}


def newest_opset() -> int:
    """The newest opset of the default domain the installed onnx defines."""
    return defs.onnx_opset_version()


def check_node(node: onnx.NodeProto, opset: int, where: str) -> None:
    """Raise InvalidModelError where ``node`` contradicts its schema at ``opset``."""
    if node.domain not in ("", "ai.onnx"):
        return  # no schema to check against: the support check reports such ops
    try:
        schema = defs.get_schema(node.op_type, opset, "")
    except defs.SchemaError:
        return
    _check_arity(node, schema, where)
    _check_attributes(node, schema, where)


def check_input_types(node: onnx.NodeProto, opset: int, dtypes: list[str | None],
                      where: str) -> None:
    """Raise InvalidModelError where an input's element type (``dtypes``, None for an omitted
    input) is not one its schema allows, or two inputs of one type variable differ."""
    if node.domain not in ("", "ai.onnx"):
        return
    try:
        schema = defs.get_schema(node.op_type, opset, "")
    except defs.SchemaError:
        return
    formals = list(schema.inputs)
    if not formals:
        return
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    bound: dict[str, tuple[str, int]] = {}
    for position, dtype in enumerate(dtypes):
        if dtype is None:
            continue
        formal = formals[min(position, len(formals) - 1)]
        given = f"tensor({_ONNX_TYPE_NAMES.get(dtype, dtype)})"
        types = allowed.get(formal.type_str, [formal.type_str])
        tensor_types = [t for t in types if t.startswith("tensor(")]
        kinds = {_kind(t) for t in tensor_types}
        if tensor_types and given not in tensor_types and (
                kinds <= {"int", "bool"} or (_kind(given) == "bool" and "bool" not in kinds)):
            raise InvalidModelError(
                f"{where}: input {position} ({formal.name!r}) is {given}, but "
                f"{node.op_type}-{schema.since_version} takes {', '.join(tensor_types)} there; "
                f"cast it (Cast) or fix its declared type")
        homogeneous = formal.type_str in allowed and (
            formal.option != _FORMAL.Variadic or formal.is_homogeneous)
        if homogeneous:
            first = bound.setdefault(formal.type_str, (given, position))
            if first[0] != given:
                raise InvalidModelError(
                    f"{where}: inputs {first[1]} and {position} share the type {formal.type_str} "
                    f"of {node.op_type}, but are {first[0]} and {given}; cast one of them "
                    f"(Cast) so that they agree")


def _kind(type_string: str) -> str:
    """A type string's kind. tensorc computes on more numeric element types than the
    schemas list (a bfloat16 Sin, an int8 Sum: onnxruntime has kernels for some of them
    only; a documented leniency, see the README's "Validation"), so for numbers it checks
    kinds only: an input whose schema takes integers or booleans alone (shapes, indices,
    axes, counts, conditions) must have one of the exact types listed (an int8 or float
    index is an error, an integer Sum is not), and a boolean goes only where the schema
    takes booleans (no ArgMax or Add of booleans)."""
    name = type_string.removeprefix("tensor(").removesuffix(")")
    if name == "bool" or name == "string":
        return name
    if name.startswith(("int", "uint")):
        return "int"
    return "complex" if name.startswith("complex") else "float"


def _check_arity(node: onnx.NodeProto, schema: defs.OpSchema, where: str) -> None:
    def count_range(low: int, high: int) -> str:
        if low == high:
            return f"exactly {low}"
        return f"at least {low}" if high >= 2 ** 31 - 1 else f"{low} to {high}"

    given = len(node.input)
    if not schema.min_input <= given <= schema.max_input:
        raise InvalidModelError(
            f"{where}: has {given} input(s), but {node.op_type}-{schema.since_version} takes "
            f"{count_range(schema.min_input, schema.max_input)} "
            f"({', '.join(i.name for i in schema.inputs)}); remove the extra inputs or "
            f"add the missing ones")
    formals = list(schema.inputs)
    for position, name in enumerate(node.input):
        if name or not formals:
            continue
        formal = formals[min(position, len(formals) - 1)]
        if formal.option != _FORMAL.Optional:
            raise InvalidModelError(
                f"{where}: input {position} ({formal.name!r}) is required, but the model "
                f"gives the empty name ''; connect a tensor to it")
    outputs = len(node.output)
    if not schema.min_output <= outputs <= schema.max_output:
        raise InvalidModelError(
            f"{where}: has {outputs} output(s), but {node.op_type}-{schema.since_version} "
            f"produces {count_range(schema.min_output, schema.max_output)}; remove the extra "
            f"outputs")
    for position, name in enumerate(node.output):
        formal = schema.outputs[min(position, len(schema.outputs) - 1)] if schema.outputs \
            else None
        if not name and formal is not None and formal.option == _FORMAL.Single:
            raise InvalidModelError(
                f"{where}: output {position} ({formal.name!r}) is required, but the model "
                f"gives it the empty name ''; name it")


def _check_attributes(node: onnx.NodeProto, schema: defs.OpSchema, where: str) -> None:
    given: dict[str, onnx.AttributeProto] = {}
    for attribute in node.attribute:
        if attribute.name in given:
            raise InvalidModelError(
                f"{where}: attribute {attribute.name!r} is given twice ("
                f"{_describe(given[attribute.name])} and {_describe(attribute)}); keep one")
        given[attribute.name] = attribute
    for name, spec in schema.attributes.items():
        if spec.required and name not in given:
            raise InvalidModelError(f"{where}: required attribute {name!r} is missing; set "
                                    f"it (see the {node.op_type} operator's specification)")
    for name, attribute in given.items():
        spec = schema.attributes.get(name)
        if spec is None:
            raise InvalidModelError(
                f"{where}: {node.op_type}-{schema.since_version} has no attribute {name!r} "
                f"(its attributes: {', '.join(sorted(schema.attributes)) or 'none'}); remove "
                f"it, or check the model's opset")
        expected = int(spec.type)
        if attribute.type != expected:
            actual = _ATTRIBUTE_TYPE_NAMES.get(attribute.type, str(attribute.type))
            raise InvalidModelError(
                f"{where}: attribute {name!r} must be of type "
                f"{_ATTRIBUTE_TYPE_NAMES.get(expected, expected)}, but the model gives "
                f"{actual} ({_describe(attribute)}); store it as "
                f"{_ATTRIBUTE_TYPE_NAMES.get(expected, expected)}")
        if name in BOOLEAN_ATTRIBUTES and attribute.type == onnx.AttributeProto.INT \
                and attribute.i not in (0, 1):
            raise InvalidModelError(
                f"{where}: attribute {name!r} is a boolean, but the model gives {attribute.i}; "
                f"set it to 0 or 1 (runtimes disagree on what other values mean)")


def _describe(attribute: onnx.AttributeProto) -> str:
    try:
        value = onnx.helper.get_attribute_value(attribute)
    except Exception:  # an UNDEFINED attribute has no value to show
        return "no value"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

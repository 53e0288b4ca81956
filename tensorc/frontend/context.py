"""Converting ONNX nodes: the context a converter works in (:class:`ImportContext`: emit
core ops, folding constants; read constants; convert subgraphs in place) and the conversion of
one node by the converter the registry holds for its op and opset. ONNX tensors and element
types become numpy arrays and tensorc dtypes here.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tensorc.errors import (
    ConstantRequiredError, InvalidModelError, ModelLoadError, ShapeError, SymbolicDimError,
    TensorcError, UnsupportedOpError,
)
from tensorc.frontend.containers import (
    CONTAINER_TYPES, ImportValue, describe, is_container,
)
from tensorc.frontend.registry import find_converter
from tensorc.frontend.shape_values import apply_shape_op, as_object, has_dims
from tensorc.frontend.validate import check_input_types, check_node
from tensorc.ir.dims import DimLike
from tensorc.ir.graph import Graph, Value
from tensorc.ir.types import DTYPES, TensorType, check_type, dtype_of
from tensorc.ops.build import emit, infer_types
from tensorc.ops.interpret import evaluate, worth_folding


def node_label(node: onnx.NodeProto, index: int) -> str:
    return repr(node.name) if node.name else f"#{index} (unnamed)"


_DTYPE_ALIASES = {"bool_": "bool"}


def element_dtype(elem_type: int, label: str, what: str) -> str:
    try:
        name = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        name = str(elem_type)
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        type_name = (onnx.TensorProto.DataType.Name(elem_type)
                     if elem_type in onnx.TensorProto.DataType.values() else str(elem_type))
        raise ShapeError(f"{label}: {what} has element type {type_name}, which tensorc does "
                         f"not support")
    return name


def tensor_to_array(tensor: onnx.TensorProto, label: str) -> np.ndarray:
    dtype = element_dtype(tensor.data_type, label, f"tensor {tensor.name!r}")
    if any(d < 0 for d in tensor.dims):
        raise InvalidModelError(f"{label}: tensor {tensor.name!r} has negative dims "
                                f"{list(tensor.dims)}; is the file corrupt?")
    check_type(TensorType(tuple(tensor.dims), dtype), f"{label}: tensor {tensor.name!r}")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as error:
        raise ModelLoadError(f"{label}: tensor {tensor.name!r} cannot be read ({error}); is the "
                             f"file truncated or its external data missing?") from None
    return np.asarray(array.astype(array.dtype.newbyteorder("="), copy=False), order="C")


class ImportContext:
    """What a converter may do: emit core ops (folding constants) and read constants."""

    def __init__(self, graph: Graph, opset: int, label: str,
                 env: dict[str, ImportValue | None] | None = None):
        self.graph = graph
        self.opset = opset
        self.label = label
        self.node_name = ""  # the ONNX node being converted; its core nodes take its name
        # ONNX names in scope -> values (sequences and optionals: frontend/containers.py)
        self.env = env if env is not None else {}
        # shape values holding symbolic dims (frontend/shape_values.py): value -> object array
        self.known: dict[Value, np.ndarray] = {}
        # whether the back end runs loop-IR kernels (ops/loop_kernels.py): recurrences over
        # a concrete length may then take the recurrence kernel (the CUDA back end has none)
        self.loop_kernels = True

    def inline_graph(self, body: onnx.GraphProto, inputs: Sequence[ImportValue | None]
                     ) -> list[ImportValue]:
        """Convert a subgraph (an If branch, a Loop or Scan body) in place: its inputs are
        bound to ``inputs``, the names of the enclosing scopes stay visible; returns the
        values of its outputs."""
        outer, node_name = self.env, self.node_name
        env = dict(outer)
        for spec, value in zip(body.input, inputs):
            env[spec.name] = value
        for tensor in body.initializer:
            env[tensor.name] = self.const(tensor_to_array(tensor, self.label))
        self.env = env
        try:
            for index, node in enumerate(body.node):
                convert_node(self, node, index, env)
        finally:
            self.env, self.node_name = outer, node_name
        missing = [o.name for o in body.output if env.get(o.name) is None]
        if missing:
            raise UnsupportedOpError(f"subgraph {body.name!r}: outputs {missing} are not "
                                     f"computed")
        return [env[o.name] for o in body.output]

    def emit(self, op: str, inputs: list[Value], **attrs: Any) -> Value:
        """Add ``op``, or its value when every input is a constant (constant folding, unless
        it would expand data past ops.interpret.MAX_FOLDED_EXPANSION_BYTES)."""
        arrays = [self.constant(v) for v in inputs]
        if inputs and all(a is not None for a in arrays):
            (expected,) = infer_types(op, attrs, [v.type for v in inputs])
            if expected.is_static and worth_folding(arrays, [expected]):
                (result,) = evaluate(op, attrs, arrays)
                if TensorType(result.shape, dtype_of(result)) != expected:  # a bug in tensorc
                    raise TensorcError(f"{op}: the reference computed {result.dtype}"
                                       f"{list(result.shape)}, the shape rule says {expected}")
                return self.const(result)
        result = emit(self.graph, op, inputs, **attrs)
        assert isinstance(result, Value) and result.producer is not None
        result.producer.name = self.node_name
        return result

    def const(self, array: np.ndarray) -> Value:
        return self.graph.add_constant(np.asarray(array, order="C"))

    def shape_value(self, array: np.ndarray, dtype: str = "int64") -> Value:
        """A value holding ``array``'s ints and Dims: a constant where it holds no Dim, else
        a ``dim_values`` node whose known value the shape arithmetic reads (see
        frontend/shape_values.py)."""
        array = np.asarray(array, dtype=object)
        if not has_dims(array):
            return self.const(np.array([int(v) for v in array.reshape(-1)], dtype=dtype)
                              .reshape(array.shape))
        (value,) = self.graph.add_node(
            "dim_values", [], {"values": tuple(array.reshape(-1)), "shape": array.shape,
                               "dtype": dtype},
            [TensorType(array.shape, dtype)], name=self.node_name or None)
        self.known[value] = array
        return value

    def value_of(self, value: Value) -> np.ndarray | None:
        """The contents of ``value`` where known at compile time: a constant's array, or a
        shape value's ints and Dims (an object array); None for a run-time value."""
        known = self.known.get(value)
        return known if known is not None else self.graph.constants.get(value)

    def require_dims(self, value: Value, what: str) -> list[DimLike]:
        """The elements of a shape-like input (a Reshape target, Expand's shape, a Slice
        bound), ints and Dims; ConstantRequiredError where it is computed at run time."""
        known = self.known.get(value)
        if known is not None:
            return list(known.reshape(-1))
        return [int(v) for v in self.require_constant(value, what).reshape(-1)]

    def constant(self, value: Value) -> np.ndarray | None:
        """The array of ``value`` when it is a constant, else None."""
        return self.graph.constants.get(value)

    def require_constant(self, value: Value, what: str) -> np.ndarray:
        array = self.constant(value)
        if array is None and value in self.known:
            dims = [str(v) for v in self.known[value].reshape(-1)]
            raise ConstantRequiredError(
                f"its {what} input %{value.name} is {dims}, computed from symbolic dims; "
                f"tensorc does not take symbolic {what}s for this op yet: give concrete "
                f"input_shapes", graph_inputs_of(value))
        if array is None:
            raise ConstantRequiredError(
                f"its {what} input %{value.name} ({value.type}{self._origin(value)}) is "
                f"computed at run time; tensorc needs it to be constant (static shapes)",
                graph_inputs_of(value))
        return array

    def _origin(self, value: Value) -> str:
        """Where a run-time value comes from, in the model's terms (for messages): its ONNX
        name where the core value's name differs, and the node that computes it."""
        names = [n for n, v in self.env.items() if v is value and n != value.name]
        origin = f", ONNX tensor {names[0]!r}" if names else ""
        if value.producer is None:
            return origin + ", a model input"
        return origin + f", computed by node {value.producer.name!r}"

    def dtype_name(self, elem_type: int) -> str:
        return element_dtype(elem_type, self.label, "a Cast target")


# shape values are shapes and their pieces; a larger tensor is data, computed by the converter
MAX_SHAPE_VALUE_ELEMENTS = 64


def _shape_arithmetic(context: ImportContext, node: onnx.NodeProto,
                      inputs: list[Value | None], attributes: dict[str, Any]
                      ) -> Value | None:
    """The node evaluated on shape values holding symbolic dims, where it reads one and the
    shape-arithmetic table takes its op (frontend/shape_values.py); None otherwise."""
    if len(node.output) != 1 or any(is_container(v) for v in inputs) or \
            not any(v in context.known for v in inputs if v is not None):
        return None
    arrays = [None if v is None else context.value_of(v) for v in inputs]
    if any(a is None for v, a in zip(inputs, arrays) if v is not None):
        return None
    if any(a.size > MAX_SHAPE_VALUE_ELEMENTS or (a.dtype != object and a.dtype.kind not in "iub")
           for a in arrays if a is not None):
        return None  # a data tensor, not shape arithmetic: the converter computes it
    try:
        result = apply_shape_op(node.op_type, arrays, attributes, context.opset)
    except SymbolicDimError:
        return None  # not decidable at compile time: the converter computes it at run time
    if result is None:
        return None
    dtypes = [v.type.dtype for v in inputs if v is not None and v in context.known]
    dtype = dtypes[0]
    if node.op_type == "Cast":
        dtype = context.dtype_name(attributes["to"])
    elif node.op_type in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
        dtype = "bool"
    elif node.op_type == "Where":
        dtype = inputs[1].type.dtype
    return context.shape_value(as_object(np.asarray(result, dtype=object)), dtype)


def graph_inputs_of(value: Value) -> tuple[str, ...]:
    """The names of the graph inputs ``value`` is computed from."""
    found: dict[str, None] = {}
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v.producer is None:
            found.setdefault(v.name, None)
        else:
            stack.extend(v.producer.inputs)
    return tuple(found)


def _attribute_values(node: onnx.NodeProto, label: str) -> dict[str, Any]:
    values = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        if isinstance(value, onnx.TensorProto):
            value = tensor_to_array(value, label)
        elif isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        elif isinstance(value, list) and value and isinstance(value[0], onnx.GraphProto):
            value = tuple(value)
        elif isinstance(value, list):
            value = tuple(v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v
                          for v in value)
        values[attribute.name] = value
    return values


def convert_node(context: ImportContext, node: onnx.NodeProto, index: int,
                  env: dict[str, ImportValue | None]) -> None:
    where = (f"{context.label}: node {node_label(node, index)} ({node.op_type}, opset "
             f"{context.opset})")
    check_node(node, context.opset, where)
    inputs: list[ImportValue | None] = []
    for name in node.input:
        value = env.get(name) if name else None
        if name and value is None:
            raise UnsupportedOpError(f"{where}: input {name!r} is an output tensorc does not "
                                     f"compute (e.g. MaxPool indices, training statistics)")
        inputs.append(value)
    check_input_types(node, context.opset, [v.type.dtype if isinstance(v, Value) else None
                                            for v in inputs], where)
    entry = find_converter(node.op_type, context.opset)
    assert entry is not None  # _check_supported ran first
    if not entry.containers:
        for name, value in zip(node.input, inputs):
            if is_container(value):
                raise InvalidModelError(f"{where}: input {name!r} is {describe(value)}, but "
                                        f"{node.op_type} takes tensors; take the tensor out "
                                        f"first (SequenceAt, OptionalGetElement)")
    context.node_name = node.name or f"{node.op_type}_{index}"
    context.num_outputs = len(node.output)  # Split without sizes splits into this many
    context.graph.dims.site = f"node {node_label(node, index)} ({node.op_type})"
    try:
        attributes = _attribute_values(node, context.label)
        outputs = _shape_arithmetic(context, node, inputs, attributes)
        if outputs is None:
            outputs = entry.fn(context, inputs, **attributes)
    except TensorcError as error:
        described = ", ".join(f"{n or '<none>'}: {describe(v)}"
                              for n, v in zip(node.input, inputs))
        # the same error (type and attributes kept), its message placed in the model
        error.args = (f"{where}: {error}\n  inputs: {described}",)
        error.onnx_node = node      # (the outermost graph's, set last: what import_model traces)
        raise error.with_traceback(None) from None
    except RecursionError:
        raise ShapeError(f"{where}: the model nests too deeply to convert (subgraphs inside "
                         f"subgraphs?); simplify it") from None
    except MemoryError:
        raise ShapeError(f"{where}: converting it ran out of memory; check the sizes its "
                         f"attributes and inputs give") from None
    except Exception as error:
        symbolic = [f"{n} {v.type}" for n, v in zip(node.input, inputs)
                    if isinstance(v, Value) and not v.type.is_static]
        if symbolic:  # most likely arithmetic of a converter not ported to symbolic dims
            raise SymbolicDimError(
                f"{where}: tensorc cannot convert this node with symbolic dims yet "
                f"({type(error).__name__}: {error}); its inputs {', '.join(symbolic)} have "
                f"symbolic dims: give concrete input_shapes") from error
        # A last-resort net: the schema check and the converters' own checks should have
        # named the problem; what reaches here is a gap in them, so say so.
        raise ShapeError(f"{where}: tensorc cannot convert this node ({type(error).__name__}: "
                         f"{error}); its inputs or attributes are probably invalid for "
                         f"{node.op_type} (if they are valid, this is a bug in tensorc: please "
                         f"report it)") from error
    if isinstance(outputs, (Value, *CONTAINER_TYPES)):
        outputs = (outputs,)
    for position, name in enumerate(node.output):
        if name:
            env[name] = outputs[position] if position < len(outputs) else None

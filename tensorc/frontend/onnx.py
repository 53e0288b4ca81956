"""Import ONNX models into the graph IR.

The importer loads and sanity-checks the model, walks the whole graph once to report every
unsupported op together, binds symbolic input dims from ``input_shapes``, then converts node
by node with the converters of :mod:`tensorc.frontend.converters` (one module per op family),
chosen by the model's opset. Subgraphs (If branches, Loop and Scan bodies) are converted in
place by the converters of those ops, through
:meth:`~tensorc.frontend.context.ImportContext.inline_graph`.
Nodes whose inputs are all constants are evaluated on the spot, so shape arithmetic
(Shape -> Gather -> Concat -> Reshape) becomes constants.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import onnx

from tensorc.errors import InvalidModelError, ModelLoadError, ShapeError, UnsupportedOpError
from tensorc.frontend import converters  # noqa: F401  (importing it registers the converters)
from tensorc.frontend.container_inputs import flatten_container_inputs, numbered_nodes
from tensorc.frontend.containers import (
    EmptyOptional, ImportValue, element_name,
)
from tensorc.frontend.context import (
    ImportContext, convert_node, element_dtype, node_label, tensor_to_array,
)
from tensorc.frontend.registry import find_converter, supported_opsets
from tensorc.frontend.shape_hint import shape_hint
from tensorc.frontend.symbolic_inputs import declare_symbolic_dims, resolve_unified_dims
from tensorc.frontend.validate import newest_opset
from tensorc.ir.dim_table import DimTable
from tensorc.ir.graph import Graph, Value, eliminate_dead_code
from tensorc.ir.types import TensorType, check_type

DEFAULT_DOMAINS = ("", "ai.onnx")


def import_onnx(model: str | Path | onnx.ModelProto,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                dim_ranges: Mapping[str, tuple[int, int | None]] | None = None,
                label: str | None = None, symbolic: bool = True,
                loop_kernels: bool = True) -> Graph:
    """Convert an ONNX model (a path or a ModelProto) to a graph of core ops.

    ``input_shapes`` binds the symbolic or unknown dims of the inputs; the dims it leaves
    unbound stay symbolic (``graph.dims`` holds their ranges and constraints), narrowed by
    ``dim_ranges`` (dim name -> (lo, hi), hi None for unbounded). With ``symbolic=False`` an
    unbound dim is a ShapeError asking for concrete shapes (what compiling needs today).
    ``label`` names the model in error messages (the one :func:`load_model` returned for a
    model read from a file). ``loop_kernels``: whether the back end runs loop-IR kernels
    (the CUDA one does not: recurrences over concrete lengths then always unroll).

    >>> g = import_onnx("resnet50.onnx", input_shapes={"data": (1, 3, 224, 224)})  # doctest: +SKIP
    >>> g = import_onnx("bert.onnx", dim_ranges={"seq": (1, 512)})  # doctest: +SKIP
    """
    proto, default_label = load_model(model)
    label = label or default_label
    # sequence and optional inputs: one tensor input per element (a no-op where
    # import_model did it already)
    proto, input_shapes, _ = flatten_container_inputs(proto, input_shapes, None, label)
    _check_structure(proto, label)
    opset = default_opset(proto, label)
    _check_supported(proto, opset, label)
    onnx_graph = proto.graph
    context = new_context(proto, opset, input_shapes or {}, label, dim_ranges, symbolic)
    context.loop_kernels = loop_kernels
    graph, env = context.graph, context.env
    with graph.dims.active():
        for index, node in numbered_nodes(onnx_graph):
            convert_node(context, node, index, env)
        graph.outputs = _bind_outputs(graph, onnx_graph, env, label)
        resolve_unified_dims(graph)
    return eliminate_dead_code(graph)


def new_context(proto: onnx.ModelProto, opset: int, input_shapes: Mapping[str, Sequence[int]],
                label: str, dim_ranges: Mapping[str, tuple[int, int | None]] | None = None,
                symbolic: bool = False) -> ImportContext:
    """A context over a new graph holding the model's inputs (bound to ``input_shapes``, the
    rest symbolic where ``symbolic``) and initializers, its ``env`` mapping their ONNX names
    to values: where conversion starts."""
    onnx_graph = proto.graph
    graph = Graph(onnx_graph.name or "main")
    env: dict[str, Value | None] = {}
    for name, type in _input_types(proto, input_shapes, label, graph.dims if symbolic
                                   else None, dim_ranges):
        env[name] = graph.add_input(name, type)
    for output in onnx_graph.output:  # so that no automatic name takes an output's name
        graph.reserve(output.name)
    initializers = {t.name: t for t in onnx_graph.initializer}
    for name, tensor in initializers.items():
        env[name] = graph.add_constant(tensor_to_array(tensor, label), name)
    return ImportContext(graph, opset, label, env)


# loading --------------------------------------------------------------------------------------
def load_model(model: str | Path | onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """Read a model; return it with a label for messages. Raises ModelLoadError."""
    if isinstance(model, onnx.ModelProto):
        return model, f"model {model.graph.name or '<unnamed>'!r}"
    path = Path(model)
    label = f"model {str(path)!r}"
    if not path.is_file():
        raise ModelLoadError(f"{label}: no such file")
    try:
        proto = onnx.load(str(path))
    except Exception as error:  # protobuf raises DecodeError and friends; all mean one thing
        if _starts_like_an_artifact(path):
            raise ModelLoadError(
                f"{label} is a compiled tensorc module (.tcz), not an ONNX model: run it with "
                f"'tensorc run {path}', see what it is with 'tensorc info {path}', or give "
                f"the .onnx model it was compiled from") from None
        external = _external_data_problem(path, label)
        if external:
            raise ModelLoadError(external) from None
        raise ModelLoadError(f"{label}: the file is corrupt or truncated, or not an ONNX "
                             f"model ({type(error).__name__}: {error})") from None
    return proto, label


def _external_data_problem(path: Path, label: str) -> str | None:
    """Why a model that parses without its external data cannot load with it (a data file
    missing or short), or None: that is a message of its own, not a corrupt model."""
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 (the model itself does not parse: corrupt after all)
        return None
    wanted: dict[Path, list[tuple[str, int]]] = {}
    for tensor in _initializers(proto.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {e.key: e.value for e in tensor.external_data}
        end = int(entries.get("offset", 0) or 0) + int(entries.get("length", 0) or 0)
        wanted.setdefault(path.parent / entries.get("location", ""), []).append(
            (tensor.name, end))
    for file, tensors in wanted.items():
        names = ", ".join(name for name, _ in tensors[:5]) + (", ..." if len(tensors) > 5
                                                               else "")
        if not file.is_file():
            return (f"{label} keeps tensor data in external files, and {file} is missing "
                    f"(tensor{'s' if len(tensors) > 1 else ''} {names}): put the data file "
                    f"beside the model, where its name says ({file.name}), or re-export "
                    f"the model with its data inside")
        size = file.stat().st_size
        short = [name for name, end in tensors if end > size]
        if short:
            return (f"{label}: {file} is shorter than the tensor data the model reads from "
                    f"it (tensor {', '.join(short[:5])}; the file has {size} bytes): it is "
                    f"truncated or from another export; copy it again")
    return None


def _initializers(graph: onnx.GraphProto):
    """Every initializer of the graph and of its subgraphs (If/Loop bodies)."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _initializers(attr.g)
            for sub in attr.graphs:
                yield from _initializers(sub)


def _starts_like_an_artifact(path: Path) -> bool:
    """Whether the file starts as a .tcz does (runtime/artifact.py's magic, b"TCZ" and the
    format digit; the frontend does not import the runtime)."""
    try:
        with open(path, "rb") as f:
            return f.read(3) == b"TCZ"
    except OSError:
        return False


def _check_structure(proto: onnx.ModelProto, label: str) -> None:
    """What a truncated or garbage file that still parses as protobuf gets wrong."""
    problem = None
    if not proto.HasField("graph") or proto.ir_version <= 0:
        problem = "it has no graph or no IR version"
    elif not proto.graph.output:
        problem = "its graph has no outputs"
    elif not proto.opset_import:  # one of the ONNX-ML domain alone is fine
        problem = "it imports no opset"
    if problem:
        raise ModelLoadError(f"{label}: not a complete ONNX model: {problem} (is the file "
                             f"truncated or not an ONNX model?)")
    graph = proto.graph
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {""}
    for index, node in numbered_nodes(graph):
        for name in node.input:
            if name not in defined:
                raise ModelLoadError(f"{label}: node {node_label(node, index)} reads {name!r}, "
                                     f"which no input, initializer or earlier node defines (is "
                                     f"the file truncated, or the graph not sorted?)")
        defined.update(node.output)
    missing = [o.name for o in graph.output if o.name not in defined]
    if missing:
        raise ModelLoadError(f"{label}: graph outputs {', '.join(missing)} are never computed "
                             f"(is the file truncated?)")


def default_opset(proto: onnx.ModelProto, label: str) -> int:
    """The model's opset of the default ONNX domain; 0 where it has no node of that domain
    and imports none (an ONNX-ML model, whose ops the support check then names)."""
    for entry in proto.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            if not 1 <= entry.version <= newest_opset():
                raise InvalidModelError(
                    f"{label}: imports opset {entry.version} of the default ONNX domain, but "
                    f"opsets run from 1 to {newest_opset()} (the newest the installed onnx "
                    f"defines); re-export the model with a released opset")
            return int(entry.version)
    if any(node.domain in DEFAULT_DOMAINS for _, node in _all_nodes(proto.graph)):
        raise ModelLoadError(f"{label}: not a complete ONNX model: its nodes use the default "
                             f"ONNX domain, but it imports no opset of it (is the file "
                             f"truncated or not an ONNX model?)")
    return 0


# unsupported ops ------------------------------------------------------------------------------
def _all_nodes(graph: onnx.GraphProto):
    """(index, node) for every node of ``graph`` and of the subgraphs its nodes hold (If
    branches, Loop and Scan bodies)."""
    for index, node in numbered_nodes(graph):
        yield index, node
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH
                        else attribute.graphs):
                yield from _all_nodes(sub)


def _check_supported(proto: onnx.ModelProto, opset: int, label: str) -> None:
    """Raise one UnsupportedOpError listing every unsupported op (and attribute) at once."""
    versions = {e.domain: e.version for e in proto.opset_import}
    problems: dict[str, list[str]] = {}
    for index, node in _all_nodes(proto.graph):
        for why in unsupported_reasons(node, opset):
            if node.domain in DEFAULT_DOMAINS:
                key = f"{node.op_type} (opset {opset}): {why}"
            else:
                key = (f"{node.domain}::{node.op_type} (domain {node.domain!r} opset "
                       f"{versions.get(node.domain, '?')}): {why}")
            problems.setdefault(key, []).append(node.name or f"#{index}")
    if problems:
        lines = [f"  {key}; node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"
                 for key, nodes in problems.items()]
        raise UnsupportedOpError(f"{label} uses {len(problems)} unsupported op(s):\n"
                                 + "\n".join(lines))


def unsupported_reasons(node: onnx.NodeProto, opset: int) -> list[str]:
    """Why the converter table cannot take ``node`` at ``opset`` (of the default domain): the
    op, its opset, its domain or each unknown attribute; [] where it can."""
    if node.domain not in DEFAULT_DOMAINS:
        return ["only the default ONNX domain is supported"]
    entry = find_converter(node.op_type, opset)
    if entry is None:
        others = supported_opsets(node.op_type)
        return [f"supported for opsets {others} only" if others else "not supported"]
    return [f"attribute {a.name!r} not supported" for a in node.attribute
            if a.name not in entry.attributes]


# inputs ---------------------------------------------------------------------------------------
@dataclass
class _InputSpec:
    name: str
    dtype: str
    dims: list[int | str | None] | None  # None: unknown rank; str: symbol; None dim: unknown

    def describe(self) -> str:
        if self.dims is None:
            return f"{self.dtype}[?]"
        return f"{self.dtype}[{','.join('?' if d is None else str(d) for d in self.dims)}]"


def _input_specs(proto: onnx.ModelProto, label: str) -> list[_InputSpec]:
    initializers = {t.name for t in proto.graph.initializer}
    specs = []
    for value in proto.graph.input:
        if value.name in initializers:  # an initializer listed as an input is a constant
            continue
        if not value.type.HasField("tensor_type"):
            raise ShapeError(f"{label}: input {value.name!r} is not a tensor; only tensor "
                             f"inputs are supported")
        tensor = value.type.tensor_type
        dims = None
        if tensor.HasField("shape"):
            # a negative dim_value (Paddle's -1, "any") is an unnamed dim, as bind.py has it
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                    else (d.dim_param or None)
                    for d in tensor.shape.dim]
        dtype = element_dtype(tensor.elem_type, label, f"input {value.name!r}")
        specs.append(_InputSpec(value.name, dtype, dims))
    return specs


def _input_types(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]],
                 label: str, table: DimTable | None = None,
                 dim_ranges: Mapping[str, tuple[int, int | None]] | None = None
                 ) -> list[tuple[str, TensorType]]:
    """The inputs' types; dims ``input_shapes`` leaves unbound become symbolic dims declared
    in ``table`` (ShapeError asking for concrete shapes where ``table`` is None)."""
    specs, shapes, unbound = bind_input_shapes(proto, input_shapes, label)
    if unbound and (table is None or any(s.dims is None for s in unbound)):
        raise ShapeError(_unbound_message(unbound, label, proto))
    if table is not None:
        shapes = declare_symbolic_dims(proto, specs, shapes, table, dim_ranges or {}, label)
    elif dim_ranges:
        raise ShapeError(f"{label}: dim_ranges names {', '.join(map(repr, dim_ranges))}, "
                         f"but every dim is bound to a concrete size")
    types = [(s.name, TensorType(shapes[s.name], s.dtype)) for s in specs]
    for name, type in types:
        check_type(type, f"{label}: input {name!r}")
    return types


def bind_input_shapes(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]],
                      label: str
                      ) -> tuple[list[_InputSpec], dict[str, list[Any] | None], list[_InputSpec]]:
    """The inputs as declared, their dims once ``input_shapes`` (and the symbols it binds)
    apply, and those still not fully known. Raises ShapeError where ``input_shapes`` names
    no input or contradicts a declared shape."""
    specs = _input_specs(proto, label)
    names = [s.name for s in specs]
    unknown = [n for n in input_shapes if n not in names]
    if unknown:
        raise ShapeError(f"{label}: input_shapes names {', '.join(map(repr, unknown))}, but "
                         f"the model's inputs are {', '.join(map(repr, names)) or 'none'}")
    symbols: dict[str, int] = {}
    shapes: dict[str, list[Any]] = {}
    for spec in specs:
        if spec.name in input_shapes:
            shapes[spec.name] = _check_given_shape(spec, input_shapes[spec.name], symbols,
                                                   label)
    unbound = []
    for spec in specs:
        if spec.name in shapes:
            continue
        dims = None if spec.dims is None else [symbols.get(d, d) if isinstance(d, str) else d
                                               for d in spec.dims]
        if dims is None or any(not isinstance(d, int) for d in dims):
            unbound.append(_InputSpec(spec.name, spec.dtype, dims))
        shapes[spec.name] = dims
    return specs, shapes, unbound


def _check_given_shape(spec: _InputSpec, given: Sequence[int], symbols: dict[str, int],
                       label: str) -> list[int]:
    try:
        shape = [int(d) for d in given]
    except (TypeError, ValueError):
        raise ShapeError(f"{label}: input_shapes[{spec.name!r}] must be a sequence of ints, "
                         f"got {given!r}") from None
    mismatch = any(d < 0 for d in shape)
    if spec.dims is not None and not mismatch:
        mismatch = len(shape) != len(spec.dims) or any(
            isinstance(d, int) and d != s for d, s in zip(spec.dims, shape))
    if mismatch:
        raise ShapeError(f"{label}: input {spec.name!r} expects shape {spec.describe()}, but "
                         f"input_shapes gives {tuple(shape)}")
    for dim, size in zip(spec.dims or [], shape):
        if isinstance(dim, str):
            symbols.setdefault(dim, size)
    return shape


def unbound_dims_message(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]],
                         label: str) -> str | None:
    """The inputs whose dims ``input_shapes`` leaves open, the nodes that read them, and how
    to bind them (None where every dim is bound): the fix for a model whose symbolic dims
    reach code that needs them concrete."""
    _, _, unbound = bind_input_shapes(proto, input_shapes, label)
    return _unbound_message(unbound, label, proto) if unbound else None


def _unbound_message(unbound: list[_InputSpec], label: str, proto: onnx.ModelProto) -> str:
    readers: dict[str, list[str]] = {spec.name: [] for spec in unbound}
    for index, node in _all_nodes(proto.graph):
        for name in dict.fromkeys(n for n in node.input if n in readers):
            readers[name].append(f"{node_label(node, index)} ({node.op_type})")
    lines = []
    for spec in unbound:
        if spec.dims is None:
            lines.append(f"  {spec.name}: {spec.dtype}, rank unknown")
        else:
            free = [f"dim {i} ({d!r})" if isinstance(d, str) else f"dim {i} (unnamed)"
                    for i, d in enumerate(spec.dims) if not isinstance(d, int)]
            lines.append(f"  {spec.name}: {spec.describe()}: {', '.join(free)}")
        if readers[spec.name]:
            nodes = readers[spec.name]
            lines.append(f"    read by node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}")
    hint = shape_hint(unbound[0].name, unbound[0].dims, proto)
    note = f" ({hint.note})" if hint.note else ""
    return (f"{label} has inputs with unknown dimensions:\n" + "\n".join(lines) +
            f"\nPass concrete shapes, e.g. {hint.python} or {hint.cli}{note}")


def _bind_outputs(graph: Graph, onnx_graph: onnx.GraphProto,
                  env: dict[str, ImportValue | None], label: str) -> list[Value]:
    """The graph outputs, each carrying its ONNX name (copied where a value cannot); a
    sequence output is one output per element, ``y[0]``, ``y[1]``, ... (see
    frontend/containers.py), an empty optional none."""
    outputs: list[Value] = []
    inputs = set(graph.inputs)
    for output in onnx_graph.output:
        value = env.get(output.name)
        if value is None:
            raise UnsupportedOpError(f"{label}: output {output.name!r} is an output tensorc "
                                     f"does not compute")
        if isinstance(value, EmptyOptional):
            continue
        named = [(output.name, value)] if isinstance(value, Value) else \
            [(element_name(output.name, k), v) for k, v in enumerate(value.items)]
        declared = _declared_elem_type(output.type)
        for name, value in named:
            if value.name != name:
                if value in outputs or value in inputs:
                    # One value cannot carry two names: give this output its own copy.
                    if graph.is_constant(value):
                        value = graph.add_constant(graph.constants[value])
                    else:
                        (value,) = graph.add_node("reshape", [value],
                                                  {"shape": value.type.shape}, [value.type])
                graph.rename(value, name)
            elif value in outputs:
                raise ModelLoadError(f"{label}: output {name!r} is listed twice")
            if declared and element_dtype(declared, label, f"output {name!r}") \
                    != value.type.dtype:
                raise InvalidModelError(
                    f"{label}: output {name!r} is declared as "
                    f"{onnx.TensorProto.DataType.Name(declared)}, but the model computes "
                    f"{value.type.dtype} for it; fix the output's declared type")
            outputs.append(value)
    if not outputs:
        raise ShapeError(f"{label}: every output is an empty sequence or an empty optional, "
                         f"so the model computes no tensor; tensorc needs at least one")
    return outputs


def _declared_elem_type(type: onnx.TypeProto) -> int:
    """The element type an output declares (of its tensors, for a sequence or an optional);
    0 where it declares none."""
    while type.HasField("optional_type") or type.HasField("sequence_type"):
        type = (type.optional_type if type.HasField("optional_type")
                else type.sequence_type).elem_type
    return type.tensor_type.elem_type if type.HasField("tensor_type") else 0

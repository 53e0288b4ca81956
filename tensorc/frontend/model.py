"""An ONNX model (a path or a ModelProto) into the graph IR: the import every entry point
shares (compile, inspect, tune), with the inputs the user fixed bound as constants.

>>> proto, graph = import_model("mlp.onnx", input_shapes=None)
"""
from __future__ import annotations

import onnx

from tensorc.errors import ConstantRequiredError, ShapeError, SymbolicDimError
from tensorc.frontend.bind import (
    bind_input_values, input_value_hint, negative_dims_as_symbols,
)
from tensorc.frontend.container_inputs import flatten_container_inputs
from tensorc.frontend.onnx import import_onnx, load_model, unbound_dims_message
from tensorc.frontend.shape_hint import shape_hint


def with_input_values(model, input_values):
    """``model`` (path or ModelProto) as a ModelProto with ``input_values`` bound as
    constants, for callers that import it several times and run it with onnxruntime (the
    tuner); ``model`` itself when no values are given."""
    if not input_values:
        return model
    proto, label = load_model(model)
    return bind_input_values(negative_dims_as_symbols(proto), input_values, label)


def import_model(model, input_shapes, input_values=None, dim_ranges=None, symbolic=False,
                 loop_kernels=True):
    """The ModelProto and graph IR of an ONNX model (path or ModelProto), with
    ``input_values`` bound as constants and ``input_shapes`` binding symbolic dims. Dims
    left unbound stay symbolic where ``symbolic`` (``tensorc check``), else are a ShapeError
    asking for concrete shapes (compiling a symbolic graph to kernels is not done yet)."""
    proto, label = load_model(model)
    # sequence and optional inputs become tensor inputs first: the module takes those
    proto, input_shapes, input_values = flatten_container_inputs(proto, input_shapes,
                                                                 input_values, label)
    proto = bind_input_values(negative_dims_as_symbols(proto), input_values, label)
    try:
        graph = import_onnx(proto, input_shapes, dim_ranges, label=label, symbolic=symbolic,
                            loop_kernels=loop_kernels)
    except ConstantRequiredError as error:
        hint = input_value_hint(error, proto)
        if hint:
            error.args = (f"{error}\n{hint}",)
        raise error.with_traceback(None) from None
    except SymbolicDimError as error:
        raise symbolic_dims_error(error, proto, input_shapes, label) from None
    except ShapeError as error:
        note = bound_input_note(error, proto, input_shapes)
        if note:
            cli = f"{error.cli_message or error}\n{note[1]}"
            error.args = (f"{error}\n{note[0]}",)
            error.cli_message = cli
        raise error.with_traceback(None) from None
    return proto, graph


def bound_input_note(error: ShapeError, proto: onnx.ModelProto,
                     input_shapes) -> tuple[str, str] | None:
    """Where a shape error follows from shapes the user bound: the bound inputs (with
    symbolic dims declared) upstream of the failing node, and what to try, in Python's
    words and the command line's; None where no such input feeds it."""
    node = getattr(error, "onnx_node", None)
    if node is None or not input_shapes:
        return None
    declared = {v.name: v for v in proto.graph.input}
    suspects = [name for name in _upstream_inputs(proto.graph, node)
                if name in input_shapes and name in declared
                and not _all_static(declared[name])]
    if not suspects:
        return None
    python, cli = [], []
    for name in suspects:
        dims = _declared_dims(declared[name])
        shape = tuple(int(d) for d in input_shapes[name])
        text = f"[{','.join(map(str, shape))}]"
        decl = f"declared [{','.join(str(d) for d in dims)}]"
        python.append(f"input {name!r} to {text} (input_shapes={{{name!r}: {shape}}}; {decl})")
        cli.append(f"input {name!r} to {text} (--input-shape "
                   f"{name}={'x'.join(map(str, shape))}; {decl})")
    hint = shape_hint(suspects[0], _declared_dims(declared[suspects[0]]), proto)
    advice = ("try the sizes the model is made for (what it was trained or exported at: "
              "its documentation or metadata says; a placeholder 1 rarely fits a pooling or "
              "strided layer)")
    example_python = example_cli = ""
    if hint.source:                 # the metadata says what fits
        example_python = f", e.g. {hint.python} ({hint.note})"
        example_cli = f", e.g. {hint.cli} ({hint.note})"
    return (f"The shape it fails on follows from binding {', '.join(python)}: {advice}"
            f"{example_python}",
            f"The shape it fails on: it follows from binding {', '.join(cli)}: {advice}"
            f"{example_cli}")


def _declared_dims(value: onnx.ValueInfoProto) -> list:
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in value.type.tensor_type.shape.dim]


def _all_static(value: onnx.ValueInfoProto) -> bool:
    tensor = value.type.tensor_type
    return tensor.HasField("shape") and all(d.HasField("dim_value") and d.dim_value >= 0
                                            for d in tensor.shape.dim)


def _upstream_inputs(graph: onnx.GraphProto, node: onnx.NodeProto) -> list[str]:
    """The names ``node`` reads, directly or through earlier nodes (a subgraph's references
    to the outer graph included), that no node produces: the graph inputs it depends on."""
    producer = {out: n for n in graph.node for out in n.output}
    seen: set[str] = set()
    found: list[str] = []
    stack = list(_reads(node))
    while stack:
        name = stack.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        source = producer.get(name)
        if source is None:
            found.append(name)
        else:
            stack.extend(_reads(source))
    return found


def _reads(node: onnx.NodeProto) -> list[str]:
    names = list(node.input)
    for attr in node.attribute:
        for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else []) + \
                list(attr.graphs):
            for inner in sub.node:
                names.extend(_reads(inner))
    return names


def symbolic_dims_error(error: SymbolicDimError, model, input_shapes, label: str | None = None
                        ) -> SymbolicDimError:
    """``error`` (code that needs a symbolic dim's value) with the model's open dims listed
    and how to compile it for one shape instead."""
    proto, name = load_model(model) if not isinstance(model, onnx.ModelProto) or label is None \
        else (model, label)
    fix = unbound_dims_message(proto, input_shapes or {}, name)
    text = f"{error}\nThis needs concrete shapes so far: " + (fix or "pass input_shapes")
    return SymbolicDimError(text, error.dim).with_traceback(None)

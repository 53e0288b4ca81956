"""An ONNX model (a path or a ModelProto) into the graph IR: the import every entry point
shares (compile, inspect, tune), with the inputs the user fixed bound as constants.

>>> proto, graph = import_model("mlp.onnx", input_shapes=None)
"""
from __future__ import annotations

from tensorc.errors import ConstantRequiredError
from tensorc.frontend.bind import bind_input_values, negative_dims_as_symbols
from tensorc.frontend.onnx import import_onnx, load_model


def import_model(model, input_shapes, input_values=None):
    """The ModelProto and graph IR of an ONNX model (path or ModelProto), with
    ``input_values`` bound as constants and ``input_shapes`` binding symbolic dims."""
    proto, label = load_model(model)
    proto = bind_input_values(negative_dims_as_symbols(proto), input_values, label)
    try:
        graph = import_onnx(proto, input_shapes, label=label)
    except ConstantRequiredError as error:
        constants = {t.name for t in proto.graph.initializer}
        names = [n for n in error.inputs if n not in constants and
                 any(v.name == n for v in proto.graph.input)]
        if names:
            example = ", ".join(f"{name!r}: VALUE" for name in names)
            flags = " ".join(f"--input-value {name}=VALUE" for name in names)
            error.args = (f"{error}\nThis depends on the value of input "
                          f"{', '.join(map(repr, names))}: fix it at compile time with "
                          f"input_values={{{example}}} (CLI: {flags})",)
        raise error.with_traceback(None) from None
    return proto, graph

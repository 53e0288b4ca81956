"""An ONNX model (a path or a ModelProto) into the graph IR: the import every entry point
shares (compile, inspect, tune), with the inputs the user fixed bound as constants.

>>> proto, graph = import_model("mlp.onnx", input_shapes=None)
"""
from __future__ import annotations

import onnx

from tensorc.errors import ConstantRequiredError, SymbolicDimError
from tensorc.frontend.bind import (
    bind_input_values, input_value_hint, negative_dims_as_symbols,
)
from tensorc.frontend.container_inputs import flatten_container_inputs
from tensorc.frontend.onnx import import_onnx, load_model, unbound_dims_message


def with_input_values(model, input_values):
    """``model`` (path or ModelProto) as a ModelProto with ``input_values`` bound as
    constants, for callers that import it several times and run it with onnxruntime (the
    tuner); ``model`` itself when no values are given."""
    if not input_values:
        return model
    proto, label = load_model(model)
    return bind_input_values(negative_dims_as_symbols(proto), input_values, label)


def import_model(model, input_shapes, input_values=None, dim_ranges=None, symbolic=False):
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
        graph = import_onnx(proto, input_shapes, dim_ranges, label=label, symbolic=symbolic)
    except ConstantRequiredError as error:
        hint = input_value_hint(error, proto)
        if hint:
            error.args = (f"{error}\n{hint}",)
        raise error.with_traceback(None) from None
    except SymbolicDimError as error:
        raise symbolic_dims_error(error, proto, input_shapes, label) from None
    return proto, graph


def symbolic_dims_error(error: SymbolicDimError, model, input_shapes, label: str | None = None
                        ) -> SymbolicDimError:
    """``error`` (code that needs a symbolic dim's value) with the model's open dims listed
    and how to compile it for one shape instead."""
    proto, name = load_model(model) if not isinstance(model, onnx.ModelProto) or label is None \
        else (model, label)
    fix = unbound_dims_message(proto, input_shapes or {}, name)
    text = f"{error}\nThis needs concrete shapes so far: " + (fix or "pass input_shapes")
    return SymbolicDimError(text, error.dim).with_traceback(None)

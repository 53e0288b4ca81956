"""tensorc as an ONNX backend (``onnx.backend.base.Backend``), so ONNX's own backend test
suite runs against tensorc unchanged.

>>> from tensorc.backend import TensorcBackend
>>> rep = TensorcBackend.prepare(model)               # compiles now if every shape is static
>>> (y,) = rep.run([x])                              # outputs in the model's output order
>>> (y,) = TensorcBackend.run_node(node, [x])        # one node, wrapped in a one-node model

A model with symbolic input dims is compiled on the first ``run``, with the shapes of the
arrays given; each new combination of input shapes compiles once more and is cached. An input
that tensorc needs as a constant (a Reshape shape, Reduce axes) is compiled in as the value
given to ``run``, once per value.

ONNX sequences and optionals are resolved while compiling (frontend/containers.py): a sequence
input is given as a list of arrays and compiled for its length and element shapes, an optional
input as an array (or list) or None, each combination compiled once; a sequence output comes
back as a list of arrays, an empty optional output as None.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from tensorc import api
from tensorc.errors import ConstantRequiredError, InputError, TensorcError
from tensorc.frontend.containers import element_name
from tensorc.runtime.module import Module

# Keyword arguments of prepare() that ONNX's test runner passes along with its own
# (tolerances for a case); they are no business of the compiler.
_RUNNER_KWARGS = frozenset({"rtol", "atol"})


class TensorcRep(BackendRep):
    """A prepared model: one compiled :class:`Module` per combination of input shapes.

    ``run`` takes a list (in the order of the model's non-initializer inputs), a dict by
    input name, or a single array for a one-input model; it returns a tuple of outputs in the
    order of the model's outputs (also indexable by output name).

    tensorc compiles static shapes, so an input that decides a shape (Reshape's shape,
    Reduce's axes, Pad's pads) must be a constant. When a model takes such an input at run
    time, the model is compiled for the values given, as constants, and compiled again for
    other values (``frozen_inputs`` lists those inputs).
    """

    def __init__(self, model: onnx.ModelProto, target: str = "llvm",
                 num_threads: int | None = None):
        self.model = model
        self.target = target
        self.num_threads = num_threads
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [v.name for v in model.graph.input if v.name not in initializers]
        self.output_names = [v.name for v in model.graph.output]
        self.frozen_inputs: list[str] = []
        self._outputs_type = namedtupledict("Outputs", self.output_names)
        self._modules: dict[tuple, Module] = {}
        # "tensor", "sequence", "optional tensor" or "optional sequence", by name
        self._kinds = {v.name: _kind(v.type) for v in model.graph.input
                       if v.name in self.input_names}
        self._output_kinds = {v.name: _kind(v.type) for v in model.graph.output}
        # a sequence's length and an optional's presence are compiled in: known at run()
        self._lazy = _has_unknown_dims(model, set(self.input_names)) or \
            any(kind != "tensor" for kind in self._kinds.values())
        if not self._lazy:
            # Compile now, so that an unsupported model fails in prepare(), as ONNX expects.
            try:
                self._modules[()] = self._compile(None, {})
            except ConstantRequiredError as error:
                if not set(error.inputs) & set(self.input_names):
                    raise
                self._lazy = True   # specialize on the values given to run()

    @property
    def compiled_count(self) -> int:
        """How many modules this model has been compiled into so far (one per input shapes
        and frozen-input values)."""
        return len(self._modules)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run the model on ``inputs``; returns its outputs in the model's output order."""
        feeds = self._feeds(inputs)
        module = self._modules[()] if not self._lazy else self._module_for(feeds)
        if self.frozen_inputs:
            feeds = {n: v for n, v in feeds.items() if n not in self.frozen_inputs}
        results = module.run(self._flat_feeds(feeds))
        return self._outputs_type(*(self._output(results, n) for n in self.output_names))

    def _flat_feeds(self, feeds: dict[str, Any]) -> dict[str, Any]:
        """The module's feeds: a sequence's elements as ``x[0]``, ``x[1]``, ...; an empty
        optional none (it is compiled in)."""
        flat: dict[str, Any] = {}
        for name, value in feeds.items():
            kind = self._kinds.get(name, "tensor")
            if kind.endswith("sequence") and value is not None:
                flat.update((element_name(name, k), v) for k, v in enumerate(value))
            elif value is not None or kind == "tensor":
                flat[name] = value
        return flat

    def _output(self, results: dict[str, np.ndarray], name: str) -> Any:
        """Output ``name`` as ONNX has it: an array, a list of arrays for a sequence, None for
        an empty optional."""
        if name in results:
            return results[name]
        items, k = [], 0
        while element_name(name, k) in results:
            items.append(results[element_name(name, k)])
            k += 1
        kind = self._output_kinds.get(name, "tensor")
        if items or kind.endswith("sequence") and not kind.startswith("optional"):
            return items
        return None   # an empty optional (an optional sequence with no elements reads so too)

    def _module_for(self, feeds: dict[str, Any]) -> Module:
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise InputError(f"run() got no value for input(s) {missing}; the model takes "
                             f"{', '.join(self.input_names)}")
        for name in self.input_names:
            _check_feed(name, feeds[name], self._kinds[name])
        shapes = tuple(_feed_shape(feeds[n], self._kinds[n]) for n in self.input_names)
        while True:
            key = (shapes, *(self._frozen_value(feeds, n).tobytes() for n in self.frozen_inputs))
            module = self._modules.get(key)
            if module is not None:
                return module
            frozen = {n: self._frozen_value(feeds, n) for n in self.frozen_inputs}
            try:
                module = self._modules[key] = self._compile(shapes, frozen)
                return module
            except ConstantRequiredError as error:
                needed = [n for n in error.inputs
                          if n in self.input_names and n not in self.frozen_inputs]
                if not needed:
                    raise
                self.frozen_inputs.extend(needed)

    def _frozen_value(self, feeds: dict[str, Any], name: str) -> np.ndarray:
        (value,) = [v for v in self.model.graph.input if v.name == name]
        type = value.type.optional_type.elem_type if value.type.HasField("optional_type") \
            else value.type   # an optional tensor, given: its tensor
        dtype = helper.tensor_dtype_to_np_dtype(type.tensor_type.elem_type)
        return np.array(feeds[name], dtype=dtype, order="C")    # keeps 0-d arrays 0-d

    def _compile(self, shapes: tuple | None, frozen: dict[str, np.ndarray]) -> Module:
        model = self.model
        if frozen:
            model = onnx.ModelProto()
            model.CopyFrom(self.model)
            kept = [v for v in model.graph.input if v.name not in frozen]
            del model.graph.input[:]
            model.graph.input.extend(kept)
            model.graph.initializer.extend(numpy_helper.from_array(a, n)
                                           for n, a in frozen.items())
        input_shapes, empty = None, {}
        if shapes is not None:
            input_shapes = {n: s for n, s in zip(self.input_names, shapes)
                            if n not in frozen and s is not None}
            # an empty optional is fixed at compile time, as input_values says it
            empty = {n: None for n, s in zip(self.input_names, shapes) if s is None}
        return api.compile(model, target=self.target, input_shapes=input_shapes,
                           input_values=empty or None, num_threads=self.num_threads)

    def _feeds(self, inputs: Any) -> dict[str, Any]:
        """Name every input. Values stay as given (numpy scalars included): Module.run checks
        and converts them."""
        names = self.input_names
        if isinstance(inputs, Mapping):
            return dict(inputs)
        if isinstance(inputs, np.ndarray) or np.isscalar(inputs):
            inputs = [inputs]
        if not isinstance(inputs, Sequence):
            raise InputError(f"run() takes a list of arrays (one per model input), a dict of "
                             f"input name -> array, or one array; got {type(inputs).__name__}")
        if len(inputs) != len(names):
            raise InputError(f"run() got {len(inputs)} input(s), but the model takes "
                             f"{len(names)}: {', '.join(names) or 'none'}")
        return dict(zip(names, inputs))


def _kind(type: onnx.TypeProto) -> str:
    """What a model input or output holds: "tensor", "sequence", "optional tensor" or
    "optional sequence" (a type that declares none counts as a tensor)."""
    if type.HasField("optional_type"):
        return "optional " + _kind(type.optional_type.elem_type)
    return "sequence" if type.HasField("sequence_type") else "tensor"


def _check_feed(name: str, value: Any, kind: str) -> None:
    arrays = (np.ndarray, np.generic, int, float, bool)
    if value is None and kind.startswith("optional"):
        return
    if kind.endswith("sequence"):
        if not isinstance(value, (list, tuple)) or \
                not all(isinstance(v, arrays) for v in value):
            raise InputError(f"input {name!r} is a sequence: expected a list of arrays, got "
                             f"{type(value).__name__}")
    elif not isinstance(value, arrays):
        raise InputError(f"input {name!r}: expected an array, got {type(value).__name__}; "
                         f"tensorc takes tensors, lists of them (sequences) and None (an "
                         f"empty optional)")


def _feed_shape(value: Any, kind: str) -> Any:
    """What a feed compiles for: an array's shape, a sequence's element shapes (as
    input_shapes takes them), None for an empty optional."""
    if value is None:
        return None
    if kind.endswith("sequence"):
        return tuple(tuple(int(d) for d in np.shape(v)) for v in value)
    return tuple(int(d) for d in np.shape(value))


# what ImportContext.require_constant says of an input computed at run time
def _has_unknown_dims(model: onnx.ModelProto, names: set[str]) -> bool:
    """Whether an input has a symbolic or unknown dim (or an unknown rank). False where an
    input is not a tensor at all: compiling at once reports that, whatever the shapes."""
    inputs = [v for v in model.graph.input if v.name in names]
    if not all(v.type.HasField("tensor_type") for v in inputs):
        return False
    for value in inputs:
        tensor = value.type.tensor_type
        if not tensor.HasField("shape") or \
                not all(d.HasField("dim_value") for d in tensor.shape.dim):
            return True
    return False


class TensorcBackend(Backend):
    """ONNX backend interface over :func:`tensorc.compile` (CPU only).

    ``prepare`` accepts ``target`` ("llvm") and ``num_threads`` (None: all cores) keyword
    arguments; a subclass may set different defaults with the class attributes of the same
    names.
    """

    target: str = "llvm"
    num_threads: int | None = None

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):  # an unknown device name
            return False

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any
                ) -> TensorcRep:
        """Check ``model`` and compile it (now, or on the first run for symbolic shapes)."""
        if not cls.supports_device(device):
            raise TensorcError(f"device {device!r} is not supported by the tensorc backend: "
                               f"use device='CPU'")
        unknown = sorted(set(kwargs) - _RUNNER_KWARGS - {"target", "num_threads"})
        if unknown:
            raise TypeError(f"prepare() got unknown keyword arguments {unknown}; it takes "
                            f"target= and num_threads=")
        return TensorcRep(model, target=kwargs.get("target", cls.target),
                          num_threads=kwargs.get("num_threads", cls.num_threads))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node on ``inputs`` (a list in the node's input order, or a dict by name).

        ``opset_version=`` picks the opset (default: the newest onnx knows); the outputs'
        types are inferred by tensorc, so ``outputs_info`` is not needed.
        """
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        present = [name for name in node.input if name]
        if isinstance(inputs, Mapping):
            feeds = {name: inputs[name] for name in present}
        else:
            if len(inputs) != len(present):
                raise InputError(f"run_node: node {node.op_type} has {len(present)} input(s) "
                                 f"{present}, got {len(inputs)} array(s)")
            feeds = dict(zip(present, inputs))
        graph_inputs = []
        for name, value in feeds.items():
            array = np.asarray(value)
            elem_type = helper.np_dtype_to_tensor_dtype(array.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, elem_type, array.shape))
        outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
        graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.prepare(model, device, **kwargs).run(feeds)


prepare = TensorcBackend.prepare
run_model = TensorcBackend.run_model
run_node = TensorcBackend.run_node
supports_device = TensorcBackend.supports_device

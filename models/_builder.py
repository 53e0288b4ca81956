"""Small helpers shared by the model scripts: seeded weights and node construction."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# IR version 8 goes with opset 17; pinning it keeps the checked-in files independent of the
# installed onnx release.
IR_VERSION = 8


class GraphBuilder:
    """Collects nodes and initializers for one ONNX graph, naming everything uniquely.

    >>> b = GraphBuilder(seed=0)
    >>> y = b.node("Relu", ["x"])
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counts: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        """A new unique name starting with ``prefix``."""
        count = self._counts.get(prefix, 0)
        self._counts[prefix] = count + 1
        return f"{prefix}_{count}"

    def constant(self, name: str, array: np.ndarray) -> str:
        """Add an initializer and return its (unique) name."""
        unique = self.fresh(name)
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), unique))
        return unique

    def node(self, op_type: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        """Add one single-output node and return its output name."""
        name = self.fresh(op_type.lower())
        output = output or f"{name}_out"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=name, **attrs))
        return output

    def he_normal(self, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        """He-scaled normal weights: keeps activations O(1) through ReLU layers."""
        std = np.sqrt(2.0 / fan_in)
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def batch_norm(self, x: str, channels: int, epsilon: float = 1e-5) -> str:
        """BatchNormalization with a random affine part (scale near 1, bias near 0) and
        statistics mean 0, variance 1 until ``calibrate_batch_norms`` measures them."""
        scale = (1 + 0.1 * self.rng.standard_normal(channels)).astype(np.float32)
        bias = (0.1 * self.rng.standard_normal(channels)).astype(np.float32)
        params = [("bn_scale", scale), ("bn_bias", bias),
                  ("bn_mean", np.zeros(channels, np.float32)),
                  ("bn_var", np.ones(channels, np.float32))]
        return self.node("BatchNormalization", [x] + [self.constant(n, a) for n, a in params],
                         epsilon=epsilon)

    def gemm(
        self,
        x: str,
        in_features: int,
        out_features: int,
        gain: float = 2.0,
        output: str | None = None,
    ) -> str:
        """A fully connected layer, weights stored [out, in] with transB=1 as exporters do.

        ``gain`` 2 suits a layer followed by Relu, 1 a layer that produces logits.
        """
        std = np.sqrt(gain / in_features)
        weight = (self.rng.standard_normal((out_features, in_features)) * std).astype(np.float32)
        bias = (self.rng.standard_normal(out_features) * 0.01).astype(np.float32)
        w = self.constant("fc_weight", weight)
        b = self.constant("fc_bias", bias)
        return self.node("Gemm", [x, w, b], output=output, transB=1)

    def model(
        self,
        name: str,
        inputs: list[onnx.ValueInfoProto],
        outputs: list[onnx.ValueInfoProto],
    ) -> onnx.ModelProto:
        """Wrap the collected nodes into a checked opset-17 model."""
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(
            graph,
            producer_name="tensorc-models",
            opset_imports=[helper.make_opsetid("", OPSET)],
            ir_version=IR_VERSION,
        )
        onnx.checker.check_model(model, full_check=True)
        return model


def calibrate_batch_norms(model: onnx.ModelProto, feeds: dict[str, np.ndarray]
                          ) -> onnx.ModelProto:
    """Set every BatchNormalization's running mean and variance to its input's per-channel
    statistics on ``feeds`` (batch 1), as training would leave them.

    Each BatchNormalization then normalizes its input to mean ``B`` and deviation ``scale``,
    so activations stay O(1) however deep the network, which fixed statistics cannot ensure
    (with SiLU and squeeze-and-excite gates they shrink or grow geometrically). One
    onnxruntime run measures them all: in a copy of the graph each BatchNormalization is an
    InstanceNormalization, the same formula with the input's own statistics, so every
    normalization downstream sees the input it will see once calibrated.

    >>> b = GraphBuilder(seed=0)
    >>> stats = [b.constant(n, np.array([v], np.float32)) for n, v in
    ...          (("scale", 1), ("bias", 0), ("mean", 0), ("var", 1))]
    >>> y = b.node("BatchNormalization", ["x", *stats], output="y")
    >>> model = b.model("bn", [float_input("x", [1, 1, 2])], [float_input("y", [1, 1, 2])])
    >>> x = np.array([[[1.0, 3.0]]], np.float32)
    >>> model = calibrate_batch_norms(model, {"x": x})
    >>> [float(numpy_helper.to_array(t)[0]) for t in model.graph.initializer[2:]]
    [2.0, 1.0]
    """
    import onnxruntime  # a test dependency, needed only to build the models

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    statistics = []  # (input, mean initializer, variance initializer) of each normalization
    for node in probe.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        x, scale, bias, mean, var = node.input
        epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        statistics.append((x, mean, var))
        node.CopyFrom(helper.make_node("InstanceNormalization", [x, scale, bias],
                                       node.output[:1], name=node.name, epsilon=epsilon))
    unused = {name for _, mean, var in statistics for name in (mean, var)}
    kept = [t for t in probe.graph.initializer if t.name not in unused]
    del probe.graph.initializer[:]
    probe.graph.initializer.extend(kept)
    del probe.graph.output[:]
    inputs = list(dict.fromkeys(x for x, _, _ in statistics))
    probe.graph.output.extend(helper.make_tensor_value_info(x, TensorProto.FLOAT, None)
                              for x in inputs)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # the same statistics on every run
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(probe.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    values = dict(zip(inputs, session.run(None, feeds)))
    measured = {}
    for name, mean, var in statistics:
        x = values[name]
        if x.shape[0] != 1:
            raise ValueError(f"calibrate_batch_norms needs batch 1, {name!r} is {x.shape}")
        axes = tuple(i for i in range(x.ndim) if i != 1)
        measured[mean] = x.astype(np.float64).mean(axis=axes).astype(np.float32)
        measured[var] = x.astype(np.float64).var(axis=axes).astype(np.float32)
    calibrated = onnx.ModelProto()
    calibrated.CopyFrom(model)
    for tensor in calibrated.graph.initializer:
        if tensor.name in measured:
            tensor.CopyFrom(numpy_helper.from_array(measured[tensor.name], tensor.name))
    return calibrated


def float_input(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    """A float32 graph input or output; string dims are symbolic."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

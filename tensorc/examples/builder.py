"""Small helpers the example models are built with: seeded weights and node construction."""

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


def float_input(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    """A float32 graph input or output; string dims are symbolic."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

"""Helpers shared by the model scripts: the example models' builder (tensorc/examples/builder.py:
seeded weights and node construction) and BatchNormalization calibration."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensorc.examples.builder import (  # noqa: F401  (the model scripts' names)
    IR_VERSION, OPSET, GraphBuilder, float_input,
)


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

"""RNN, GRU and LSTM over a sequence length known only at run time: each model compiled once
with its time (and batch) dims symbolic, one ``recurrence`` kernel per direction looping over
the steps, and run against onnxruntime at several lengths (1 included) and batch sizes, at 1
and 2 threads: every output (Y, Y_h, Y_c) compared. The attributes the unrolled form supports
are covered: directions, layout 1, initial states, peepholes, input_forget, clip,
linear_before_reset, activations, sequence_lens (a reverse direction runs each sequence
backwards from its own end, which the unrolled form refused). Concrete lengths take the
kernel where it pays (long sequences, one batch row) and unroll otherwise."""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorc
from tensorc.frontend.onnx import import_onnx
from tensorc.ir.dims import Dim
from tensorc.ops.recurrence import recurrence

F = TensorProto.FLOAT
INPUT, HIDDEN = 5, 6
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
# (steps, batch) at which every model runs
SHAPES = [(1, 1), (2, 3), (7, 1), (13, 2)]


def _model(op: str, attrs: dict, extra: tuple = (), layout: int = 0, seed: int = 0,
           for_onnxruntime: bool = False):
    """An ``op`` node over x [t, n, INPUT] (or [n, t, INPUT]) with random weights; ``extra``
    names the optional operands given: "b", "h0", "c0", "p" (constants or symbolic-batch
    inputs), "lens" (an int32 input). onnxruntime runs only layout 0: ``for_onnxruntime``
    states layout 1 as transposes around a layout-0 node (the same function)."""
    rng = np.random.default_rng(seed)
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    g = GATES[op]

    def weights(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) / 2).astype(np.float32),
                                       name)
    inits = [weights("w", dirs, g * HIDDEN, INPUT), weights("r", dirs, g * HIDDEN, HIDDEN)]
    x_shape = ["t", "n", INPUT] if layout == 0 else ["n", "t", INPUT]
    state_shape = [dirs, "n", HIDDEN] if layout == 0 else ["n", dirs, HIDDEN]
    inputs = [helper.make_tensor_value_info("x", F, x_shape)]
    names = ["x", "w", "r", "", "", "", "", ""]
    if "b" in extra:
        inits.append(weights("b", dirs, 2 * g * HIDDEN))
        names[3] = "b"
    if "lens" in extra:
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, ["n"]))
        names[4] = "lens"
    for slot, name in ((5, "h0"), (6, "c0")):
        if name in extra:
            inputs.append(helper.make_tensor_value_info(name, F, state_shape))
            names[slot] = name
    if "p" in extra:
        inits.append(weights("p", dirs, 3 * HIDDEN))
        names[7] = "p"
    while not names[-1]:
        names.pop()
    outs = ["y", "y_h", "y_c"][:3 if op == "LSTM" else 2]
    nodes = []
    if for_onnxruntime and layout == 1:
        perms = {"x": (1, 0, 2), "h0": (1, 0, 2), "c0": (1, 0, 2)}
        for k, name in enumerate(names):
            if name in perms:
                nodes.append(helper.make_node("Transpose", [name], [name + "_t"],
                                              perm=perms[name]))
                names[k] = name + "_t"
        inner = [o + "_t" for o in outs]
        nodes.append(helper.make_node(op, names, inner, hidden_size=HIDDEN, **attrs))
        nodes += [helper.make_node("Transpose", [i], [o], perm=(2, 0, 1, 3) if o == "y"
                                   else (1, 0, 2)) for i, o in zip(inner, outs)]
    else:
        nodes.append(helper.make_node(op, names, outs, hidden_size=HIDDEN, layout=layout,
                                      **attrs))
    outputs = [helper.make_empty_tensor_value_info(o) for o in outs]
    graph = helper.make_graph(nodes, "rec", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                             ir_version=8)


CASES = {
    "lstm_forward_bias_states": ("LSTM", {}, ("b", "h0", "c0"), 0),
    "lstm_bidirectional_peepholes_clip": ("LSTM", {"direction": "bidirectional", "clip": 1.5},
                                          ("b", "p"), 0),
    "lstm_reverse_input_forget_layout1": ("LSTM", {"direction": "reverse", "input_forget": 1},
                                          ("b", "h0"), 1),
    "lstm_sequence_lens": ("LSTM", {}, ("b", "lens"), 0),
    "lstm_bidirectional_sequence_lens": ("LSTM", {"direction": "bidirectional"},
                                         ("b", "lens", "h0", "c0"), 0),
    "gru_reverse_sequence_lens": ("GRU", {"direction": "reverse"}, ("b", "lens"), 0),
    "lstm_activations": ("LSTM", {"activations": ["Sigmoid", "Relu", "Tanh"]}, ("b",), 0),
    "gru_forward": ("GRU", {}, ("b", "h0"), 0),
    "gru_bidirectional_linear_before_reset": (
        "GRU", {"direction": "bidirectional", "linear_before_reset": 1}, ("b",), 0),
    "gru_linear_before_reset_no_bias_layout1": ("GRU", {"linear_before_reset": 1}, ("h0",), 1),
    "gru_reverse_clip": ("GRU", {"direction": "reverse", "clip": 0.7}, ("b",), 0),
    "rnn_relu_reverse": ("RNN", {"direction": "reverse", "activations": ["Relu"]}, ("b",), 0),
    "rnn_bidirectional_states": ("RNN", {"direction": "bidirectional"}, ("b", "h0"), 0),
    "rnn_sequence_lens": ("RNN", {}, ("lens",), 0),
}


def _feeds(model, steps: int, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else
                {"t": steps, "n": batch}[d.dim_param]
                for d in value.type.tensor_type.shape.dim]
        if value.name == "lens":     # lengths from 1 to the whole sequence
            feeds["lens"] = rng.integers(1, steps + 1, size=dims).astype(np.int32)
        else:
            feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_recurrence_over_a_run_time_length_matches_onnxruntime(case):
    op, attrs, extra, layout = CASES[case]
    model = _model(op, attrs, extra, layout)
    module = tensorc.compile(model, cache=False)
    steps_dim = module.inputs[0][1][0 if layout == 0 else 1]
    assert isinstance(steps_dim, Dim), module.inputs
    reference = _model(op, attrs, extra, layout, for_onnxruntime=True)
    session = onnxruntime.InferenceSession(reference.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    for k, (steps, batch) in enumerate(SHAPES):
        feeds = _feeds(model, steps, batch, k)
        module.num_threads = 1 + k % 2
        got = module.run(feeds)
        expected = dict(zip(names, session.run(names, feeds)))
        for name in names:
            assert got[name].shape == expected[name].shape, (case, name, steps, batch)
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-4, atol=1e-5,
                                       err_msg=f"{case}: {name} at {steps} steps, batch {batch}")


def test_the_op_reference_matches_onnxruntime():
    """The numpy semantics of ``recurrence`` (constant folding) against onnxruntime's LSTM:
    the frontend's projection done by hand, then the op's reference."""
    model = _model("LSTM", {"direction": "reverse"}, ("b", "h0", "c0", "p"))
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    feeds = _feeds(model, 4, 3, 0)
    w, r, b = weights["w"][0], weights["r"][0], weights["b"][0]
    size = 4 * HIDDEN
    xw = feeds["x"] @ w.T + b[:size] + b[size:]
    attrs = dict(cell="lstm", hidden=HIDDEN, reverse=True,
                 activations=("sigmoid", "tanh", "tanh"), clip=None, input_forget=0,
                 linear_before_reset=0, has_h0=True, has_c0=True, has_peepholes=True,
                 has_lens=False)
    (states,) = recurrence.reference_fn(attrs, xw, np.ascontiguousarray(r.T),
                                        feeds["h0"][0], feeds["c0"][0], weights["p"][0])
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    y, y_h, y_c = session.run(["y", "y_h", "y_c"], feeds)
    np.testing.assert_allclose(states[:4, :, :HIDDEN], y[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(states[4, :, :HIDDEN], y_h[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(states[4, :, HIDDEN:], y_c[0], rtol=1e-5, atol=1e-6)


def test_an_unsupported_activation_is_refused_by_name():
    model = _model("RNN", {"activations": ["Softsign"]}, ("b",))
    with pytest.raises(tensorc.TensorcError, match="Softsign"):
        tensorc.compile(model, cache=False)


@pytest.mark.parametrize("op, steps, batch, kernel", [
    ("GRU", 70, 3, True),       # long: the kernel (the unrolled form compiles per step)
    ("RNN", 6, 3, True),        # sequence_lens backwards: the kernel's per-row steps
    ("LSTM", 9, 1, True),       # one batch row: the kernel
    ("LSTM", 9, 2, False),      # short, several rows: unrolled, the steps' GEMMs share R
])
def test_concrete_sequences_run_as_the_kernel_where_it_pays(op, steps, batch, kernel):
    extra = ("b", "h0", "lens") if op == "RNN" else ("b", "h0")
    model = _model(op, {"direction": "bidirectional"}, extra, seed=3)
    shapes = {"x": (steps, batch, INPUT), "h0": (2, batch, HIDDEN)}
    if op == "RNN":
        shapes["lens"] = (batch,)
    graph = import_onnx(model, input_shapes=shapes)
    assert any(n.op == "recurrence" for n in graph.nodes) == kernel
    if op != "RNN":     # a back end without loop-IR kernels (CUDA) unrolls them all
        graph = import_onnx(model, input_shapes=shapes, loop_kernels=False)
        assert not any(n.op == "recurrence" for n in graph.nodes)
    else:               # ... and refuses sequence_lens backwards, as before
        with pytest.raises(tensorc.TensorcError, match="reverse direction.*CPU targets"):
            import_onnx(model, input_shapes=shapes, loop_kernels=False)
    module = tensorc.compile(model, input_shapes=shapes, cache=False)
    feeds = _feeds(model, steps, batch, 5)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    got = module.run(feeds)
    for name, expected in zip(names, session.run(names, feeds)):
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)

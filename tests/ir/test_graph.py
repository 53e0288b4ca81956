"""The graph IR: building, printing, verifying, copying and rewriting."""
from __future__ import annotations

import numpy as np
import pytest

from tensorc.errors import TensorcError
from tensorc.ir.graph import Graph, Node, Value, print_graph, rewrite, verify
from tensorc.ir.types import TensorType

F32 = "float32"


def small_graph() -> Graph:
    g = Graph("resnet")
    x = g.add_input("x", TensorType((1, 3, 224, 224), F32))
    w = g.add_constant(np.zeros((64, 3, 7, 7), F32), "w0")
    (y,) = g.add_node("conv", [x, w], {"strides": (2, 2), "pads": (3, 3, 3, 3),
                                       "dilations": (1, 1), "groups": 1},
                      [TensorType((1, 64, 112, 112), F32)])
    (z,) = g.add_node("relu", [y], {}, [y.type])
    g.outputs.append(z)
    return g


def test_print_graph_snapshot():
    g = small_graph()
    g.rename(g.outputs[0], "out")
    g.add_constant(np.array([1, -2], np.int64), "shape")
    assert print_graph(g) == "\n".join([
        "graph resnet(%x: float32[1,3,224,224]) -> (%out: float32[1,64,112,112])",
        "  const %w0: float32[64,3,7,7]",
        "  const %shape: int64[2] = [1, -2]",
        "  %1: float32[1,64,112,112] = conv(%x, %w0) {strides=(2,2), pads=(3,3,3,3), "
        "dilations=(1,1), groups=1}",
        "  %out: float32[1,64,112,112] = relu(%1)",
    ])
    assert str(g) == print_graph(g)


def test_print_attrs_of_every_kind():
    g = Graph("attrs")
    x = g.add_input("x", TensorType((2,), F32))
    g.add_node("clip", [x], {"min": None, "max": 6.0}, [x.type])
    g.add_node("cast", [x], {"dtype": "int64"}, [TensorType((2,), "int64")])
    g.add_node("max_pool", [x], {"ceil_mode": True, "kernel_shape": (3,)}, [x.type])
    text = print_graph(g)
    assert "clip(%x) {min=None, max=6.0}" in text
    assert "cast(%x) {dtype=int64}" in text
    assert "{ceil_mode=True, kernel_shape=(3)}" in text


def test_names_are_unique():
    g = Graph()
    a = g.add_input("x", TensorType((1,), F32))
    b = g.add_input("x", TensorType((1,), F32))
    c = g.add_constant(np.ones(1, F32), "x")
    d = g.add_constant(np.ones(1, F32))
    e = g.add_constant(np.ones(1, F32))
    g.add_input("1", TensorType((1,), F32))
    (n,) = g.add_node("relu", [a], {}, [a.type])
    names = [a.name, b.name, c.name, d.name, e.name, n.name]
    assert len(set(names)) == len(names)
    assert (a.name, d.name, e.name, n.name) == ("x", "c0", "c1", "2")


def test_consumers_and_is_constant():
    g = small_graph()
    x, w = g.inputs[0], next(iter(g.constants))
    conv, relu = g.nodes
    uses = g.consumers()
    assert uses[x] == [conv] and uses[w] == [conv] and uses[conv.outputs[0]] == [relu]
    assert g.is_constant(w) and not g.is_constant(x)
    (y,) = g.add_node("add", [x, x], {}, [x.type])
    assert g.consumers()[x] == [conv, g.nodes[-1]]  # a node reading twice is listed once


def test_verify_accepts_valid_graph():
    verify(small_graph())


def test_verify_rejects_use_before_definition():
    g = small_graph()
    g.nodes.reverse()
    with pytest.raises(TensorcError, match=r"node 'relu_1' \(relu\) reads %1 \(input 0\) before"):
        verify(g)


def test_verify_rejects_value_from_another_graph():
    g = small_graph()
    stray = Value(TensorType((1,), F32), "stray")
    g.nodes[1].inputs = [stray]
    with pytest.raises(TensorcError, match="relu_1.*%stray"):
        verify(g)


def test_verify_rejects_double_definition():
    g = small_graph()
    conv, relu = g.nodes
    g.nodes.append(Node("relu", [conv.outputs[0]], {}, conv.outputs, "again"))
    with pytest.raises(TensorcError, match="defined twice"):
        verify(g)


def test_verify_rejects_undefined_output():
    g = small_graph()
    g.outputs.append(Value(TensorType((1,), F32), "ghost"))
    with pytest.raises(TensorcError, match="output 1 \\(%ghost\\) is never defined"):
        verify(g)


def test_verify_rejects_constant_type_mismatch():
    g = small_graph()
    w = next(iter(g.constants))
    g.constants[w] = np.zeros((64, 3, 7, 7), np.float64)
    with pytest.raises(TensorcError, match="constant %w0 is declared float32.*float64"):
        verify(g)
    g.constants[w] = np.zeros((64, 3, 7), F32)
    with pytest.raises(TensorcError, match="constant %w0"):
        verify(g)


def test_verify_rejects_duplicate_names_and_wrong_producer():
    g = small_graph()
    g.nodes[1].outputs[0].name = "x"
    with pytest.raises(TensorcError, match="name %x is used by input %x and node 'relu_1'"):
        verify(g)
    g = small_graph()
    g.nodes[1].outputs[0].producer = g.nodes[0]
    with pytest.raises(TensorcError, match="another producer"):
        verify(g)


def test_copy_is_independent():
    g = small_graph()
    h = g.copy()
    assert print_graph(h) == print_graph(g)
    h.nodes[1].attrs["extra"] = 1
    h.add_node("neg", [h.outputs[0]], {}, [h.outputs[0].type])
    assert "extra" not in g.nodes[1].attrs and len(g.nodes) == 2
    verify(h)


def test_rewrite_keeps_output_names():
    g = small_graph()
    g.rename(g.outputs[0], "out")
    # Drop the relu: the conv output takes over the name %out.
    h = rewrite(g, lambda g, n: n.inputs[:1] if n.op == "relu" else None)
    verify(h)
    assert print_graph(h).splitlines()[-1].startswith("  %out: float32[1,64,112,112] = conv(")
    assert len(g.nodes) == 2  # the input graph is unchanged


def test_rewrite_refuses_to_rename_an_input():
    g = Graph("passthrough")
    x = g.add_input("x", TensorType((4,), F32))
    (y,) = g.add_node("relu", [x], {}, [x.type])
    g.outputs.append(y)
    h = rewrite(g, lambda g, n: n.inputs[:1])
    verify(h)
    assert [n.op for n in h.nodes] == ["relu"] and h.outputs[0].name == "1"


def test_rewrite_builds_replacement_nodes():
    g = small_graph()

    def relu_to_max(g: Graph, node: Node) -> list[Value] | None:
        if node.op != "relu":
            return None
        zero = g.add_constant(np.zeros((), F32), "zero")
        return g.add_node("maximum", [node.inputs[0], zero], {}, [node.outputs[0].type])

    h = rewrite(g, relu_to_max)
    verify(h)
    assert [n.op for n in h.nodes] == ["conv", "maximum"]
    assert h.outputs[0].name == "2"

"""Layout transforms decided at compile time.

Constant 2-D conv weights are repacked from OIHW into blocks of ``b`` filters,
``[F/b, C/g, KH, KW, b]``, so that the ``b`` weights a kernel broadcasts against one input
vector are adjacent in memory. Pointwise convs (any rank) take blocks of the GEMM tile's
rows, the last one padded with zero filters (attr ``filters``): the A panels of the matmul
micro-kernel they run on. The repacking runs once, here, never at run time.

    %y = conv(%x, %w: float32[64,64,3,3])  ->  %y = conv(%x, %w_packed: float32[4,64,3,3,16])
                                                 {kernel_block=16}

Which formulation each conv runs as, and so which weight layout it wants, is
``ops/nn/conv/strategy.py``'s choice; the layouts themselves are the formulations' own
(``ops/nn/conv/formulations.py``). Stride-1 3x3 convs that run as Winograd F(m x m, 3 x 3)
(``ops/nn/conv/winograd.py``) get their weights transformed instead, U = G W G^T, in
panels of the GEMM tile's rows (the A of its alpha^2 GEMMs):

    %y = conv(%x, %w: float32[64,64,3,3])  ->  %y = conv(%x, %w_winograd: float32[36,8,64,8])
                                                 {winograd=4, kernel_block=8, filters=64}

Inside a blocked chain (below) such a conv runs on the blocks, its weights in panels of nr
filters, the B of its GEMMs (``conv/winograd_blocked.py``: {winograd=4, kernel_block=64,
filters=64, layout_block=16}), where a band of one tile row's transformed tiles fits
``winograd_blocked.BAND_BUFFER_BYTES``.

Chains of convs, pools and elementwise ops take the blocked activation layout NCHW[b]c
(``ops/nn/blocked_layout.py``, b the float32 vector lanes) where at least BLOCKED_MIN_CONVS convs of
the chain run on it; ``layout_transform`` nodes convert at the chain's boundaries only, and
per-channel constants (biases, scales) are blocked here:

    %a = conv(%x, %w1); %b = relu(%a); %c = conv(%b, %w2)
      ->  %t = layout_transform(%x) {to=blocked}; %a = conv(%t, %w1_packed) {layout_block=16}
          %b = relu(%a); %c = conv(%b, %w2_packed) {layout_block=16}
          %o = layout_transform(%c) {to=plain}

Constant matmul weights ``B[K, N]`` are repacked into column panels as wide as the GEMM
micro-kernel's register tile, ``[ceil(N/nr), K, nr]`` (the last panel padded with zeros), so
that the micro-kernel streams one contiguous panel (see ``ops/matmul/``):

    %y = matmul(%x, %w: float32[768,3072]) -> %y = matmul(%x, %w_packed: float32[192,768,16])
                                                {b_panel=16, n=3072}
"""
from __future__ import annotations

import math


from tensorc.ir import te
from tensorc.ir.graph import Graph, Node, Value
from tensorc.ops.matmul.tile import pack_b_panels, panel_width
from tensorc.ops.nn import blocked_layout
from tensorc.ops.nn.conv import strategy
from tensorc.ops.nn.conv.formulations import FORMULATIONS
from tensorc.ops.catalog import get_op
from tensorc.ops.registry import Pattern


def alter_layout(graph: Graph, target=None) -> Graph:
    if target is not None and target.kind != "llvm":
        return graph        # the blocked layout is what the CPU conv schedules want
    # (measured before any weights are repacked: every conv decides against the same total)
    weight_bytes = sum(a.nbytes for a in graph.constants.values())
    if target is not None and target.vector_bits >= 256:
        _block_activations(graph, target, weight_bytes)
    _choose_conv_formulations(graph, target, weight_bytes)
    if target is not None:
        _pack_matmul_weights(graph, target)
    return graph


def _pack_matmul_weights(graph: Graph, target) -> None:
    """Constant 2-D right operands of float32 matmuls -> column panels (b_panel, n attrs)."""
    packed: dict[tuple, Value] = {}
    repacked = set()
    for node in graph.nodes:
        if node.op != "matmul" or node.attrs.get("b_panel"):
            continue
        b = node.inputs[1]
        if b not in graph.constants or b.type.ndim != 2 or b.type.dtype != "float32" or \
                node.inputs[0].type.dtype != "float32":
            continue
        k, n = b.type.shape
        # rows at the hints where they are symbolic (te.hint: the panel width is a choice)
        nr = panel_width(target, n, math.prod(te.hint_shape(node.inputs[0].type.shape[:-1])))
        if (b, nr) not in packed:
            array = pack_b_panels(graph.constants[b], nr)
            packed[(b, nr)] = graph.add_constant(array, f"{b.name}_panels")
        repacked.add(b)
        node.inputs[1] = packed[(b, nr)]
        node.attrs["b_panel"] = nr
        node.attrs["n"] = n
    _drop_unused(graph, repacked)


def _drop_unused(graph: Graph, values) -> None:
    consumers = graph.consumers()
    for v in values:
        if not consumers.get(v) and v not in graph.outputs:
            del graph.constants[v]


def _choose_conv_formulations(graph: Graph, target=None, weight_bytes: int = 0) -> None:
    """Each conv outside blocked chains: the formulation ``conv/strategy.py`` chooses, its
    attrs stamped and its weight layout written (once per weights and layout)."""
    consumers = graph.consumers()
    packed: dict[tuple, Value] = {}
    for node in graph.nodes:
        if node.op != "conv" or node.attrs.get("kernel_block") or len(node.inputs) != 2:
            continue
        w = node.inputs[1]
        choice = strategy.plain_choice(node.attrs, node.inputs[0].type, w.type, target,
                                       weight_bytes, constant=w in graph.constants)
        if choice is None:
            continue
        node.attrs.update(choice.attrs)
        formulation = FORMULATIONS[choice.name]
        if formulation.pack is None or "kernel_block" not in choice.attrs:
            continue
        key = (w, formulation.weights, choice.attrs.get("winograd"),
               choice.attrs["kernel_block"])
        if key not in packed:
            array = formulation.pack(graph.constants[w], choice.attrs)
            packed[key] = graph.add_constant(array, f"{w.name}_{formulation.weights}")
        node.inputs[1] = packed[key]
    originals = {key[0] for key in packed}
    for w in originals:
        if all(n.op == "conv" and n.inputs[1] is not w for n in consumers.get(w, [])) \
                and w not in graph.outputs:
            del graph.constants[w]


alter_layout.needs_target = True


# ---------------------------------------------------------------------------------------------
# blocked activations (NCHW[b]c) across chains

BLOCKED_MIN_CONVS = 2       # convs a chain must have to be worth its two layout transforms
_BLOCKED_POOLS = ("max_pool", "avg_pool")
_BLOCKED_REDUCTIONS = ("reduce_mean", "reduce_max", "reduce_sum")


def _block_activations(graph: Graph, target, weight_bytes: int) -> None:
    """Run the chains that :func:`_blocked_chains` picks on blocked tensors: their convs'
    weights packed in blocks of b filters, their constant operands blocked, a
    ``layout_transform`` before each chain input and after each chain output (one per value,
    however many nodes read it)."""
    b = target.vector_lanes("float32")
    chosen = _blocked_chains(graph, b, target, weight_bytes)
    if not chosen:
        return
    # the chains' convs' formulations, decided on their plain types
    choices = {node: strategy.blocked_choice(node.attrs, node.inputs[0].type,
                                             node.inputs[1].type, target, weight_bytes, b)
               for node in chosen if node.op == "conv"}
    converted: dict[tuple[Value, str], Value] = {}
    replaced: set[Value] = set()
    nodes: list[Node] = []

    def transform(value: Value, to: str) -> Value:
        if (value, to) not in converted:
            attrs = {"block": b, "to": to}
            types = get_op("layout_transform").infer_fn(attrs, [value.type])
            (converted[(value, to)],) = graph.add_node("layout_transform", [value], attrs,
                                                      types)
            nodes.append(graph.nodes.pop())     # in place: before the node that reads it
        return converted[(value, to)]

    def blocked_operand(node: Node, k: int, value: Value) -> Value:
        if node.op == "conv" and k == 1:
            replaced.add(value)
            formulation = FORMULATIONS[choices[node].name]
            return graph.add_constant(formulation.pack(graph.constants[value],
                                                       choices[node].attrs),
                                      f"{value.name}_{formulation.weights}")
        if value in graph.constants:
            replaced.add(value)
            array = graph.constants[value]
            out = node.outputs[0].type.shape
            array = blocked_layout.block(array, b) if array.shape == out else \
                blocked_layout.blocked_constant(array, out[1], b)
            return graph.add_constant(array, f"{value.name}_blocked")
        return transform(value, "blocked")

    blocked_values: set[Value] = set()
    for node in list(graph.nodes):
        if node in chosen:
            plain_input = node.op == "conv" and choices[node].attrs.get("plain_input", False)
            node.inputs = [v if v in blocked_values or (k == 0 and plain_input)
                           else blocked_operand(node, k, v) for k, v in enumerate(node.inputs)]
            if node.op == "conv":
                node.attrs.update(choices[node].attrs)
            elif node.op in _BLOCKED_POOLS:
                node.attrs["layout_block"] = b
            elif node.op == "concat":
                node.attrs["axis"] = 1
            elif node.op == "pad":
                node.attrs["pads"] = _blocked_pads(node.attrs["pads"])
            out = node.outputs[0]
            out.type = get_op(node.op).infer_fn(node.attrs, [v.type for v in node.inputs])[0]
            blocked_values.add(out)
        else:
            node.inputs = [transform(v, "plain") if v in blocked_values else v
                           for v in node.inputs]
        nodes.append(node)
    for k, value in enumerate(graph.outputs):
        if value in blocked_values:
            # the plain tensor is the output the user sees, under its name
            plain = transform(value, "plain")
            value.name, plain.name = plain.name, value.name
            graph.outputs[k] = plain
    graph.nodes = nodes
    _drop_unused(graph, replaced)


def _blocked_chains(graph: Graph, b: int, target, weight_bytes: int) -> set[Node]:
    """The nodes that run on blocked tensors: connected chains of convs that take the
    layout (``conv/strategy.py``'s ``blocks``) and of the pools, channel concats, reductions
    over the map and elementwise ops between and after them, each chain with at least
    BLOCKED_MIN_CONVS convs (a conv that ``strategy.counts_alone`` counts as that many)."""
    candidate: set[Node] = set()
    produced: dict[Value, Node] = {}
    parent: dict[Node, Node] = {}

    def find(node: Node) -> Node:
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for node in graph.nodes:
        if len(node.outputs) != 1:
            continue
        inner = [produced[v] for v in node.inputs if v in produced]
        if node.op == "conv":
            ok = len(node.inputs) == 2 and node.inputs[1] in graph.constants and \
                not node.attrs.get("kernel_block") and strategy.blocks(
                    node.attrs, node.inputs[0].type, node.inputs[1].type, target,
                    weight_bytes, b)
        elif node.op in _BLOCKED_POOLS:
            ok = bool(inner) and node.inputs[0] in produced and node.inputs[0].type.ndim == 4
        elif node.op == "concat":
            # along the channels, of parts in whole blocks: a concat of the blocks
            ok = bool(inner) and node.attrs["axis"] % 4 == 1 and all(
                v.type.ndim == 4 and v.type.shape[1] % b == 0 for v in node.inputs)
        elif node.op == "pad":
            ok = bool(inner) and node.inputs[0] in produced and _spatial_pad(node)
        elif node.op in _BLOCKED_REDUCTIONS:
            # over the map, its dims kept (a global pool; squeeze-and-excite's): the same
            # reduction of the blocked tensor, [N, C/b, 1, 1, b]
            ok = bool(inner) and node.inputs[0].type.ndim == 4 and \
                tuple(node.attrs["axes"]) == (2, 3) and bool(node.attrs["keepdims"])
        else:
            ok = bool(inner) and _blocks_elementwise(graph, node, b)
        if not ok:
            continue
        candidate.add(node)
        produced[node.outputs[0]] = node
        parent[node] = node
        for producer in inner:
            parent[find(producer)] = find(node)
    convs: dict[Node, int] = {}
    for node in candidate:
        if node.op == "conv":
            alone = strategy.counts_alone(node.attrs, node.inputs[0].type,
                                          node.outputs[0].type, b)
            weight = BLOCKED_MIN_CONVS if alone else 1
            convs[find(node)] = convs.get(find(node), 0) + weight
    return {n for n in candidate if convs.get(find(n), 0) >= BLOCKED_MIN_CONVS}


def _spatial_pad(node: Node) -> bool:
    """A constant pad of a 4-D map's spatial axes over symbolic dims: the padding that
    ``lower_for_target`` takes out of a symbolic conv, which joins the conv's chain (a
    static conv pads inside its kernel)."""
    x, pads = node.inputs[0].type, tuple(node.attrs["pads"])
    return x.ndim == 4 and not x.is_static and len(pads) == 8 and \
        node.attrs.get("mode", "constant") == "constant" and not any(pads[:2] + pads[4:6])


def _blocked_pads(pads) -> tuple[int, ...]:
    """A 4-D pad's (ONNX order: begins, then ends) for the blocked 5-D tensor, whose lanes
    axis is not padded."""
    return (*pads[:4], 0, *pads[4:], 0)


def _blocks_elementwise(graph: Graph, node: Node, b: int) -> bool:
    """Elementwise and broadcast ops on a 4-D [N, C, H, W] result whose other operands are
    4-D tensors of its shape or per-channel ones [N, C, 1, 1] (a squeeze-and-excite scale;
    converted at the boundary) or constants with a blocked form.
    (batch_norm broadcasts its [C] parameters along the channels, not as numpy does; what
    simplify leaves of it stays plain.)"""
    if get_op(node.op).pattern not in (Pattern.ELEMWISE, Pattern.BROADCAST) or \
            node.op == "batch_norm":
        return False
    out = node.outputs[0].type
    if out.ndim != 4 or out.shape[1] % b:
        return False
    for value in node.inputs:
        if value.type.shape in (out.shape, (*out.shape[:2], 1, 1)):
            continue
        if value not in graph.constants or \
                blocked_layout.blocked_constant(graph.constants[value], out.shape[1], b) is None:
            return False
    return True

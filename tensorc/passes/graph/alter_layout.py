"""Layout transforms decided at compile time.

Constant 2-D conv weights are repacked from OIHW into blocks of ``b`` filters,
``[F/b, C/g, KH, KW, b]``, so that the ``b`` weights a kernel broadcasts against one input
vector are adjacent in memory. Pointwise convs (any rank) take blocks of the GEMM tile's
rows, the last one padded with zero filters (attr ``filters``): the A panels of the matmul
micro-kernel they run on. The repacking runs once, here, never at run time.

    %y = conv(%x, %w: float32[64,64,3,3])  ->  %y = conv(%x, %w_packed: float32[4,64,3,3,16])
                                                 {kernel_block=16}

Stride-1 3x3 convs that run as Winograd F(m x m, 3 x 3) (``ops/nn/winograd.py``, where
``tile_size`` says which, measured) get their weights transformed instead, U = G W G^T, in
panels of the GEMM tile's rows (the A of its alpha^2 GEMMs):

    %y = conv(%x, %w: float32[64,64,3,3])  ->  %y = conv(%x, %w_winograd: float32[36,8,64,8])
                                                 {winograd=4, kernel_block=8, filters=64}

Inside a blocked chain (below) such a conv runs on the blocks, its weights in panels of nr
filters, the B of its GEMMs (``winograd.winograd_blocked``: {winograd=4, kernel_block=64,
filters=64, layout_block=16}), where a band of one tile row's transformed tiles fits
``winograd.BAND_BUFFER_BYTES``.

Chains of convs, pools and elementwise ops take the blocked activation layout NCHW[b]c
(``ops/nn/blocked.py``, b the float32 vector lanes) where at least BLOCKED_MIN_CONVS convs of
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

import numpy as np

from tensorc.ir.graph import Graph, Node, Value
from tensorc.ops.matmul.tile import pack_b_panels, panel_width
from tensorc.ops.nn import blocked, winograd
from tensorc.ops.registry import Pattern, get_op
from tensorc.ops.nn.conv import (
    conv_as_gemm, conv_as_matmul, filter_lanes_wins, filter_panel, flat_conv_wins, pack_weight,
)

KERNEL_BLOCKS = (16, 8)     # filters per block, the first that divides the filter count
BLOCKED_WINOGRAD = True     # Winograd convs join blocked chains (ops/nn/winograd.py)


def alter_layout(graph: Graph, target=None) -> Graph:
    if target is not None and target.kind != "llvm":
        return graph        # the blocked layout is what the CPU conv schedules want
    # (measured before any weights are repacked: every conv decides against the same total)
    weight_bytes = sum(a.nbytes for a in graph.constants.values())
    if target is not None and target.vector_bits >= 256:
        _block_activations(graph, target, weight_bytes)
    _pack_conv_weights(graph, target, weight_bytes)
    if target is not None:
        _pack_matmul_weights(graph, target)
        _flatten_windows(graph, target)
    return graph


def _flatten_windows(graph: Graph, target) -> None:
    """Float32 depthwise convs that run faster over their channels' planes split into
    phases and laid out flat (ops/nn/flat_window.py): attr flat_window = the vector lanes."""
    lanes = target.vector_lanes("float32")
    for node in graph.nodes:
        if node.op != "conv" or len(node.inputs) != 2 or node.attrs.get("kernel_block") or \
                node.attrs.get("flat_window"):
            continue
        x, w = node.inputs[0].type, node.inputs[1].type
        if x.dtype == "float32" and x.ndim == 4 and w.shape[1] == 1 and \
                node.attrs["groups"] == x.shape[1] == w.shape[0] and \
                flat_conv_wins(node.attrs, x.shape, w.shape, lanes):
            node.attrs["flat_window"] = lanes


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
        nr = panel_width(target, n, int(np.prod(node.inputs[0].type.shape[:-1])))
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


def _pack_conv_weights(graph: Graph, target=None, weight_bytes: int = 0) -> None:
    consumers = graph.consumers()
    packed: dict[tuple, Value] = {}
    for node in graph.nodes:
        if node.op != "conv" or node.attrs.get("kernel_block") or len(node.inputs) != 2:
            continue
        w = node.inputs[1]
        if w not in graph.constants:
            continue
        filters, per_group = w.type.shape[:2]
        tile = winograd.tile_size(node.attrs, node.inputs[0].type, w.type, target, weight_bytes)
        if tile:        # the transformed weights in panels of the GEMM tile's rows
            block = filter_panel(target, filters)
            key = (w, "winograd", tile, block)
            if key not in packed:
                array = winograd.transform_weight(graph.constants[w], tile, block)
                packed[key] = graph.add_constant(array, f"{w.name}_winograd")
            node.inputs[1] = packed[key]
            node.attrs.update(winograd=tile, kernel_block=block, filters=filters)
            continue
        x_shape = node.inputs[0].type.shape
        if w.type.dtype == "float32" and \
                filter_lanes_wins(node.attrs, x_shape, w.type.shape, target):
            # filters in vector lanes: blocks of a vector (the last one padded)
            block = target.vector_lanes("float32")
            node.attrs["filter_lanes"] = block
        elif target is not None and w.type.dtype == "float32" and \
                conv_as_matmul(node.attrs, w.type.shape[2:]):
            # a 1x1 conv on the matmul micro-kernel: panels of a tile's rows
            block = filter_panel(target, filters)
        elif w.type.ndim == 4:
            block = next((b for b in KERNEL_BLOCKS if filters % b == 0), None)
            if per_group == 1 or block is None or \
                    conv_as_gemm(node.attrs, x_shape, w.type.shape, target):
                continue    # depthwise convs, odd filter counts and GEMM convs keep OIHW
        else:
            continue
        if (w, block) not in packed:
            array = pack_weight(graph.constants[w], block)
            packed[(w, block)] = graph.add_constant(array, f"{w.name}_packed")
        node.inputs[1] = packed[(w, block)]
        node.attrs["kernel_block"] = block
        if filters % block:
            node.attrs["filters"] = filters
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
    # the convs of the chains that run as Winograd, decided on their plain types
    tiles = {node: winograd.tile_size(node.attrs, node.inputs[0].type, node.inputs[1].type,
                                      target, weight_bytes)
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
        if node.op == "conv" and k == 1 and tiles[node]:
            replaced.add(value)
            panel = winograd.blocked_panel(value.type.shape[0], b)
            return graph.add_constant(
                winograd.transform_weight(graph.constants[value], tiles[node], panel),
                f"{value.name}_winograd")
        if node.op == "conv" and k == 1:
            replaced.add(value)
            return graph.add_constant(pack_weight(graph.constants[value], b),
                                      f"{value.name}_packed")
        if value in graph.constants:
            replaced.add(value)
            array = graph.constants[value]
            out = node.outputs[0].type.shape
            array = blocked.block(array, b) if array.shape == out else \
                blocked.blocked_constant(array, out[1], b)
            return graph.add_constant(array, f"{value.name}_blocked")
        return transform(value, "blocked")

    blocked_values: set[Value] = set()
    for node in list(graph.nodes):
        if node in chosen:
            plain_input = _plain_input(node, b)
            node.inputs = [v if v in blocked_values or (k == 0 and plain_input)
                           else blocked_operand(node, k, v) for k, v in enumerate(node.inputs)]
            if node.op == "conv" and tiles[node]:
                filters = node.outputs[0].type.shape[1]
                node.attrs.update(layout_block=b, winograd=tiles[node], filters=filters,
                                  kernel_block=winograd.blocked_panel(filters, b))
            elif node.op == "conv":
                node.attrs.update(layout_block=b, kernel_block=b)
                if plain_input:
                    node.attrs["plain_input"] = True
            elif node.op in _BLOCKED_POOLS:
                node.attrs["layout_block"] = b
            elif node.op == "concat":
                node.attrs["axis"] = 1
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
    layout (:func:`_blocks_conv`) and of the pools, channel concats, reductions over the
    map and elementwise ops between and after them, each chain with at least
    BLOCKED_MIN_CONVS convs."""
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
            ok = _blocks_conv(graph, node, b, target, weight_bytes)
        elif node.op in _BLOCKED_POOLS:
            ok = bool(inner) and node.inputs[0] in produced and node.inputs[0].type.ndim == 4
        elif node.op == "concat":
            # along the channels, of parts in whole blocks: a concat of the blocks
            ok = bool(inner) and node.attrs["axis"] % 4 == 1 and all(
                v.type.ndim == 4 and v.type.shape[1] % b == 0 for v in node.inputs)
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
            alone = _narrow_depthwise(node, b) or _dilated(node, b)
            weight = BLOCKED_MIN_CONVS if alone else 1
            convs[find(node)] = convs.get(find(node), 0) + weight
    return {n for n in candidate if convs.get(find(n), 0) >= BLOCKED_MIN_CONVS}


def _narrow_depthwise(node: Node, b: int) -> bool:
    """A depthwise conv whose output rows fill at most half a vector: on plain planes its
    vectors run mostly empty, so it takes the blocked layout even alone, its two layout
    transforms included. One thread (Xeon), ms, plain -> blocked (onnxruntime): 1152
    channels 5x5 onto 7x7 0.108 -> 0.040 (0.064), 672 5x5 s2 onto 7x7 0.069 -> 0.057
    (0.080); rows of 14 stay plain (480 3x3 onto 14x14: 0.030, blocked 0.054)."""
    x, out = node.inputs[0].type, node.outputs[0].type
    return node.attrs["groups"] == x.shape[1] > 1 and out.ndim == 4 and 2 * out.shape[3] <= b


def _dilated(node: Node, b: int) -> bool:
    """A dense dilated conv on whole channel blocks (DeepLab's atrous convs): on plain
    planes it runs flattened over rows padded by the dilation, (W + 2 d) / W of the work, so
    it takes the blocked layout even alone. One thread (Xeon), ms, 256 -> 256 3x3 onto
    33x33, flattened -> blocked with both transforms (onnxruntime): dilation 2 11.6 -> 8.1
    (7.8), dilation 6 16.7 -> 8.4 (7.2)."""
    return node.op == "conv" and node.attrs["groups"] == 1 and \
        node.inputs[0].type.shape[1] % b == 0 and \
        any(d > 1 for d in node.attrs.get("dilations", ()))


def _blocks_conv(graph: Graph, node: Node, b: int, target, weight_bytes: int) -> bool:
    """2-D float32 convs, plain or depthwise, with constant weights and filters in whole
    blocks. The input channels come in whole blocks too, except a plain conv's
    (:func:`_plain_input`); a Winograd conv's always, and a band of one tile row must fit
    its buffers (``winograd.band_rows``). Blocked, ResNet-18 at one / two threads (Xeon)
    took 10.15 / 5.65 -> 8.85 / 4.80 ms: no layout transforms around its Winograd convs,
    the transforms on whole vectors of channels, each band's transformed tiles in L2."""
    if len(node.inputs) != 2 or node.inputs[1] not in graph.constants or \
            node.attrs.get("kernel_block"):
        return False
    x, w = node.inputs[0].type, node.inputs[1].type
    if node.attrs["groups"] != 1 and not node.attrs["groups"] == x.shape[1] == w.shape[0]:
        return False
    if x.dtype != "float32" or w.dtype != "float32" or x.ndim != 4 or w.shape[0] % b or \
            (x.shape[1] % b and not _plain_input(node, b)):
        return False
    tile = winograd.tile_size(node.attrs, x, w, target, weight_bytes)
    # a Winograd conv runs on blocks where a band of one tile row fits its buffers
    return not tile or BLOCKED_WINOGRAD and x.shape[1] % b == 0 and \
        winograd.band_rows(node.attrs, x.shape, w.shape[0], tile)[1] >= 1


def _plain_input(node: Node, b: int) -> bool:
    """A dense conv whose input channels come in no whole blocks (a stem conv's 3) reads its
    input plain and writes blocks."""
    return node.op == "conv" and node.attrs["groups"] == 1 and \
        node.inputs[0].type.ndim == 4 and node.inputs[0].type.shape[1] % b != 0


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
                blocked.blocked_constant(graph.constants[value], out.shape[1], b) is None:
            return False
    return True

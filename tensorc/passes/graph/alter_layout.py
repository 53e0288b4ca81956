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

Constant matmul weights ``B[K, N]`` are repacked into column panels as wide as the GEMM
micro-kernel's register tile, ``[ceil(N/nr), K, nr]`` (the last panel padded with zeros), so
that the micro-kernel streams one contiguous panel (see ``ops/matmul.py``):

    %y = matmul(%x, %w: float32[768,3072]) -> %y = matmul(%x, %w_packed: float32[192,768,16])
                                                {b_panel=16, n=3072}
"""
from __future__ import annotations

import numpy as np

from tensorc.ir.graph import Graph, Value
from tensorc.ops.matmul import pack_b_panels, panel_width
from tensorc.ops.nn import winograd
from tensorc.ops.nn.conv import (
    conv_as_gemm, conv_as_matmul, filter_lanes_wins, filter_panel, flat_conv_wins, pack_weight,
)

KERNEL_BLOCKS = (16, 8)     # filters per block, the first that divides the filter count


def alter_layout(graph: Graph, target=None) -> Graph:
    if target is not None and target.kind != "llvm":
        return graph        # the blocked layout is what the CPU conv schedules want
    _pack_conv_weights(graph, target)
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


def _pack_conv_weights(graph: Graph, target=None) -> None:
    consumers = graph.consumers()
    packed: dict[tuple, Value] = {}
    for node in graph.nodes:
        if node.op != "conv" or node.attrs.get("kernel_block") or len(node.inputs) != 2:
            continue
        w = node.inputs[1]
        if w not in graph.constants:
            continue
        filters, per_group = w.type.shape[:2]
        tile = winograd.tile_size(node.attrs, node.inputs[0].type, w.type, target)
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

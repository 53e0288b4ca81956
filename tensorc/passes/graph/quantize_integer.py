"""MatMulInteger (``quantize_dynamic``'s transformers) on the int8 kernel.

The importer spells MatMulInteger(a, w, a_zero_point) as an int32 matmul,
``matmul(sub(cast(a), cast(zp)), W)`` with ``W`` the constant ``w - w_zero_point`` in int32.
Where ``a`` is uint8 / int8, ``zp`` one value (DynamicQuantizeLinear's, known only at run
time) and ``W`` fits int8, this pass writes it as ``qmatmul`` over ``a``'s bytes and the
packed weights, less the zero point's weight-sum correction computed at run time:

    acc = qmatmul(a, W) - (zp + shift) * sum_k W[k, n]

(``shift``: what reading ``a``'s bytes with the sign bit flipped adds, +-128). The int32
result feeds what it fed before (the Cast and scale Mul of the dequantization). The sum is
exact, as onnxruntime's MatMulInteger is: uint8 ``a`` is read as int8 on AVX2 (s8 x s8, no
byte pair saturates), as it is where ``vpdpbusd`` sums u8 x s8 exactly.
"""
from __future__ import annotations

import numpy as np

from tensorc.ir.graph import Graph, Node, Value
from tensorc.ops.build import emit
from tensorc.ops.matmul.tile import pack_b_panels, panel_width
from tensorc.ops.quantized.qmatmul import shift_of
from tensorc.ops.quantized.words import pack_words
from tensorc.passes.graph.quantize_qdq import QUANTIZED, finish_rewrite
from tensorc.target import Target


def quantize_integer(g: Graph, target: Target) -> Graph:
    """Integer matmuls of 8-bit activations by constant int8-range weights as ``qmatmul``; a
    graph with none is returned as it is."""
    if target.kind != "llvm" or not any(_match(g, n) for n in g.nodes if n.op == "matmul"):
        return g
    old, g.nodes = g.nodes, []
    replaced: dict[Value, Value] = {}
    renames = []
    for node in old:
        node.inputs = [replaced.get(v, v) for v in node.inputs]
        found = _match(g, node) if node.op == "matmul" else None
        if found is None:
            g.nodes.append(node)
            continue
        mark = len(g.nodes)
        value = replaced[node.outputs[0]] = _build(g, *found, target)
        for built in g.nodes[mark:]:
            built.name = node.name
        if node.outputs[0] in g.outputs:
            renames.append((value, node.outputs[0].name))
    return finish_rewrite(g, replaced, renames)


def _match(g: Graph, node: Node) -> tuple[Value, Value | None, np.ndarray] | None:
    """matmul(sub(cast(a), cast(zp)) | cast(a), W) -> (a, zp, W), or None."""
    x, w = node.inputs
    weights = g.constants.get(w)
    if weights is None or weights.dtype != np.int32 or weights.ndim != 2 or \
            node.attrs.get("b_panel") or \
            weights.min(initial=0) < -128 or weights.max(initial=0) > 127:
        return None
    zero = None
    producer = x.producer
    if producer is not None and producer.op == "sub":
        zero = producer.inputs[1]
        if zero.type.size != 1 or zero.producer is None or zero.producer.op != "cast" or \
                zero.producer.inputs[0].type.dtype not in QUANTIZED:
            return None
        producer = producer.inputs[0].producer
    if producer is None or producer.op != "cast" or \
            producer.inputs[0].type.dtype not in QUANTIZED:
        return None
    if zero is not None and zero.producer.inputs[0].type.dtype != \
            producer.inputs[0].type.dtype:
        return None
    return producer.inputs[0], zero, weights.astype(np.int8)


def _build(g: Graph, a: Value, zero: Value | None, weights: np.ndarray,
           target: Target) -> Value:
    k, n = weights.shape
    # exact, as onnxruntime's MatMulInteger is: u8 x s8 where vpdpbusd sums exactly, else
    # s8 x s8 (uint8 bytes read -128), unless the weights hold -128
    exact_signed = int(weights.min(initial=0)) > -128 and not target.int8_dot_exact
    shift = exact_signed if a.type.dtype == "uint8" else not exact_signed
    nr = panel_width(target, n, 2)
    words = g.add_constant(pack_b_panels(pack_words(weights, 0), nr))
    acc = emit(g, "qmatmul", [a, words], n=n, k=k, b_panel=nr, shift=shift,
               saturate=not target.int8_dot_exact)
    sums = weights.astype(np.int64).sum(axis=0)
    if zero is None and not shift:
        return acc
    offset = g.add_constant(np.array(shift_of(a.type.dtype, shift), np.int32))
    if zero is not None:
        offset = emit(g, "add", [emit(g, "reshape", [zero], shape=()), offset])
    correction = emit(g, "mul", [offset, g.add_constant(sums.astype(np.int32))])
    return emit(g, "sub", [acc, correction])


quantize_integer.needs_target = True

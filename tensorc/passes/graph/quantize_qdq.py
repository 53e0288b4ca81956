"""QDQ -> integer kernels: DequantizeLinear -> Conv / MatMul / Gemm -> QuantizeLinear, as
onnxruntime's ``quantize_static`` writes it, becomes one int8 kernel.

The importer spells an activation's DequantizeLinear as ``mul(sub(cast(xq), zp), scale)``
and QuantizeLinear as ``cast(clip(add(round(div(y, scale)), zp)))``, and keeps the
DequantizeLinear of a constant (int8 weights, int32 biases) as the core ``dequantize``. This
pass finds, with every intermediate read once,

    xq (u8|s8) -> DQ -> conv(., DQ(w)) | matmul(., DQ(w) [transposed])
               [-> add(., DQ(bias int32))] [-> relu | clip] -> Q -> yq (u8|s8)

and writes it as an int32 accumulation over the raw bytes (``qmatmul``, or ``qconv`` over
``qconv_patches``) followed by elementwise ops that fusion makes the kernel's epilogue:

    acc = sum_k x'[k] * w[k, n]                 x' = xq, or xq + 128 (see below)
    y   = clip(round(float(acc + c[n]) * M[n]) + zy, lo, hi)
    c[n] = bias[n] - zx' * sum_k w[k, n]         (the zero point: the weight-sum correction)
    M[n] = (sx * sw[n]) / sy  in float32         (as onnxruntime's QLinearConv computes it)

Weights may be int8 or uint8 with any zero point whose difference fits int8 (uint8 weights
with zero point 128 do), per tensor or per output channel; the activation scale and zero
point must be per tensor. A Relu or Clip between the product and Q raises ``lo`` (and lowers
``hi``) to where their bounds quantize: exact, since quantization is monotone. Convs: 2-D,
one group (depthwise and grouped convs stay on the float path), static shapes; matmuls over
symbolic dims too (qmatmul's GEMM template takes them, as the float one does). What the
pass leaves, including every ``dequantize`` it did not use, is folded back to float constants.

int8 activations: where the target has ``vpdpbusd`` (``Target.int8_dot_exact``) they are read
+128 as uint8 (u8 x s8, as MLAS does), the shift undone by the correction above; on AVX2 they
stay signed (s8 x s8: exact, where the shift would let AVX2's byte pairs saturate; about 15%
slower on a 3x3 conv, measured in the commit that chose it), unless the weights hold -128.
uint8 activations on AVX2 saturate their byte pairs as onnxruntime's do (ops/quantized).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorc.ir.graph import Graph, Node, Value
from tensorc.ops.build import emit
from tensorc.ops.interpret import evaluate_node
from tensorc.ops.matmul.tile import pack_b_panels, panel_width
from tensorc.ops.quantized.words import pack_words
from tensorc.passes.graph.simplify import eliminate_dead_code
from tensorc.target import Target

QUANTIZED = {"uint8": (0, 255), "int8": (-128, 127)}


@dataclass
class Match:
    """One DQ -> product -> Q chain: the integers and scales the kernel needs."""

    x: Value                # the quantized input (uint8 / int8)
    x_scale: float
    x_zero: int
    anchor: Node            # the conv or matmul
    weights: np.ndarray     # int8, zero point removed: conv [CO, C, KH, KW], matmul [K, N]
    w_scale: np.ndarray     # float32 [channels] (one entry: per tensor)
    bias: np.ndarray | None  # int32 [channels]
    y_scale: float
    y_zero: int
    low: int
    high: int
    dtype: str              # the output's


def quantize_qdq(g: Graph, target: Target) -> Graph:
    """Replace each QDQ chain around a conv or matmul by an int8 kernel (see the module
    docstring); a graph with no ``dequantize`` is returned as it is.

    Before:  %1 = cast(%xq) {dtype=float32}; %2 = sub(%1, %zx); %3 = mul(%2, %sx)
             %w = dequantize(%wq, %sw, %zw); %4 = matmul(%3, %w)
             %5 = div(%4, %sy); %6 = round(%5); %7 = add(%6, %zy); %8 = clip(%7); %yq = cast(%8)
    After:   %1 = qmatmul(%xq, %w_words) {...}; %2 = add(%1, %c); %3 = cast(%2); ...
             %yq = cast(clip(add(round(mul(%3, %M)), %zy)))
    """
    if not any(node.op == "dequantize" for node in g.nodes):
        return g
    g = g.copy()
    if target.kind != "llvm":       # the int8 kernels are CPU kernels so far
        return _fold_dequantize(g)
    consumers = g.consumers()
    outputs = set(g.outputs)
    old, g.nodes = g.nodes, []
    replaced: dict[Value, Value] = {}
    renames: list[tuple[Value, str]] = []
    for node in old:
        node.inputs = [replaced.get(v, v) for v in node.inputs]
        match = _match(g, node, consumers, outputs)
        if match is None:
            g.nodes.append(node)
            continue
        value = replaced[node.outputs[0]] = _build(g, match, target, match.anchor.name)
        if node.outputs[0] in outputs:
            renames.append((value, node.outputs[0].name))
    return finish_rewrite(g, replaced, renames,
                          lambda done: _fold_dequantize(eliminate_dead_code(done)))


def finish_rewrite(g: Graph, replaced: dict[Value, Value], renames: list[tuple[Value, str]],
                   clean=eliminate_dead_code) -> Graph:
    """The end of a rewrite that replaced values (``replaced``): the graph's outputs
    replaced, what no longer feeds them dropped (``clean``), and each replaced graph output
    under its old name (``renames``)."""
    g.outputs = [replaced.get(v, v) for v in g.outputs]
    g = clean(g)
    g.release_dead_names()
    for value, name in renames:
        g.rename(value, name)
    return g


# matching ------------------------------------------------------------------------------------
def _scalar(g: Graph, v: Value) -> float | None:
    array = g.constants.get(v)
    return float(array.reshape(-1)[0]) if array is not None and array.size == 1 else None


def single_use(v: Value, consumers: dict, outputs: set) -> Node | None:
    """The one node reading ``v`` (None where ``v`` is read twice or is an output)."""
    users = consumers.get(v, [])
    return users[0] if len(users) == 1 and v not in outputs else None


def _match(g: Graph, node: Node, consumers: dict, outputs: set) -> Match | None:
    """The chain whose last node (the cast of Q) is ``node``, or None."""
    if node.op != "cast" or node.attrs["dtype"] not in QUANTIZED:
        return None
    quantize = quantize_chain(g, node, consumers, outputs)
    if quantize is None:
        return None
    y, y_scale, y_zero, low, high = quantize
    low, high, y = _activation(g, y, y_scale, y_zero, low, high, consumers, outputs)
    bias_value = None
    producer = y.producer
    if producer is not None and producer.op == "add" and \
            single_use(producer.outputs[0], consumers, outputs) is not None:
        for k in (0, 1):
            anchor_out, other = producer.inputs[k], producer.inputs[1 - k]
            if anchor_out.producer is not None and \
                    anchor_out.producer.op in ("conv", "matmul"):
                bias_value = other
                y = anchor_out
                break
        else:
            return None
    anchor = y.producer
    if anchor is None or anchor.op not in ("conv", "matmul") or \
            single_use(y, consumers, outputs) is None:
        return None
    activation = dequantized_activation(g, anchor.inputs[0], consumers, outputs)
    weights = _dequantized_weights(g, anchor)
    if activation is None or weights is None:
        return None
    x, x_scale, x_zero = activation
    if anchor.op == "conv" and not (x.type.is_static and anchor.outputs[0].type.is_static):
        return None     # symbolic dims: the int8 conv kernels take static shapes so far
    w, w_scale = weights
    bias = None
    if bias_value is not None:
        bias = _dequantized_bias(g, bias_value, x_scale * w_scale, w.shape[0] if
                                 anchor.op == "conv" else w.shape[1])
        if bias is None:
            return None
    return Match(x, x_scale, x_zero, anchor, w, w_scale, bias, y_scale, y_zero, low, high,
                 node.attrs["dtype"])


def quantize_chain(g: Graph, cast: Node, consumers: dict, outputs: set):
    """cast(clip(add(round(div(y, s)), zp))) -> (y, s, zp, low, high), or None."""
    clip = cast.inputs[0].producer
    if clip is None or clip.op != "clip" or not _once(clip, consumers, outputs):
        return None
    low, high = QUANTIZED[cast.attrs["dtype"]]
    if (clip.attrs.get("min"), clip.attrs.get("max")) != (float(low), float(high)):
        return None
    rounded, zero = clip.inputs[0].producer, 0
    if rounded is not None and rounded.op == "add" and _once(rounded, consumers, outputs):
        zero_value = _scalar(g, rounded.inputs[1])
        if zero_value is None:
            return None
        zero, rounded = int(zero_value), rounded.inputs[0].producer
    if rounded is None or rounded.op != "round" or not _once(rounded, consumers, outputs):
        return None
    div = rounded.inputs[0].producer
    if div is None or div.op != "div" or not _once(div, consumers, outputs):
        return None
    scale = _scalar(g, div.inputs[1])
    if scale is None or div.inputs[0].type.dtype != "float32":
        return None
    return div.inputs[0], scale, zero, low, high


def _once(node: Node, consumers: dict, outputs: set) -> bool:
    return single_use(node.outputs[0], consumers, outputs) is not None


def _activation(g: Graph, y: Value, scale: float, zero: int, low: int, high: int,
                consumers: dict, outputs: set) -> tuple[int, int, Value]:
    """A Relu or Clip before Q folded into the output's bounds."""
    node = y.producer
    if node is None or node.op not in ("relu", "clip") or \
            not _once(node, consumers, outputs):
        return low, high, y
    if node.op == "relu":
        return max(low, zero), high, node.inputs[0]
    bounds = (node.attrs.get("min"), node.attrs.get("max"))
    if len(node.inputs) != 1 or bounds[0] is None or bounds[1] is None:
        return low, high, y

    def level(v: float) -> int:
        return int(np.round(np.float32(v) / np.float32(scale))) + zero
    return max(low, level(bounds[0])), min(high, level(bounds[1])), node.inputs[0]


def dequantized_activation(g: Graph, v: Value, consumers: dict, outputs: set):
    """mul(sub(cast(xq), zp), s) or mul(cast(xq), s) -> (xq, s, zp)."""
    mul = v.producer
    if mul is None or mul.op != "mul":
        return None
    scale = _scalar(g, mul.inputs[1])
    inner, zero = mul.inputs[0].producer, 0
    if scale is None or inner is None:
        return None
    if inner.op == "sub":
        zero_value = _scalar(g, inner.inputs[1])
        if zero_value is None:
            return None
        zero, inner = int(zero_value), inner.inputs[0].producer
    if inner is None or inner.op != "cast" or inner.inputs[0].type.dtype not in QUANTIZED:
        return None
    return inner.inputs[0], scale, zero


def _constant_dequantize(g: Graph, v: Value):
    """A ``dequantize`` of constants -> (integers, scale, zero point) arrays, or None."""
    node = v.producer
    if node is None or node.op != "dequantize" or \
            not all(g.is_constant(i) for i in node.inputs):
        return None
    return tuple(g.constants[i] for i in node.inputs)


def _dequantized_weights(g: Graph, anchor: Node):
    """The anchor's int8 weights (zero point removed) and per-channel scales, or None."""
    w_value = anchor.inputs[1]
    transposed = False
    if anchor.op == "matmul" and w_value.producer is not None and \
            w_value.producer.op == "transpose" and w_value.producer.attrs["perm"] == (1, 0):
        w_value, transposed = w_value.producer.inputs[0], True
    found = _constant_dequantize(g, w_value)
    if found is None:
        return None
    q, scale, zero = found
    if q.dtype not in (np.int8, np.uint8):
        return None
    w = q.astype(np.int32) - zero.astype(np.int32)
    if w.min(initial=0) < -128 or w.max(initial=0) > 127:
        return None
    scale = np.broadcast_to(scale, q.shape)
    if transposed:
        w, scale = w.T, scale.T
    if anchor.op == "conv":
        if anchor.attrs["groups"] != 1 or w.ndim != 4:
            return None
        channel_scale = scale.reshape(w.shape[0], -1)
        per_channel = channel_scale[:, 0]
    else:
        if w.ndim != 2 or anchor.inputs[0].type.ndim < 2:
            return None
        channel_scale = scale.T.reshape(w.shape[1], -1)
        per_channel = channel_scale[:, 0]
    if not (channel_scale == per_channel[:, None]).all():   # a scale per input channel
        return None
    return w.astype(np.int8), per_channel.astype(np.float32)


def _dequantized_bias(g: Graph, v: Value, scale: np.ndarray, channels: int):
    """An int32 bias of ``channels`` entries at ``scale`` (possibly reshaped), or None."""
    if v.producer is not None and v.producer.op == "reshape":
        v = v.producer.inputs[0]
    found = _constant_dequantize(g, v)
    if found is None:
        return None
    q, bias_scale, zero = found
    if q.dtype != np.int32 or q.size != channels:
        return None
    bias_scale = np.broadcast_to(bias_scale, q.shape).reshape(-1)
    if not np.allclose(bias_scale, np.broadcast_to(scale, (channels,)), rtol=1e-5, atol=0):
        return None
    return (q.astype(np.int64) - zero.astype(np.int64)).reshape(-1)


# building ------------------------------------------------------------------------------------
def _build(g: Graph, m: Match, target: Target, name: str) -> Value:
    mark = len(g.nodes)
    signed = m.x.type.dtype == "int8"
    # int8 activations: +128 into the u8s8 product where vpdpbusd makes that exact (or the
    # weights hold -128, which the s8s8 product cannot take); else s8s8, exact on AVX2
    shift = signed and (target.int8_dot_exact or int(m.weights.min(initial=0)) == -128)
    x_zero = m.x_zero + (128 if shift else 0)       # the zero point of the bytes read
    saturate = not target.int8_dot_exact
    if m.anchor.op == "conv":
        co = m.weights.shape[0]
        w2 = m.weights.transpose(0, 2, 3, 1).reshape(co, -1)   # [CO, K], k = (kh, kw, c)
        attrs = m.anchor.attrs
        patches = emit(g, "qconv_patches", [m.x], kernel=tuple(m.weights.shape[2:]),
                       strides=tuple(attrs["strides"]), pads=tuple(attrs["pads"]),
                       dilations=tuple(attrs["dilations"]), pad_value=x_zero, shift=shift)
        n, k4, oh, ow = patches.type.shape
        patches = emit(g, "reshape", [patches], shape=(n, k4, oh * ow))
        words = g.add_constant(pack_words(w2, 1), f"{name}_weights")
        acc = emit(g, "qconv", [words, patches], signed=signed and not shift,
                   saturate=saturate)
        sums, channel_shape = w2.astype(np.int64).sum(axis=1), (co, 1)
    else:
        k, n = m.weights.shape
        nr = panel_width(target, n, 2)
        panels = pack_b_panels(pack_words(m.weights, 0), nr)
        words = g.add_constant(panels, f"{name}_weights")
        acc = emit(g, "qmatmul", [m.x, words], n=n, k=k, b_panel=nr, shift=shift,
                   saturate=saturate)
        sums, channel_shape = m.weights.astype(np.int64).sum(axis=0), (n,)
    bias = m.bias if m.bias is not None else np.zeros(len(sums), np.int64)
    correction = (bias - x_zero * sums).astype(np.int32)
    multiplier = (np.float32(m.x_scale) * m.w_scale.astype(np.float32)) / np.float32(m.y_scale)
    multiplier = np.broadcast_to(multiplier.astype(np.float32), (len(sums),))
    y = emit(g, "add", [acc, g.add_constant(correction.reshape(channel_shape))])
    y = emit(g, "cast", [y], dtype="float32")
    y = emit(g, "mul", [y, g.add_constant(np.ascontiguousarray(multiplier)
                                          .reshape(channel_shape))])
    y = emit(g, "round", [y])
    if m.y_zero:
        y = emit(g, "add", [y, g.add_constant(np.array(m.y_zero, np.float32))])
    y = emit(g, "clip", [y], min=float(m.low), max=float(m.high))
    y = emit(g, "cast", [y], dtype=m.dtype)
    if m.anchor.op == "conv":
        y = emit(g, "reshape", [y], shape=m.anchor.outputs[0].type.shape)
    for node in g.nodes[mark:]:     # the kernel takes the name of the model's node
        node.name = name
    return y


def _fold_dequantize(g: Graph) -> Graph:
    """Every ``dequantize`` of constants the pass left, as a float constant."""
    folded: dict[Value, Value] = {}
    nodes = []
    for node in g.nodes:
        node.inputs = [folded.get(v, v) for v in node.inputs]
        if node.op == "dequantize" and all(g.is_constant(v) for v in node.inputs):
            (array,) = evaluate_node(node, [g.constants[v] for v in node.inputs])
            folded[node.outputs[0]] = g.add_constant(array)
        else:
            nodes.append(node)
    g.nodes = nodes
    g.outputs = [folded.get(v, v) for v in g.outputs]
    return eliminate_dead_code(g)


quantize_qdq.needs_target = True

"""What a kernel must do at least: its arithmetic (FLOPs) and the bytes it must move.

These are the numerators of the roofline: a kernel's bound is
``max(flops / peak_flops, bytes / bandwidth)``, and the profiler reports how close each kernel
comes to it. FLOPs count a multiply-add as 2; an elementwise or reduction op counts one
operation per element it touches, except the functions with no instruction of their own
(exp, tanh, sigmoid, erf, ...), which count the operations of their least vector evaluation
(MATH_FLOPS: range reduction, polynomial, reconstruction); data movement (transpose, concat,
pad) counts none.

>>> node_flops(conv_node)      # 2 * N * F * OH * OW * C/groups * KH * KW
"""
from __future__ import annotations

import math

from tensorc.ir import te
from tensorc.ir.dims import DimLike
from tensorc.ir.graph import Node
from tensorc.ops.nn.conv.shapes import unpacked_weight_shape
from tensorc.ops.catalog import get_op
from tensorc.ops.registry import Pattern


def _conv(node: Node) -> int:
    # the direct conv's arithmetic, whatever the layout or algorithm (a Winograd conv's
    # figure is its effective rate)
    out = node.outputs[0].type.shape
    w = unpacked_weight_shape(node.attrs, node.inputs[1].type.shape)     # [F, C/g, *K]
    return 2 * math.prod(out) * math.prod(w[1:])


def _conv_transpose(node: Node) -> int:
    # every input element meets every weight of its group: [C, F/g, *K]
    x, w = node.inputs[0].type.shape, node.inputs[1].type.shape
    return 2 * math.prod(x) * math.prod(w[1:])


def _matmul(node: Node) -> int:
    k = node.inputs[0].type.shape[-1]
    return 2 * math.prod(node.outputs[0].type.shape) * k


def _input_elements(node: Node) -> int:
    return math.prod(node.inputs[0].type.shape)


def _window(node: Node) -> int:
    return math.prod(node.outputs[0].type.shape) * math.prod(node.attrs["kernel_shape"])


def _normalize(node: Node) -> int:
    # mean, variance, then scale and shift: about 5 operations per element
    return 5 * _input_elements(node)


def _softmax(node: Node) -> int:
    # max, exp, sum, divide
    return 4 * _input_elements(node)


def _recurrence(node: Node) -> int:
    # each step: the recurrent product h @ R^T (H x G*H) and, per hidden unit, the gate
    # equations: LSTM three sigmoids, two tanh and six multiply-adds; GRU two sigmoids, a tanh
    # and five; RNN a tanh
    sigmoid, tanh = MATH_FLOPS["sigmoid"], MATH_FLOPS["tanh"]
    cell = {"lstm": 3 * sigmoid + 2 * tanh + 6, "gru": 2 * sigmoid + tanh + 5,
            "rnn": tanh}[node.attrs["cell"]]
    steps, batch, size = node.inputs[0].type.shape
    hidden = node.attrs["hidden"]
    return steps * batch * (2 * hidden * size + cell * hidden)


# Ops whose arithmetic is not one operation per output element.
FLOPS = {
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "matmul": _matmul,
    "qmatmul": _matmul,
    "max_pool": _window,
    "avg_pool": _window,
    "lp_pool": _window,
    "normalize": _normalize,
    "softmax": _softmax,
    "log_softmax": _softmax,
    "recurrence": _recurrence,
}

# Operations per element of the functions a CPU has no instruction for, as their shortest
# float32 vector evaluation does them: exp is a Cody-Waite reduction (3), a degree-5
# polynomial (5) and a 2^n scaling (2); sigmoid is that exp of -|x|, an add, a divide and a
# select; log, tanh, erf, sin and cos are a reduction and a polynomial of similar length;
# softplus is an exp and a log1p; mish is x * tanh(softplus(x)). Counted as 1 each, a kernel
# whose time is its activation's arithmetic (a conv + SiLU stem) looked 4x below a bound no
# implementation can reach.
MATH_FLOPS = {
    "exp": 10, "elu": 12, "celu": 12, "selu": 12, "log": 12, "sigmoid": 13, "swish": 14,
    "tanh": 14, "erf": 14, "sin": 14, "cos": 14, "gelu": 17, "softplus": 22, "mish": 36,
}

_MOVES_DATA_ONLY = {"reshape", "transpose", "concat", "pad", "slice", "broadcast_to", "tile",
                    "gather", "gather_elements", "gather_nd", "reverse_sequence", "resize_axis",
                    "cast", "bitcast"}


def node_flops(node: Node, exact: bool = False) -> DimLike:
    """Floating-point (or integer) operations of one node: where its shapes are symbolic, at
    the dims' hints (te.hint), or with ``exact`` the expression of the dims."""
    rule = FLOPS.get(node.op)
    if rule is not None:
        flops = rule(node)
    elif node.op in _MOVES_DATA_ONLY:
        flops = 0
    elif get_op(node.op).pattern == Pattern.REDUCTION:
        flops = _input_elements(node)
    else:
        flops = MATH_FLOPS.get(node.op, 1) * math.prod(node.outputs[0].type.shape)
    return flops if exact else te.hint(flops)


def bytes_moved(inputs, output, exact: bool = False) -> DimLike:
    """The bytes a kernel must read and write at least: each input and the output once (at
    the dims' hints where symbolic, or with ``exact`` the expression of the dims)."""
    nbytes = sum(v.type.nbytes for v in inputs) + output.type.nbytes
    return nbytes if exact else te.hint(nbytes)

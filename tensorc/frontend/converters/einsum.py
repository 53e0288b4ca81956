"""The Einsum converter: an equation becomes transposes, reshapes, reduce_sum and matmuls.

Operands are folded left to right. Before each step, a label that no later operand and not the
output uses is summed away; a label repeated within one operand takes the diagonal (a product
with an identity mask, summed). Two operands then contract as one batched matmul:
``[batch, left, contracted] @ [batch, contracted, right]``.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.converters.common import reshape
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value

_ELLIPSIS_LABELS = "0123456789"   # stand-ins for the dims under "...", never ONNX labels


def parse_equation(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The label string of every operand and of the output, "..." expanded to digit labels
    (right-aligned, so an operand with fewer dims under "..." broadcasts).

    >>> parse_equation("...ij,jk", [3, 2])
    (['0ij', 'jk'], '0ik')
    """
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"Einsum: equation {equation!r} names {len(terms)} operands, the node "
                         f"has {len(ranks)}")
    widths = [rank - (len(t) - 3) if "..." in t else 0 for t, rank in zip(terms, ranks)]
    ellipsis = _ELLIPSIS_LABELS[:max(widths, default=0)]
    expanded = []
    for term, width, rank in zip(terms, widths, ranks):
        if "..." in term:
            term = term.replace("...", ellipsis[len(ellipsis) - width:])
        if len(term) != rank or not all(c.isalpha() or c.isdigit() for c in term):
            raise ShapeError(f"Einsum: term {term!r} of {equation!r} does not match an "
                             f"operand of rank {rank}")
        expanded.append(term)
    if arrow:
        output = rhs.replace("...", ellipsis)
    else:  # implicit output: the broadcast dims, then the labels used once, sorted
        letters = "".join(expanded)
        output = ellipsis + "".join(sorted(c for c in set(letters)
                                           if c.isalpha() and letters.count(c) == 1))
    return expanded, output


def _sum_out(ctx: ImportContext, x: Value, term: str, keep: set[str]) -> tuple[Value, str]:
    """Take the diagonal of repeated labels, then sum away the labels not in ``keep``."""
    for label in dict.fromkeys(term):
        while term.count(label) > 1:
            first = term.index(label)
            second = term.index(label, first + 1)
            n = x.type.shape[first]
            shape = [1] * x.type.ndim
            shape[first] = shape[second] = n
            mask = np.eye(n, dtype=x.type.dtype).reshape(shape)
            x = ctx.emit("mul", [x, ctx.const(mask)])
            x = ctx.emit("reduce_sum", [x], axes=(second,), keepdims=False)
            term = term[:second] + term[second + 1:]
    axes = tuple(i for i, c in enumerate(term) if c not in keep)
    if axes:
        x = ctx.emit("reduce_sum", [x], axes=axes, keepdims=False)
        term = "".join(c for c in term if c in keep)
    return x, term


def _transpose(ctx: ImportContext, x: Value, term: str, order: str) -> Value:
    perm = tuple(term.index(c) for c in order)
    return x if perm == tuple(range(len(perm))) else ctx.emit("transpose", [x], perm=perm)


def _contract(ctx: ImportContext, a: Value, ta: str, b: Value, tb: str, keep: set[str]
              ) -> tuple[Value, str]:
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    size = {**dict(zip(tb, b.type.shape)), **dict(zip(ta, a.type.shape))}
    a_batch = tuple(a.type.shape[ta.index(c)] for c in batch)
    b_batch = tuple(b.type.shape[tb.index(c)] for c in batch)
    k = math.prod(size[c] for c in summed)
    a2 = reshape(ctx, _transpose(ctx, a, ta, "".join(batch + left + summed)),
                 a_batch + (math.prod(size[c] for c in left), k))
    b2 = reshape(ctx, _transpose(ctx, b, tb, "".join(batch + summed + right)),
                 b_batch + (k, math.prod(size[c] for c in right)))
    y = ctx.emit("matmul", [a2, b2])
    shape = y.type.shape[:len(batch)] + tuple(size[c] for c in left + right)
    return reshape(ctx, y, shape), "".join(batch + left + right)


@converter("Einsum", since=12)
def einsum(ctx: ImportContext, inputs: list[Value], *, equation: str) -> Value:
    terms, output = parse_equation(equation, [v.type.ndim for v in inputs])
    for c in output:
        if not any(c in t for t in terms):
            raise ShapeError(f"Einsum: output label {c!r} of {equation!r} is in no operand")
    x, term = inputs[0], terms[0]
    for k in range(1, len(inputs)):
        after = set(output).union(*terms[k + 1:])   # the labels needed after this step
        x, term = _sum_out(ctx, x, term, after | set(terms[k]))
        y, other = _sum_out(ctx, inputs[k], terms[k], after | set(term))
        x, term = _contract(ctx, x, term, y, other, after)
    x, term = _sum_out(ctx, x, term, set(output))
    return _transpose(ctx, x, term, output)

"""Comparisons, boolean logic, float predicates and ``where``.

Comparisons and predicates produce bool tensors; the boolean ops take them. All broadcast like
numpy and are :class:`~tensorc.ops.elementwise.Rule` entries, like the arithmetic ops.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.types import TensorType
from tensorc.ops.elementwise import (
    ALL, FLOATS, Rule, broadcast_compute, define_elementwise, widened_numpy,
)
from tensorc.ops.registry import Pattern, define
from tensorc.ops.shape_rules import broadcast_shapes, expect_arity, expect_same_dtype


def _compare(op: str, numpy_fn) -> Rule:
    return Rule(lambda a, x, y: numpy_fn(x, y), lambda a, x, y: E.Compare(op, x, y), ALL,
                out_dtype="bool", widen=False)


def _logical(numpy_fn, expr_fn) -> Rule:
    return Rule(lambda a, *xs: numpy_fn(*xs), lambda a, *xs: expr_fn(*xs), ("bool",))


def _isinf(a: dict, x: np.ndarray) -> np.ndarray:
    return (np.isposinf(x) & bool(a["detect_positive"])) | \
        (np.isneginf(x) & bool(a["detect_negative"]))


def _isinf_expr(a: dict, x: E.Expr) -> E.Expr:
    checks = []
    if a["detect_positive"]:
        checks.append(E.eq(x, float("inf")))
    if a["detect_negative"]:
        checks.append(E.eq(x, float("-inf")))
    return E.any_of(*checks) if checks else E.Const(False, "bool")


COMPARISONS: dict[str, Rule] = {
    "equal": _compare("eq", np.equal),
    "less": _compare("lt", np.less),
    "less_equal": _compare("le", np.less_equal),
    "greater": _compare("gt", np.greater),
    "greater_equal": _compare("ge", np.greater_equal),
}

LOGICAL: dict[str, Rule] = {
    "logical_and": _logical(np.logical_and, lambda x, y: E.Logical("and", x, y)),
    "logical_or": _logical(np.logical_or, lambda x, y: E.Logical("or", x, y)),
    "logical_xor": _logical(np.logical_xor, lambda x, y: E.Compare("ne", x, y)),
}

for _name, _rule in {**COMPARISONS, **LOGICAL}.items():
    define_elementwise(_name, _rule, 2)
define_elementwise("logical_not", _logical(np.logical_not, lambda x: E.Logical("not", x)), 1)
define_elementwise("isnan", Rule(lambda a, x: np.isnan(x),
                                 lambda a, x: E.Call("isnan", (x,), "bool"), FLOATS,
                                 out_dtype="bool"), 1)
define_elementwise("isinf", Rule(_isinf, _isinf_expr, FLOATS, out_dtype="bool"), 1)


# where ----------------------------------------------------------------------------------------
WHERE = Rule(lambda a, cond, x, y: np.where(cond, x, y),
             lambda a, cond, x, y: E.select(cond, x, y), ALL, widen=False)
where = define("where", Pattern.BROADCAST)


@where.infer
def _where_infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    expect_arity("where", input_types, 3)
    if input_types[0].dtype != "bool":
        raise ShapeError(f"where: the condition must be a bool tensor, got {input_types[0]}")
    dtype = expect_same_dtype("where", input_types[1:])
    return [TensorType(broadcast_shapes("where", input_types), dtype)]


@where.reference
def _where_reference(attrs: dict, cond: np.ndarray, x: np.ndarray, y: np.ndarray
                     ) -> list[np.ndarray]:
    return [widened_numpy(WHERE, attrs, cond, x, y)]


where.compute(broadcast_compute("where", WHERE))

"""Recognize normalizations spelled out in elementwise ops and reductions.

Exporters write LayerNorm and RMSNorm as chains of ReduceMean, Sub, Pow, Add, Sqrt, Div
(PyTorch below opset 17, T5/LLaMA-style RMSNorm in every opset). Fused greedily they are
several kernels, each a pass over memory; as one ``normalize`` op they are one kernel that
reads each row once for its statistics and once for the result. The patterns are data
(:data:`RULES`); a small matcher walks them from the result back to the input.

    %m = reduce_mean(%x) {axes=(2,)}; %d = sub(%x, %m); %v = reduce_mean(mul(%d, %d))
    %y = div(%d, sqrt(add(%v, 1e-5)))         ->   %y = normalize(%x) {mode=layer, ...}
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorc.ir.graph import Graph, Node, Value, eliminate_dead_code, rewrite
from tensorc.ops.build import emit


@dataclass(frozen=True)
class Op:
    """A node of ``op`` whose inputs match ``args`` (either order for a commutative op)."""

    op: str
    args: tuple
    commutative: bool = False


@dataclass(frozen=True)
class Either:
    options: tuple


@dataclass(frozen=True)
class Capture:
    """Any value, bound to ``name`` (the same value wherever the name recurs)."""

    name: str


@dataclass(frozen=True)
class Scalar:
    """A one-element constant: equal to ``value``, or bound to ``name``."""

    name: str = ""
    value: float | None = None


def _op(op: str, *args, commutative: bool = False) -> Op:
    return Op(op, tuple(args), commutative)


def _square(t) -> Either:
    return Either((_op("mul", t, t), _op("pow", t, Scalar(value=2.0))))


def _mean(t, name: str) -> Op:
    return Op("reduce_mean", (t, Capture(name)), False)


def _normalized(numerator, variance) -> Either:
    """numerator / sqrt(variance + eps), as exporters write it."""
    shifted = _op("add", variance, Scalar("eps"), commutative=True)
    root = Either((_op("sqrt", shifted), _op("pow", shifted, Scalar(value=0.5))))
    return Either((
        _op("div", numerator, root),
        _op("mul", numerator, _op("reciprocal", root), commutative=True),
        _op("mul", numerator, _op("div", Scalar(value=1.0), root), commutative=True),
        _op("mul", numerator, _op("pow", shifted, Scalar(value=-0.5)), commutative=True),
    ))


# mode -> the pattern of its result; a layer norm's deviation is x - mean(x)
RULES = {
    "layer": _normalized(Capture("dev"), _mean(_square(Capture("dev")), "var")),
    "rms": _normalized(Capture("x"), _mean(_square(Capture("x")), "var")),
}
DEVIATION = _op("sub", Capture("x"), _mean(Capture("x"), "mean"))


def _match(pattern, value: Value, graph: Graph, env: dict) -> bool:
    if isinstance(pattern, Capture):
        bound = env.get(pattern.name)
        if bound is None:
            env[pattern.name] = value
            return True
        return bound is value
    if isinstance(pattern, Scalar):
        array = graph.constants.get(value)
        if array is None or array.size != 1:
            return False
        number = float(array.reshape(-1)[0])
        if pattern.value is not None:
            return abs(number - pattern.value) <= 1e-6 * max(1.0, abs(pattern.value))
        env[pattern.name] = number
        return True
    if isinstance(pattern, Either):
        for option in pattern.options:
            trial = dict(env)
            if _match(option, value, graph, trial):
                env.update(trial)
                return True
        return False
    node = value.producer
    if node is None or node.op != pattern.op:
        return False
    if pattern.op == "reduce_mean":      # (input, Capture of the node for its axes)
        env[pattern.args[1].name] = node
        return _match(pattern.args[0], node.inputs[0], graph, env)
    if len(node.inputs) != len(pattern.args):
        return False
    orders = [node.inputs]
    if pattern.commutative:
        orders.append(node.inputs[::-1])
    for inputs in orders:
        trial = dict(env)
        if all(_match(p, v, graph, trial) for p, v in zip(pattern.args, inputs)):
            env.update(trial)
            return True
    return False


def _trailing_axes(mean: Node, ndim: int) -> tuple[int, ...] | None:
    axes = tuple(mean.attrs["axes"])
    if not axes or not mean.attrs["keepdims"] or axes != tuple(range(axes[0], ndim)):
        return None
    return axes


def _rule(graph: Graph, node: Node) -> list[Value] | None:
    if node.op not in ("div", "mul") or not node.outputs[0].type.dtype.startswith("float"):
        return None
    y = node.outputs[0]
    for mode, pattern in RULES.items():
        env: dict = {}
        if not _match(pattern, y, graph, env):
            continue
        if mode == "layer":
            if not _match(DEVIATION, env["dev"], graph, env):
                continue
        x = env["x"]
        if x.type.shape != y.type.shape or x.type.dtype != y.type.dtype:
            continue
        axes = _trailing_axes(env["var"], x.type.ndim)
        if axes is None or (mode == "layer" and _trailing_axes(env["mean"], x.type.ndim)
                            != axes):
            continue
        return [emit(graph, "normalize", [x], axes=axes, mode=mode,
                     epsilon=float(env["eps"]))]
    return None


def fuse_normalizations(graph: Graph) -> Graph:
    """Rewrite spelled-out LayerNorm and RMSNorm over trailing axes into ``normalize``.

    >>> graph = fuse_normalizations(graph)    # doctest: +SKIP
    """
    return eliminate_dead_code(rewrite(graph, _rule))

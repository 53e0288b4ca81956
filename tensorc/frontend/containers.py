"""ONNX sequences and optionals at import time: values of the ONNX graph that never reach the
graph IR.

tensorc resolves every sequence and optional while it imports a model: a sequence is a
:class:`TensorSequence`, a tuple of tensor Values whose length is known at compile time; a
present optional is its element itself (a Value or a TensorSequence), an empty one is an
:class:`EmptyOptional`. The converters of the sequence and optional ops
(frontend/converters/sequence.py, optional.py) build and take these apart, so the core ops
see tensors only. A sequence that is a model input or output becomes one graph input or
output per element, named by :func:`element_name` (``x[0]``, ``x[1]``, ...).

>>> seq = TensorSequence((a, b), "float32")
>>> describe(seq)
'a sequence of 2 tensors (float32[2,3], float32[4])'
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorc.ir.graph import Value


@dataclass(frozen=True)
class TensorSequence:
    """An ONNX sequence of tensors: its elements, and their dtype (None where no element
    and no declaration gives it)."""
    items: tuple[Value, ...]
    dtype: str | None

    def inserted(self, position: int, value: Value) -> TensorSequence:
        items = list(self.items)
        items.insert(position, value)
        return TensorSequence(tuple(items), self.dtype or value.type.dtype)

    def erased(self, position: int) -> TensorSequence:
        items = list(self.items)
        del items[position]
        return TensorSequence(tuple(items), self.dtype)


@dataclass(frozen=True)
class EmptyOptional:
    """An ONNX optional holding nothing; ``kind`` says what it would hold ("tensor" or
    "sequence")."""
    kind: str = "tensor"


# what an ONNX name may stand for at import time (None: an output tensorc does not compute)
ImportValue = Value | TensorSequence | EmptyOptional


CONTAINER_TYPES = (TensorSequence, EmptyOptional)


def is_container(value: object) -> bool:
    return isinstance(value, CONTAINER_TYPES)


def element_name(name: str, index: int) -> str:
    """The graph input or output that holds element ``index`` of the sequence ``name``."""
    return f"{name}[{index}]"


def describe(value: ImportValue | None) -> str:
    """``value`` for messages: a tensor's type, a sequence's element types."""
    if value is None:
        return "-"
    if isinstance(value, EmptyOptional):
        return f"an empty optional ({value.kind})"
    if isinstance(value, TensorSequence):
        if not value.items:
            return f"an empty sequence ({value.dtype or 'no dtype'})"
        types = ", ".join(str(v.type) for v in value.items[:4])
        more = ", ..." if len(value.items) > 4 else ""
        return (f"a sequence of {len(value.items)} tensor{'s' if len(value.items) > 1 else ''} "
                f"({types}{more})")
    return str(value.type)

"""Converters of ONNX ops on the bit representation of tensors."""
from __future__ import annotations

from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value


@converter("BitCast", since=26)
def bit_cast(ctx: ImportContext, inputs: list[Value], *, to: int) -> Value:
    return ctx.emit("bitcast", inputs[:1], dtype=ctx.dtype_name(to))

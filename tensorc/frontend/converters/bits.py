"""Converters of ONNX ops on the bit representation of tensors."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tensorc.frontend.converters import converter
from tensorc.ir.graph import Value

if TYPE_CHECKING:
    from tensorc.frontend.onnx import ImportContext


@converter("BitCast", since=26)
def bit_cast(ctx: ImportContext, inputs: list[Value], *, to: int) -> Value:
    return ctx.emit("bitcast", inputs[:1], dtype=ctx.dtype_name(to))

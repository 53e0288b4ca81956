"""What each part of the LLVM code generator (values, math, vector loops, memory, register
tiles, parallel loops) reaches through the generator it is composed into: the builder of the
function being emitted and that function's state."""
from __future__ import annotations

from llvmlite import ir


class CodegenPart:
    """A part of ``gen`` (an ``LLVMCodegen``): its builder ``b`` and function state ``fs``
    are always the generator's current ones (outlining a parallel loop swaps them)."""

    def __init__(self, gen):
        self.gen = gen

    @property
    def b(self) -> ir.IRBuilder:
        return self.gen.b

    @property
    def fs(self):
        return self.gen.fs

"""LLVM types the code generator's modules share, and the two helpers that make one piece of
code serve scalars and vectors alike."""
from __future__ import annotations

from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def like(ty: ir.Type, element: ir.Type) -> ir.Type:
    """``element``, as a vector of as many lanes as ``ty`` has when ``ty`` is a vector."""
    return ir.VectorType(element, ty.count) if isinstance(ty, ir.VectorType) else element


def splat(ty: ir.Type, element: ir.Type, value) -> ir.Constant:
    """The constant ``value`` of type ``like(ty, element)``."""
    shaped = like(ty, element)
    if isinstance(shaped, ir.VectorType):
        return ir.Constant(shaped, [value] * shaped.count)
    return ir.Constant(shaped, value)

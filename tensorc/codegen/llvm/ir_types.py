"""LLVM types the code generator's modules share, the two helpers that make one piece of code
serve scalars and vectors alike, and the shuffles that cut vectors into pieces and join them."""
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


def slice_lanes(b: ir.IRBuilder, v: ir.Value, start: int, count: int) -> ir.Value:
    """Lanes ``start .. start + count`` of vector ``v`` (``v`` itself where that is all)."""
    if start == 0 and count == v.type.count:
        return v
    return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), ir.Constant(
        ir.VectorType(I32, count), list(range(start, start + count))))


def concat(b: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    """The vectors ``parts`` (a power of two of them, of one width) joined, pairwise."""
    while len(parts) > 1:
        merged = []
        for x, y in zip(parts[0::2], parts[1::2]):
            n = x.type.count
            merged.append(b.shuffle_vector(x, y, ir.Constant(
                ir.VectorType(I32, 2 * n), list(range(2 * n)))))
        parts = merged
    return parts[0]

"""LLVM types the code generator's modules share, the two helpers that make one piece of code
serve scalars and vectors alike, and the shuffles that cut vectors into pieces and join them."""
from __future__ import annotations

from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
VOID = ir.VoidType()


# Constants by (type, value): a constant is an immutable operand that any module may share, and
# llvmlite formats each Constant object once (it caches the text on the object). A vector
# constant built from a list makes and formats a Constant per lane; a kernel uses the same few
# splats and shuffle masks thousands of times. Floats are keyed by repr (0.0 and -0.0 differ).
_CONSTANTS: dict[tuple, ir.Constant] = {}
_CONSTANT_LIMIT = 1 << 16


def constant(ty: ir.Type, value) -> ir.Constant:
    """``ir.Constant(ty, value)``, made once per type and value (``value``: a number, or a
    list of numbers for a vector type)."""
    key = (str(ty), repr(value))
    found = _CONSTANTS.get(key)
    if found is None:
        if len(_CONSTANTS) >= _CONSTANT_LIMIT:
            _CONSTANTS.clear()
        if isinstance(value, ir.Value) or isinstance(value, list) and \
                any(isinstance(v, ir.Value) for v in value):
            return ir.Constant(ty, value)       # built of other values: not kept
        if isinstance(ty, ir.VectorType) and isinstance(value, list):
            if all(repr(v) == repr(value[0]) for v in value):
                found = ir.Constant(ty, constant(ty.element, value[0]))
            else:
                found = ir.Constant(ty, [constant(ty.element, v) for v in value])
        else:
            found = ir.Constant(ty, value)
        _CONSTANTS[key] = found
    return found


def like(ty: ir.Type, element: ir.Type) -> ir.Type:
    """``element``, as a vector of as many lanes as ``ty`` has when ``ty`` is a vector."""
    return ir.VectorType(element, ty.count) if isinstance(ty, ir.VectorType) else element


def splat(ty: ir.Type, element: ir.Type, value) -> ir.Constant:
    """The constant ``value`` of type ``like(ty, element)``."""
    shaped = like(ty, element)
    if isinstance(shaped, ir.VectorType):
        return constant(shaped, [value] * shaped.count)
    return constant(shaped, value)


def slice_lanes(b: ir.IRBuilder, v: ir.Value, start: int, count: int) -> ir.Value:
    """Lanes ``start .. start + count`` of vector ``v`` (``v`` itself where that is all)."""
    if start == 0 and count == v.type.count:
        return v
    return b.shuffle_vector(v, constant(v.type, ir.Undefined), constant(
        ir.VectorType(I32, count), list(range(start, start + count))))


def concat(b: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    """The vectors ``parts`` (a power of two of them, of one width) joined, pairwise."""
    while len(parts) > 1:
        merged = []
        for x, y in zip(parts[0::2], parts[1::2]):
            n = x.type.count
            merged.append(b.shuffle_vector(x, y, constant(
                ir.VectorType(I32, 2 * n), list(range(2 * n)))))
        parts = merged
    return parts[0]

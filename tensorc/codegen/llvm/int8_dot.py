"""The int8 dot product of four byte pairs on LLVM values: ``dot4_u8s8(u, s)`` and
``dot4_s8s8(x, w)``.

Each int32 lane of the operands holds four bytes; the result lane is the four products
summed into int32. ``dot4_u8s8`` multiplies unsigned bytes ``u`` by signed bytes ``s``; how
the sum is formed follows the instructions the target has, and the results differ only where
a pair saturates:

- AVX512-VNNI / AVX-VNNI (``vpdpbusd``): the exact sum.
- AVX2 / AVX-512BW (``vpmaddubsw`` then ``vpmaddwd`` with ones): bytes 0+1 and 2+3 are summed
  pairwise into int16 *with saturation* (a pair of 255 x 127 products is 64770, clamped to
  32767), then the two int16 added exactly. onnxruntime's MLAS u8s8 kernels do the same on
  AVX2 (its ``reduce_range`` option quantizes weights to 7 bits so that no pair reaches the
  bound); tensorc pairs the same k (channels innermost in a conv), so their results agree.
- scalars and narrow vectors: in the low lanes of a 256-bit vector, through the same
  instructions; on targets without AVX2 the same saturating arithmetic spelled out in int32,
  so that a kernel gives one answer whichever of its loops vectorizes.

``dot4_s8s8(x, w)`` multiplies signed bytes by signed bytes, ``w`` never -128 (symmetric
weights): as ``|x| * (w with x's sign)`` through the same instructions, whose pairs then stay
within 2 x 128 x 127 = 32512: exact on every target, as MLAS's AVX2 s8s8 results are.

:func:`tensorc.ops.quantized.words.dot4_reference` is the rule in numpy; the Target says
which a build follows (``int8_dot_exact``).
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen.llvm.ir_types import I8, I32, concat, slice_lanes, splat

I16 = ir.IntType(16)


def emit_dot4(gen, first: ir.Value, second: ir.Value, signed: bool = False) -> ir.Value:
    """The dot4 of int32 (vector) values: ``dot4_u8s8(first, second)``, or where ``signed``
    ``dot4_s8s8(first, second)``; ``gen``: the code generator (its builder ``b``,
    ``target`` and ``declare``)."""
    if isinstance(first.type, ir.VectorType):
        bits = 32 * first.type.count
        for width in (512, 256):
            if bits % width or not _native(gen.target, width) or \
                    not _power_of_two(bits // width):
                continue
            lanes = width // 32
            parts = [_native_dot4(gen, slice_lanes(gen.b, first, k, lanes),
                                  slice_lanes(gen.b, second, k, lanes), width, signed)
                     for k in range(0, first.type.count, lanes)]
            return concat(gen.b, parts)
    if _native(gen.target, 256):
        # a scalar or narrow vector: in the low lanes of one 256-bit vector, through the same
        # instructions (one answer whichever loops vectorize; the int32 emulation, right
        # alone, gave wrong first rows in the scalar register tile of a conv over a 1x1
        # input, after LLVM's SLP vectorizer regrouped it: not root-caused)
        return _narrow_native(gen, first, second, signed)
    return _emulated_dot4(gen.b, first, second, signed, not gen.target.int8_dot_exact)


def _narrow_native(gen, first: ir.Value, second: ir.Value, signed: bool) -> ir.Value:
    b = gen.b
    wide = ir.VectorType(I32, 8)
    undef = ir.Constant(wide, ir.Undefined)
    if isinstance(first.type, ir.VectorType):
        count = first.type.count
        spread = ir.Constant(ir.VectorType(I32, 8), [k if k < count else count
                                                     for k in range(8)])
        u = b.shuffle_vector(first, ir.Constant(first.type, ir.Undefined), spread)
        s = b.shuffle_vector(second, ir.Constant(second.type, ir.Undefined), spread)
        out = _native_dot4(gen, u, s, 256, signed)
        return slice_lanes(b, out, 0, count)
    u = b.insert_element(undef, first, ir.Constant(I32, 0))
    s = b.insert_element(undef, second, ir.Constant(I32, 0))
    return b.extract_element(_native_dot4(gen, u, s, 256, signed), ir.Constant(I32, 0))


def _power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


def _native(target, width: int) -> bool:
    on = {f[1:] for f in target.features.split(",") if f.startswith("+")}
    if target.has_vnni(width):
        return True
    return "avx512bw" in on if width == 512 else "avx2" in on


def _native_dot4(gen, first: ir.Value, second: ir.Value, width: int, signed: bool
                 ) -> ir.Value:
    b = gen.b
    lanes = width // 32
    i32v = ir.VectorType(I32, lanes)
    bytes_ty, words_ty = ir.VectorType(I8, 4 * lanes), ir.VectorType(I16, 2 * lanes)
    u, s = b.bitcast(first, bytes_ty), b.bitcast(second, bytes_ty)
    if signed:      # |x| (-128 -> 128 as a byte read unsigned), w with x's sign
        zero = ir.Constant(bytes_ty, None)
        negative = b.icmp_signed("<", u, zero)
        if width == 256:    # vpsignb: one instruction (LLVM spells the select as two)
            sign = gen.declare("llvm.x86.avx2.psign.b", bytes_ty, [bytes_ty, bytes_ty])
            s = b.call(sign, [s, u])
        else:
            s = b.select(negative, b.sub(zero, s), s)
        u = b.select(negative, b.sub(zero, u), u)
    if gen.target.has_vnni(width):
        fn = gen.declare(f"llvm.x86.avx512.vpdpbusd.{width}", i32v, [i32v] * 3)
        return b.call(fn, [ir.Constant(i32v, None), b.bitcast(u, i32v), b.bitcast(s, i32v)])
    if width == 256:
        madd_bytes, madd_words = "llvm.x86.avx2.pmadd.ub.sw", "llvm.x86.avx2.pmadd.wd"
    else:
        madd_bytes, madd_words = "llvm.x86.avx512.pmaddubs.w.512", "llvm.x86.avx512.pmaddw.d.512"
    pairs = b.call(gen.declare(madd_bytes, words_ty, [bytes_ty, bytes_ty]), [u, s])
    ones = ir.Constant(words_ty, [1] * (2 * lanes))
    return b.call(gen.declare(madd_words, i32v, [words_ty, words_ty]), [pairs, ones])


def _emulated_dot4(b: ir.IRBuilder, first: ir.Value, second: ir.Value, signed: bool,
                   saturate: bool) -> ir.Value:
    """The same sum in int32 arithmetic (scalars, or vectors of any width)."""
    def unsigned_byte(v: ir.Value, q: int) -> ir.Value:
        return b.and_(b.lshr(v, splat(v.type, I32, 8 * q)), splat(v.type, I32, 255))

    def signed_byte(v: ir.Value, q: int) -> ir.Value:
        return b.ashr(b.shl(v, splat(v.type, I32, 24 - 8 * q)), splat(v.type, I32, 24))

    def pair(q: int) -> ir.Value:
        lhs = signed_byte if signed else unsigned_byte
        total = b.add(b.mul(lhs(first, q), signed_byte(second, q)),
                      b.mul(lhs(first, q + 1), signed_byte(second, q + 1)))
        if not saturate:
            return total
        low, high = splat(first.type, I32, -32768), splat(first.type, I32, 32767)
        total = b.select(b.icmp_signed("<", total, low), low, total)
        return b.select(b.icmp_signed(">", total, high), high, total)
    return b.add(pair(0), pair(2))

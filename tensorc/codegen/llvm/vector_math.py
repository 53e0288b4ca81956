"""float32 math functions as inline LLVM IR: exp, log, log1p, tanh, erf, sin, cos, and pow
by a constant exponent.

LLVM lowers ``llvm.exp.v8f32`` and friends on x86 to one scalar libm call per lane, which made
every exp, tanh or erf in a vectorized loop 3-50x slower than onnxruntime. Here each function
is a straight sequence of vector instructions (range reduction through the float's bits, a
polynomial, a rescale), the same code for scalars and for vectors of any lane count.

Accuracy (measured by ``tests/codegen/test_vector_math.py`` over 10^6 points of the whole
float32 range against float64 numpy): at most 2 ulp, with IEEE results at the edges (+-0,
+-inf, NaN, denormal inputs and results, overflow to inf, underflow to 0). sin and cos reduce
their argument in float64 (Cody-Waite with a three-part pi/2); that is exact enough for
|x| < 2**50 with FMA (0.7 ulp measured), |x| < 2**29 without, and is wrong beyond (the
results stay in [-1, 1]): there is no Payne-Hanek reduction here.

The polynomial coefficients are float32 minimax-like fits (weighted least squares iterated
toward equal ripple, coefficients rounded to float32 one at a time) made by
``tools/fit_math_polynomials.py``. float64 math still calls LLVM intrinsics / libm.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from tensorc.codegen.llvm.ir_types import I32, I64, concat, constant, like, slice_lanes, splat
from tensorc.codegen.llvm.part import CodegenPart

F32 = ir.FloatType()
F64 = ir.DoubleType()

# exp(r) = 1 + r + r^2 * P(r) on |r| <= ln2/2 (relative error 2^-28.3)
EXP_P = (0.4999999403953552, 0.1666652113199234, 0.04166826233267784, 0.00836866907775402,
         0.001382102258503437)
LN2_HI = 0.693145751953125          # 15 significant bits: n * LN2_HI is exact for |n| < 512
LN2_LO = 1.4286068202862268e-06     # ln 2 - LN2_HI
LOG2E = 1.4426950408889634
ROUND_MAGIC = 12582912.0            # 1.5 * 2^23: x + this rounds x to an integer (|x| < 2^22)
EXP_NORMAL_BELOW = -87.33654        # exp(x) is a denormal below (exp(-87.33654) = 2^-126)
EXP_ZERO_BELOW = -104.0             # exp(x) rounds to 0 below: exp(-104) = 6.8e-46 < 2^-150
# log(1 + f) = f - f^2/2 + f^3 * P(f) on sqrt(1/2) - 1 <= f < sqrt(2) - 1 (2^-27.3)
LOG_P = (0.3333333134651184, -0.2500081956386566, 0.2000124305486679, -0.1662341058254242,
         0.14201541244983673, -0.13159553706645966, 0.12762469053268433, -0.0763690397143364)
SQRT_HALF_BITS = 0x3F3504F3
# expm1(r) = r + r^2 * P(r) on |r| <= ln2/2 (relative error 2^-26.1)
EXPM1_P = (0.4999999701976776, 0.1666654497385025, 0.04166743531823158, 0.008366451598703861,
           0.0013870890252292156)
# tanh(x) = x + x^3 * P(x^2) on |x| < TANH_SMALL (2^-26.3)
TANH_SMALL = 0.3
TANH_P = (-0.33333060145378113, 0.13314810395240784, -0.05036460608243942)
TANH_ONE = 9.1      # tanh(x) rounds to 1 in float32 for x > 9.02
# erf(x) = x + x * P(x^2) on |x| < 1 (2^-29.4); erf(x) = 1 - exp(Q(x)) on 1 <= x < ERF_ONE
# (Q fits log(erfc(x)), absolute error of erf 2^-35.3); erf(x) rounds to 1 beyond ERF_ONE
ERF_P = (0.12837916612625122, -0.3761262595653534, 0.11283578723669052, -0.026853347197175026,
         0.005187162198126316, -0.0007997853099368513, 7.806903158780187e-05)
ERF_Q = (0.0001880438212538138, -1.1295784711837769, -0.6332197189331055,
         -0.10841887444257736, 0.025208527222275734, -0.004204697906970978,
         0.000441372103523463, -2.1690686480724253e-05)
ERF_ONE = 3.9375
# sin and cos of |r| <= pi/4 in float64: Taylor series, truncation below 2^-28 relative
SIN_P = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 5))
COS_P = tuple((-1) ** k / math.factorial(2 * k) for k in range(2, 6))
# pi/2 in three float64 parts (fma reduction)
PIO2 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)


def _float_bits(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


def _split(parts: tuple[float, ...], bits: int, count: int) -> tuple[float, ...]:
    """The sum of ``parts`` as ``count`` floats of ``bits`` significant bits each: q * part
    is exact without an fma while q < 2^(53 - bits)."""
    from fractions import Fraction
    rest, out = sum(map(Fraction, parts)), []
    for _ in range(count):
        exponent = math.frexp(float(rest))[1] - bits
        chunk = Fraction(round(rest / Fraction(2) ** exponent)) * Fraction(2) ** exponent
        out.append(float(chunk))
        rest -= chunk
    return tuple(out)


PIO2_SHORT = _split(PIO2, 24, 5)     # without fma: exact to |x| < 2^29
TWO_OVER_PI = 0.6366197723675814
# pow in float64: atanh(s) = s + s^3 (1/3 + s^2/5 + ...) for |s| <= 0.172 (tail below 2^-44),
# exp(z) for |z| <= ln2/2 by Taylor to z^8 (2^-32)
ATANH_P = tuple(1 / (2 * k + 3) for k in range(7))
EXP_TAYLOR = tuple(1 / math.factorial(k) for k in range(9))
SIGN_BIT = -0x80000000

INLINE = frozenset({"exp", "log", "tanh", "erf", "sin", "cos"})


class MathOps(CodegenPart):
    """float32 math functions emitted inline (see the module docstring), by the code
    generator ``gen``: its builder ``b``, ``target``, ``declare`` and ``intrinsic``."""

    def __init__(self, gen):
        super().__init__(gen)
        self.target = gen.target


    def inline_math(self, name: str, x: ir.Value) -> ir.Value:
        """``name`` (one of INLINE, or log1p) of the float32 scalar or vector ``x``."""
        return getattr(self, f"_math_{name}")(x)

    # helpers ----------------------------------------------------------------------------
    def _fc(self, x: ir.Value, value: float) -> ir.Constant:
        """A float constant shaped like ``x`` (float or double, scalar or vector)."""
        elem = x.type.element if isinstance(x.type, ir.VectorType) else x.type
        return splat(x.type, elem, value)

    def _ic(self, x: ir.Value, value: int, bits: int = 32) -> ir.Constant:
        return splat(x.type, I32 if bits == 32 else I64, value)

    def _has_fma(self) -> bool:
        features = self.target.features.split(",")
        return "+fma" in features or "+avx512f" in features

    def _fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """a * b + c, rounded once where the target has FMA instructions."""
        if self._has_fma():
            return self.b.call(self.gen.intrinsic("llvm.fma", a.type, 3), [a, b, c])
        return self.b.fadd(self.b.fmul(a, b), c)

    def _horner(self, x: ir.Value, coeffs) -> ir.Value:
        """coeffs[0] + coeffs[1] x + coeffs[2] x^2 + ..."""
        acc = self._fc(x, coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self._fma(acc, x, self._fc(x, c))
        return acc

    def _estrin(self, x: ir.Value, x2: ir.Value, coeffs) -> ir.Value:
        """coeffs[0] + coeffs[1] x + ... in pairs (c0 + c1 x) + x^2 (c2 + c3 x) + ...: a
        shorter dependency chain than Horner's for the same number of operations, given
        x^2."""
        pairs = [self._fma(self._fc(x, coeffs[k + 1]), x, self._fc(x, coeffs[k]))
                 if k + 1 < len(coeffs) else self._fc(x, coeffs[k])
                 for k in range(0, len(coeffs), 2)]
        acc = pairs[-1]
        for pair in reversed(pairs[:-1]):
            acc = self._fma(acc, x2, pair)
        return acc

    def _abs(self, x: ir.Value) -> ir.Value:
        return self.b.call(self.gen.intrinsic("llvm.fabs", x.type, 1), [x])

    def _as_int(self, x: ir.Value) -> ir.Value:
        return self.b.bitcast(x, like(x.type, I32 if like(x.type, F32) == x.type else I64))

    def _as_float(self, i: ir.Value) -> ir.Value:
        return self.b.bitcast(i, like(i.type, F32 if like(i.type, I32) == i.type else F64))

    def _clamp(self, x: ir.Value, low: float, high: float) -> ir.Value:
        """x limited to [low, high]; NaN stays NaN."""
        b = self.b
        x = b.select(b.fcmp_ordered(">", x, self._fc(x, high)), self._fc(x, high), x)
        return b.select(b.fcmp_ordered("<", x, self._fc(x, low)), self._fc(x, low), x)

    def _copysign(self, magnitude: ir.Value, sign_of: ir.Value) -> ir.Value:
        b = self.b
        sign = b.and_(self._as_int(sign_of), self._ic(sign_of, SIGN_BIT))
        return self._as_float(b.or_(self._as_int(magnitude), sign))

    def _pow2(self, n: ir.Value) -> ir.Value:
        """2^n as a float32, for int32 n in [-126, 127]."""
        b = self.b
        return self._as_float(b.shl(b.add(n, self._ic(n, 127)), self._ic(n, 23)))

    def _scalef(self, p: ir.Value, t: ir.Value) -> ir.Value | None:
        """p * 2^n for t = n + ROUND_MAGIC, rounded once (a denormal result too; inf past
        the range), as AVX-512's one instruction ``vscalefps``; None where the target has no
        such instruction for ``p``'s type (then the callers build 2^n from bits)."""
        features = self.target.features.split(",")
        if "+avx512f" not in features or not isinstance(p.type, ir.VectorType) or \
                p.type.element != F32:
            return None
        lanes = p.type.count
        if lanes % 16 == 0:
            width = 16
        elif lanes in (4, 8) and "+avx512vl" in features:
            width = lanes
        else:
            return None
        b = self.b
        n = b.fsub(t, self._fc(t, ROUND_MAGIC))
        vty = ir.VectorType(F32, width)
        mask_ty = ir.IntType(max(8, width))
        args = [vty, vty, vty, mask_ty] + ([I32] if width == 16 else [])
        fn = self.gen.declare(f"llvm.x86.avx512.mask.scalef.ps.{32 * width}", vty, args)
        tail = [constant(I32, 4)] if width == 16 else []    # the current rounding mode
        parts = []
        for start in range(0, lanes, width):
            pp, nn = slice_lanes(self.b, p, start, width), slice_lanes(self.b, n, start, width)
            parts.append(b.call(fn, [pp, nn, pp, constant(mask_ty, -1), *tail]))
        return concat(self.b, parts)

    # functions --------------------------------------------------------------------------
    def _math_exp(self, x: ir.Value) -> ir.Value:
        """exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 (Cody-Waite)."""
        b = self.b
        # beyond these, the result is inf or 0 anyway; the clamp keeps n in [-150, 129]
        x, zero = self._exp_underflow(x)
        t, p = self._exp_reduced(self._clamp(x, EXP_ZERO_BELOW, 89.0))
        scaled = self._scalef(p, t)
        if scaled is None:
            ni = b.sub(self._as_int(t), self._as_int(self._fc(x, ROUND_MAGIC)))
            # 2^n in two factors, so that overflow gives inf and a denormal result is rounded
            # once
            half = b.ashr(ni, self._ic(ni, 1))
            scaled = b.fmul(b.fmul(p, self._pow2(half)), self._pow2(b.sub(ni, half)))
        return b.select(zero, self._fc(x, 0.0), scaled)

    def _exp_underflow(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(x', lanes where exp(x) rounds to 0): x' is x with those lanes set to 0, so that
        no lane computes a result that underflows. Each such operation (a scaling to below
        the smallest denormal, then arithmetic on denormals) takes a microcode assist on
        Intel cores: a softmax over rows with -1e4 attention-mask entries ran 4x slower."""
        zero = self.b.fcmp_ordered("<", x, self._fc(x, EXP_ZERO_BELOW))
        return self.b.select(zero, self._fc(x, 0.0), x), zero

    def _math_exp_nonpositive(self, x: ir.Value) -> ir.Value:
        """exp(x) for x <= 0 (or NaN), as sigmoid's exp(-|y|), with the results below the
        normal range (x < EXP_NORMAL_BELOW) flushed to 0, as FTZ hardware would: a denormal
        sigmoid makes a denormal SiLU output (x * sigmoid(x), x in (-104, -91)), and every FMA
        of the next conv that reads one takes a microcode assist on Intel cores. A YOLO-shaped
        model with large activations (random weights, no calibrated batch norms) ran 57 ms
        against 18 ms without. The others are exp_normal's: 2^n in one factor."""
        zero = self.b.fcmp_ordered("<", x, self._fc(x, EXP_NORMAL_BELOW))
        exp = self._exp_normal(self.b.select(zero, self._fc(x, 0.0), x))
        return self.b.select(zero, self._fc(x, 0.0), exp)

    def _exp_normal(self, x: ir.Value) -> ir.Value:
        """exp(x) for x known to give a normal float (-87 < x < 88): no clamps, and 2^n in
        one factor, from the rounding sum's bits."""
        t, p = self._exp_reduced(x)
        scaled = self._scalef(p, t)
        return scaled if scaled is not None else self.b.fmul(p, self._pow2_of_rounded(t))

    def _exp_reduced(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(t, exp(r)) with t = n + ROUND_MAGIC, n = round(x / ln 2) and r = x - n ln 2: exp(x)
        is exp(r) * 2^n."""
        b = self.b
        t = self._fma(x, self._fc(x, LOG2E), self._fc(x, ROUND_MAGIC))
        n = b.fsub(t, self._fc(x, ROUND_MAGIC))
        r = self._fma(n, self._fc(x, -LN2_LO), self._fma(n, self._fc(x, -LN2_HI), x))
        return t, b.fadd(self._fma(b.fmul(r, r), self._horner(r, EXP_P), r), self._fc(x, 1.0))

    def _pow2_of_rounded(self, t: ir.Value, shift: int = 0) -> ir.Value:
        """2^(n + shift) for t = n + ROUND_MAGIC (n + shift in [-126, 127]): t's bits are
        bits(ROUND_MAGIC) + n, so (n + shift + 127) << 23 is t's bits << 23 plus a constant."""
        bias = ((127 + shift - _float_bits(ROUND_MAGIC)) << 23) & 0xFFFFFFFF
        return self._as_float(self.b.add(self.b.shl(self._as_int(t), self._ic(t, 23)),
                                          self._ic(t, bias - (1 << 32) if bias >= 1 << 31
                                                   else bias)))

    def _math_log(self, x: ir.Value) -> ir.Value:
        """log(x) = k ln 2 + log(m), m in [sqrt(1/2), sqrt(2)) from the float's bits."""
        b = self.b
        denormal = b.fcmp_ordered("<", x, self._fc(x, 1.1754943508222875e-38))
        xs = b.select(denormal, b.fmul(x, self._fc(x, 8388608.0)), x)
        bias = b.select(denormal, self._ic(x, -23), self._ic(x, 0))
        ix = b.sub(self._as_int(xs), self._ic(x, SQRT_HALF_BITS))
        k = b.add(b.ashr(ix, self._ic(x, 23)), bias)
        m = self._as_float(b.add(b.and_(ix, self._ic(x, 0x7FFFFF)), self._ic(x, SQRT_HALF_BITS)))
        f = b.fsub(m, self._fc(x, 1.0))
        kf = b.sitofp(k, x.type)
        f2 = b.fmul(f, f)
        tail = self._fma(b.fmul(f2, f), self._horner(f, LOG_P), b.fmul(kf, self._fc(x, LN2_LO)))
        tail = self._fma(f2, self._fc(x, -0.5), tail)
        out = self._fma(kf, self._fc(x, LN2_HI), b.fadd(f, tail))
        out = b.select(b.fcmp_ordered("==", x, self._fc(x, math.inf)), x, out)
        out = b.select(b.fcmp_ordered("==", x, self._fc(x, 0.0)), self._fc(x, -math.inf), out)
        # negative or NaN: NaN
        return b.select(b.fcmp_unordered("<", x, self._fc(x, 0.0)), self._fc(x, math.nan), out)

    def _math_log1p(self, y: ir.Value) -> ir.Value:
        """log(1 + y) for y > -1 without losing y's low bits: log(u) + (y - (u - 1)) / u with
        u = 1 + y rounded (the correction is u's rounding error, to first order)."""
        b = self.b
        u = b.fadd(y, self._fc(y, 1.0))
        c = b.fsub(y, b.fsub(u, self._fc(y, 1.0)))
        log_u = self._math_log(u)
        corrected = b.fadd(log_u, b.fdiv(c, u))
        # u = 0 (y = -1) or inf: c / u is 0 / 0 or inf / inf
        exact = b.or_(b.fcmp_ordered("==", u, self._fc(y, 0.0)),
                      b.fcmp_ordered("==", u, self._fc(y, math.inf)))
        return b.select(exact, log_u, corrected)

    def _math_tanh(self, x: ir.Value) -> ir.Value:
        """An odd polynomial for |x| < TANH_SMALL, else E / (E + 2) with
        E = expm1(2 min(|x|, TANH_ONE)); the sign from x.

        E = 2^n (expm1(r) + 1) - 1 = 2^n expm1(r) + (2^n - 1), n = round(2|x| / ln 2) >= 1,
        so the two terms never cancel much (at worst 2^2 expm1(-0.35) + 3). E is at most
        8e7: no clamps or two-factor scaling as in :meth:`_math_exp`, 2^n is the rounding
        sum's bits shifted into the exponent, and one float32 ln 2 reduces exactly enough
        (n <= 27; the error of E matters less as n grows). Below TANH_SMALL the roundings of
        E + 2 and of the quotient would add up to 2.3 ulp."""
        b = self.b
        a = self._abs(x)
        a = b.select(b.fcmp_ordered(">", a, self._fc(x, TANH_ONE)), self._fc(x, TANH_ONE), a)
        t = self._fma(a, self._fc(x, 2.0 * LOG2E), self._fc(x, ROUND_MAGIC))
        r = self._fma(b.fsub(t, self._fc(x, ROUND_MAGIC)), self._fc(x, -math.log(2)),
                      b.fadd(a, a))                             # 2a is exact
        r2 = b.fmul(r, r)
        expm1_r = self._fma(r2, self._estrin(r, r2, EXPM1_P), r)
        scale = self._pow2_of_rounded(t)
        big = self._fma(scale, expm1_r, b.fsub(scale, self._fc(x, 1.0)))
        large = b.fdiv(big, b.fadd(big, self._fc(x, 2.0)))
        a2 = b.fmul(a, a)
        small = self._fma(b.fmul(a2, a), self._horner(a2, TANH_P), a)
        # tanh(-0) = -0; NaN is not small and stays NaN (the clamp keeps it)
        return self._copysign(
            b.select(b.fcmp_ordered("<", a, self._fc(x, TANH_SMALL)), small, large), x)

    def _math_erf(self, x: ir.Value) -> ir.Value:
        """x + x P(x^2) for |x| < 1, else 1 - exp(Q(|x|)) (Q ~ log erfc), 1 beyond 3.9375."""
        b = self.b
        a = self._abs(x)
        # the polynomials in Estrin's form: shorter dependency chains (erf was latency bound)
        x2 = b.fmul(x, x)
        small = self._fma(x, self._estrin(x2, b.fmul(x2, x2), ERF_P), x)
        clamped = self._clamp(a, 1.0, ERF_ONE)
        # Q is in [-17.7, -1.8] there: exp's result is a normal float
        large = b.fsub(self._fc(x, 1.0), self._exp_normal(
            self._estrin(clamped, b.fmul(clamped, clamped), ERF_Q)))
        large = b.select(b.fcmp_ordered("<", a, self._fc(x, ERF_ONE)), large, self._fc(x, 1.0))
        large = self._copysign(large, x)
        # NaN takes the small branch, which keeps it
        return b.select(b.fcmp_ordered(">=", a, self._fc(x, 1.0)), large, small)

    def _math_sin(self, x: ir.Value) -> ir.Value:
        b = self.b     # sin(-0) = -0 (the reduction gives +0)
        return b.select(b.fcmp_ordered("==", x, self._fc(x, 0.0)), x, self._sin_cos(x, 0))

    def _math_cos(self, x: ir.Value) -> ir.Value:
        return self._sin_cos(x, 1)

    def _sin_cos(self, x: ir.Value, quadrant_shift: int) -> ir.Value:
        """sin(x) (shift 0) or cos(x) = sin(x + pi/2) (shift 1): q = round(x 2/pi),
        r = x - q pi/2 in float64, then +-sin(r) or +-cos(r) by q's low bits."""
        b = self.b
        xd = b.fpext(x, like(x.type, F64))
        q = b.call(self.gen.intrinsic("llvm.roundeven", xd.type, 1),
                   [b.fmul(xd, self._fc(xd, TWO_OVER_PI))])
        r = xd
        for part in PIO2 if self._has_fma() else PIO2_SHORT:
            r = self._fma(q, self._fc(xd, -part), r)
        # q mod 4 exactly, for any q (the quarter is a power of two: exact)
        quarter = b.call(self.gen.intrinsic("llvm.floor", xd.type, 1),
                         [b.fmul(q, self._fc(xd, 0.25))])
        quadrant = self._fma(quarter, self._fc(xd, -4.0), q)   # 0, 1, 2 or 3 (NaN: poison)
        quadrant = b.fptosi(b.select(b.fcmp_ordered("==", quadrant, quadrant), quadrant,
                                     self._fc(xd, 0.0)), like(x.type, I32))
        quadrant = b.add(quadrant, self._ic(quadrant, quadrant_shift))
        r2 = b.fmul(r, r)
        sin_r = self._fma(b.fmul(r2, r), self._horner(r2, SIN_P), r)
        cos_r = self._fma(r2, self._horner(r2, COS_P), self._fc(xd, -0.5))
        cos_r = self._fma(r2, cos_r, self._fc(xd, 1.0))
        odd = b.icmp_unsigned("!=", b.and_(quadrant, self._ic(quadrant, 1)),
                              self._ic(quadrant, 0))
        value = b.fptrunc(b.select(odd, cos_r, sin_r), x.type)
        sign = b.shl(b.and_(quadrant, self._ic(quadrant, 2)), self._ic(quadrant, 30))
        value = self._as_float(b.xor(self._as_int(value), sign))
        # beyond the accurate range the reduction can leave |r| large: stay within [-1, 1]
        return self._clamp(value, -1.0, 1.0)

    def pow_by_constant(self, x: ir.Value, y: float) -> ir.Value:
        """pow(x, y) for a finite constant y: 2^(y log2|x|) in float64 (log2 through the
        atanh series, 2^t through a Taylor series and the exponent bits), rounded once to
        float32; the sign from y's parity, NaN for x < 0 and a fractional y."""
        b = self.b
        a = b.fpext(self._abs(x), like(x.type, F64))
        sqrt_half = 0x3FE6A09E667F3BCD
        ix = b.sub(self._as_int(a), self._ic(a, sqrt_half, 64))
        k = b.sitofp(b.trunc(b.ashr(ix, self._ic(a, 52, 64)), like(x.type, I32)), a.type)
        m = self._as_float(b.add(b.and_(ix, self._ic(a, (1 << 52) - 1, 64)),
                                 self._ic(a, sqrt_half, 64)))
        f = b.fsub(m, self._fc(a, 1.0))
        s = b.fdiv(f, b.fadd(f, self._fc(a, 2.0)))
        s2 = b.fmul(s, s)
        atanh = self._fma(b.fmul(s, s2), self._horner(s2, ATANH_P), s)     # log(m) / 2
        log2 = self._fma(atanh, self._fc(a, 2.0 * LOG2E), k)
        log2 = b.select(b.fcmp_ordered("==", a, self._fc(a, 0.0)), self._fc(a, -math.inf), log2)
        log2 = b.select(b.fcmp_ordered("==", a, self._fc(a, math.inf)), a, log2)
        t = self._clamp(b.fmul(log2, self._fc(a, y)), -160.0, 130.0)
        n = b.call(self.gen.intrinsic("llvm.roundeven", a.type, 1), [t])
        p = self._horner(b.fmul(b.fsub(t, n), self._fc(a, math.log(2))), EXP_TAYLOR)
        ni = b.fptosi(b.select(b.fcmp_ordered("==", n, n), n, self._fc(a, 0.0)),
                      like(x.type, I32))
        scale = b.shl(b.sext(b.add(ni, self._ic(x, 1023)), like(x.type, I64)),
                      self._ic(a, 52, 64))
        out = b.fptrunc(b.fmul(p, self._as_float(scale)), x.type)
        if y == math.floor(y) and abs(y) < 2 ** 24 and int(y) % 2:
            out = self._copysign(out, x)
        elif y != math.floor(y):
            negative = b.and_(b.fcmp_ordered("<", x, self._fc(x, 0.0)),
                              b.fcmp_ordered(">", x, self._fc(x, -math.inf)))
            out = b.select(negative, self._fc(x, math.nan), out)     # pow(-inf, y) is not
        return b.select(b.fcmp_unordered("uno", x, x), x, out)

"""Fit the float32 polynomial coefficients of tensorc/codegen/llvm/vector_math.py.

    .venv/bin/python tools/fit_math_polynomials.py      # prints each table and its error

Each fit minimizes the largest weighted error of ``base(t) + sum c_k basis_k(t)`` against the
function on Chebyshev nodes: weighted least squares, reweighted by the error (Lawson's
iteration toward equal ripple). The coefficients are rounded to float32 one at a time, lowest
order first, refitting the rest after each rounding, so the rounding of a large leading
coefficient is absorbed by the others. Needs scipy (erf, erfc), which tensorc itself does not.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import erf, erfc


def fit(fn, base, low: float, high: float, basis, weight, nodes: int = 6000,
        iterations: int = 40) -> tuple[list[float], float]:
    """float32 coefficients c minimizing max |(base + sum c_k basis_k - fn) * weight| on
    [low, high]; returns them and log2 of that maximum."""
    t = np.cos(np.linspace(0, np.pi, nodes)) * (high - low) / 2 + (low + high) / 2
    t = t[t != 0]
    target = fn(t) - base(t)
    columns = np.stack([f(t) for f in basis], 1)
    w_scale = weight(t)
    fixed: list[float] = []
    for k in range(len(basis)):
        rest = target - (columns[:, :k] @ np.array(fixed) if k else 0)
        w = np.ones(len(t))
        for _ in range(iterations):
            sqrt_w = np.sqrt(w) * w_scale
            c, *_ = np.linalg.lstsq(columns[:, k:] * sqrt_w[:, None], rest * sqrt_w, rcond=None)
            err = np.abs(columns[:, k:] @ c - rest) * w_scale
            w = w * err
            w /= w.sum()
        fixed.append(float(np.float32(c[0])))
    worst = np.max(np.abs(columns @ np.array(fixed) - target) * w_scale)
    return fixed, float(np.log2(worst))


def powers(first: int, step: int, count: int):
    return [lambda t, k=k: t ** (first + step * k) for k in range(count)]


def main() -> None:
    half_ln2 = math.log(2) / 2
    tables = {
        # exp(r) = 1 + r + r^2 P(r), relative error
        "EXP_P": fit(np.exp, lambda r: 1 + r, -half_ln2, half_ln2, powers(2, 1, 5),
                     lambda r: 1 / np.exp(r)),
        # log(1 + f) = f - f^2/2 + f^3 P(f), relative error
        "LOG_P": fit(np.log1p, lambda f: f - f * f / 2, math.sqrt(0.5) - 1, math.sqrt(2) - 1,
                     powers(3, 1, 8), lambda f: 1 / np.abs(np.log1p(f))),
        # expm1(r) = r + r^2 P(r), relative error (a little beyond the reduced range)
        "EXPM1_P": fit(np.expm1, lambda r: r, -half_ln2 - 0.001, half_ln2 + 0.001,
                       powers(2, 1, 5), lambda r: 1 / np.abs(np.expm1(r))),
        # tanh(x) = x + x^3 P(x^2) on [0, 0.3], relative error
        "TANH_P": fit(np.tanh, lambda x: x, 1e-5, 0.3, powers(3, 2, 3),
                      lambda x: 1 / np.tanh(x)),
        # erf(x) = x + x P(x^2) on [0, 1], relative error
        "ERF_P": fit(erf, lambda x: x, 1e-5, 1.0, powers(1, 2, 7), lambda x: 1 / erf(x)),
        # log(erfc(x)) = Q(x) on [1, 3.9375], error of erf = 1 - erfc
        "ERF_Q": fit(lambda x: np.log(erfc(x)), lambda x: 0 * x, 1.0, 3.92, powers(0, 1, 8),
                     erfc),
    }
    for name, (coefficients, log2_error) in tables.items():
        print(f"{name} = {tuple(coefficients)}  # error 2^{log2_error:.1f}")


if __name__ == "__main__":
    main()

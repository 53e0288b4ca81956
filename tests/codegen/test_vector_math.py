"""float32 math compiles to inline vector code (codegen/llvm/vector_math.py): exp, log, tanh, erf,
sin, cos, sigmoid, softplus and pow by any constant are within 2 ulp of float64 numpy over the
whole float32 range (edges included; sigmoid's and softplus's denormal results flush to 0),
for every vector width, with no libm call left in the generated assembly."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from onnx import helper

from helpers import make_model, tensor_info
from helpers_kernels import run_func, run_kernel
from test_llvm import elementwise_func
import tensorc
from tensorc.runtime.kernel import build_kernel
from tensorc.codegen.llvm.objects import emit_assembly
from tensorc.compiler.llvm import compile_graph
from tensorc.frontend.onnx import import_onnx
from tensorc.ir import expr as E
from tensorc.ops.activations import softplus_expr
from tensorc.ops.elementwise import sigmoid_expr
from tensorc.passes.loop import optimize
from tensorc.target import Target

try:
    from scipy.special import erf as _erf      # not a dependency: faster when installed
except ImportError:                              # pragma: no cover
    _erf = np.vectorize(math.erf, otypes=[np.float64])

MAX_ULP = 2.0
SIN_COS_RANGE = 2.0 ** 50     # Cody-Waite reduction: accurate below, bounded beyond


def _sweep_points(n: int = 1_000_000, seed: int = 7) -> np.ndarray:
    """Log-spaced magnitudes of both signs from the smallest denormal to FLT_MAX, random bit
    patterns (every exponent, NaNs included) and the special values."""
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38,
                        1.1754944e-38, 3.4028235e38, -3.4028235e38, 88.72283, 88.72284, 89.0,
                        -87.33654, -103.97207, -103.97208, -104.0, 1.0, -1.0, 0.5, 2.0,
                        3.9375, -3.9375, 0.9, -0.9], np.float32)
    count = (n - len(special)) // 3
    magnitudes = np.logspace(np.log10(1.4e-45), np.log10(3.4e38), count)
    bits = rng.integers(0, 2 ** 32, n - len(special) - 2 * count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        logspaced = magnitudes.astype(np.float32)
    return np.concatenate([special, logspaced, -logspaced,
                           bits.astype(np.uint32).view(np.float32)])


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the last place of float32 at ``exact`` (float64); 0 where
    ``got`` is ``exact`` rounded to float32 (inf and NaN included), inf for a wrong NaN or
    infinity."""
    with np.errstate(all="ignore"):
        rounded = exact.astype(np.float32)
        same = (got == rounded) | (np.isnan(got) & np.isnan(exact))
        _, exponent = np.frexp(np.abs(exact))
        ulp = np.ldexp(1.0, np.maximum(exponent - 24, -149))
        err = np.abs(got.astype(np.float64) - exact) / ulp
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(err) | (~same & ~np.isfinite(got)), np.inf, err)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _call(name):
    return lambda x: E.Call(name, [x], x.dtype)


def _pow(c):
    return lambda x: E.call("pow", x, E.Const(c, x.dtype))


# name -> (expression of x, float64 reference)
FUNCTIONS = {
    "exp": (_call("exp"), np.exp),
    "log": (_call("log"), np.log),
    "tanh": (_call("tanh"), np.tanh),
    "erf": (_call("erf"), _erf),
    "sin": (_call("sin"), np.sin),
    "cos": (_call("cos"), np.cos),
    "sigmoid": (sigmoid_expr, _sigmoid),
    "softplus": (softplus_expr, _softplus),
    "pow2": (_pow(2.0), lambda x: x ** 2),
    "pow3": (_pow(3.0), lambda x: x ** 3),
    "pow0.5": (_pow(0.5), lambda x: np.power(x, 0.5)),
    "pow-0.5": (_pow(-0.5), lambda x: np.power(x, -0.5)),
    "pow-1": (_pow(-1.0), lambda x: np.power(x, -1.0)),
    # any other constant: 2^(y log2|x|) in float64
    "pow1.7": (_pow(1.7), lambda x: np.power(x, 1.7)),
    "pow-2.5": (_pow(-2.5), lambda x: np.power(x, -2.5)),
    "pow5": (_pow(5.0), lambda x: np.power(x, 5.0)),
    "pow-3": (_pow(-3.0), lambda x: np.power(x, -3.0)),
    "pow0.1": (_pow(0.1), lambda x: np.power(x, 0.1)),
}


# functions whose denormal results are flushed to 0
FLUSHED = ("sigmoid", "softplus")


@pytest.fixture(scope="module")
def sweep():
    return _sweep_points()


def _max_ulp_report(name: str, x: np.ndarray, got: np.ndarray, exact: np.ndarray,
                    lanes) -> tuple[float, str]:
    err = ulp_error(got, exact)
    if name in FLUSHED:
        # exp(-|x|) inside flushes its results below the normal range (they cost microcode
        # assists wherever they are read): a result that would be a denormal may be 0
        err = np.where((got == 0) & (np.abs(exact) < np.finfo(np.float32).tiny), 0.0, err)
    if name in ("sin", "cos"):
        err = np.where(np.abs(x) < SIN_COS_RANGE, err, 0.0)
    k = int(np.argmax(err))
    return float(err[k]), (f"{name} (lanes {lanes}): max error {err[k]:.3g} ulp at x = "
                           f"{x[k]!r} (got {got[k]!r}, want {exact[k]!r}); "
                           f"{int((err > MAX_ULP).sum())} points over {MAX_ULP} ulp")


@pytest.mark.parametrize("lanes", [8, 16, 4, None])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_float32_math_within_2_ulp_over_the_whole_range(name, lanes, sweep):
    body, reference = FUNCTIONS[name]
    x = sweep if lanes == 8 else sweep[::10]        # every width; the full sweep at 8 lanes
    (got,) = run_func(elementwise_func(["float32"], body, n=len(x), lanes=lanes), [x])
    with np.errstate(all="ignore"):
        exact = reference(x.astype(np.float64))
    worst, report = _max_ulp_report(name, x, got, exact, lanes)
    assert worst <= MAX_ULP, report
    if name in ("sin", "cos"):      # beyond the accurate range: bounded, NaN only for inf
        far = np.isfinite(x) & (np.abs(x) >= SIN_COS_RANGE)
        assert np.all(np.abs(got[far]) <= 1.0)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_without_fma_instructions(name, sweep):
    """A target without FMA (SSE4.2, 4 lanes) multiplies and adds separately: sin and cos then
    reduce with shorter pi/2 parts, exact to |x| < 2^29."""
    target = Target.from_string("llvm -mcpu=x86-64-v2")
    assert "+fma" not in target.features.split(",")
    body, reference = FUNCTIONS[name]
    x = sweep[::10]
    if name in ("sin", "cos"):
        x = x[~(np.abs(x) >= 2.0 ** 29)]
    func = optimize(elementwise_func(["float32"], body, n=len(x), lanes=4))
    (got,) = run_kernel(build_kernel(func, target), [x])
    with np.errstate(all="ignore"):
        exact = reference(x.astype(np.float64))
    worst, report = _max_ulp_report(name, x, got, exact, "4, no fma")
    assert worst <= MAX_ULP, report


ONNX_CASES = {
    "Exp": ("exp", {}), "Log": ("log", {}), "Tanh": ("tanh", {}), "Erf": ("erf", {}),
    "Sin": ("sin", {}), "Cos": ("cos", {}), "Sigmoid": ("sigmoid", {}),
    "Softplus": ("softplus", {}),
}


@pytest.mark.parametrize("op", list(ONNX_CASES))
def test_one_op_onnx_model_within_2_ulp(op, sweep):
    """The same sweep through the whole pipeline: import, fuse, schedule, vectorize."""
    name, attrs = ONNX_CASES[op]
    x = sweep.reshape(1, -1)[:, : (len(sweep) // 1024) * 1024].reshape(-1, 1024)
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)],
                       [tensor_info("x", "float32", x.shape)], ["y"])
    got = tensorc.compile(model).run({"x": x})["y"].ravel()
    with np.errstate(all="ignore"):
        exact = FUNCTIONS[name][1](x.ravel().astype(np.float64))
    worst, report = _max_ulp_report(name, x.ravel(), got, exact, "scheduled")
    assert worst <= MAX_ULP, report


@pytest.mark.parametrize("op", ["Sigmoid", "SiLU", "Softplus"])
def test_very_negative_inputs_give_no_denormals(op):
    """Denormal outputs cost a microcode assist in every op that reads them (a conv after a
    SiLU ran 3x slower): sigmoid and softplus of x below -87.3 (where exp(x) is a denormal)
    are 0, and so is x * sigmoid(x); above, the results are normal floats, within 2 ulp."""
    x = np.linspace(-110.0, -80.0, 4096, dtype=np.float32).reshape(4, 1024)
    nodes = {"Sigmoid": [helper.make_node("Sigmoid", ["x"], ["y"])],
             "Softplus": [helper.make_node("Softplus", ["x"], ["y"])],
             "SiLU": [helper.make_node("Sigmoid", ["x"], ["s"]),
                      helper.make_node("Mul", ["x", "s"], ["y"])]}[op]
    model = make_model(nodes, [tensor_info("x", "float32", x.shape)], ["y"])
    got = tensorc.compile(model).run({"x": x})["y"]
    tiny = np.finfo(np.float32).tiny
    assert np.all((got == 0) | (np.abs(got) >= tiny)), got[(got != 0) & (np.abs(got) < tiny)]
    with np.errstate(all="ignore"):
        wide = x.astype(np.float64)
        exact = {"Sigmoid": _sigmoid(wide), "Softplus": _softplus(wide),
                 "SiLU": wide * _sigmoid(wide)}[op]
    normal = _sigmoid(wide) >= 2 * tiny      # exp(x) a normal float: nothing flushed
    assert normal.any() and np.all(got[normal] != 0)
    assert ulp_error(got[normal], exact[normal]).max() <= MAX_ULP


def test_pow_by_a_constant_keeps_pows_edges():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 4.0, -4.0, 1e-45], np.float32)
    for c in (0.0, 1.0, 2.0, 3.0, 4.0, -1.0, 0.5, -0.5, 1.7, -2.5, 5.0, -3.0, 6.0, 1e9):
        (got,) = run_func(elementwise_func(["float32"], _pow(c), n=len(x), lanes=8), [x])
        with np.errstate(all="ignore"):     # correctly rounded (numpy's own float32 pow
            want = np.power(x.astype(np.float64), c).astype(np.float32)  # may be 1 ulp off)
        np.testing.assert_array_equal(got, want, err_msg=f"pow(x, {c})")


# ---------------------------------------------------------------------------------------------
# generated code

LIBM = {f"{prefix}{name}{suffix}" for name in (
    "exp", "exp2", "expm1", "log", "log1p", "log2", "tanh", "erf", "sin", "cos", "sincos",
    "pow", "sqrt") for prefix in ("", "__") for suffix in ("", "f", "f_finite", "_finite")}


def called_functions(assembly: str) -> set[str]:
    """The names every call instruction of x86 assembly (AT&T) calls."""
    return {m.group(1) for m in re.finditer(r"^\s*call[lq]?\s+\*?([\w.$]+)", assembly, re.M)}


def _model_with_every_function(shape=(4, 256)) -> object:
    nodes = [helper.make_node(op, ["x"], [f"y_{op}"]) for op in ONNX_CASES]
    nodes.append(helper.make_node("Gelu", ["x"], ["y_gelu"]))
    nodes.append(helper.make_node("Mul", ["x", "y_Sigmoid"], ["y_silu"]))
    outputs = [f"y_{op}" for op in ONNX_CASES] + ["y_gelu", "y_silu"]
    inits = {}
    for k, c in enumerate((2.0, 3.0, 0.5, -1.0, -0.5, 1.7)):
        inits[f"c{k}"] = np.array(c, np.float32)
        nodes.append(helper.make_node("Pow", ["x", f"c{k}"], [f"y_pow{k}"]))
        outputs.append(f"y_pow{k}")
    return make_model(nodes, [tensor_info("x", "float32", shape)], outputs, opset=20,
                      initializers=inits)


def test_no_libm_call_in_the_generated_assembly():
    target = Target.host()
    compiled = compile_graph(import_onnx(_model_with_every_function()), target)
    assembly = emit_assembly(compiled.llvm_ir, target)
    calls = called_functions(assembly)
    assert called_functions("\tcallq\texpf@PLT\n  call tanhf\n") == {"expf", "tanhf"}
    assert not calls & LIBM, f"libm calls left in the kernels: {sorted(calls & LIBM)}"
    # and the math really is vector code
    if "+avx" in target.features.split(","):
        assert re.search(r"\bvfmadd\w+ps\s+%ymm|\bvmulps\s+%[yz]mm", assembly)


def test_code_reaches_its_constants_by_absolute_address():
    """MCJIT maps code, constants and globals wherever mmap puts them, possibly more than
    2 GiB apart in a long-lived process; a 32-bit PC-relative reference (``x(%rip)``) to a
    constant pool would then be out of range and LLVM would abort the process while linking.
    Static relocations with the large code model address them with 64-bit constants
    (``movabs``), with no GOT either."""
    target = Target.host()
    compiled = compile_graph(import_onnx(_model_with_every_function()), target)
    assembly = emit_assembly(compiled.llvm_ir, target)
    assert re.search(r"movabsq\s+\$\.LCPI", assembly), "no constant pool read at all"
    relative = sorted(set(re.findall(r"[\w.$]+\(%rip\)", assembly)))
    assert not relative, f"PC-relative references: {relative[:10]}"


@pytest.mark.parametrize("cpu, scalef", [("znver4", True), ("znver3", False)])
def test_exp_scales_by_2_to_the_n_in_one_instruction_with_avx512(cpu, scalef):
    """exp's result p * 2^n is one ``vscalefps`` where the target has AVX-512 (rounded once,
    denormals and overflow included); without, 2^n is built from the float's bits. The
    10^6-point sweeps above check the numbers on the host's path."""
    target = Target.from_string(f"llvm -mcpu={cpu}")
    model = make_model([helper.make_node("Exp", ["x"], ["y"])],
                       [tensor_info("x", "float32", (4, 256))], ["y"])
    assembly = emit_assembly(compile_graph(import_onnx(model), target).llvm_ir, target)
    assert bool(re.search(r"\bvscalefps\b", assembly)) == scalef

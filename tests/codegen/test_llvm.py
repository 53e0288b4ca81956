"""LLVM code generation: vector registers, parallel loops on real threads, arithmetic of every
dtype against numpy, guarded and non-contiguous vector loops, kernel argument checks."""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helpers_kernels import compile_func, run_func
from tensorc.runtime.kernel import build_kernel, llvm_ir
from tensorc.codegen.llvm.objects import emit_assembly
from tensorc.errors import InputError, TensorcError
from tensorc.ir.expr import Binary, Call, Compare, Logical, cast, maximum, select
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, placeholder, reduce_axis, sum_
from tensorc.passes.loop import optimize
from tensorc.target import Target

RNG = np.random.default_rng(3)
REPO = Path(__file__).resolve().parents[2]


def elementwise_func(in_dtypes, body, n: int = 37, lanes: int | None = None, name="k"):
    """out[i] = body(x0[i], x1[i], ...) over n elements; with ``lanes``, the loop is split by
    ``lanes`` and its inner loop vectorized (37 is no multiple of any lane count: guarded)."""
    xs = [placeholder((n,), dt, name=f"x{k}") for k, dt in enumerate(in_dtypes)]
    out = compute((n,), lambda i: body(*[x[i] for x in xs]), name="out")
    s = create_schedule(out)
    if lanes:
        outer, inner = s[out].split(s[out].op_axis[0], lanes)
        s[out].vectorize(inner)
    return lower(s, [*xs, out], name)


def run_elementwise(in_dtypes, body, inputs, lanes=None) -> np.ndarray:
    func = elementwise_func(in_dtypes, body, len(inputs[0]), lanes)
    if lanes:
        # the loop really is a vector loop (an odd width runs on the next power of two, the
        # extra lanes masked, unless integer division could trap in them)
        width = min(lanes, len(inputs[0]))
        assert re.search(rf"<({width}|{1 << (width - 1).bit_length()}) x \w+>",
                         llvm_ir(optimize(func)))
    (out,) = run_func(func, inputs)
    return out


# ---------------------------------------------------------------------------------------------
# (a) vector registers

def test_vectorized_float32_loop_uses_the_widest_vector_registers():
    A = placeholder((64, 64), name="A")
    B = placeholder((64, 64), name="B")
    C = compute((64, 64), lambda i, j: A[i, j] * B[i, j] + 1.0, name="C")
    s = create_schedule(C)
    outer, inner = s[C].split(s[C].op_axis[1], 16)
    s[C].vectorize(inner)
    func = optimize(lower(s, [A, B, C], "vmul"))
    target = Target.host()
    assembly = emit_assembly(llvm_ir(func), target)
    registers = set(re.findall(r"%([xyz]mm)\d+", assembly))
    if "+avx512f" in target.features.split(","):
        assert "zmm" in registers, registers
    elif "+avx" in target.features.split(","):
        assert "ymm" in registers, registers
    else:
        pytest.skip(f"host {target.mcpu} has neither AVX nor AVX-512")


# ---------------------------------------------------------------------------------------------
# (b) parallel loops run on several threads

THREAD_PROBE = """
import os
import numpy as np
from tensorc.runtime.kernel import build_kernel
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, placeholder, reduce_axis, sum_
from tensorc.passes.loop import optimize

A = placeholder((256, 256), name="A")
B = placeholder((256, 256), name="B")
k = reduce_axis(256, "k")
C = compute((256, 256), lambda i, j: sum_(A[i, k] * B[k, j], axis=k), name="C")
s = create_schedule(C)
s[C].parallel(s[C].op_axis[0])
kernel = build_kernel(optimize(lower(s, [A, B, C], "mm")))
a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
c = np.zeros((256, 256), np.float32)
threads = lambda: len(os.listdir("/proc/self/task"))
before = threads()
kernel(a, a, c, num_threads=2)
after_first = threads()
kernel(a, a, c, num_threads=2)
after_second = threads()
assert np.allclose(c, a @ a, rtol=1e-4), "wrong result"
print(before, after_first, after_second)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_parallel_loop_runs_on_pool_worker_threads():
    # A fresh process: this one may already hold the thread pool from earlier tests.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env["PYTHONPATH"] = str(REPO)
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(THREAD_PROBE)], env=env,
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    before, after_first, after_second = map(int, probe.stdout.split())
    # tensorc_parallel runs the loop on the calling thread plus a worker that the pool keeps
    # for the next parallel region
    assert after_first > before, (before, after_first)
    assert after_second == after_first, (after_first, after_second)


def test_parallel_loop_is_outlined_for_the_thread_pool():
    A = placeholder((37, 19), name="A")
    B = compute((37, 19), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    s[B].parallel(s[B].op_axis[0])
    text = llvm_ir(optimize(lower(s, [A, B], "par")))
    assert re.search(r'call void @"tensorc_parallel"\(.*@"par\.par1", ptr %"par\.par1\.closure"',
                     text)


def test_parallel_loop_is_correct_for_any_thread_count():
    A = placeholder((37, 19), name="A")
    B = compute((37, 19), lambda i, j: A[i, j] * 3.0 - 1.0, name="B")
    s = create_schedule(B)
    s[B].parallel(s[B].op_axis[0])
    kernel = compile_func(lower(s, [A, B], "par"))
    a = RNG.random((37, 19), dtype=np.float32)
    for threads in (0, 1, 2, 3, 8, 64):            # more threads than iterations too
        b = np.full((37, 19), np.nan, np.float32)
        kernel(a, b, num_threads=threads)
        np.testing.assert_allclose(b, a * 3 - 1, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# (c) arithmetic of every dtype against numpy, on scalar and vector loops

LANES = [None, 8, 16]


def _ints(dtype, n=37, low=-50, high=50):
    return RNG.integers(low, high, size=n).astype(dtype)


def _nonzero_ints(dtype, n=37):
    values = RNG.integers(1, 8, size=n) * RNG.choice([-1, 1], size=n)
    return values.astype(dtype)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op, reference", [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
    ("floordiv", np.floor_divide), ("floormod", np.mod),
    ("truncdiv", lambda a, b: np.trunc(a / b).astype(a.dtype)), ("truncmod", np.fmod),
    ("min", np.minimum), ("max", np.maximum),
])
def test_integer_arithmetic(op, reference, dtype, lanes):
    a, b = _ints(dtype), _nonzero_ints(dtype)
    out = run_elementwise([dtype, dtype], lambda x, y: Binary(op, x, y), [a, b], lanes)
    np.testing.assert_array_equal(out, reference(a, b))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("divisor", [3, -3, 8])
def test_integer_floordiv_floormod_by_constants_of_negative_numbers(divisor, lanes):
    a = np.arange(-18, 19).astype("int32")
    out = run_elementwise(["int32"], lambda x: x // divisor * 100 + x % divisor, [a], lanes)
    np.testing.assert_array_equal(out, a // divisor * 100 + a % divisor)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op, reference", [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
    ("min", np.minimum), ("max", np.maximum),
    ("floordiv", np.floor_divide), ("floormod", np.mod), ("pow", np.power),
])
def test_float_arithmetic(op, reference, dtype, lanes):
    a = RNG.uniform(0.1, 4, 37).astype(dtype) if op == "pow" else \
        RNG.uniform(-9, 9, 37).astype(dtype)
    b = RNG.uniform(0.5, 3, 37).astype(dtype) * RNG.choice([-1, 1], 37).astype(dtype)
    if op == "pow":
        b = np.abs(b)
    out = run_elementwise([dtype, dtype], lambda x, y: Binary(op, x, y), [a, b], lanes)
    np.testing.assert_allclose(out, reference(a, b), rtol=1e-6 if dtype == "float32" else 1e-14)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("op, reference", [("min", np.minimum), ("max", np.maximum)])
def test_float_min_max_propagate_nan_like_numpy(op, reference, lanes):
    a = np.array([1.0, np.nan, 3.0, np.nan] * 9 + [0.0], np.float32)
    b = np.array([np.nan, 2.0, 1.0, np.nan] * 9 + [-1.0], np.float32)
    out = run_elementwise(["float32", "float32"], lambda x, y: Binary(op, x, y), [a, b], lanes)
    np.testing.assert_array_equal(out, reference(a, b))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("op, reference", [
    ("lt", np.less), ("le", np.less_equal), ("eq", np.equal), ("ne", np.not_equal),
    ("gt", np.greater), ("ge", np.greater_equal),
])
def test_comparisons_and_select(op, reference, dtype, lanes):
    a = (RNG.integers(-3, 4, 37)).astype(dtype)
    b = (RNG.integers(-3, 4, 37)).astype(dtype)
    out = run_elementwise([dtype, dtype], lambda x, y: select(Compare(op, x, y), x, y * 2),
                          [a, b], lanes)
    np.testing.assert_array_equal(out, np.where(reference(a, b), a, b * 2))


@pytest.mark.parametrize("lanes", LANES)
def test_comparison_stored_as_bool(lanes):
    a = RNG.uniform(-1, 1, 37).astype(np.float32)
    b = RNG.uniform(-1, 1, 37).astype(np.float32)
    out = run_elementwise(["float32", "float32"], lambda x, y: x < y, [a, b], lanes)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, a < b)
    # a bool input, read back and selected on
    out = run_elementwise(["bool", "int32"], lambda c, y: select(c, y, y * -1), [a < b,
                          np.arange(37, dtype=np.int32)], lanes)
    np.testing.assert_array_equal(out, np.where(a < b, np.arange(37), -np.arange(37)))


@pytest.mark.parametrize("lanes", LANES)
def test_logical_and_or_not(lanes):
    def body(x):
        return select(Logical("or", Logical("and", x > -5, x < 5), Logical("not", x < 10)),
                      x, x * 0)

    a = np.arange(-18, 19).astype(np.int32)
    out = run_elementwise(["int32"], body, [a], lanes)
    np.testing.assert_array_equal(out, np.where(((a > -5) & (a < 5)) | (a >= 10), a, 0))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("src, dst, values", [
    ("float32", "int32", [-2.7, -2.5, -0.5, 0.0, 0.5, 1.9, 100.2]),       # toward zero
    ("float64", "int64", [-2.7, -1e12 - 0.5, 3.99, 7.0]),
    ("int32", "float32", [-7, 0, 16777217, 3]),
    ("int64", "float64", [-(2**40) - 1, 0, 5]),
    ("float32", "float64", [0.1, -3.5, 1e30]),
    ("float64", "float32", [0.1, -3.5, 1e30, 1e-50]),
    ("int64", "int32", [2**31 + 5, -(2**31) - 1, -4, 7]),                # wraps
    ("int32", "int64", [-(2**31), -1, 0, 2**31 - 1]),                    # sign-extends
    ("float32", "bool", [0.0, -0.0, 0.5, -2.0]),
    ("int32", "bool", [0, 1, -1, 7]),
    ("bool", "float32", [True, False, True, True]),
])
def test_casts(src, dst, values, lanes):
    a = np.resize(np.array(values, dtype=src), 37)
    out = run_elementwise([src], lambda x: cast(dst, x), [a], lanes)
    np.testing.assert_array_equal(out, a.astype(dst))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, reference, low, high", [
    ("exp", np.exp, -10, 10), ("log", np.log, 0.01, 100), ("sqrt", np.sqrt, 0, 100),
    ("tanh", np.tanh, -5, 5), ("erf", np.vectorize(math.erf), -3, 3),
    ("floor", np.floor, -5, 5), ("ceil", np.ceil, -5, 5), ("trunc", np.trunc, -5, 5),
    ("fabs", np.abs, -5, 5), ("sin", np.sin, -4, 4), ("cos", np.cos, -4, 4),
])
def test_math_intrinsics(name, reference, low, high, dtype, lanes):
    a = RNG.uniform(low, high, 37).astype(dtype)
    out = run_elementwise([dtype], lambda x: Call(name, [x], dtype), [a], lanes)
    want = reference(a.astype(np.float64)).astype(dtype)
    if dtype == "float32":
        np.testing.assert_allclose(out, want, rtol=4e-7, atol=1e-7)
    else:
        np.testing.assert_allclose(out, want, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_is_half_to_even(dtype, lanes):
    a = np.resize(np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4, -2.6, 0.49999997],
                           dtype=dtype), 37)
    out = run_elementwise([dtype], lambda x: Call("round", [x], dtype), [a], lanes)
    np.testing.assert_array_equal(out, np.round(a))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("name, reference", [("isnan", np.isnan), ("isinf", np.isinf)])
def test_isnan_isinf(name, reference, lanes):
    a = np.resize(np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32), 37)
    out = run_elementwise(["float32"], lambda x: select(Call(name, [x], "bool"), 1.0, 0.0),
                          [a], lanes)
    np.testing.assert_array_equal(out, reference(a).astype(np.float32))


def test_mixed_dtype_expression():
    # int64 index arithmetic feeding float math: out[i] = float32(i // 3) * x[i] + float32(x[i] > 0)
    x = placeholder((37,), "float32", name="x")
    out = compute((37,), lambda i: cast("float32", i // 3) * x[i]
                  + cast("float32", x[i] > 0.0), name="out")
    s = create_schedule(out)
    outer, inner = s[out].split(s[out].op_axis[0], 16)
    s[out].vectorize(inner)
    a = RNG.uniform(-1, 1, 37).astype(np.float32)
    (got,) = run_func(lower(s, [x, out], "mixed"), [a])
    i = np.arange(37)
    np.testing.assert_allclose(got, (i // 3).astype(np.float32) * a + (a > 0), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# (d) guarded vector loops

@pytest.mark.parametrize("n, lanes", [(37, 16), (37, 8), (5, 16), (100, 64), (17, 4)])
def test_vector_loop_with_a_guard(n, lanes):
    a = RNG.uniform(-1, 1, n).astype(np.float32)
    b = RNG.uniform(-1, 1, n).astype(np.float32)
    out = run_elementwise(["float32", "float32"], lambda x, y: x * y + maximum(x, y), [a, b],
                          lanes)
    # (LLVM may fuse the multiply-add: one rounding fewer than numpy)
    np.testing.assert_allclose(out, a * b + np.maximum(a, b), rtol=1e-6, atol=1e-6)


def test_vector_loop_of_an_odd_extent():
    # the whole loop is one vector of 37 lanes: it runs on 64 lanes, the last 27 masked off
    # (odd-width vectors legalize into scalar shuffles), its masked accesses issued a register
    # at a time
    xs = placeholder((5, 37), name="x")
    out = compute((5, 37), lambda i, j: xs[i, j] * 2.0 + 1.0, name="out")
    s = create_schedule(out)
    s[out].vectorize(s[out].op_axis[1])
    func = lower(s, [xs, out], "odd")
    ir_text = llvm_ir(optimize(func))
    assert "<37 x float>" not in ir_text
    assert "<64 x float>" in ir_text
    lanes = Target.host().vector_lanes("float32")
    assert f"llvm.masked.load.v{lanes}f32" in ir_text
    assert f"llvm.masked.store.v{lanes}f32" in ir_text
    a = RNG.random((5, 37), dtype=np.float32)
    np.testing.assert_allclose(run_func(func, [a])[0], a * 2 + 1, rtol=1e-6)


def test_guarded_2d_tile_with_vector_inner_loop():
    A = placeholder((13, 29), name="A")
    B = placeholder((29,), name="B")
    C = compute((13, 29), lambda i, j: A[i, j] - B[j], name="C")
    s = create_schedule(C)
    i, j = s[C].op_axis
    s[C].tile(i, j, 4, 8)
    s[C].vectorize(s[C].leaf_vars[-1])
    s[C].parallel(s[C].leaf_vars[0])
    a, b = RNG.random((13, 29), dtype=np.float32), RNG.random(29, dtype=np.float32)
    (got,) = run_func(lower(s, [A, B, C], "tile"), [a, b])
    np.testing.assert_allclose(got, a - b, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# (e) non-contiguous accesses in vector loops

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("access, reference", [
    ("transpose", lambda a: a.T[:8, :8]),                 # stride 32: a gather
    ("stride2", lambda a: a[:8, 0:16:2]),
    ("stride3", lambda a: a[:8, 0:24:3]),
    ("stride4", lambda a: a[:8, 1:32:4]),                 # offset 1, stride 4
    ("reverse", lambda a: a[:8, ::-1][:, :8]),            # stride -1
    ("broadcast", lambda a: np.broadcast_to(a[:8, 5:6], (8, 8))),   # stride 0
])
def test_non_contiguous_vector_loads(access, reference, dtype):
    a = (np.arange(16 * 32).reshape(16, 32) * 3 - 700).astype(dtype)
    src = placeholder((16, 32), dtype, name="A")
    index = {
        "transpose": lambda i, j: src[j, i],
        "stride2": lambda i, j: src[i, j * 2],
        "stride3": lambda i, j: src[i, j * 3],
        "stride4": lambda i, j: src[i, j * 4 + 1],
        "reverse": lambda i, j: src[i, 31 - j],
        "broadcast": lambda i, j: src[i, 5],
    }[access]
    out = compute((8, 8), index, name="out")
    s = create_schedule(out)
    s[out].vectorize(s[out].op_axis[1])
    func = lower(s, [src, out], "gather")
    assert re.search(r"<8 x (float|double|i32|i64)>", llvm_ir(optimize(func)))
    (got,) = run_func(func, [a])
    np.testing.assert_array_equal(got, reference(a))


def test_strided_load_at_the_very_end_of_a_buffer():
    # the masked span of the last vector ends exactly at the buffer's last element
    src = placeholder((4, 31), name="A")
    out = compute((4, 16), lambda i, j: src[i, j * 2], name="out")
    s = create_schedule(out)
    s[out].vectorize(s[out].op_axis[1])
    a = RNG.random((4, 31), dtype=np.float32)
    (got,) = run_func(lower(s, [src, out], "tail"), [a])
    np.testing.assert_array_equal(got, a[:, ::2])


def test_transposed_vector_store():
    # out[j, i] = A[i, j] vectorized over j: contiguous loads, a strided store
    A = placeholder((8, 24), name="A")
    out = compute((24, 8), lambda j, i: A[i, j], name="out")
    s = create_schedule(out)
    j, i = s[out].op_axis
    s[out].reorder(i, j)
    jo, ji = s[out].split(j, 16)
    s[out].vectorize(ji)
    a = RNG.random((8, 24), dtype=np.float32)
    (got,) = run_func(lower(s, [A, out], "tstore"), [a])
    np.testing.assert_array_equal(got, a.T)


@pytest.mark.parametrize("width, length", [(16, 64), (16, 61), (7, 26), (2, 8)])
def test_interleaved_vector_store(width, length):
    # out[i, 4 v + u], four vectors (u unrolled) of ``width`` lanes (v): interleaved with
    # shuffles into whole vectors of consecutive elements, masked where the row ends early
    # or the width is odd, never scattered lane by lane
    A = placeholder((3, 4, width), name="A")
    out = compute((3, length), lambda i, x: A[i, x % 4, x // 4] * 2.0, name="out")
    s = create_schedule(out)
    i, x = s[out].op_axis
    xo, xi = s[out].split(x, 4)
    s[out].reorder(i, xi, xo)
    s[out].unroll(xi)
    s[out].vectorize(xo)
    func = lower(s, [A, out], "interleave")
    text = llvm_ir(optimize(func))
    assert "shufflevector" in text and "store float" not in text
    assert ("llvm.masked.store" in text) == (length % (4 * width) != 0 or width == 7)
    a = RNG.random((3, 4, width), dtype=np.float32)
    (got,) = run_func(func, [a])
    np.testing.assert_array_equal(got, (a.transpose(0, 2, 1).reshape(3, -1) * 2)[:, :length])


def test_non_affine_index_in_a_vector_loop():
    # a fused-and-vectorized loop reads through // and %: gathers, still correct
    A = placeholder((6, 5), name="A")
    B = placeholder((5,), name="B")
    C = compute((6, 5), lambda i, j: A[i, j] * B[j], name="C")
    s = create_schedule(C)
    fused = s[C].fuse(*s[C].op_axis)
    s[C].vectorize(fused)
    a, b = RNG.random((6, 5), dtype=np.float32), RNG.random(5, dtype=np.float32)
    (got,) = run_func(lower(s, [A, B, C], "fused"), [a, b])
    np.testing.assert_allclose(got, a * b, rtol=1e-6)


def test_vectorized_reduction_loop_is_correct():
    # vectorizing the reduction loop itself: every lane adds into the same element
    A = placeholder((5, 23), name="A")
    k = reduce_axis(23, "k")
    S = compute((5,), lambda i: sum_(A[i, k], axis=k), name="S")
    s = create_schedule(S)
    s[S].vectorize(s[S].reduce_axis[0])
    a = RNG.integers(-4, 5, (5, 23)).astype(np.float32)
    (got,) = run_func(lower(s, [A, S], "vsum"), [a])
    np.testing.assert_array_equal(got, a.sum(axis=1))


def test_a_loop_bound_to_a_gpu_thread_axis_is_refused():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] + 1.0, name="B")
    s = create_schedule(B)
    s[B].bind(s[B].op_axis[0], "threadIdx.x")
    with pytest.raises(TensorcError, match="loop i is bound to threadIdx.x, which a CPU target "
                                           "cannot run"):
        compile_func(lower(s, [A, B], "gpu"))


# ---------------------------------------------------------------------------------------------
# (f) kernel arguments

@pytest.fixture(scope="module")
def add_kernel():
    A = placeholder((4, 3), name="A")
    B = placeholder((3,), "float64", name="B")
    C = compute((4, 3), lambda i, j: cast("float64", A[i, j]) + B[j], name="C")
    return build_kernel(optimize(lower(create_schedule(C), [A, B, C], "add")))


def _arrays():
    return (np.zeros((4, 3), np.float32), np.zeros(3, np.float64), np.zeros((4, 3), np.float64))


def test_kernel_runs_with_matching_arrays(add_kernel):
    a, b, c = _arrays()
    a[:] = 1.5
    b[:] = [1, 2, 3]
    add_kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_kernel_rejects_a_wrong_number_of_arrays(add_kernel):
    a, b, c = _arrays()
    with pytest.raises(InputError, match="add takes 3 arrays, got 2"):
        add_kernel(a, b)


def test_kernel_rejects_a_wrong_shape(add_kernel):
    a, b, c = _arrays()
    with pytest.raises(InputError, match=r"parameter A needs a contiguous float32\[4, 3\] "
                                         r"array, got float32\[3, 4\]"):
        add_kernel(np.zeros((3, 4), np.float32), b, c)


def test_kernel_rejects_a_wrong_dtype(add_kernel):
    a, b, c = _arrays()
    with pytest.raises(InputError, match=r"parameter B needs a contiguous float64\[3\] array, "
                                         r"got float32\[3\]"):
        add_kernel(a, b.astype(np.float32), c)


def test_kernel_rejects_a_non_contiguous_array(add_kernel):
    a, b, c = _arrays()
    with pytest.raises(InputError, match=r"parameter C needs a contiguous float64\[4, 3\] array, "
                                         r"got non-contiguous float64\[4, 3\]"):
        add_kernel(a, b, np.zeros((3, 4), np.float64).T)


def test_kernel_rejects_a_non_array(add_kernel):
    a, b, c = _arrays()
    with pytest.raises(InputError, match="parameter B needs a contiguous float64\\[3\\] numpy "
                                         "array, got list"):
        add_kernel(a, [0.0, 1.0, 2.0], c)



# --- an LLVM crash never takes the process down --------------------------------------------

@pytest.fixture
def fresh_llvm_child():
    """The LLVM child runs the code as it was when it was forked: a test that patches that
    code gets a child forked after its patch, and leaves none with the patch behind."""
    from tensorc.codegen.llvm import child
    child.stop()
    yield
    child.stop()


def test_llvm_abort_in_the_slp_vectorizer_path_falls_back(monkeypatch, fresh_llvm_child) -> None:
    """The object is compiled in a forked child: if LLVM aborts (one of its assertions) with
    the SLP vectorizer on, it is compiled again without it."""
    from tensorc.codegen.llvm import objects as llvm_codegen
    real = llvm_codegen.optimize_module
    tried = []

    def abort_with_slp(llvm_ir, target, slp=True, speed=3):
        tried.append(slp)        # recorded in the child only
        if slp:
            os.abort()
        return real(llvm_ir, target, slp, speed)
    monkeypatch.setattr(llvm_codegen, "optimize_module", abort_with_slp)
    func = optimize(elementwise_func(["float32"], lambda x: x + 1))
    kernel = build_kernel(func)
    x = np.arange(37, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x, out)
    np.testing.assert_array_equal(out, x + 1)
    assert tried == []           # the parent never ran LLVM itself


def test_llvm_crash_both_ways_is_a_tensorc_error(monkeypatch, fresh_llvm_child) -> None:
    from tensorc.codegen.llvm import objects as llvm_codegen
    monkeypatch.setattr(llvm_codegen, "optimize_module", lambda *a, **k: os.abort())
    with pytest.raises(TensorcError, match="LLVM crashed .*SIGABRT"):
        llvm_codegen.emit_object("", Target.host())


def test_python_errors_in_the_child_come_back(monkeypatch, fresh_llvm_child) -> None:
    from tensorc.codegen.llvm import objects as llvm_codegen

    def fail(*args, **kwargs):
        raise ValueError("bad IR")
    monkeypatch.setattr(llvm_codegen, "optimize_module", fail)
    with pytest.raises(ValueError, match="bad IR"):
        llvm_codegen.emit_object("", Target.host())


# ---------------------------------------------------------------------------------------------
# the partials of an rfactor, reduced across lanes

@pytest.mark.parametrize("combiner, partials", [("sum", 64), ("max", 16), ("min", 40),
                                                ("max", 100)])
def test_a_row_reductions_partials_are_combined_in_vectors(combiner, partials):
    """row[i] = reduce(A[i, :]) with ``partials`` partial results per row (an rfactor): the
    final pass over the partials is whole vectors combined pairwise and one reduction across
    lanes (no chain of one scalar op per partial); partials past the last whole vector (40,
    100) are folded in one by one. Against numpy, NaN propagating through max and min."""
    from tensorc.ir.te import max_, min_
    reduce_fn = {"sum": sum_, "max": max_, "min": min_}[combiner]
    n = 301
    A = placeholder((6, n), name="A")
    k = reduce_axis(n, "k")
    B = compute((6,), lambda i: reduce_fn(A[i, k], axis=k), name="B")
    s = create_schedule(B)
    rf = s.rfactor(B, partials)
    (i,) = s[B].op_axis
    s[rf].compute_at(s[B], i)
    *_, j = s[rf].op_axis
    s[rf].reorder(*s[rf].reduce_axis, j)
    s[rf].vectorize(j)
    func = optimize(lower(s, [A, B], "rows"))
    ir_text = llvm_ir(func)
    intrinsic = {"sum": "llvm.vector.reduce.fadd", "max": "llvm.vector.reduce.fmaximum",
                 "min": "llvm.vector.reduce.fminimum"}[combiner]
    assert intrinsic in ir_text
    a = RNG.standard_normal((6, n)).astype(np.float32)
    a[2, 77] = np.nan
    want = {"sum": np.sum, "max": np.max, "min": np.min}[combiner](a.astype(np.float64), axis=1)
    (got,) = run_func(func, [a])
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-5, atol=1e-5)
    if combiner != "sum":
        assert np.isnan(got[2]) and not np.isnan(got[[0, 1, 3, 4, 5]]).any()


def test_kernels_stay_functions_of_their_own():
    """Kernels are not inlined into the entry function: a model of many kernels (an unrolled
    recurrence: hundreds) made one function of 140,000 lines that LLVM's optimizer took 16 s
    over; each stays a function that the entry calls."""
    import tensorc
    from models import path
    llvm = tensorc.inspect(str(path("mlp")), stage="llvm")
    kernels = re.findall(r"define internal [^@]*@(k\d+_\w+)\(", llvm)
    assert len(kernels) >= 3
    entry = llvm[llvm.index("@tensorc_entry("):]
    for name in kernels:
        if not name.endswith(".par1"):
            assert re.search(rf"call [^@]*@{re.escape(name)}\(", entry), name


def test_transposed_tiles_store_rows_from_registers():
    # out[j, i] = A[i, j] * 2 with rows of 21: tiles of 16 x 16 (i unrolled, j vectorized)
    # and a last tile of 5 x 16 (the peeled tail of i). Each tile's vectors are transposed
    # with shuffles and stored as 16 rows (masked stores of 5 elements in the last tile),
    # the next block's rows prefetched for writing; nothing is scattered lane by lane
    A = placeholder((21, 48), name="A")
    out = compute((48, 21), lambda j, i: A[i, j] * 2.0, name="out")
    s = create_schedule(out)
    j, i = s[out].op_axis
    jo, ji = s[out].split(j, 16)
    io, ii = s[out].split(i, 16)
    s[out].reorder(jo, io, ii, ji)
    s[out].unroll(ii)
    s[out].vectorize(ji)
    func = optimize(lower(s, [A, out], "tile"))
    assert "for (i.i: unrolled, 0, 5)" in str(func)
    text = llvm_ir(func)
    assert "shufflevector" in text and "llvm.prefetch" in text and "llvm.masked.store" in text
    assert "scatter" not in text and "store float" not in text
    a = RNG.random((21, 48), dtype=np.float32)
    (got,) = run_func(func, [a])
    np.testing.assert_array_equal(got, a.T * 2)


def test_guarded_transposed_tiles_test_their_guard_once():
    # out[k, j, i] = A[k, i, j] * 2 with k in blocks of 2 (fused with j's blocks, so that
    # the guard on the last k block's second k stays) around tiles of 7 x 16: the guard,
    # the same for all of a tile's stores, is tested once around the transposed stores
    # (masked rows of 7) instead of storing lane by lane
    A = placeholder((5, 7, 32), name="A")
    out = compute((5, 32, 7), lambda k, j, i: A[k, i, j] * 2.0, name="out")
    s = create_schedule(out)
    k, j, i = s[out].op_axis
    ko, ki = s[out].split(k, 2)
    jo, ji = s[out].split(j, 16)
    s[out].reorder(jo, ko, ki, i, ji)
    s[out].parallel(s[out].fuse(jo, ko))
    s[out].unroll(ki)
    s[out].unroll(i)
    s[out].vectorize(ji)
    func = optimize(lower(s, [A, out], "guarded_tile"))
    assert "if (" in str(func)
    text = llvm_ir(func)
    assert "shufflevector" in text and "llvm.masked.store" in text
    assert "scatter" not in text and "store float" not in text
    a = RNG.random((5, 7, 32), dtype=np.float32)
    (got,) = run_func(func, [a])
    np.testing.assert_array_equal(got, a.transpose(0, 2, 1) * 2)


def test_local_blocks_are_zeroed_where_they_are_allocated():
    """A local block's padding lanes (rows padded to a power-of-two pitch, lane padding at
    its end) are read by unmasked vector loads but never written: zeroed once where the
    block is allocated, they hold no stack garbage, which was often denormal (a 3x3
    depthwise conv on 28x28 maps ran 30x slower on it, depending on the stack's history)."""
    from tensorc.ir.schedule import create_schedule as schedule_of
    a = placeholder((6, 28), "float32", "a")
    t = compute((6, 28), lambda i, j: a[i, j] * 2.0, name="t")
    b = compute((6, 28), lambda i, j: t[i, j] + 1.0, name="b")
    s = schedule_of(b)
    i, j = s[b].op_axis
    s[t].compute_at(s[b], i)
    s[t].vectorize(s[t].op_axis[-1])
    s[b].vectorize(j)
    text = llvm_ir(optimize(lower(s, [a, b], "local")))
    allocas = re.findall(r"(%\"?[\w.]+\"?) = alloca float, i64 (\d+)", text)
    assert allocas
    for name, size in allocas:
        assert re.search(rf"call void @\"?llvm\.memset\.p0\.i64\"?\(ptr {re.escape(name)}, "
                         rf"i8 0, i64 {int(size) * 4}", text), text
    x = RNG.standard_normal((6, 28)).astype(np.float32)
    out = np.zeros((6, 28), np.float32)
    build_kernel(optimize(lower(s, [a, b], "local")))(x, out)
    np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)


def _half_rows_tile(divided: bool):
    """C[i, j] = sum_k A[i // 2 (or i), k] * B[k, j] over symbolic R x N, its 8-wide column
    tiles accumulated in a local block, the last one under a lane guard."""
    from tensorc.ir.te import dim_var
    rows, n = dim_var("R"), dim_var("N")
    a = placeholder((rows, 8), name="A")
    b = placeholder((8, n), name="B")
    k = reduce_axis(8, "k")
    c = compute((rows, n), lambda i, j: sum_(a[i // 2 if divided else i, k] * b[k, j],
                                             axis=k), name="C")
    s = create_schedule([c])
    local = s.cache_write(c, "local")
    _, j = s[c].op_axis
    jo, ji = s[c].split(j, 8)
    s[c].vectorize(ji)
    s[local].compute_at(s[c], jo)
    ci, cj = s[local].op_axis
    s[local].reorder(*s[local].reduce_axis, ci, cj)
    s[local].vectorize(cj)
    return optimize(lower(s, [a, b, c], "tile"))


def test_a_tile_tail_reading_a_row_divided_by_a_constant_accumulates_without_branches():
    """The guarded accumulation of a last, partial column tile runs under its lane mask,
    with no any-lane branch at each step of k, though its loads' indices divide by constants
    (the tile's start N // 8, a batch x heads loop's batch index): only a divisor that may be
    0 could trap in masked-off lanes. The one any-lane test left is the store of C's tail."""
    for divided in (False, True):
        func = _half_rows_tile(divided)
        assert llvm_ir(func).count("call i1 @\"llvm.vector.reduce.or") == 1
    kernel = build_kernel(func)
    rng = np.random.default_rng(4)
    for rows, n in [(1, 1), (2, 7), (5, 8), (4, 13), (3, 30)]:
        x = rng.standard_normal((rows, 8)).astype(np.float32)
        y = rng.standard_normal((8, n)).astype(np.float32)
        out = np.full((rows, n), np.nan, np.float32)
        kernel(x, y, out)
        np.testing.assert_allclose(out, x[np.arange(rows) // 2] @ y, rtol=1e-5, atol=1e-5)

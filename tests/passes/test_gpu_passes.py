"""The GPU loop passes: the host/device split, barrier insertion, and the verifier that
rejects schedules the target cannot run (before any nvcc run), each error read for what it
says."""
from __future__ import annotations

import numpy as np
import pytest
from helpers_cuda import CUDA, emulate

from tensorc.errors import ScheduleError
from tensorc.ir import arith
from tensorc.ir.loop import Barrier, For, ThreadReduce, format_func, walk_stmts
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, placeholder, reduce_axis, sum_
from tensorc.ops.gpu.matmul import cooperative_fetch
from tensorc.passes.loop import optimize
from tensorc.passes.loop.insert_barriers import insert_barriers
from tensorc.passes.loop.split_kernels import split_kernels
from tensorc.passes.loop.verify_gpu import verify_gpu
from tensorc.target import Target


def tiled_matmul(m: int, n: int, k: int, tile: int = 16, step: int = 8, name: str = "mm"):
    """C = A @ B with shared A and B tiles, one output element per thread."""
    A, B = placeholder((m, k), name="A"), placeholder((k, n), name="B")
    r = reduce_axis(k, "k")
    C = compute((m, n), lambda i, j: sum_(A[i, r] * B[r, j], axis=r), name="C")
    sch = create_schedule(C)
    CL = sch.cache_write(C, "local")
    AS, BS = sch.cache_read(A, "shared", [CL]), sch.cache_read(B, "shared", [CL])
    st = sch[C]
    i, j = st.op_axis
    io, jo, ii, ji = st.tile(i, j, tile, tile)
    for loop, axis in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                       (ji, "threadIdx.x")):
        st.bind(loop, axis)
    cl = sch[CL]
    cl.compute_at(st, ji)
    ko, ki = cl.split(cl.reduce_axis[0], step)
    for t in (AS, BS):
        sch[t].compute_at(cl, ko)
        cooperative_fetch(sch[t], (tile, tile))
    return optimize(lower(sch, [A, B, C], name))


def kernel_of(func):
    (kernel,) = split_kernels(func).kernels
    return kernel


def barriers(func) -> int:
    return sum(isinstance(s, Barrier) for s in walk_stmts(func.body))


def test_tiles_sync_once_after_the_copy_and_once_before_the_next() -> None:
    kernel = insert_barriers(kernel_of(tiled_matmul(32, 32, 32)))
    text = format_func(kernel)
    # inside the k.o loop: copy A, copy B, barrier, accumulate, barrier
    loop = text[text.index("for (k.o"):]
    assert loop.count("barrier()") == 2, text
    assert loop.index("B.shared[") < loop.index("barrier()") < loop.index("for (k.i")
    assert loop.rstrip().splitlines()[-2].strip() == "barrier()", text


def test_no_barrier_without_shared_memory() -> None:
    A = placeholder((64,), name="A")
    B = compute((64,), lambda i: A[i] * 2.0, name="B")
    sch = create_schedule(B)
    o, i = sch[B].split(sch[B].op_axis[0], 32)
    sch[B].bind(o, "blockIdx.x")
    sch[B].bind(i, "threadIdx.x")
    assert barriers(insert_barriers(kernel_of(optimize(lower(sch, [A, B], "double"))))) == 0


def test_barriers_make_the_tiled_matmul_correct() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 24)), rng.standard_normal((24, 33))
    a, b = a.astype(np.float32), b.astype(np.float32)
    [[c]] = emulate([(tiled_matmul(40, 33, 24, name="mm_emulated"), [a, b])])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_split_gives_one_kernel_per_root_nest_with_workspace() -> None:
    A = placeholder((8, 100), name="A")
    r = reduce_axis(100, "r")
    total = compute((8,), lambda i: sum_(A[i, r], axis=r), name="total")
    out = compute((8, 100), lambda i, j: A[i, j] / total[i], name="out")
    sch = create_schedule(out)
    sch[total].bind(sch[total].op_axis[0], "threadIdx.x")
    fused = sch[out].fuse(*sch[out].op_axis)
    bo, bi = sch[out].split(fused, 128)
    sch[out].bind(bo, "blockIdx.x")
    sch[out].bind(bi, "threadIdx.x")
    device = split_kernels(optimize(lower(sch, [A, out], "norm")))
    assert [k.name for k in device.kernels] == ["norm_0", "norm_1"]
    assert [b.name for b in device.workspace] == ["total"]
    assert device.kernels[0].attrs == {"grid": (1, 1, 1), "block": (8, 1, 1)}
    assert device.kernels[1].attrs == {"grid": (7, 1, 1), "block": (128, 1, 1)}
    assert [b.name for b in device.kernels[1].params] == ["A", "out", "total"]
    a = np.random.default_rng(1).uniform(1, 2, (8, 100)).astype(np.float32)
    [[got]] = emulate([(optimize(lower(sch, [A, out], "norm_emulated")), [a])])
    np.testing.assert_allclose(got, a / a.sum(1, keepdims=True), rtol=1e-5)


def test_cross_thread_reduction_lowers_to_a_thread_reduce() -> None:
    A = placeholder((4, 300), name="A")
    r = reduce_axis(300, "r")
    total = compute((4,), lambda i: sum_(A[i, r], axis=r), name="total")
    sch = create_schedule(total)
    st = sch[total]
    st.bind(st.op_axis[0], "blockIdx.x")
    ro, ri = st.split(st.reduce_axis[0], 64)
    st.reorder(ri, ro)
    st.bind(ri, "threadIdx.x")
    func = optimize(lower(sch, [A, total], "rowsum"))
    (reduce,) = [s for s in walk_stmts(func.body) if isinstance(s, ThreadReduce)]
    assert (reduce.combiner, reduce.thread_axis, reduce.extent) == ("sum", "threadIdx.x", 64)
    assert "if (r.i == 0)" in format_func(func)     # the first thread stores the result
    a = np.random.default_rng(2).standard_normal((4, 300)).astype(np.float32)
    [[got]] = emulate([(func, [a])])
    np.testing.assert_allclose(got, a.sum(1), rtol=1e-5, atol=1e-5)


def test_cross_thread_reduction_needs_its_outermost_reduction_loop_bound() -> None:
    A = placeholder((4, 300), name="A")
    r = reduce_axis(300, "r")
    total = compute((4,), lambda i: sum_(A[i, r], axis=r), name="total")
    sch = create_schedule(total)
    st = sch[total]
    _, ri = st.split(st.reduce_axis[0], 64)
    st.bind(ri, "threadIdx.x")
    with pytest.raises(ScheduleError, match="outermost one, to a thread axis"):
        lower(sch, [A, total], "bad")


# ---------------------------------------------------------------------------------------------
# the verifier: limits and correctness rules, checked before anything is built

def elementwise(n: int, bind) -> object:
    A = placeholder((n,), name="A")
    B = compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = create_schedule(B)
    bind(sch[B])
    return kernel_of(optimize(lower(sch, [A, B], "k")))


def test_rejects_more_threads_than_the_target_allows() -> None:
    def bind(st):
        o, i = st.split(st.op_axis[0], 2048)
        st.bind(o, "blockIdx.x")
        st.bind(i, "threadIdx.x")
    with pytest.raises(ScheduleError, match="2048 threads along threadIdx.x, more than the "
                                            "1024 CUDA allows; split the loop"):
        verify_gpu(elementwise(4096, bind), CUDA)

    def bind_2d(st):
        o, i = st.split(st.op_axis[0], 2048)
        y, x = st.split(i, 32)
        st.bind(o, "blockIdx.x")
        st.bind(y, "threadIdx.y")
        st.bind(x, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"a block of 32x64x1 = 2048 threads is more than "
                                            r"cuda -arch=sm_80's 1024"):
        verify_gpu(elementwise(4096, bind_2d), CUDA)


def test_rejects_a_large_loop_bound_to_no_gpu_axis() -> None:
    with pytest.raises(ScheduleError, match=r"loop i \(extent 100000\) is bound to no GPU "
                                            r"axis, so one thread would run all"):
        verify_gpu(elementwise(100000, lambda st: None), CUDA)
    verify_gpu(elementwise(100, lambda st: None), CUDA)    # a handful: one thread is fine


def test_rejects_a_block_loop_inside_a_serial_loop() -> None:
    def bind(st):
        o, i = st.split(st.op_axis[0], 64)
        st.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="block loops must be outermost"):
        verify_gpu(elementwise(1024, bind), CUDA)


def test_rejects_a_cpu_parallel_loop() -> None:
    with pytest.raises(ScheduleError, match="parallel \\(CPU thread\\) loop; bind it"):
        verify_gpu(elementwise(1024, lambda st: st.parallel(st.op_axis[0])), CUDA)


def test_rejects_too_much_shared_memory() -> None:
    # a 128 x 128 float tile of A per block: 64 KiB, over the 48 KiB of static shared memory
    A = placeholder((256, 128), name="A")
    B = compute((256, 128), lambda i, j: A[i, j] * 2.0, name="B")
    sch = create_schedule(B)
    AS = sch.cache_read(A, "shared", [B])
    st = sch[B]
    i, j = st.op_axis
    io, ii = st.split(i, 128)
    st.reorder(io, ii, j)
    st.bind(io, "blockIdx.x")
    jo, ji = st.split(j, 128)
    st.bind(ji, "threadIdx.x")
    sch[AS].compute_at(st, io)
    sch[AS].bind(sch[AS].op_axis[1], "threadIdx.x")
    kernel = kernel_of(optimize(lower(sch, [A, B], "big")))
    with pytest.raises(ScheduleError, match="65536 bytes of shared memory per block, more "
                                            "than cuda -arch=sm_80's 49152"):
        verify_gpu(insert_barriers(kernel), CUDA)


def test_rejects_a_barrier_that_some_threads_skip() -> None:
    # the copy into shared memory uses 16 threads, the output loop 8 of them: the barrier
    # after the copy sits inside the output's thread loop, which the other 8 threads skip
    A = placeholder((128,), name="A")
    B = compute((64,), lambda i: A[i * 2] + A[i * 2 + 1], name="B")
    sch = create_schedule(B)
    AS = sch.cache_read(A, "shared", [B])
    st = sch[B]
    o, i = st.split(st.op_axis[0], 8)
    st.bind(o, "blockIdx.x")
    st.bind(i, "threadIdx.x")
    sch[AS].compute_at(st, i)
    sch[AS].bind(sch[AS].op_axis[0], "threadIdx.x")
    kernel = insert_barriers(kernel_of(optimize(lower(sch, [A, B], "skip"))))
    assert kernel.attrs["block"] == (16, 1, 1) and barriers(kernel) == 1
    with pytest.raises(ScheduleError, match=r"a barrier sits inside loop i.i \(threadIdx.x, "
                                            r"extent 8 of 16 threads\), which some threads"):
        verify_gpu(kernel, CUDA)


def test_rejects_a_store_every_thread_repeats() -> None:
    # the output's loop is bound to blocks only, but a producer uses 64 threads per block
    A = placeholder((16, 64), name="A")
    P = compute((16, 64), lambda i, j: A[i, j] + 1.0, name="P")
    r = reduce_axis(64, "r")
    B = compute((16,), lambda i: sum_(P[i, r], axis=r), name="B")
    sch = create_schedule(B)
    st = sch[B]
    st.bind(st.op_axis[0], "blockIdx.x")
    sch[P].compute_at(st, st.op_axis[0])
    sch[P].bind(sch[P].op_axis[1], "threadIdx.x")
    kernel = insert_barriers(kernel_of(optimize(lower(sch, [A, B], "repeat"))))
    with pytest.raises(ScheduleError, match="the store to B is outside every loop bound to "
                                            "threadIdx.x \\(64 of them\\)"):
        verify_gpu(kernel, CUDA)


def test_limits_follow_the_target() -> None:
    sm90 = Target.from_string("cuda -arch=sm_90")
    assert sm90.max_shared_memory_per_block_optin == 227 * 1024
    assert Target.from_string("cuda -arch=sm_89").max_threads_per_sm == 1536
    # several architectures: the most restrictive of them
    both = Target.from_string("cuda -arch=sm_89,sm_90")
    assert both.max_shared_memory_per_block_optin == 99 * 1024
    assert both.archs == ("sm_89", "sm_90")


def test_device_loops_read_the_thread_index() -> None:
    kernel = kernel_of(tiled_matmul(32, 32, 32))
    kinds = {s.kind for s in walk_stmts(kernel.body) if isinstance(s, For)}
    assert {"blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"} <= kinds
    assert all(arith.as_const_int(s.extent) for s in walk_stmts(kernel.body)
               if isinstance(s, For))


def test_compile_rejects_an_illegal_schedule_before_nvcc_runs(monkeypatch) -> None:
    import models
    import tensorc
    import tensorc.codegen.nvcc as nvcc
    from tensorc.ops.catalog import get_op
    from tensorc.ops.registry import Template

    def blocks_inside_a_loop(target, sch, out, anchor, attrs, config):
        st = sch[out]
        outer, inner = st.split(st.fuse(*st.op_axis), 16)
        st.bind(inner, "blockIdx.x")
        sch[anchor].compute_at(st, inner)

    monkeypatch.setitem(get_op("matmul").templates, "cuda", Template(blocks_inside_a_loop))
    monkeypatch.setattr(nvcc, "build_fatbin", lambda *a, **k: pytest.fail("nvcc ran"))
    with pytest.raises(ScheduleError, match=r"k0_fused_matmul_add_relu \(fused_matmul_add_relu"
                                            r"\): kernel k0_fused_matmul_add_relu: loop .* is "
                                            r"bound to blockIdx.x inside loop .*block loops "
                                            r"must be outermost"):
        tensorc.compile(str(models.path("mlp")), target="cuda")

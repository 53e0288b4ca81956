"""Parallel loops: threads take chunks from a shared counter (dynamic scheduling), so any
thread count gives the same answer; a loop with one chunk wakes no worker; nested parallel
loops run serially inside the outer one; the pool survives concurrent callers and fork;
libgomp (still loaded for modules saved before the pool) gets a short-spinning wait policy."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helpers_kernels import compile_func
from tensorc.runtime.kernel import llvm_ir
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, dim_var, placeholder, reduce_axis, sum_
from tensorc.passes.loop import optimize
from tensorc.passes.loop.parallel_work import MIN_CHUNK_WORK, stmt_work

RNG = np.random.default_rng(7)
REPO = Path(__file__).resolve().parents[2]
THREAD_COUNTS = (0, 1, 2, 3, 8, 64)


def _matmul(m: int, n: int, k: int, parallel_axes=(0,)):
    A = placeholder((m, k), name="A")
    B = placeholder((k, n), name="B")
    r = reduce_axis(k, "r")
    C = compute((m, n), lambda i, j: sum_(A[i, r] * B[r, j], axis=r), name="C")
    s = create_schedule(C)
    for axis in parallel_axes:
        s[C].parallel(s[C].op_axis[axis])
    return lower(s, [A, B, C], "mm")


def _run_at_every_count(func, arrays, out_shape):
    kernel = compile_func(func)
    results = []
    for threads in THREAD_COUNTS:
        out = np.full(out_shape, np.nan, np.float32)
        kernel(*arrays, out, num_threads=threads)
        results.append(out)
    return results


def test_many_chunks_give_the_same_answer_at_any_thread_count():
    # 200 rows of 64 * 256 multiply-adds: several rows a chunk, many chunks
    a = RNG.random((200, 256), dtype=np.float32)
    b = RNG.random((256, 64), dtype=np.float32)
    results = _run_at_every_count(_matmul(200, 64, 256), [a, b], (200, 64))
    np.testing.assert_allclose(results[0], a @ b, rtol=1e-4)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])   # each element computed the same way


def test_extent_smaller_than_the_thread_count():
    # 3 heavy rows (one chunk each) at up to 64 threads: only 3 take part
    func = _matmul(3, 256, 512)
    assert stmt_work(optimize(func).body) // 3 >= MIN_CHUNK_WORK
    a = RNG.random((3, 512), dtype=np.float32)
    b = RNG.random((512, 256), dtype=np.float32)
    for got in _run_at_every_count(func, [a, b], (3, 256)):
        np.testing.assert_allclose(got, a @ b, rtol=1e-4)


def test_light_loop_runs_as_one_chunk():
    A = placeholder((37, 19), name="A")
    B = compute((37, 19), lambda i, j: A[i, j] * 3.0 - 1.0, name="B")
    s = create_schedule(B)
    s[B].parallel(s[B].op_axis[0])
    func = lower(s, [A, B], "light")
    assert stmt_work(optimize(func).body) < MIN_CHUNK_WORK
    a = RNG.random((37, 19), dtype=np.float32)
    for got in _run_at_every_count(func, [a], (37, 19)):
        np.testing.assert_allclose(got, a * 3 - 1, rtol=1e-6, atol=1e-6)


def test_chunks_come_from_an_atomic_counter():
    text = llvm_ir(optimize(_matmul(64, 64, 64)))
    assert re.search(r"atomicrmw add ptr %.*, i64 %.* monotonic", text)
    assert "omp_get_thread_num" not in text      # no static split by thread number
    assert text.count('call void @"tensorc_parallel"') == 1


def test_nested_parallel_loop_runs_serially_inside_the_outer_one():
    func = _matmul(24, 40, 32, parallel_axes=(0, 1))
    text = llvm_ir(optimize(func))
    assert text.count('call void @"tensorc_parallel"') == 1   # only the outer loop forks
    a = RNG.random((24, 32), dtype=np.float32)
    b = RNG.random((32, 40), dtype=np.float32)
    for got in _run_at_every_count(func, [a, b], (24, 40)):
        np.testing.assert_allclose(got, a @ b, rtol=1e-4)


PROBE = """
import os, sys
import numpy as np
sys.path.insert(0, {repo!r})
from tensorc.runtime.kernel import build_kernel
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, placeholder
from tensorc.passes.loop import optimize

A = placeholder((4, 8), name="A")
B = compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
s = create_schedule(B)
s[B].parallel(s[B].op_axis[0])
kernel = build_kernel(optimize(lower(s, [A, B], "tiny")))
a = np.zeros((4, 8), np.float32)
b = np.zeros((4, 8), np.float32)
before = len(os.listdir("/proc/self/task"))
kernel(a, b, num_threads=2)
assert (b == 1).all()
print(before, len(os.listdir("/proc/self/task")), "GOMP_SPINCOUNT" in os.environ)
import ctypes
sys.stdout.flush()
ctypes.CDLL("libgomp.so.1").omp_display_env(1)
"""


SYMBOLIC_PROBE = """
import os, sys
import numpy as np
sys.path.insert(0, {repo!r})
from tensorc.runtime.kernel import build_kernel
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.te import compute, dim_var, placeholder
from tensorc.ir.loop import walk_stmts
from tensorc.passes.loop import optimize
from tensorc.passes.loop.parallel_work import annotate_parallel_loops

m, h, w = dim_var("M"), dim_var("H"), dim_var("W")
A = placeholder((m, h, w, 64), name="A")
B = compute((m, h, w, 64), lambda i, y, x, c: A[i, y, x, c] * 2.0, name="B")
s = create_schedule(B)
s[B].parallel(s[B].op_axis[0])
func = optimize(lower(s, [A, B], "rows"))
kernel = build_kernel(func)
annotated = annotate_parallel_loops(func)
work = [x.annotations["iteration_work"] for x in walk_stmts(annotated.body)
        if getattr(x, "kind", "") == "parallel"]
a = np.random.default_rng(0).standard_normal((40, 2, 2, 64)).astype(np.float32)
b = np.zeros_like(a)
before = len(os.listdir("/proc/self/task"))
kernel(a, b, num_threads=2)
assert (b == a * 2).all()
print(before, len(os.listdir("/proc/self/task")), isinstance(work[0], int))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_symbolic_loop_sizes_its_chunks_by_the_runs_dims():
    """Over symbolic dims the work of an iteration is an expression of them, computed at run
    time: 40 rows of 2 x 2 x 64 run as one chunk on the calling thread (counted as 16 x 16
    x 64 per row, they made five chunks and woke a worker)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(SYMBOLIC_PROBE.format(
        repo=str(REPO)))], env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    before, after, constant_work = probe.stdout.split()[:3]
    assert constant_work == "False" and before == after


def test_symbolic_chunks_give_the_same_answer_at_any_size_and_thread_count():
    m, n = dim_var("M"), dim_var("N")
    A = placeholder((m, n, 16), name="A")
    B = compute((m, n, 16), lambda i, j, c: A[i, j, c] * 3.0 - 1.0, name="B")
    s = create_schedule(B)
    s[B].parallel(s[B].op_axis[0])
    kernel = compile_func(lower(s, [A, B], "sym"))
    for rows, cols in [(1, 1), (3, 5), (40, 2), (257, 300), (5, 20000), (0, 3)]:
        a = RNG.random((rows, cols, 16), dtype=np.float32)
        for threads in THREAD_COUNTS:
            out = np.full_like(a, np.nan)
            kernel(a, out, num_threads=threads)
            np.testing.assert_allclose(out, a * 3 - 1, rtol=1e-6, atol=1e-6)


def _probe(**env_extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE.format(repo=str(REPO)))],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_one_chunk_wakes_no_worker_and_wait_policy_is_short_spinning():
    probe = _probe()
    assert probe.returncode == 0, probe.stderr
    before, after, leaked = probe.stdout.split()[:3]
    assert before == after                    # the 4 tiny rows ran on the calling thread
    assert leaked == "False"                  # the setting was for libgomp's load only
    assert re.search(r"GOMP_SPINCOUNT = '1000'", probe.stdout + probe.stderr)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_users_wait_policy_is_kept():
    probe = _probe(OMP_WAIT_POLICY="active")
    assert probe.returncode == 0, probe.stderr
    assert re.search(r"OMP_WAIT_POLICY = 'ACTIVE'", probe.stdout + probe.stderr)
    assert not re.search(r"GOMP_SPINCOUNT = '1000'", probe.stdout + probe.stderr)


def test_callers_on_several_threads_share_the_pool():
    # ctypes lets go of the GIL: the calls overlap, and a caller that finds the pool busy
    # runs its loop alone
    import threading
    func = _matmul(96, 64, 256)
    kernel = compile_func(func)
    a = RNG.random((96, 256), dtype=np.float32)
    b = RNG.random((256, 64), dtype=np.float32)
    want = np.zeros((96, 64), np.float32)
    kernel(a, b, want, num_threads=1)
    wrong = []

    def calls(threads):
        out = np.empty((96, 64), np.float32)
        for k in range(40):
            out[:] = np.nan
            kernel(a, b, out, num_threads=threads[k % len(threads)])
            if not np.array_equal(out, want):
                wrong.append(threads)

    callers = [threading.Thread(target=calls, args=([2, 8, 3],)) for _ in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert not wrong


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_parallel_loops_without_the_parents_workers():
    func = _matmul(96, 64, 256)
    kernel = compile_func(func)
    a = RNG.random((96, 256), dtype=np.float32)
    b = RNG.random((256, 64), dtype=np.float32)
    out = np.empty((96, 64), np.float32)
    kernel(a, b, out, num_threads=2)             # the pool has a worker now
    pid = os.fork()
    if pid == 0:                                  # the child: no worker threads
        child = np.full((96, 64), np.nan, np.float32)
        kernel(a, b, child, num_threads=2)
        os._exit(0 if np.array_equal(child, out) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0

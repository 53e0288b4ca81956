"""GEMM at one thread: tensorc vs onnxruntime vs numpy (OpenBLAS), in GFLOP/s and % of peak.

Each case is a one-node ONNX MatMul ``A[M, K] @ B[K, N]`` with B a constant (weights, as in
a Dense/Linear layer) or, with ``--dynamic-b``, a second input. The three candidates are timed
alternately in one process (``tensorc.benchmark.time_alternating``), median after warm-up.

    python -m benchmarks.gemm                      # 1024^3 and the transformer shapes
    python -m benchmarks.gemm --quick              # a subset
    python -m benchmarks.gemm --shapes 1024x1024x1024 128x768x3072
    python -m benchmarks.gemm --peak-gflops 102

The peak is ``tensorc.runtime.machine``'s cached FMA measurement unless ``--peak-gflops`` is
given. For numpy's AVX-512 kernel, run with ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE``
unset (see ``../shared/BENCHMARKING.md``); the table prints the kernel OpenBLAS reports.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")    # before numpy loads OpenBLAS

import argparse
import itertools
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from benchmarks.common import add_peak_argument, format_table, geomean, one_core_peak, rate_cell

TRANSFORMER_M = (1, 16, 77, 128, 500)
TRANSFORMER_KN = (256, 384, 768, 1024, 3072)
QUICK = ((1024, 1024, 1024), (1, 768, 768), (16, 768, 3072), (77, 768, 768),
         (128, 256, 1024), (128, 768, 3072), (128, 3072, 768), (500, 1024, 1024))


def matmul_model(m: int, k: int, n: int, constant_b: bool = True, seed: int = 0
                 ) -> onnx.ModelProto:
    """A one-node MatMul model; B is an initializer when ``constant_b``."""
    rng = np.random.default_rng(seed)
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
    inputs, inits = [a], []
    if constant_b:
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, n]))
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    graph = helper.make_graph([node], f"matmul_{m}x{k}x{n}", inputs, [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def openblas_kernel() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "?"
    for info in threadpool_info():
        if info.get("internal_api") == "openblas":
            return str(info.get("architecture", "?"))
    return "?"


def time_alternating_cpu(candidates, seconds: float, samples: int):
    """Like ``tensorc.benchmark.time_alternating``, but on this thread's CPU clock: at one
    thread every candidate runs on the calling thread, and the CPU clock does not count the
    time another process held the core (the figure to trust on a busy machine)."""
    from tensorc.benchmark import Timing

    def per_call(fn, calls: int) -> float:
        start = time.thread_time()
        for _ in range(calls):
            fn()
        return (time.thread_time() - start) / calls
    for fn in candidates.values():
        fn()
        fn()
    estimate = {name: max(per_call(fn, 3), 1e-7) for name, fn in candidates.items()}
    batch = {name: max(1, round(seconds / samples / t)) for name, t in estimate.items()}
    taken = {name: [] for name in candidates}
    for _ in range(samples):
        for name, fn in candidates.items():
            taken[name].append(per_call(fn, batch[name]) * 1e3)
    return {name: Timing(tuple(v), batch[name]) for name, v in taken.items()}


def bench_case(m: int, k: int, n: int, peak: float, constant_b: bool, seconds: float,
               check: bool = True, cpu_clock: bool = False) -> list[str]:
    import tensorc
    from tensorc.benchmark import time_alternating
    from tensorc.reference import onnxruntime_session

    model = matmul_model(m, k, n, constant_b)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = numpy_helper.to_array(model.graph.initializer[0]) if constant_b else \
        rng.standard_normal((k, n)).astype(np.float32)
    feeds = {"a": a} if constant_b else {"a": a, "b": b}
    mod = tensorc.compile(model, num_threads=1)
    sess = onnxruntime_session(model, num_threads=1)
    if check:
        got = mod.run(feeds)["y"]
        want = a.astype(np.float64) @ b.astype(np.float64)
        err = np.abs(got - want).max() / (np.abs(want).max() + 1e-30)
        if err > 1e-4:
            raise SystemExit(f"tensorc is wrong on {m}x{k}x{n}: relative error {err:.2e}")
    out = np.empty((m, n), np.float32)
    candidates = {
        "tensorc": lambda: mod.run(feeds),
        "onnxruntime": lambda: sess.run(None, feeds),
        "numpy": lambda: np.matmul(a, b, out=out),
    }
    if cpu_clock:
        timings = time_alternating_cpu(candidates, seconds=seconds, samples=9)
    else:
        timings = time_alternating(candidates, seconds=seconds, samples=9)
    flops = 2.0 * m * k * n

    def cell(name: str) -> str:
        return rate_cell(timings[name], flops, peak)
    ratio = timings["tensorc"].median_ms / timings["onnxruntime"].median_ms
    return [f"{m}x{k}x{n}", cell("tensorc"), cell("onnxruntime"), cell("numpy"),
            f"{ratio:.2f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", help="MxKxN cases (default: 1024^3 and the "
                        "transformer shapes)")
    parser.add_argument("--quick", action="store_true", help="a subset of the shapes")
    parser.add_argument("--dynamic-b", action="store_true", help="B is an input, not a weight")
    add_peak_argument(parser)
    parser.add_argument("--seconds", type=float, default=0.6, help="timing per candidate")
    parser.add_argument("--cpu-clock", action="store_true", help="time on the thread's CPU "
                        "clock instead of the wall clock (a busy machine)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:
        pass
    if args.shapes:
        cases = [tuple(int(x) for x in s.lower().split("x")) for s in args.shapes]
    elif args.quick:
        cases = list(QUICK)
    else:
        cases = [(1024, 1024, 1024)] + [(m, k, n) for m, k, n in itertools.product(
            TRANSFORMER_M, TRANSFORMER_KN, TRANSFORMER_KN)]
    peak = one_core_peak(args.peak_gflops)
    clock = "thread CPU time" if args.cpu_clock else "wall time"
    print(f"one thread, {clock}, peak {peak:.1f} GFLOP/s, "
          f"B {'input' if args.dynamic_b else 'constant'}"
          f", OpenBLAS kernel {openblas_kernel()}; cells: median ms, GFLOP/s (% of peak); "
          f"~ marks a min-max spread over 10%", flush=True)
    header = ["MxKxN", "tensorc", "onnxruntime", "numpy", "tc/ort"]
    rows = []
    for m, k, n in cases:
        rows.append(bench_case(m, k, n, peak, not args.dynamic_b, args.seconds,
                               cpu_clock=args.cpu_clock))
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(format_table(header, rows))
    ratios = [float(r[-1]) for r in rows]
    print(f"tensorc/onnxruntime: geomean {geomean(ratios):.2f}, "
          f"worst {max(ratios):.2f}, {sum(r <= 1.0 for r in ratios)}/{len(ratios)} at most 1.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())

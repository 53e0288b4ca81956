"""int8 models side by side in one process: tensorc int8, tensorc fp32, onnxruntime int8 and
onnxruntime fp32, at 1 and 2 threads.

The models are models/quantized.py's: a small CNN (conv, ReLU, SiLU, squeeze-and-excite,
pooling) quantized by onnxruntime's ``quantize_static`` (QDQ, per-channel, int8 activations),
and a transformer block quantized by ``quantize_static`` and by ``quantize_dynamic``. Each
row times the four alternately (``tensorc.benchmark.time_alternating``: median after
warm-up, min-max in brackets) and gives the errors of both int8 runs against the fp32 model,
in units of the output's range.

Targets (issue 35): tensorc int8 at most 0.8x onnxruntime int8's latency, and at least 1.8x
faster than tensorc fp32 on the CNNs (1.4x on the transformers).

    python -m benchmarks.int8                       # every model, 1 and 2 threads
    python -m benchmarks.int8 --models cnn --threads 1 --seconds 1
    python -m benchmarks.int8 --peak                # int8 vs fp32 multiply-add peaks, 1 core

``--peak`` measures what one core's AVX2 instructions allow: 10 independent chains of
``vpmaddubsw + vpmaddwd + vpaddd`` (the u8 x s8 step of the int8 kernels: 32 multiply-adds)
against 10 chains of ``vfmadd`` on 8 floats, in multiply-adds per second. Where the int8
figure is not well above the float one (Zen 3: its vector integer multiplies share fewer
pipes than its FMAs), no int8 kernel can be much faster than a float one at peak.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import tensorc  # noqa: E402
from benchmarks.common import format_table  # noqa: E402
from models import quantized  # noqa: E402
from tensorc.benchmark import format_ms, time_alternating  # noqa: E402
from tensorc.reference import onnxruntime_session  # noqa: E402


def _cases(size: int) -> dict:
    """name -> (float model, int8 model, input shapes)."""
    cnn_shapes = {"input": (1, 3, size, size)}
    tf_shapes = {"tokens": (1, 128, 256)}
    cnn = quantized.cnn(size, width=64)
    tf = quantized.transformer(seq=128, hidden=256, heads=4)
    return {
        "cnn (static s8)": (cnn, quantized.quantize_static(cnn, cnn_shapes), cnn_shapes),
        "cnn (static u8)": (cnn, quantized.quantize_static(cnn, cnn_shapes, "uint8"),
                            cnn_shapes),
        "transformer (static s8)": (tf, quantized.quantize_static(tf, tf_shapes), tf_shapes),
        "transformer (dynamic)": (tf, quantized.quantize_dynamic(tf), tf_shapes),
    }


def _error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| in units of want's range."""
    span = float(want.max() - want.min()) or 1.0
    return float(np.abs(got.astype(np.float64) - want).max()) / span


def _peak_loop(kind: str, chains: int = 10):
    """A JIT-compiled function(n) running n steps of ``chains`` independent chains."""
    import ctypes

    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    vec = "<32 x i8>" if kind == "int8" else "<8 x float>"
    acc = "<8 x i32>" if kind == "int8" else "<8 x float>"
    ones16 = "<" + ", ".join(["i16 1"] * 16) + ">"
    step = ("<" + ", ".join(["i8 1"] * 32) + ">") if kind == "int8" else \
        ("<" + ", ".join(["float 1.0"] * 8) + ">")
    lines = ["declare <16 x i16> @llvm.x86.avx2.pmadd.ub.sw(<32 x i8>, <32 x i8>)",
             "declare <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16>, <16 x i16>)",
             "declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)",
             f"define void @run(i64 %n, {vec}* %p, {acc}* %out) {{",
             "entry:", f"  %a = load volatile {vec}, {vec}* %p, align 1", "  br label %loop",
             "loop:", "  %i = phi i64 [0, %entry], [%i1, %loop]",
             f"  %b = phi {vec} [%a, %entry], [%b1, %loop]"]
    lines += [f"  %acc{c} = phi {acc} [zeroinitializer, %entry], [%n{c}, %loop]"
              for c in range(chains)]
    add = "add" if kind == "int8" else "fadd"
    lines.append(f"  %b1 = {add} {vec} %b, {step}")
    for c in range(chains):
        if kind == "int8":
            lines += [f"  %x{c} = xor <32 x i8> %a, <" + ", ".join([f"i8 {c}"] * 32) + ">",
                      f"  %m{c} = call <16 x i16> @llvm.x86.avx2.pmadd.ub.sw(<32 x i8> %x{c}, "
                      f"<32 x i8> %b)",
                      f"  %w{c} = call <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16> %m{c}, "
                      f"<16 x i16> {ones16})",
                      f"  %n{c} = add <8 x i32> %acc{c}, %w{c}"]
        else:
            lines.append(f"  %n{c} = call <8 x float> @llvm.fma.v8f32(<8 x float> %a, "
                         f"<8 x float> %b, <8 x float> %acc{c})")
    lines += ["  %i1 = add i64 %i, 1", "  %done = icmp eq i64 %i1, %n",
              "  br i1 %done, label %exit, label %loop", "exit:"]
    total = "%n0"
    for c in range(1, chains):
        lines.append(f"  %s{c} = {add} {acc} {total}, %n{c}")
        total = f"%s{c}"
    lines += [f"  store volatile {acc} {total}, {acc}* %out, align 1", "  ret void", "}"]
    module = llvm.parse_assembly("\n".join(lines))
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(
        engine.get_function_address("run"))
    buffers = (ctypes.c_uint8 * 64)(*range(64)), (ctypes.c_uint8 * 64)()
    return (lambda n: fn(n, ctypes.addressof(buffers[0]), ctypes.addressof(buffers[1]))), \
        (engine, buffers)


def peak() -> None:
    """Multiply-adds per second of the int8 and fp32 AVX2 steps on one core."""
    import time
    steps = 5_000_000
    rows = []
    for kind, macs in (("int8 vpmaddubsw+vpmaddwd+vpaddd", 32), ("fp32 vfmadd", 8)):
        run, keep = _peak_loop(kind.split()[0])
        best = float("inf")
        for _ in range(7):
            start = time.perf_counter()
            run(steps)
            best = min(best, time.perf_counter() - start)
        rows.append([kind, f"{steps * 10 * macs / best / 1e9:.1f}"])
        del keep
    print(format_table(["step (10 chains, 256-bit)", "G multiply-adds/s (best of 7)"], rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=None,
                        help="name prefixes: cnn, transformer (default: all)")
    parser.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--size", type=int, default=112, help="the CNN's input size")
    parser.add_argument("--peak", action="store_true",
                        help="only the int8 and fp32 multiply-add peaks of one core")
    args = parser.parse_args(argv)
    if args.peak:
        peak()
        return
    rows, speedups = [], {}
    for name, (fp32, int8, shapes) in _cases(args.size).items():
        if args.models and not any(name.startswith(p) for p in args.models):
            continue
        feeds = quantized.random_inputs(shapes, 99)
        for threads in args.threads:
            runs = {
                "tensorc int8": tensorc.compile(int8, num_threads=threads),
                "tensorc fp32": tensorc.compile(fp32, num_threads=threads),
                "ort int8": onnxruntime_session(int8, threads, spinning=True),
                "ort fp32": onnxruntime_session(fp32, threads, spinning=True),
            }
            calls = {k: (lambda m=m, f=feeds: m.run(f)) if k.startswith("tensorc") else
                     (lambda s=m, f=feeds: s.run(None, f)) for k, m in runs.items()}
            reference = runs["ort fp32"].run(None, feeds)[0]
            tc_error = _error(list(runs["tensorc int8"].run(feeds).values())[0], reference)
            ort_error = _error(runs["ort int8"].run(None, feeds)[0], reference)
            timing = time_alternating(calls, seconds=args.seconds)
            ms = {k: t.median_ms for k, t in timing.items()}
            vs_ort = ms["tensorc int8"] / ms["ort int8"]
            vs_fp32 = ms["tensorc fp32"] / ms["tensorc int8"]
            speedups.setdefault((name.split()[0], threads), []).append((vs_ort, vs_fp32))
            rows.append([name, str(threads), *(format_ms(timing[k]) for k in runs),
                         f"{vs_ort:.2f}x", f"{vs_fp32:.2f}x", f"{tc_error:.4f}",
                         f"{ort_error:.4f}"])
    print(format_table(["model", "threads", "tensorc int8 ms", "tensorc fp32 ms", "ort int8 ms",
                        "ort fp32 ms", "int8 tc/ort", "tc fp32/int8", "err tc int8",
                        "err ort int8"], rows))
    print("\ngeomeans (target: tc/ort int8 <= 0.8; tc fp32/int8 >= 1.8 CNNs, 1.4 transformers)")
    for (family, threads), values in speedups.items():
        ort_ratio = math.exp(sum(math.log(v[0]) for v in values) / len(values))
        fp32_ratio = math.exp(sum(math.log(v[1]) for v in values) / len(values))
        print(f"  {family} at {threads} thread(s): tensorc int8 / ort int8 {ort_ratio:.2f}x, "
              f"tensorc fp32 / int8 {fp32_ratio:.2f}x")
    print("errors: max |int8 - fp32| over the fp32 output's range (onnxruntime fp32 as fp32)")


if __name__ == "__main__":
    main()

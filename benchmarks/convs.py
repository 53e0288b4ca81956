"""ResNet-50's conv layers at one thread: tensorc (direct, and its default: Winograd where its
cost model chooses it) vs onnxruntime, in GFLOP/s and % of peak.

Each case is one ResNet-50 (torchvision) conv with its bias and ReLU, a one-layer ONNX model;
"direct" compiles it for ``llvm -winograd=0``. The candidates are timed alternately in one
process (``tensorc.benchmark.time_alternating``), median after warm-up. A layer's weights stay
in the caches between runs here, as they do not in the whole model (100 MB of weights):
``tensorc profile`` shows the layers in place.

    python -m benchmarks.convs                         # every distinct 3x3 and 1x1 layer
    python -m benchmarks.convs --match 3x3
    python -m benchmarks.convs --peak-gflops 272

Winograd layers are quoted in effective GFLOP/s: the direct conv's FLOPs over their time.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from benchmarks.common import (  # noqa: E402
    add_peak_argument, format_table, geomean, one_core_peak, rate_cell,
)

# (input channels, map size, filters, kernel, stride): ResNet-50's stages at 224 x 224
LAYERS = (
    (64, 56, 64, 1, 1), (64, 56, 64, 3, 1), (64, 56, 256, 1, 1), (256, 56, 64, 1, 1),
    (256, 56, 128, 1, 1), (128, 56, 128, 3, 2), (256, 56, 512, 1, 2),
    (128, 28, 512, 1, 1), (512, 28, 128, 1, 1), (128, 28, 128, 3, 1),
    (512, 28, 256, 1, 1), (256, 28, 256, 3, 2), (512, 28, 1024, 1, 2),
    (256, 14, 1024, 1, 1), (1024, 14, 256, 1, 1), (256, 14, 256, 3, 1),
    (1024, 14, 512, 1, 1), (512, 14, 512, 3, 2), (1024, 14, 2048, 1, 2),
    (512, 7, 2048, 1, 1), (2048, 7, 512, 1, 1), (512, 7, 512, 3, 1),
)


def output_size(size: int, kernel: int, stride: int) -> int:
    """The output map's side of a conv padded to keep ``size`` at stride 1."""
    return (size + 2 * (kernel // 2) - kernel) // stride + 1


def conv_model(c: int, size: int, filters: int, kernel: int, stride: int, seed: int = 0
               ) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((filters, c, kernel, kernel)) / np.sqrt(c * kernel * kernel))
    b = rng.standard_normal(filters) * 0.1
    pad = kernel // 2
    out = output_size(size, kernel, stride)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride, stride],
                              pads=[pad] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, f"conv_{c}_{size}_{filters}_{kernel}_{stride}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, filters, out, out])],
        [numpy_helper.from_array(w.astype(np.float32), "w"),
         numpy_helper.from_array(b.astype(np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def layer_name(c: int, size: int, filters: int, kernel: int, stride: int) -> str:
    return f"{kernel}x{kernel} s{stride} {c}->{filters} {size}x{size}"


def bench_layer(layer: tuple, peak: float, seconds: float) -> tuple[list[str], float, float]:
    """The layer's table row, the direct conv's percent of peak, and tensorc's faster time
    over onnxruntime's."""
    import tensorc
    from tensorc.benchmark import time_alternating
    from tensorc.reference import compare_outputs, onnxruntime_session, run_session

    c, size, filters, kernel, stride = layer
    model = conv_model(*layer)
    feeds = {"x": np.random.default_rng(1).standard_normal((1, c, size, size))
             .astype(np.float32)}
    direct = tensorc.compile(model, target="llvm -winograd=0", num_threads=1)
    default = tensorc.compile(model, num_threads=1)
    winograd = "winograd" in tensorc.inspect(model, stage="graph")     # the graph passes only
    session = onnxruntime_session(model, num_threads=1)
    want = run_session(session, feeds)
    for label, module in (("direct", direct), ("default", default)):
        check = compare_outputs(module.run(feeds), want, rtol=1e-3, atol=1e-3)
        if not check.passed:
            raise SystemExit(f"tensorc ({label}) is wrong on {layer_name(*layer)}: max abs "
                             f"error {check.max_abs:.3g}, max rel {check.max_rel:.3g}")
    candidates = {"direct": lambda: direct.run(feeds),
                  "onnxruntime": lambda: session.run(None, feeds)}
    if winograd:
        candidates["winograd"] = lambda: default.run(feeds)
    timings = time_alternating(candidates, seconds=seconds, samples=9)
    out = output_size(size, kernel, stride)
    flops = 2.0 * c * filters * kernel * kernel * out * out

    def cell(name: str) -> str:
        return rate_cell(timings[name], flops, peak) if name in timings else "-"
    best = min(timings[n].median_ms for n in ("direct", "winograd") if n in timings)
    ratio = best / timings["onnxruntime"].median_ms
    direct_percent = 100 * flops / timings["direct"].median_ms / 1e6 / peak
    return ([layer_name(*layer), cell("direct"), cell("winograd"), cell("onnxruntime"),
             f"{ratio:.2f}"], direct_percent, ratio)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--match", help="only the layers whose name contains this")
    add_peak_argument(parser)
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per candidate")
    args = parser.parse_args(argv)
    layers = [layer for layer in LAYERS if not args.match or args.match in layer_name(*layer)]
    if not layers:
        raise SystemExit(f"no layer matches {args.match!r}")
    peak = one_core_peak(args.peak_gflops)
    print(f"ResNet-50's conv layers (+ bias + ReLU), one thread, peak {peak:.1f} GFLOP/s; "
          f"cells: median ms, GFLOP/s (% of peak; Winograd's effective); ~ marks a min-max "
          f"spread over 10%", flush=True)
    header = ["layer", "tensorc direct", "tensorc Winograd", "onnxruntime", "tc/ort"]
    rows, direct, ratios = [], [], []
    for layer in layers:
        row, percent, ratio = bench_layer(layer, peak, args.seconds)
        rows.append(row)
        direct.append(percent)
        ratios.append(ratio)
        print(" | ".join(row), file=sys.stderr, flush=True)
    print(format_table(header, rows))
    print(f"direct: {sum(d >= 85 for d in direct)}/{len(direct)} layers at 85% of peak or "
          f"more (lowest {min(direct):.0f}%); tensorc (its faster) / onnxruntime: geomean "
          f"{geomean(ratios):.2f}, worst {max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

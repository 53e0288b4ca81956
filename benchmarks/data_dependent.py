"""Latency of the ops whose output size depends on the data, beside onnxruntime: a YOLO-sized
NonMaxSuppression, a large Unique, NonZero and Compress over a large mask, and the detector
with NMS in its graph (models/nms_detector.py) at two image sizes. One thread each (the
kernels of these ops are serial); each case's outputs are checked against onnxruntime's
first. Times alternate between the two after a warm-up (tensorc.benchmark.time_alternating);
the figure is the median, with the min-max spread.

    python -m benchmarks.data_dependent
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import tensorc  # noqa: E402
from benchmarks.common import format_table  # noqa: E402
from models.nms_detector import build as nms_detector  # noqa: E402
from tensorc.benchmark import time_alternating  # noqa: E402
from tensorc.reference import onnxruntime_session  # noqa: E402


def _model(nodes, inputs, outputs, initializers=None):
    graph = helper.make_graph(nodes, "case", inputs, outputs, initializer=[
        helper.make_tensor(n, TensorProto.INT64 if a.dtype == np.int64 else TensorProto.FLOAT,
                           a.shape, a.reshape(-1).tolist())
        for n, a in (initializers or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def cases(rng: np.random.Generator) -> list[tuple[str, object, dict]]:
    out = []
    s, c = 8400, 80
    nms = _model([helper.make_node("NonMaxSuppression", ["b", "s", "k", "iou", "t"], ["sel"],
                                   center_point_box=1)],
                 [_info("b", TensorProto.FLOAT, [1, s, 4]),
                  _info("s", TensorProto.FLOAT, [1, c, s])],
                 [_info("sel", TensorProto.INT64, None)],
                 {"k": np.array([100], np.int64), "iou": np.array([0.45], np.float32),
                  "t": np.array([0.25], np.float32)})
    boxes = np.concatenate([rng.uniform(0, 640, (1, s, 2)), rng.uniform(5, 100, (1, s, 2))], 2)
    out.append(("NMS 80 classes x 8400 boxes", nms,
                {"b": boxes.astype(np.float32),
                 "s": (rng.random((1, c, s)) ** 8).astype(np.float32)}))
    unique = _model([helper.make_node("Unique", ["x"], ["y", "i", "v", "n"])],
                    [_info("x", TensorProto.INT64, [100000])],
                    [_info(n, TensorProto.INT64, None) for n in ("y", "i", "v", "n")])
    out.append(("Unique of 100000 int64", unique,
                {"x": rng.integers(0, 5000, 100000).astype(np.int64)}))
    nonzero = _model([helper.make_node("NonZero", ["x"], ["y"])],
                     [_info("x", TensorProto.FLOAT, [256, 1024])],
                     [_info("y", TensorProto.INT64, None)])
    mask = (rng.random((256, 1024)) < 0.3).astype(np.float32)
    out.append(("NonZero 256x1024, 30% set", nonzero, {"x": mask}))
    compress = _model([helper.make_node("Compress", ["x", "m"], ["y"], axis=0)],
                      [_info("x", TensorProto.FLOAT, [20000, 16]),
                       _info("m", TensorProto.BOOL, [20000])],
                      [_info("y", TensorProto.FLOAT, None)])
    out.append(("Compress 20000x16 rows, half kept", compress,
                {"x": rng.standard_normal((20000, 16)).astype(np.float32),
                 "m": rng.random(20000) < 0.5}))
    detector = nms_detector()
    for h, w in ((64, 96), (320, 320)):
        out.append((f"nms_detector {h}x{w}", detector,
                    {"images": rng.standard_normal((1, 3, h, w)).astype(np.float32)}))
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    compiled = {}
    for name, model, feeds in cases(rng):
        key = id(model)
        if key not in compiled:
            compiled[key] = tensorc.compile(model, num_threads=1)
        module = compiled[key]
        session = onnxruntime_session(model, num_threads=1)
        got = list(module.run(feeds).values())
        want = session.run(None, feeds)
        same = all(g.shape == e.shape and np.allclose(g, e, rtol=1e-4, atol=1e-4)
                   for g, e in zip(got, want))
        timings = time_alternating({
            "tensorc": lambda m=module, f=feeds: m.run(f),
            "onnxruntime": lambda s=session, f=feeds: s.run(None, f)})
        t, o = timings["tensorc"], timings["onnxruntime"]
        rows.append([name, f"{t.median_ms:.2f} ({t.min_ms:.2f}-{max(t.samples_ms):.2f})",
                     f"{o.median_ms:.2f} ({o.min_ms:.2f}-{max(o.samples_ms):.2f})",
                     f"{t.median_ms / o.median_ms:.2f}", "yes" if same else "NO"])
    print(format_table(["case (1 thread)", "tensorc ms", "onnxruntime ms", "ratio",
                        "same output"], rows))


if __name__ == "__main__":
    main()

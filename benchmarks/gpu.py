"""GPU latency of tensorc's CUDA modules beside onnxruntime-gpu's CUDA provider (or, where that
provider is missing, PyTorch eager through onnx2torch), on the models in models/, at batch 1
and batch 16.

For each model and batch: compile for the GPU's architecture, check the outputs against
onnxruntime, then time both after a warm-up. Inputs and outputs stay on the device on both
sides (tensorc: device arrays passed through; onnxruntime: I/O binding), so the figures are
the model's GPU time plus launch overhead, synchronized at the end of every run; tensorc's
kernel time alone (the sum of its launches, timed with CUDA events) is shown beside it.

    python -m benchmarks.gpu                           # every model, batch 1 and 16
    python -m benchmarks.gpu --models resnet bert --batch 1 --json
    python -m benchmarks.gpu --emulate --models mlp    # no GPU: check the plumbing only

Without an NVIDIA GPU (pycuda, the driver or a device missing) it says so and exits with 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import tensorc  # noqa: E402
from benchmarks.common import format_table  # noqa: E402
from tensorc.errors import TensorcError  # noqa: E402
from tensorc.reference import random_inputs  # noqa: E402

MODELS = ("mlp", "lenet5", "resnet", "mobilenetv2", "bert", "gpt2", "detector", "lstm")
BATCH_AXIS = {"lstm": 1}          # [sequence, batch, features]
EXIT_NO_GPU = 2


@dataclass
class Row:
    model: str
    batch: int
    tensorc_ms: float | None = None
    kernels_ms: float | None = None
    baseline: str = ""
    baseline_ms: float | None = None
    launches: int = 0
    max_abs_err: float | None = None
    error: str = ""

    @property
    def ratio(self) -> float | None:
        if self.tensorc_ms and self.baseline_ms:
            return self.tensorc_ms / self.baseline_ms
        return None


def model_at_batch(name: str, batch: int) -> tuple[onnx.ModelProto, dict]:
    """The model with its batch dim set to ``batch`` (in the ONNX inputs and the shapes)."""
    module = importlib.import_module(f"models.{name}")
    model = module.build()
    axis = BATCH_AXIS.get(name, 0)
    shapes = {}
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        given = (module.INPUT_SHAPES or {}).get(value.name)
        shape = list(given or [d.dim_value for d in dims])
        shape[axis] = batch
        shapes[value.name] = tuple(shape)
        for dim, n in zip(dims, shape):
            dim.ClearField("dim_param")
            dim.dim_value = n
    return model, shapes


def median_ms(fn, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


class OnnxruntimeCuda:
    """onnxruntime's CUDA provider, inputs and outputs bound on the device."""

    name = "onnxruntime-gpu"

    def __init__(self, model: onnx.ModelProto, feeds: dict):
        import onnxruntime as ort
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RuntimeError("onnxruntime has no CUDA provider (pip install onnxruntime-gpu)")
        self.session = ort.InferenceSession(model.SerializeToString(),
                                            providers=["CUDAExecutionProvider"])
        self.binding = self.session.io_binding()
        for name, array in feeds.items():
            value = ort.OrtValue.ortvalue_from_numpy(array, "cuda", 0)
            self.binding.bind_ortvalue_input(name, value)
        for out in self.session.get_outputs():
            self.binding.bind_output(out.name, "cuda")

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)      # synchronizes


class TorchEager:
    """PyTorch eager on the GPU, the model converted by onnx2torch."""

    name = "pytorch-eager"

    def __init__(self, model: onnx.ModelProto, feeds: dict):
        import torch
        from onnx2torch import convert
        self.torch = torch
        self.net = convert(model).cuda().eval()
        self.inputs = [torch.from_numpy(a).cuda() for a in feeds.values()]

    def __call__(self) -> None:
        with self.torch.no_grad():
            self.net(*self.inputs)
        self.torch.cuda.synchronize()


def baseline_for(model: onnx.ModelProto, feeds: dict):
    errors = []
    for kind in (OnnxruntimeCuda, TorchEager):
        try:
            return kind(model, feeds)
        except Exception as exc:  # noqa: BLE001 - report why each baseline is unavailable
            errors.append(f"{kind.name}: {exc}")
    raise RuntimeError("no baseline: " + "; ".join(errors))


def bench_one(name: str, batch: int, args, device) -> Row:
    row = Row(name, batch)
    try:
        model, shapes = model_at_batch(name, batch)
        module = tensorc.compile(model, target=f"cuda -arch={args.arch}", input_shapes=shapes)
        module.use_device(device)
        row.launches = len(module.plan.launches)
        feeds = random_inputs(module.inputs, seed=0)
        from tensorc.reference import run_onnxruntime
        expected = run_onnxruntime(model.SerializeToString(), feeds)
        got = module.run(feeds)
        row.max_abs_err = max(float(np.max(np.abs(got[k].astype(np.float64) - expected[k])))
                              for k in expected)
        on_device = {}
        for k, v in feeds.items():
            ptr = device.alloc(v.nbytes)
            device.upload(ptr, v)
            on_device[k] = DeviceArray(ptr, v)
        row.tensorc_ms = median_ms(lambda: module.run(on_device, device_outputs=True),
                                   args.warmup, args.repeat)
        row.kernels_ms = sum(p["ms"] for p in module.profile(feeds, repeat=args.repeat))
        if args.emulate:
            row.baseline = "(emulated: no baseline)"
        else:
            baseline = baseline_for(model, feeds)
            row.baseline = baseline.name
            row.baseline_ms = median_ms(baseline, args.warmup, args.repeat)
    except Exception as exc:  # noqa: BLE001 - one failing model does not stop the table
        row.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
        if args.verbose:
            traceback.print_exc()
    return row


class DeviceArray:
    """A device buffer with ``__cuda_array_interface__`` (the way tensorc takes inputs that
    are already on the device)."""

    def __init__(self, ptr: int, like: np.ndarray):
        self.__cuda_array_interface__ = {"shape": like.shape, "typestr": like.dtype.str,
                                         "data": (ptr, False), "version": 3, "strides": None}


def gpu_device(args):
    """The device to run on, or exit with a message when there is no GPU."""
    from tensorc.runtime.cuda_device import EmulatedDevice, PyCudaDevice
    if args.emulate:
        return EmulatedDevice()
    try:
        device = PyCudaDevice()
    except TensorcError as exc:
        print(f"benchmarks/gpu.py needs an NVIDIA GPU: {exc}", file=sys.stderr)
        sys.exit(EXIT_NO_GPU)
    major, minor = device.gpu.compute_capability()
    arch = f"sm_{major}{minor}"
    if args.arch is None:
        from tensorc.target import CUDA_ARCHS
        args.arch = arch if arch in CUDA_ARCHS else "sm_80"
    print(f"GPU: {device.name} ({arch}); kernels built for {args.arch}")
    return device


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--arch", help="CUDA architecture (default: the GPU's)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--emulate", action="store_true",
                        help="run on the CPU emulator (no GPU; checks the plumbing only)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    device = gpu_device(args)
    if args.arch is None:
        args.arch = "sm_80"
    if args.emulate:
        args.warmup, args.repeat = min(args.warmup, 1), min(args.repeat, 2)
    rows = [bench_one(m, b, args, device) for m in args.models for b in args.batch]
    if args.json:
        print(json.dumps([asdict(r) | {"ratio": r.ratio} for r in rows], indent=2))
        return 0

    def ms(x):
        return "-" if x is None else f"{x:.3f}"
    print(format_table(
        ["model", "batch", "tensorc ms", "kernels ms", "baseline", "baseline ms",
         "tensorc/baseline", "launches", "max abs err", "error"],
        [[r.model, str(r.batch), ms(r.tensorc_ms), ms(r.kernels_ms), r.baseline,
          ms(r.baseline_ms), "-" if r.ratio is None else f"{r.ratio:.2f}", str(r.launches),
          "-" if r.max_abs_err is None else f"{r.max_abs_err:.2g}", r.error] for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

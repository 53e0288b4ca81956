"""Run ONNX's backend node tests through the CUDA path, on the CPU emulator (no GPU needed).

    .venv/bin/python tools/cuda_node_report.py              # every node test the CPU passes
    .venv/bin/python tools/cuda_node_report.py -k softmax   # only the matching ones

Each case's model is compiled for target cuda; the generated CUDA C of a batch of cases is
built into one emulator library (one host-compiler run per batch, which keeps the run to
minutes), and every case runs its launch plan on it and compares with ONNX's expected
outputs. Cases the CPU backend lists as expected failures are skipped; so are the cases
whose shapes depend on input values (the ONNX backend freezes those inputs; this report
does not) and those the CUDA backend rejects by design (float8, int4, int2: a clear error).
"""
from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tensorc.codegen.cuda_emulator import build_emulator  # noqa: E402
from tensorc.codegen.cuda_prelude import PRELUDE  # noqa: E402
from tensorc.compiler.cuda import compile_graph_cuda, cuda_module  # noqa: E402
from tensorc.errors import ConstantRequiredError, TensorcError  # noqa: E402
from tensorc.frontend.onnx import import_onnx  # noqa: E402
from tensorc.runtime.cuda import CudaModule  # noqa: E402
from tensorc.runtime.cuda_device import EmulatedDevice, kernel_sync_flags  # noqa: E402
from tensorc.runtime.launch_plan import Launch, LaunchPlan  # noqa: E402
from tensorc.target import Target  # noqa: E402

EXPECTED_FAILURES = ROOT / "tests" / "backend" / "expected_failures.txt"
BATCH = 250


def cases(pattern: str):
    from onnx.backend.test.case.node import collect_testcases
    skip = {line.split(" # ")[0].strip() for line in EXPECTED_FAILURES.read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    return [c for c in collect_testcases("") if c.name not in skip and re.search(pattern, c.name)]


def as_array(value) -> np.ndarray:
    from onnx import TensorProto, numpy_helper
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def prepare(case, index: int, target: Target):
    """(feeds, expected outputs, module, launch plan with renamed kernels, renamed source)."""
    inputs, expected = case.data_sets[0]
    initializers = {t.name for t in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in initializers]
    feeds = {n: as_array(v) for n, v in zip(names, inputs)}
    expected = [as_array(v) for v in expected]
    graph = import_onnx(case.model, {n: v.shape for n, v in feeds.items()})
    module = cuda_module(compile_graph_cuda(graph, target), target, build=False)
    prefix = f"c{index}_"
    source = module.source[len(PRELUDE):]
    for name in sorted(kernel_sync_flags(module.source), key=len, reverse=True):
        source = re.sub(rf"\b{name}\b", prefix + name, source)
    plan = LaunchPlan([Launch(prefix + x.kernel, x.grid, x.block, x.args, x.group)
                       for x in module.plan.launches], module.plan.arena_size)
    return feeds, expected, module, plan, source


def check(case, feeds, expected, module: CudaModule) -> None:
    got = module.run(feeds)
    for (name, _, _), want in zip(module.outputs, expected):
        if want.dtype.kind in "fcV":
            # ONNX's own runner: two bfloat16 ulps for bfloat16 outputs
            rtol = max(case.rtol, 1e-3, 2 ** -6 if want.dtype.name == "bfloat16" else 0)
            np.testing.assert_allclose(got[name].astype(np.float64), want.astype(np.float64),
                                       rtol=rtol, atol=max(case.atol, 1e-5), equal_nan=True)
        else:
            np.testing.assert_array_equal(got[name], want)


def run_batch(batch, target: Target, results: dict) -> None:
    prepared = []
    for k, case in enumerate(batch):
        try:
            prepared.append((case, *prepare(case, k, target)))
        except ConstantRequiredError:
            results[case.name] = "skipped: shapes depend on input values"
        except TensorcError as exc:
            kind = "rejected" if "does not support dtype" in str(exc) else "compile error"
            results[case.name] = f"{kind}: {str(exc).splitlines()[0][:160]}"
    source = PRELUDE + "\n".join(p[5] for p in prepared)
    library = build_emulator(source, kernel_sync_flags(source))

    class Device(EmulatedDevice):
        def load(self, module):
            self.kernels = library
            return {name: name for name in module.plan.kernel_names}

    for case, feeds, expected, module, plan, _ in prepared:
        try:
            renamed = CudaModule(module.source, None, plan, module.inputs, module.outputs,
                                 module.const_pool, module.target)
            check(case, feeds, expected, renamed.use_device(Device()))
            results[case.name] = "ok"
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the run
            results[case.name] = f"wrong: {type(exc).__name__}: " \
                                 f"{' '.join(str(exc).split())[:160]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only the cases whose name matches this regex")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    target = Target.from_string("cuda")
    todo = cases(args.k)
    results: dict[str, str] = {}
    for start in range(0, len(todo), BATCH):
        run_batch(todo[start:start + BATCH], target, results)
        print(f"{min(start + BATCH, len(todo))}/{len(todo)} cases", file=sys.stderr)
    counts = Counter(r.split(":")[0] for r in results.values())
    for name, result in sorted(results.items()):
        if result.startswith(("wrong", "compile error")):
            print(f"{name}: {result}")
    print(", ".join(f"{n} {k}" for k, n in counts.most_common()))
    return 0 if not counts.get("wrong") and not counts.get("compile error") else 1


if __name__ == "__main__":
    sys.exit(main())

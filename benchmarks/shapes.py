"""One symbolic module against a module compiled for each shape, and against onnxruntime.

For each model of models/symbolic.py (symbolic batch, sequence, width, height, KV-cache
length), the benchmark compiles the model once with its dims symbolic, then draws a sweep of
shapes from each dim's range with a printed seed: always 1 (0 for a dim whose range starts
there, such as an empty KV cache), the range's upper end where finite, and primes and sizes
that are no multiple of a vector or a tile. At every shape it times, side by side in one run
(tensorc.benchmark.time_alternating: medians after warm-up), the symbolic module, a module
compiled statically for that shape, and onnxruntime, at 1 and 2 threads; and it prints the
compile time of the symbolic module beside the static ones.

The targets (issue: symbolic shapes): at every shape the symbolic module at most 1.10x the
static one (geomean at most 1.05x) and at most onnxruntime's latency, its intermediate
tensors (the arena its memory plan sizes for the shape) at most 1.2x the static plan's; its
compile at most 2x a static compile.

    python -m benchmarks.shapes                          # every model, 4 shapes each
    python -m benchmarks.shapes --models bert_encoder --shapes 6 --seed 7 --json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorc  # noqa: E402
from benchmarks.common import format_table, geomean  # noqa: E402
from models.symbolic import SYMBOLIC_MODELS  # noqa: E402
from tensorc.benchmark import time_alternating  # noqa: E402
# the modules tensorc.compile imports on a process's first call (tensorc/api.py): imported here,
# so that the first model's symbolic compile, which runs first, is not timed with them
from tensorc.compiler.llvm import compile_llvm_module  # noqa: E402, F401
from tensorc.errors import TensorcError  # noqa: E402
from tensorc.frontend.model import import_model  # noqa: E402
from tensorc.reference import onnxruntime_session, run_session  # noqa: E402

# sizes that are no multiple of 4, 8 or 16 (vectors, register tiles), primes among them
ODD_SIZES = (3, 7, 13, 17, 31, 37, 61, 97, 127)
# the largest value drawn for an unbounded dim: the BERT model's position table has 128 rows
# (a bound its graph implies but the importer does not derive yet)
DRAW_MAX = 127


def dim_table(model):
    """The model's dim table: each symbolic dim's range (with the lower bounds the model
    implies: an OCR line at least 4 wide) and the constraints a run must meet."""
    _, graph = import_model(model, None, symbolic=True)
    return graph.dims


def _valid(model, table, dims: dict[str, int]) -> bool:
    try:
        table.check(concrete_inputs(model, dims))
    except TensorcError:
        return False
    return True


def draw_shapes(model, table, count: int, rng: random.Random) -> list[dict[str, int]]:
    """``count`` assignments of the dims that the model's constraints admit: the first at
    each range's low end (1, or 0 where the range starts there; the next values the model
    admits where it does not), the second at the high end where finite, the rest from
    ODD_SIZES within range (and other sizes where no odd one is admitted: a detector whose
    map must halve evenly)."""
    ranges = {var.name: bounds for var, bounds in table.bounds().items()
              if var.name in table.symbols}
    shapes: list[dict[str, int]] = []
    low = {n: lo for n, (lo, _) in ranges.items()}
    for step in range(DRAW_MAX):
        pick = {n: v + step for n, v in low.items()}
        if _valid(model, table, pick):
            shapes.append(pick)
            break
    if any(hi is not None for _, hi in ranges.values()):
        high = {n: hi if hi is not None else min(DRAW_MAX, max(lo, 17))
                for n, (lo, hi) in ranges.items()}
        if _valid(model, table, high):
            shapes.append(high)
    sizes = list(ODD_SIZES) + list(range(2, DRAW_MAX + 1))
    for _ in range(2000):
        if len(shapes) >= count:
            break
        pick = {}
        for n, (lo, hi) in ranges.items():
            top = hi if hi is not None else DRAW_MAX
            odd = [s for s in ODD_SIZES if lo <= s <= top]
            pick[n] = rng.choice(odd) if odd and rng.random() < 0.8 else \
                rng.choice([s for s in sizes if lo <= s <= top] or [lo])
        if pick not in shapes and _valid(model, table, pick):
            shapes.append(pick)
    return shapes[:count]


def concrete_inputs(model, dims: dict[str, int]) -> dict[str, tuple[int, ...]]:
    out = {}
    for value in model.graph.input:
        out[value.name] = tuple(d.dim_value if d.HasField("dim_value") else dims[d.dim_param]
                                for d in value.type.tensor_type.shape.dim)
    return out


def feeds_for(model, shapes: dict, seed: int):
    import numpy as np
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        shape = shapes[value.name]
        kind = value.type.tensor_type.elem_type
        if kind == 1:
            feeds[value.name] = rng.standard_normal(shape).astype("float32")
        else:
            high = 2 if "mask" in value.name else 50
            feeds[value.name] = rng.integers(0, high, shape).astype("int64")
    return feeds


def run(names: list[str], count: int, seed: int, threads: list[int], seconds: float) -> dict:
    rng = random.Random(seed)
    rows, report = [], {"seed": seed, "models": {}}
    for name in names:
        model = SYMBOLIC_MODELS[name]()
        start = time.perf_counter()
        symbolic = tensorc.compile(model, cache=False)
        symbolic_compile = time.perf_counter() - start
        static_compiles, entries = [], []
        for k, dims in enumerate(draw_shapes(model, dim_table(model), count, rng)):
            shapes = concrete_inputs(model, dims)
            start = time.perf_counter()
            static = tensorc.compile(model, input_shapes=shapes, cache=False)
            static_compiles.append(time.perf_counter() - start)
            feeds = feeds_for(model, shapes, k)
            for n in threads:
                symbolic.num_threads = static.num_threads = n
                session = onnxruntime_session(model, num_threads=n)
                timings = time_alternating({
                    "symbolic": lambda m=symbolic, f=feeds: m.run(f),
                    "static": lambda m=static, f=feeds: m.run(f),
                    "onnxruntime": lambda s=session, f=feeds: run_session(s, f),
                }, seconds=seconds)
                ms = {k: t.median_ms for k, t in timings.items()}
                memory = symbolic.arena_bytes(shapes) / max(static.arena_bytes(), 1)
                entries.append({"dims": dims, "threads": n, **ms, "memory_ratio": memory})
                rows.append([name, " ".join(f"{d}={v}" for d, v in dims.items()), str(n),
                             f"{ms['symbolic']:.3f}", f"{ms['static']:.3f}",
                             f"{ms['onnxruntime']:.3f}",
                             f"{ms['symbolic'] / ms['static']:.2f}x",
                             f"{ms['symbolic'] / ms['onnxruntime']:.2f}x",
                             f"{memory:.2f}x"])
        ratios = [e["symbolic"] / e["static"] for e in entries]
        report["models"][name] = {
            "symbolic_compile_s": round(symbolic_compile, 2),
            "static_compile_s_median": round(statistics.median(static_compiles), 2),
            "geomean_symbolic_over_static": round(geomean(ratios), 3),
            "worst_symbolic_over_static": round(max(ratios), 3),
            "worst_symbolic_over_onnxruntime": round(
                max(e["symbolic"] / e["onnxruntime"] for e in entries), 3),
            "worst_memory_ratio": round(max(e["memory_ratio"] for e in entries), 3),
            "runs": entries}
    report["table"] = rows
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(sorted(SYMBOLIC_MODELS)))
    parser.add_argument("--shapes", type=int, default=4, help="shapes per model")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--seconds", type=float, default=0.5,
                        help="timing per candidate and shape")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 16)
    report = run(args.models.split(","), args.shapes, seed,
                 [int(t) for t in args.threads.split(",")], args.seconds)
    if args.json:
        print(json.dumps({k: v for k, v in report.items() if k != "table"}, indent=1))
        return
    print(f"seed {seed} (rerun the same sweep with --seed {seed})\n")
    print(format_table(["model", "dims", "thr", "symbolic ms", "static ms", "onnxrt ms",
                        "sym/static", "sym/ort", "arena sym/static"], report["table"]))
    print()
    summary = [[name, f"{m['geomean_symbolic_over_static']:.2f}x",
                f"{m['worst_symbolic_over_static']:.2f}x",
                f"{m['worst_symbolic_over_onnxruntime']:.2f}x",
                f"{m['worst_memory_ratio']:.2f}x",
                f"{m['symbolic_compile_s']:.1f}", f"{m['static_compile_s_median']:.1f}"]
               for name, m in report["models"].items()]
    print(format_table(["model", "geomean sym/static", "worst sym/static", "worst sym/ort",
                        "worst arena sym/static", "symbolic compile s",
                        "static compile s (median)"], summary))


if __name__ == "__main__":
    main()

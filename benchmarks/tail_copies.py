"""Remainder copies with their constant loops rolled (passes/loop/symbolic_tails.py) against the
same copies unrolled by LLVM, side by side: one symbolic MatMul model compiled both ways in one
process, timed alternating (tensorc.benchmark.time_alternating, one thread) at row counts that
hit every remainder of the register tile's 6 rows, with and without whole tiles before it.

    python -m benchmarks.tail_copies                    # attention scores and a projection
    python -m benchmarks.tail_copies --rows 1,3,5 --seconds 3
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorc  # noqa: E402
from benchmarks.common import format_table  # noqa: E402
from tensorc.benchmark import time_alternating  # noqa: E402
from tensorc.passes.loop import symbolic_tails  # noqa: E402


def scores_model():
    """[batch, m, 16] @ [batch, 16, n]: an attention's scores over a symbolic query count."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["q", "k"], ["y"])], "scores",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, ["b", "m", 16]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, ["b", 16, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "m", "n"])], [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def projection_model():
    """[m, 64] @ W[64, 96]: a projection of a symbolic token count."""
    w = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "projection",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", 96])],
        [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def feeds(name: str, rows: int, rng) -> dict:
    if name == "scores":
        return {"q": rng.standard_normal((12, rows, 16)).astype(np.float32),
                "k": rng.standard_normal((12, 16, 40)).astype(np.float32)}
    return {"x": rng.standard_normal((rows, 64)).astype(np.float32)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1,2,3,4,5,7,11,13,101")
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args(argv)
    table = []
    for name, build in (("scores", scores_model), ("projection", projection_model)):
        model = build()
        default = symbolic_tails.ROLLED_COPIES
        try:
            symbolic_tails.ROLLED_COPIES = True
            rolled = tensorc.compile(model, cache=False)
            symbolic_tails.ROLLED_COPIES = False
            unrolled = tensorc.compile(model, cache=False)
        finally:
            symbolic_tails.ROLLED_COPIES = default
        rolled.num_threads = unrolled.num_threads = 1
        rng = np.random.default_rng(1)
        for rows in (int(r) for r in args.rows.split(",")):
            x = feeds(name, rows, rng)
            np.testing.assert_allclose(rolled.run(x)["y"], unrolled.run(x)["y"], rtol=1e-5,
                                       atol=1e-5)
            t = time_alternating({"unrolled": lambda m=unrolled, x=x: m.run(x),
                                  "rolled": lambda m=rolled, x=x: m.run(x)},
                                 seconds=args.seconds)
            u, r = t["unrolled"], t["rolled"]
            table.append([name, str(rows), f"{u.median_ms * 1e3:.2f}",
                          f"{r.median_ms * 1e3:.2f}", f"{r.median_ms / u.median_ms:.3f}",
                          f"{r.min_ms / u.min_ms:.3f}"])
            print(" | ".join(table[-1]), file=sys.stderr, flush=True)
    print(format_table(["kernel", "rows", "unrolled us", "rolled us", "rolled / unrolled",
                        "min / min"], table))


if __name__ == "__main__":
    main()

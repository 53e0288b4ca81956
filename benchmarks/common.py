"""Helpers shared by the benchmarks: FLOP counts, one core's peak, rate cells and plain-text
tables.

The timing helper itself is ``tensorc.benchmark.time_alternating`` and the onnxruntime
session and output check are in ``tensorc.reference``: they live in the package because the
``tensorc bench`` command uses them too.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence

import onnx
from onnx import shape_inference


def _fix_input_shapes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> None:
    for value in model.graph.input:
        if value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[value.name], strict=True):
                dim.Clear()
                dim.dim_value = int(size)


def count_flops(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> int:
    """Floating-point operations of one inference, counting Conv, Gemm and MatMul (2 per
    multiply-add); the rest is small next to them in the models benchmarked here.

    >>> import models
    >>> count_flops(models.load("mlp"))
    469504
    """
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    if input_shapes:
        _fix_input_shapes(fixed, input_shapes)
    inferred = shape_inference.infer_shapes(fixed)
    shapes: dict[str, tuple[int, ...]] = {}
    for value in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        dims = value.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    for init in inferred.graph.initializer:
        shapes[init.name] = tuple(init.dims)

    flops = 0
    for node in inferred.graph.node:
        out = shapes.get(node.output[0])
        if out is None:
            continue
        if node.op_type == "Conv":
            weight = shapes[node.input[1]]  # [F, C/groups, *K]
            flops += 2 * math.prod(out) * math.prod(weight[1:])
        elif node.op_type == "Gemm":
            a = shapes[node.input[0]]
            trans_a = any(a.name == "transA" and a.i for a in node.attribute)
            k = a[0] if trans_a else a[1]
            flops += 2 * math.prod(out) * k
        elif node.op_type == "MatMul":
            k = shapes[node.input[0]][-1]
            flops += 2 * math.prod(out) * k
    return flops


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table, columns separated by ``|``; text left-aligned, the rest right.

    >>> print(format_table(["a", "b"], [["x", "1"]]))
    a | b
    --+--
    x | 1
    """
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = []
        for i, (cell, width) in enumerate(zip(cells, widths, strict=True)):
            parts.append(str(cell).ljust(width) if i == 0 else str(cell).rjust(width))
        return " | ".join(parts)

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def add_peak_argument(parser: argparse.ArgumentParser) -> None:
    """``--peak-gflops``: one core's fp32 peak, which the percentages are of."""
    parser.add_argument("--peak-gflops", type=float, help="one core's fp32 peak (default: "
                        "tensorc.runtime.machine's measurement)")


def one_core_peak(given: float | None) -> float:
    """``given`` (``--peak-gflops``), else one core's fp32 peak as tensorc.runtime.machine
    measures it."""
    if given is not None:
        return given
    from tensorc.runtime.machine import machine_roofline
    return machine_roofline(threads=1).peak_gflops


def rate_cell(timing, flops: float, peak: float) -> str:
    """A timing (``tensorc.benchmark``'s: median_ms, noisy) of ``flops`` as 'ms GFLOP/s (% of
    peak)', '~' after the ms where its min-max spread was wide."""
    gflops = flops / timing.median_ms / 1e6
    noisy = "~" if timing.noisy else ""
    return f"{timing.median_ms:.3f}{noisy} ms {gflops:6.1f} ({100 * gflops / peak:3.0f}%)"


def geomean(values: Sequence[float]) -> float | None:
    """The geometric mean, None for no values."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None

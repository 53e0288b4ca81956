"""Snapshot the code tensorc generates, to prove that a refactor changed none of it.

For every model in models/ and a set of single-op models (one kernel of each conv
formulation, matmul schedule and pool schedule) this writes, into a folder:

- ``<case>.ll``: the LLVM IR that codegen emits, before LLVM's optimizer, with every local
  value renamed in order of appearance (value names are not part of the contract);
- ``<case>.loops``: the loop IR of each distinct kernel and of the entry function;
- ``<case>.cu``: CUDA C, for a few models.

    python -m tools.ir_snapshot write /tmp/ir-before        # on the old code
    python -m tools.ir_snapshot write /tmp/ir-after         # on the new code
    python -m tools.ir_snapshot compare /tmp/ir-before /tmp/ir-after

``compare`` checks each file of the second snapshot (so a ``--only`` snapshot compares its
cases), prints each that differs (LLVM IR must not differ at all; loop IR may differ only by
the annotations new loop passes add) and exits 1 if any ``.ll`` or ``.cu`` differs.
``--only NAME`` (repeatable, a prefix) limits ``write`` to some cases.
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

import models
import tensorc

CUDA_CASES = ("lenet5", "mlp")


def _single(op: str, x_shape, attrs: dict, weights: list[tuple[str, tuple]] | None = None,
            extra_inputs: list[tuple[str, tuple]] | None = None, opset: int = 17
            ) -> onnx.ModelProto:
    """A one-node model: input x, constant weights (seeded), output y."""
    rng = np.random.default_rng(0)
    inits = [helper.make_tensor(name, TensorProto.FLOAT, shape,
                                rng.standard_normal(shape).astype(np.float32).ravel())
             for name, shape in (weights or [])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
               for n, s in (extra_inputs or [])]
    names = ["x"] + [n for n, _ in (extra_inputs or [])] + [n for n, _ in (weights or [])]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], f"{op.lower()}", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _conv(n, c, h, w, f, k, stride=1, pad=None, group=1, dilation=1, bias=True):
    kh, kw = (k, k) if isinstance(k, int) else k
    pads = pad if pad is not None else [(kh // 2) * dilation, (kw // 2) * dilation] * 2
    weights = [("w", (f, c // group, kh, kw))] + ([("b", (f,))] if bias else [])
    return _single("Conv", (n, c, h, w), dict(kernel_shape=[kh, kw], strides=[stride] * 2,
                                              pads=pads, group=group,
                                              dilations=[dilation] * 2), weights)


def _single_cases() -> dict[str, tuple[onnx.ModelProto, str]]:
    """name -> (model, target string): kernels that reach every conv formulation, matmul
    schedule and pool schedule."""
    llvm, direct = "llvm", "llvm -winograd=0"
    return {
        "conv3x3_64_56": (_conv(1, 64, 56, 56, 64, 3), llvm),            # Winograd / blocked
        "conv3x3_64_56_direct": (_conv(1, 64, 56, 56, 64, 3), direct),   # flattened
        "conv3x3_512_7": (_conv(1, 512, 7, 7, 512, 3), llvm),            # channels outer
        "conv3x3_s2_288_17": (_conv(1, 288, 35, 35, 384, 3, 2, [0, 0, 0, 0]), llvm),
        "conv1x1_1024_7": (_conv(1, 1024, 7, 7, 2048, 1), llvm),         # filters in lanes
        "conv1x1_256_56": (_conv(1, 64, 56, 56, 256, 1), llvm),          # pointwise GEMM
        "conv7x7_s2_first": (_conv(1, 3, 224, 224, 64, 7, 2), llvm),     # im2col GEMM
        "conv3x3_3_odd": (_conv(1, 3, 111, 111, 24, 3), llvm),
        "conv_depthwise": (_conv(1, 96, 56, 56, 96, 3, group=96), llvm),
        "conv_depthwise_s2": (_conv(1, 144, 55, 55, 144, 3, 2, group=144), llvm),
        "conv_grouped": (_conv(1, 64, 28, 28, 64, 3, group=4), llvm),
        "conv_dilated": (_conv(1, 64, 33, 33, 64, 3, dilation=6), llvm),
        "conv1x7_160_17": (_conv(1, 160, 17, 17, 160, (1, 7)), llvm),
        "conv5x5_48_27": (_conv(1, 48, 27, 27, 64, 5), llvm),
        "conv1d_audio": (_single("Conv", (1, 40, 301), dict(kernel_shape=[5], pads=[2, 2]),
                                 [("w", (64, 40, 5)), ("b", (64,))]), llvm),
        "conv_transpose": (_single("ConvTranspose", (1, 32, 14, 14),
                                   dict(kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1]),
                                   [("w", (32, 16, 4, 4))]), llvm),
        "maxpool3x3_s2": (_single("MaxPool", (1, 64, 112, 112),
                                  dict(kernel_shape=[3, 3], strides=[2, 2],
                                       pads=[1, 1, 1, 1])), llvm),
        "maxpool5x5_same": (_single("MaxPool", (1, 128, 13, 13),
                                    dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])), llvm),
        "maxpool13x13_same": (_single("MaxPool", (1, 256, 20, 20),
                                      dict(kernel_shape=[13, 13], pads=[6, 6, 6, 6])), llvm),
        "avgpool3x3": (_single("AveragePool", (1, 32, 35, 35),
                               dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                    count_include_pad=0)), llvm),
        "global_avgpool": (_single("GlobalAveragePool", (1, 1280, 7, 7), {}), llvm),
        "lppool": (_single("LpPool", (1, 16, 20, 20), dict(kernel_shape=[3, 3], p=2)), llvm),
        "matmul_gemv": (_single("MatMul", (1, 2048), {}, [("w", (2048, 1000))]), llvm),
        "matmul_16x768x768": (_single("MatMul", (16, 768), {}, [("w", (768, 768))]), llvm),
        "matmul_500x768x3072": (_single("MatMul", (500, 768), {}, [("w", (768, 3072))]), llvm),
        "matmul_128x3072x3072": (_single("MatMul", (128, 3072), {}, [("w", (3072, 3072))]),
                                 llvm),
        "matmul_1024": (_single("MatMul", (1024, 1024), {}, [("w", (1024, 1024))]), llvm),
        "matmul_batched_inputs": (_single("MatMul", (12, 77, 64), {},
                                          extra_inputs=[("b", (12, 64, 77))]), llvm),
    }


def _normalize_llvm(text: str) -> str:
    """Rename local values (%name, %"name", %N) per function in order of appearance."""
    out, names = [], {}
    token = re.compile(r'%(?:"[^"]*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*|[0-9]+)')
    for line in text.splitlines():
        if line.startswith("define "):
            names = {}

        def rename(match, names=names):
            return names.setdefault(match.group(0), f"%v{len(names)}")
        out.append(token.sub(rename, line))
    return "\n".join(out) + "\n"


def _llvm_ir(model, input_shapes, target: str) -> str:
    from tensorc.frontend.model import import_model as _import
    from tensorc.compiler.llvm import compile_graph
    _, graph = _import(model, input_shapes)
    return compile_graph(graph, tensorc.Target.from_string(target)).llvm_ir


def _cases(only: list[str]):
    for name in sorted(models.MODELS):
        yield name, (str(models.path(name)), models.input_shapes(name), "llvm")
    for name, (model, target) in _single_cases().items():
        yield name, (model, None, target)


def write(folder: Path, only: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, (model, shapes, target) in _cases(only):
        if only and not any(name.startswith(o) for o in only):
            continue
        start = time.perf_counter()
        (folder / f"{name}.ll").write_text(_normalize_llvm(_llvm_ir(model, shapes, target)))
        loops = tensorc.inspect(model, stage="loops", input_shapes=shapes, target=target)
        (folder / f"{name}.loops").write_text(loops)
        if name in CUDA_CASES:
            cuda = tensorc.inspect(model, stage="cuda", input_shapes=shapes,
                                   target="cuda -arch=sm_80")
            (folder / f"{name}.cu").write_text(cuda)
        print(f"{name}: {time.perf_counter() - start:.1f}s", flush=True)


def compare(before: Path, after: Path) -> int:
    bad, compared = 0, 0
    for new in sorted(after.iterdir()):
        old = before / new.name
        if not old.exists():
            print(f"not in {before}: {new.name}")
            continue
        compared += 1
        a, b = old.read_text(), new.read_text()
        if a == b:
            continue
        strict = old.suffix != ".loops"
        bad += strict
        print(f"{'DIFFERS' if strict else 'loops differ'}: {old.name}")
        diff = difflib.unified_diff(a.splitlines(), b.splitlines(), str(old), str(new),
                                    lineterm="", n=1)
        for k, line in enumerate(diff):
            if k > 40:
                print("  ...")
                break
            print("  " + line)
    print(f"{compared} files compared: " +
          (f"{bad} generated-code file(s) differ" if bad else "generated code identical"))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("folder", type=Path)
    w.add_argument("--only", action="append", default=[])
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.folder, args.only)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())

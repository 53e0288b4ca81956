"""The CUDA C that codegen/cuda.py writes: what matters in it, read off the source (float4
accesses where aligned, shared tiles and their barriers, warp-shuffle reductions, half
storage, launch bounds, fast-math intrinsics on request)."""
from __future__ import annotations

import re

import numpy as np
from helpers import make_model, tensor_info
from onnx import helper

from tensorc.codegen.cuda import float_literal, int_literal
from tensorc.compiler.cuda import compile_graph_cuda
from tensorc.frontend.onnx import import_onnx
from tensorc.target import Target


def source_of(nodes, inputs: dict[str, tuple], dtype: str = "float32",
              target: str = "cuda", initializers=None) -> str:
    infos = [tensor_info(n, dtype, s) for n, s in inputs.items()]
    model = make_model(nodes, infos, ["y"], initializers=initializers)
    return compile_graph_cuda(import_onnx(model), Target.from_string(target)).source


def kernels(source: str) -> dict[str, str]:
    heads = list(re.finditer(r'extern "C" __global__ void __launch_bounds__\((\d+), (\d+)\) '
                             r'(\w+)\(', source))
    return {m.group(3): source[m.start():(heads[k + 1].start() if k + 1 < len(heads)
                                          else len(source))]
            for k, m in enumerate(heads)}


def test_aligned_elementwise_moves_float4() -> None:
    src = source_of([helper.make_node("Add", ["a", "b"], ["y"])], {"a": (8, 64), "b": (8, 64)})
    assert src.count("*reinterpret_cast<const float4*>") == 2      # both operands
    assert re.search(r"\*reinterpret_cast<float4\*>\(&\w+\[", src)     # the store


def test_unaligned_rows_stay_scalar() -> None:
    src = source_of([helper.make_node("Add", ["a", "b"], ["y"])], {"a": (8, 63), "b": (8, 63)})
    assert "float4" not in src


def test_launch_bounds_are_the_block_size() -> None:
    src = source_of([helper.make_node("Relu", ["a"], ["y"])], {"a": (4, 100)})
    (text,) = kernels(src).values()
    threads, blocks = map(int, re.search(r"__launch_bounds__\((\d+), (\d+)\)", text).groups())
    assert threads == 100 and blocks >= 1       # 400 elements, 4 per thread, one block
    assert "threadIdx.x" in text and "blockIdx.x" in text


def test_tiled_matmul_syncs_around_its_shared_tiles() -> None:
    src = source_of([helper.make_node("MatMul", ["a", "b"], ["y"])],
                    {"a": (64, 64), "b": (64, 64)})
    (text,) = kernels(src).values()
    assert text.count("__shared__ __align__(16) float") == 2
    assert text.count("__syncthreads();") == 2
    assert re.search(r"float matmul_local\[\d+\];", text)     # the register tile


def test_softmax_reduces_rows_with_warp_shuffles() -> None:
    src = source_of([helper.make_node("Softmax", ["a"], ["y"], axis=-1)], {"a": (4, 512)})
    (text,) = kernels(src).values()
    assert "tc_thread_reduce(softmax_max_partial[0], tc_op_max(), " in text
    assert "tc_thread_reduce(softmax_sum_partial[0], tc_op_sum(), " in text
    assert "__shared__" in text               # more than a warp: partials meet in shared memory


def test_half_is_stored_as_half_and_computed_in_float() -> None:
    src = source_of([helper.make_node("Mul", ["a", "b"], ["y"])], {"a": (4, 10), "b": (4, 10)},
                    dtype="float16")
    assert re.search(r"\(const __half\* __restrict__ in0, const __half\* __restrict__ in1, "
                     r"__half\* __restrict__ \w+\)", src)
    assert "__float2half_rn(" in src and "__half2float(" in src
    assert "tc_h(" in src                     # rounded to half precision


def test_fast_math_on_request() -> None:
    nodes = [helper.make_node("Exp", ["a"], ["y"])]
    assert "expf(" in source_of(nodes, {"a": (4, 8)}) and "__expf" not in \
        source_of(nodes, {"a": (4, 8)})
    assert "__expf(" in source_of(nodes, {"a": (4, 8)}, target="cuda -fastmath=1")


def test_literals() -> None:
    assert float_literal(0.1, "float32") == "1e-01f"
    assert float_literal(float("inf"), "float32") == "tc_bitcast<float>(0x7f800000u)"
    assert float_literal(-float("inf"), "float64") == "-tc_bitcast<double>(0x7ff0000000000000ULL)"
    assert float_literal(1 / 3, "float16") == "3.3325195e-01f"       # rounded to half first
    assert int_literal(7, "int64") == "7" and int_literal(1 << 40, "int64") == "1099511627776LL"
    assert int_literal(-(1 << 63), "int64") == "(-9223372036854775807LL - 1)"
    assert np.float32(1e-01) == np.float32(0.1)

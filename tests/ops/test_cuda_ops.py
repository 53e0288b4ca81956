"""Every op family's GPU schedule, as the CUDA C tensorc generates, executed on the CPU
emulator against numpy.

All cases are independent subgraphs of one ONNX model with one output each, compiled for
target cuda once and built by the host C++ compiler once (module fixture); each test reads
its case's output. Shapes are odd where it matters (33 rows for a 16-row tile, 300-element
rows for 256 threads, 7-wide rows narrower than a warp) so that the guards run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np
import pytest
from helpers import check_result, make_model, ort_run
from helpers_cuda import needs_nvcc
from onnx import helper

from tensorc.codegen.nvcc import build_fatbin
from tensorc.compiler.cuda import compile_graph_cuda, cuda_module
from tensorc.frontend.onnx import import_onnx
from tensorc.runtime.cuda_device import EmulatedDevice, kernel_sync_flags
from tensorc.target import Target


@dataclass
class Case:
    name: str
    nodes: list                         # ONNX nodes; the last one's output is named `name`
    inputs: dict[str, np.ndarray]
    reference: Callable | None          # numpy: inputs (by name) -> output; None: onnxruntime
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    rtol: float = 1e-4
    atol: float = 1e-5


def rand(shape, seed, low=-1.0, high=1.0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def node(op: str, inputs: list[str], output: str, **attrs):
    return helper.make_node(op, inputs, [output], **attrs)


def erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(np.float64))


def conv_ref(x, w, b=None, stride=1, pad=0, dilation=1, groups=1) -> np.ndarray:
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    ho = (h - dilation * (kh - 1) - 1) // stride + 1
    wo = (wd - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, f, ho, wo))
    per = f // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        ws = w[g * per:(g + 1) * per]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dilation:ky * dilation + stride * (ho - 1) + 1:stride,
                           kx * dilation:kx * dilation + stride * (wo - 1) + 1:stride]
                out[:, g * per:(g + 1) * per] += np.einsum("nchw,fc->nfhw", patch,
                                                           ws[:, :, ky, kx])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out.astype(np.float32)


def pool_ref(x, k, stride, pad, op) -> np.ndarray:
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)],
                constant_values=fill)
    n, c, h, w = xp.shape
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    windows = np.stack([xp[:, :, dy:dy + stride * (ho - 1) + 1:stride,
                           dx:dx + stride * (wo - 1) + 1:stride]
                        for dy in range(k) for dx in range(k)])
    if op == "max":
        return windows.max(0).astype(np.float32)
    return (windows.sum(0) / (k * k)).astype(np.float32)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _cases() -> list[Case]:
    cases = []

    def add(name, nodes, inputs, reference, initializers=None, **tol):
        cases.append(Case(name, nodes, inputs, reference, initializers or {}, **tol))

    # --- elementwise, broadcast, injective -------------------------------------------------
    add("ew_odd", [node("Mul", ["ew_odd_x", "ew_odd_y"], "t0"),
                   node("Exp", ["ew_odd_x"], "t1"), node("Add", ["t0", "t1"], "t2"),
                   node("Relu", ["t2"], "ew_odd")],
        {"ew_odd_x": rand((7, 33), 1), "ew_odd_y": rand((1, 33), 2)},
        lambda x, y: np.maximum(x * y + np.exp(x), 0))
    add("ew_vec", [node("Tanh", ["ew_vec_x"], "u0"), node("Sigmoid", ["ew_vec_y"], "u1"),
                   node("Div", ["u0", "u1"], "ew_vec")],
        {"ew_vec_x": rand((4, 64), 3), "ew_vec_y": rand((4, 64), 4)},
        lambda x, y: np.tanh(x) * (1 + np.exp(-y)))
    add("gelu", [node("Div", ["gelu_x", "sqrt2"], "g0"), node("Erf", ["g0"], "g1"),
                 node("Add", ["g1", "one"], "g2"), node("Mul", ["gelu_x", "g2"], "g3"),
                 node("Mul", ["g3", "half"], "gelu")],
        {"gelu_x": rand((3, 40), 5, -3, 3)},
        lambda x: (0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(np.float32),
        {"sqrt2": np.array(math.sqrt(2), np.float32), "one": np.array(1, np.float32),
         "half": np.array(0.5, np.float32)})
    add("minmax_pow", [node("Max", ["mp_x", "mp_y"], "m0"), node("Min", ["m0", "mp_c"], "m1"),
                       node("Pow", ["m1", "two"], "minmax_pow")],
        {"mp_x": rand((5, 12), 6), "mp_y": rand((5, 12), 7)},
        lambda x, y: np.minimum(np.maximum(x, y), 0.25) ** 2,
        {"mp_c": np.array(0.25, np.float32), "two": np.array(2.0, np.float32)})
    add("transpose", [node("Transpose", ["tr_x"], "transpose", perm=[2, 0, 1])],
        {"tr_x": rand((3, 5, 8), 8)}, lambda x: np.transpose(x, (2, 0, 1)))
    add("concat", [node("Concat", ["cc_a", "cc_b"], "concat", axis=1)],
        {"cc_a": rand((2, 3, 5), 9), "cc_b": rand((2, 4, 5), 10)},
        lambda a, b: np.concatenate([a, b], axis=1))
    add("slice_pad", [node("Slice", ["sp_x", "sp_starts", "sp_ends", "sp_axes", "sp_steps"],
                           "s0"),
                      node("Pad", ["s0", "sp_pads", "sp_value"], "slice_pad")],
        {"sp_x": rand((6, 20), 11)},
        lambda x: np.pad(x[1:5, 2:19:3], [(1, 0), (2, 1)], constant_values=0.5),
        {"sp_starts": np.array([1, 2]), "sp_ends": np.array([5, 19]),
         "sp_axes": np.array([0, 1]), "sp_steps": np.array([1, 3]),
         "sp_pads": np.array([1, 2, 0, 1]), "sp_value": np.array(0.5, np.float32)})
    ids = np.array([[3, 0], [9, 4], [1, 1]], np.int64)
    add("gather", [node("Gather", ["ga_table", "ga_ids"], "gather", axis=0)],
        {"ga_ids": ids}, lambda i: rand((10, 6), 12)[i], {"ga_table": rand((10, 6), 12)})
    add("where_cast", [node("Less", ["wc_x", "wc_y"], "w0"),
                       node("Where", ["w0", "wc_x", "wc_y"], "w1"),
                       node("Cast", ["w1"], "w2", to=helper.np_dtype_to_tensor_dtype(
                           np.dtype("int32"))),
                       node("Add", ["w2", "wc_i"], "where_cast")],
        {"wc_x": rand((4, 9), 13, -50, 50), "wc_y": rand((4, 9), 14, -50, 50),
         "wc_i": np.arange(36, dtype=np.int32).reshape(4, 9)},
        lambda x, y, i: np.minimum(x, y).astype(np.int32) + i)

    # --- reductions ------------------------------------------------------------------------
    add("sum_rows", [node("ReduceSum", ["rs_x", "rs_axes"], "sum_rows", keepdims=1)],
        {"rs_x": rand((8, 300), 15)}, lambda x: x.sum(-1, keepdims=True),
        {"rs_axes": np.array([-1])}, atol=1e-4)
    add("max_leading", [node("ReduceMax", ["ml_x"], "max_leading", axes=[0], keepdims=0)],
        {"ml_x": rand((40, 6), 16)}, lambda x: x.max(0))
    add("mean_all", [node("ReduceMean", ["ma_x"], "mean_all", axes=[0, 1], keepdims=0)],
        {"ma_x": rand((5, 70), 17)}, lambda x: np.float32(x.mean()), atol=1e-5)
    add("mean_spatial", [node("GlobalAveragePool", ["gp_x"], "mean_spatial")],
        {"gp_x": rand((2, 5, 9, 9), 18)}, lambda x: x.mean((2, 3), keepdims=True))
    add("softmax_wide", [node("Softmax", ["sw_x"], "softmax_wide", axis=-1)],
        {"sw_x": rand((4, 1000), 19, -5, 5)}, lambda x: softmax(x))
    add("softmax_narrow", [node("Softmax", ["sn_x"], "softmax_narrow", axis=-1)],
        {"sn_x": rand((6, 7), 20, -5, 5)}, lambda x: softmax(x))
    add("softmax_mid", [node("Softmax", ["sm_x"], "softmax_mid", axis=1)],
        {"sm_x": rand((2, 50, 3), 21, -5, 5)}, lambda x: softmax(x, axis=1))
    add("log_softmax", [node("LogSoftmax", ["ls_x"], "log_softmax", axis=-1)],
        {"ls_x": rand((3, 129), 22, -5, 5)},
        lambda x: x - x.max(-1, keepdims=True) - np.log(
            np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)))
    add("layer_norm", [node("LayerNormalization", ["ln_x", "ln_g", "ln_b"], "layer_norm",
                            axis=-1, epsilon=1e-5)],
        {"ln_x": rand((4, 96), 23, -2, 2)},
        lambda x: ((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
                   * rand((96,), 24) + rand((96,), 25)),
        {"ln_g": rand((96,), 24), "ln_b": rand((96,), 25)})
    add("argmax", [node("ArgMax", ["am_x"], "argmax", axis=-1, keepdims=0)],
        {"am_x": rand((5, 200), 26)}, lambda x: x.argmax(-1))

    # --- matmul ----------------------------------------------------------------------------
    add("matmul_odd", [node("MatMul", ["mo_a", "mo_b"], "matmul_odd")],
        {"mo_a": rand((33, 70), 27), "mo_b": rand((70, 45), 28)}, lambda a, b: a @ b,
        atol=1e-4)
    add("matmul_batch", [node("MatMul", ["mb_a", "mb_b"], "matmul_batch")],
        {"mb_a": rand((2, 3, 17, 24), 29), "mb_b": rand((24, 20), 30)}, lambda a, b: a @ b,
        atol=1e-4)
    add("gemv", [node("MatMul", ["gv_a", "gv_b"], "gemv")],
        {"gv_a": rand((1, 64), 31), "gv_b": rand((64, 100), 32)}, lambda a, b: a @ b,
        atol=1e-4)
    add("gemm_relu", [node("Gemm", ["gr_a", "gr_w", "gr_b"], "h0", transB=1),
                      node("Relu", ["h0"], "gemm_relu")],
        {"gr_a": rand((64, 128), 33)},
        lambda a: np.maximum(a @ rand((96, 128), 34).T + rand((96,), 35), 0),
        {"gr_w": rand((96, 128), 34), "gr_b": rand((96,), 35)}, atol=1e-4)

    # --- convolution and pooling -----------------------------------------------------------
    def conv_case(name, x_shape, w_shape, seed, bias=True, **attrs):
        x, w = rand(x_shape, seed), rand(w_shape, seed + 1)
        b = rand((w_shape[0],), seed + 2) if bias else None
        inits = {f"{name}_w": w, **({f"{name}_b": b} if bias else {})}
        ins = [f"{name}_x", f"{name}_w"] + ([f"{name}_b"] if bias else [])
        pad = attrs.get("pads", [0])[0]
        add(name, [node("Conv", ins, name, **attrs)], {f"{name}_x": x},
            lambda x: conv_ref(x, w, b, attrs.get("strides", [1])[0], pad,
                               attrs.get("dilations", [1])[0], attrs.get("group", 1)),
            inits, atol=1e-4)

    conv_case("conv3x3", (1, 5, 13, 11), (12, 5, 3, 3), 40, pads=[1, 1, 1, 1])
    conv_case("conv7x7s2", (1, 3, 20, 20), (8, 3, 7, 7), 43, strides=[2, 2],
              pads=[3, 3, 3, 3])
    conv_case("conv1x1", (2, 16, 6, 6), (24, 16, 1, 1), 46, bias=False)
    conv_case("conv_dilated", (1, 4, 12, 12), (6, 4, 3, 3), 49, dilations=[2, 2],
              pads=[2, 2, 2, 2])
    conv_case("conv_depthwise", (1, 8, 10, 10), (8, 1, 3, 3), 52, group=8,
              pads=[1, 1, 1, 1])
    conv_case("conv_grouped", (1, 8, 7, 7), (6, 4, 3, 3), 55, group=2)
    add("max_pool", [node("MaxPool", ["mx_x"], "max_pool", kernel_shape=[3, 3],
                          strides=[2, 2], pads=[1, 1, 1, 1])],
        {"mx_x": rand((1, 4, 15, 15), 58)}, lambda x: pool_ref(x, 3, 2, 1, "max"))
    add("avg_pool", [node("AveragePool", ["av_x"], "avg_pool", kernel_shape=[2, 2],
                          strides=[2, 2])],
        {"av_x": rand((2, 3, 8, 8), 59)}, lambda x: pool_ref(x, 2, 2, 0, "avg"))
    # large windows: a pass along the rows, then one across them (pool_separable.py)
    add("max_pool_9x9", [node("MaxPool", ["mx9_x"], "max_pool_9x9", kernel_shape=[9, 9],
                              pads=[4, 4, 4, 4])],
        {"mx9_x": rand((1, 3, 13, 11), 62)}, lambda x: pool_ref(x, 9, 1, 4, "max"))
    add("avg_pool_5x5", [node("AveragePool", ["av5_x"], "avg_pool_5x5", kernel_shape=[5, 5],
                              count_include_pad=1, pads=[2, 2, 2, 2])],
        {"av5_x": rand((1, 3, 9, 10), 63)}, lambda x: pool_ref(x, 5, 1, 2, "avg"))
    add("conv_transpose", [node("ConvTranspose", ["ct_x", "ct_w"], "conv_transpose",
                                strides=[2, 2])],
        {"ct_x": rand((1, 3, 5, 5), 60)}, None, {"ct_w": rand((3, 4, 3, 3), 61)})

    # --- scans, selection, windows ---------------------------------------------------------
    add("cumsum", [node("CumSum", ["cs_x", "cs_axis"], "cumsum")],
        {"cs_x": rand((3, 40), 62)}, lambda x: np.cumsum(x, axis=1),
        {"cs_axis": np.array(1)}, atol=1e-5)
    add("topk", [helper.make_node("TopK", ["tk_x", "tk_k"], ["topk", "topk_idx"], axis=-1)],
        {"tk_x": rand((3, 50), 63)}, lambda x: -np.sort(-x, axis=-1)[:, :5],
        {"tk_k": np.array([5])})
    add("lrn", [node("LRN", ["lr_x"], "lrn", size=3, alpha=1e-3, beta=0.75, bias=1.0)],
        {"lr_x": rand((1, 6, 4, 4), 64)},
        lambda x: x / (1.0 + 1e-3 / 3 * sum(np.pad(x ** 2, [(0, 0), (1, 1), (0, 0), (0, 0)])
                                            [:, k:k + 6] for k in range(3))) ** 0.75)
    add("resize", [node("Resize", ["rz_x", "", "rz_scales"], "resize", mode="linear")],
        {"rz_x": rand((1, 2, 4, 5), 65)}, None,
        {"rz_scales": np.array([1, 1, 2, 1.5], np.float32)})

    # --- half precision --------------------------------------------------------------------
    a16, b16 = rand((20, 40), 66).astype(np.float16), rand((40, 24), 67).astype(np.float16)
    add("half_matmul", [node("MatMul", ["h_a", "h_b"], "hm0"),
                        node("Add", ["hm0", "h_c"], "half_matmul")],
        {"h_a": a16, "h_b": b16},
        lambda a, b: ((a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
                      + np.float16(0.5)),
        {"h_c": np.array(0.5, np.float16)}, rtol=2e-3, atol=2e-3)
    add("half_sum", [node("ReduceSum", ["hs_x", "hs_axes"], "half_sum", keepdims=0)],
        {"hs_x": rand((6, 100), 68).astype(np.float16)},
        lambda x: x.astype(np.float32).sum(-1).astype(np.float16),
        {"hs_axes": np.array([-1])}, rtol=2e-3, atol=2e-3)
    add("bfloat16_cast", [node("Cast", ["bf_x"], "bf0", to=helper.TensorProto.BFLOAT16),
                          node("Cast", ["bf0"], "bf1", to=helper.TensorProto.FLOAT),
                          node("Cast", ["bf_x"], "bf2", to=helper.TensorProto.FLOAT16),
                          node("Cast", ["bf2"], "bf3", to=helper.TensorProto.FLOAT),
                          node("Add", ["bf1", "bf3"], "bfloat16_cast")],
        {"bf_x": rand((3, 37), 69, -300, 300)},
        lambda x: (x.astype(ml_dtypes.bfloat16).astype(np.float32)
                   + x.astype(np.float16).astype(np.float32)), rtol=0, atol=0)
    # a kernel whose output buffer is named like a C function; unsigned wrap-around
    add("pow_int", [node("Pow", ["pi_x", "pi_y"], "pow_int")],
        {"pi_x": np.arange(-4, 8, dtype=np.int64).reshape(3, 4),
         "pi_y": np.full((3, 4), 3, np.int64)}, lambda x, y: x ** y)
    add("sub_uint8", [node("Sub", ["su_x", "su_y"], "sub_uint8")],
        {"su_x": np.arange(10, 22, dtype=np.uint8), "su_y": np.arange(0, 36, 3, dtype=np.uint8)},
        lambda x, y: x - y)
    add("sub_uint64", [node("Sub", ["s64_x", "s64_y"], "sub_uint64")],
        {"s64_x": np.arange(10, 22, dtype=np.uint64), "s64_y": np.arange(12, dtype=np.uint64)},
        lambda x, y: x - y)
    add("sum_all", [node("ReduceSum", ["sa_x", "sa_axes"], "sum_all", keepdims=0)],
        {"sa_x": rand((6, 90), 71)}, lambda x: np.float32(x.sum()),
        {"sa_axes": np.array([0, 1])}, atol=1e-4)
    add("split_expand", [helper.make_node("Split", ["se_x"], ["se_a", "se_b"], axis=1),
                         node("Expand", ["se_b", "se_shape"], "se_c"),
                         node("Sub", ["se_c", "se_a"], "split_expand")],
        {"se_x": rand((4, 2), 70)},
        lambda x: np.broadcast_to(x[:, 1:], (3, 4, 1)) - x[:, :1],
        {"se_shape": np.array([3, 4, 1])})
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def zoo() -> dict[str, np.ndarray]:
    """Every case's output, computed by the emulated CUDA module (and onnxruntime's for the
    cases without a numpy reference, under 'ort:NAME')."""
    nodes, inputs, outputs, inits, feeds = [], [], [], {}, {}
    for case in CASES:
        nodes += case.nodes
        for name, array in case.inputs.items():
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape))
            feeds[name] = array
        outputs.append(case.name)
        inits.update(case.initializers)
    model = make_model(nodes, inputs, outputs, initializers=inits)
    graph = import_onnx(model)
    target = Target.from_string("cuda")
    module = cuda_module(compile_graph_cuda(graph, target), target, build=False)
    got = module.use_device(EmulatedDevice()).run(feeds)
    want = ort_run(model, feeds)
    return {**got, **{f"ort:{k}": v for k, v in want.items()}, "source": module.source}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_family_on_emulated_gpu(zoo: dict[str, np.ndarray], case: Case) -> None:
    got = zoo[case.name]
    if case.reference is None:
        want = zoo[f"ort:{case.name}"]
    else:
        want = np.asarray(case.reference(*case.inputs.values()))
        if want.dtype.kind == "f" and got.dtype.kind == "f":
            want = want.astype(got.dtype)      # references compute in float64
    check_result(got, want, rtol=case.rtol, atol=case.atol)


@needs_nvcc
def test_every_op_family_builds_with_nvcc(zoo: dict) -> None:
    """nvcc accepts the same source (half, bfloat16, integer and bool kernels included) for
    sm_80 and sm_90, without spills."""
    build = build_fatbin(zoo["source"], ("sm_80", "sm_90"))
    assert set(build.resources) == set(kernel_sync_flags(zoo["source"]))
    assert all(r.spill_stores == 0 for by_arch in build.resources.values()
               for r in by_arch.values())

"""1x1 convs on the matmul's micro-kernel (conv.py, ``conv_as_matmul``): the weights,
packed at compile time into panels of the GEMM tile's rows (padded with zero filters where
the tile does not divide the filters), are A; the input's channels x positions are B.
Against numpy over filter counts no tile divides, odd position counts, batches, 1-D and 3-D
convs, strides (the input's every s-th position copied first) and fused epilogues."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from onnx import helper, numpy_helper

import tensorc
from tensorc.ops.nn.conv.conv_matmul import filter_panel
from tensorc.ops.nn.conv.shapes import pack_weight, unpack_weight
from tensorc.target import Target


@pytest.mark.parametrize("x_shape, filters, strides", [
    ((1, 512, 13, 13), 1000, None),     # a SqueezeNet classifier: 1000 = 71 x 14 + 6
    ((1, 24, 9, 11), 40, None),         # 99 positions, 40 filters
    ((2, 16, 7, 7), 19, None),          # a batch of two, a prime filter count
    ((1, 32, 30), 17, None),            # 1-D
    ((1, 8, 3, 5, 6), 20, None),        # 3-D
    ((3, 5, 1, 1), 7, None),            # one position per image
    ((1, 24, 30, 29), 40, (2, 2)),      # a strided 1x1 (ResNet's downsample): 15x15 out
    ((2, 6, 9, 20), 10, (3, 2)),
    ((1, 16, 31), 9, (4,)),
])
def test_pointwise_conv_matches_numpy(x_shape, filters, strides):
    rng = np.random.default_rng(sum(x_shape) + filters)
    channels, spatial = x_shape[1], len(x_shape) - 2
    strides = strides or (1,) * spatial
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((filters, channels) + (1,) * spatial) * 0.3).astype(np.float32)
    b = rng.standard_normal(filters).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=list(strides)),
             helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Mul", ["c", "s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", list(x_shape))], ["y"])
    model.graph.initializer.extend([numpy_helper.from_array(w, "w"),
                                    numpy_helper.from_array(b, "b")])
    graph = tensorc.inspect(model, stage="graph")
    assert "kernel_block=" in graph                     # packed for the micro-kernel
    assert "conv_matmul" in tensorc.inspect(model, stage="loops")
    module = tensorc.compile(model)
    assert len(module.kernels) == 1                     # the SiLU fused into the GEMM
    got = module.run({"x": x})["y"]
    x = x[(slice(None), slice(None), *[slice(None, None, st) for st in strides])]
    c = np.einsum("fc,nc...->nf...", w.reshape(filters, channels).astype(np.float64), x)
    c += b.reshape((1, filters) + (1,) * spatial)
    check_result(got, (c / (1 + np.exp(-c))).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_weights_pack_into_tile_panels_with_zero_filters():
    w = np.arange(5 * 3, dtype=np.float32).reshape(5, 3, 1, 1)
    packed = pack_weight(w, 2)
    assert packed.shape == (3, 3, 1, 1, 2)
    assert (packed[2, :, 0, 0, 1] == 0).all()           # the sixth filter: zeros
    np.testing.assert_array_equal(unpack_weight({"kernel_block": 2, "filters": 5}, packed), w)


@pytest.mark.parametrize("filters, panel", [(1000, 14), (64, 8), (24, 12), (96, 14), (5, 5),
                                            (1, 1)])
def test_the_panel_is_the_tallest_tile_that_pads_little(filters, panel):
    assert filter_panel(Target.from_string("llvm -mcpu=znver4"), filters) == panel


def test_the_remainder_columns_keep_their_tile_in_registers():
    """The last columns of a row of positions (169 = 5 x 32 + 9) run the register tile with
    its lanes predicated: its accumulators stay in registers (a select where lanes do not
    run), not in memory behind masked stores on every step of the reduction. Compiled for
    an AVX-512 CPU, not run: no block of FMAs moves vectors to or from the stack."""
    from tensorc.codegen.llvm.objects import optimize_module
    from tensorc.compiler.llvm import compile_graph
    from tensorc.frontend.onnx import import_onnx
    w = np.random.default_rng(0).standard_normal((28, 64, 1, 1)).astype(np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])],
                       [tensor_info("x", "float32", [1, 64, 13, 13])], ["y"])
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    target = Target.from_string("llvm -mcpu=znver4")
    compiled = compile_graph(import_onnx(model), target)
    mod, tm = optimize_module(compiled.llvm_ir, target)
    # the straight runs of instructions (up to a jump: a loop's body ends in its branch back)
    blocks, current = [], []
    for line in tm.emit_assembly(mod).splitlines():
        if line.startswith(".LBB") or line.startswith("\tj"):
            blocks.append(current)
            current = []
        current.append(line)
    blocks.append(current)
    fma_loops = [b for b in blocks if sum("vfmadd" in line for line in b) >= 4]
    assert len(fma_loops) >= 2                      # the whole tiles and the remainder's
    for block in fma_loops:
        assert not any("(%rsp" in line and "mm" in line for line in block), "\n".join(block)

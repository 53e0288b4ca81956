"""Vector loads whose index is a division of the lane's position (codegen/llvm/memory.py,
``two_step``): a broadcast operand [C, 1, 1] read in an elementwise loop over a flat
[C, H, W] takes at most two values per vector where H * W is at least the vector's width, and
is loaded as two scalars and a select instead of a gather. Against numpy over plane sizes on
both sides of the vector width, batches (an offset outside the division), odd tails and a
chain of ops; and the LLVM IR of such a loop has no gather."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import tensorc
from tensorc.codegen.llvm.vector_index import two_step
from tensorc.ir import arith
from tensorc.ir import expr as E


def scale_model(shape, op="Mul"):
    n, c = shape[:2]
    nodes = [helper.make_node(op, ["x", "s"], ["y"])]
    return make_model(nodes, [tensor_info("x", "float32", list(shape)),
                              tensor_info("s", "float32", [n, c] + [1] * (len(shape) - 2))],
                      ["y"])


@pytest.mark.parametrize("shape", [
    (1, 672, 14, 14),       # EfficientNet's squeeze-and-excite scale: 196 per channel
    (1, 1152, 7, 7),        # 49
    (2, 24, 5, 7),          # 35, a batch: the batch's offset outside the division
    (1, 5, 4, 4),           # 16: exactly a vector
    (1, 7, 3, 3),           # 9: more than two channels a vector (a gather)
    (1, 3, 17),             # 1-D, 17
    (3, 11, 2, 13),         # 26, an odd tail
])
@pytest.mark.parametrize("op", ["Mul", "Add", "Sub"])
def test_channel_broadcast_matches_numpy(shape, op):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    s = rng.standard_normal(shape[:2] + (1,) * (len(shape) - 2)).astype(np.float32)
    got = tensorc.compile(scale_model(shape, op), num_threads=1).run({"x": x, "s": s})["y"]
    want = {"Mul": np.multiply, "Add": np.add, "Sub": np.subtract}[op](x, s)
    np.testing.assert_array_equal(got, want)


def test_channel_broadcast_has_no_gather():
    llvm = tensorc.inspect(scale_model((1, 672, 14, 14)), stage="llvm")
    assert "fmul" in llvm
    assert "masked.gather" not in llvm


def test_two_step_forms():
    v, c = E.Var("v"), E.Var("c")
    # (v + 16 c) // 14 // 14: one division by 196, stride 1
    outer, scale, numerator, divisor = two_step((v + c * 16) // 14 // 14, v, 16)
    assert (scale, divisor) == (1, 196)
    assert arith.linear_coeff(numerator, v)[1] == 1
    # an offset and a scale outside the division
    outer, scale, _, divisor = two_step((v + c * 16) // 49 * 3 + c, v, 16)
    assert (scale, divisor) == (3, 49) and E.uses_var(outer, c)
    # a quotient that takes three values over 16 lanes, and no division at all
    assert two_step((v + c * 16) // 9, v, 16) is None
    assert two_step(v * 2 + c, v, 16) is None
    # a stride that crosses more than one boundary
    assert two_step((v * 8 + c) // 64, v, 16) is None

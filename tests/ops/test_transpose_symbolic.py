"""A transpose over a symbolic innermost output axis (attention's keys, [batch, heads,
head_dim, seq]): the small-dims variant vectorizes the constant head_dim axis its input is
contiguous in (a sequence of a few tokens was all masked gathers), the large one runs in
register tiles stored transposed at seq's run-time stride. Every size matches numpy, on one
thread and two."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorc


def _model():
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], "keys",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 16, "seq"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def compiled():
    return tensorc.compile(_model())


@pytest.mark.parametrize("batch,seq", [(1, 1), (1, 2), (2, 3), (1, 8), (3, 9), (2, 17),
                                       (5, 97)])
def test_keys_transposed_match_numpy(compiled, batch, seq):
    x = np.random.default_rng(seq).standard_normal((batch, seq, 4, 16)).astype(np.float32)
    for threads in (1, 2):
        compiled.num_threads = threads
        np.testing.assert_array_equal(compiled.run({"x": x})["y"], x.transpose(0, 2, 3, 1))


def test_small_variant_vectorizes_the_contiguous_axis():
    loops = tensorc.inspect(_model(), stage="loops")
    parts = {p.split("(")[0].split()[-1]: p for p in re.split(r"(?m)^(?=func )", loops)
             if p.startswith("func")}
    small = next(p for name, p in parts.items() if name.endswith("_small"))
    main = next(p for name, p in parts.items() if not name.endswith(("_small", "_unit")) and
                "transpose" in name)
    # the small variant's vectors run along the 16 (contiguous in x); the large one is in
    # 8 x 8 tiles (vectors along the 16, unrolled along seq), which codegen stores transposed
    # at seq's run-time stride, and each remainder of seq in a shorter tile
    assert re.search(r"for \(i2\.i: vectorized, 0, (8|16)\)", small), small
    assert re.search(r"for \(i3\.i: unrolled, 0, 8\)\n\s+for \(i2\.i: vectorized, 0, 8\)",
                     main), main
    assert re.search(r"for \(i3\.i: unrolled, 0, 7\)\n\s+for \(i2\.i: vectorized, 0, 8\)",
                     main), main


def _matrix_model():
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])], "matrix",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "rows", "cols"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "cols", "rows"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def compiled_matrix():
    return tensorc.compile(_matrix_model())


@pytest.mark.parametrize("batch,rows,cols", [(1, 1, 1), (1, 8, 8), (2, 9, 17), (1, 3, 40),
                                             (3, 41, 5), (2, 64, 31), (1, 97, 123)])
def test_symbolic_tiles_match_numpy(compiled_matrix, batch, rows, cols):
    """Both axes symbolic: transposed tiles at a run-time stride, their partial tiles along
    either axis, every remainder."""
    compiled = compiled_matrix
    x = np.random.default_rng(rows * cols).standard_normal((batch, rows, cols)).astype(
        np.float32)
    for threads in (1, 2):
        compiled.num_threads = threads
        np.testing.assert_array_equal(compiled.run({"x": x})["y"], x.transpose(0, 2, 1))



@pytest.mark.parametrize("seq", [9, 10, 11, 12, 13, 14, 15])
def test_every_partial_tile_of_the_keys_matches_numpy(compiled, seq):
    """Each remainder of seq modulo the 8 x 8 tile, at a batch past the small variant:
    the partial tile's rows are stored as plain stores of their first lanes."""
    x = np.random.default_rng(seq).standard_normal((9, seq, 4, 16)).astype(np.float32)
    for threads in (1, 2):
        compiled.num_threads = threads
        np.testing.assert_array_equal(compiled.run({"x": x})["y"], x.transpose(0, 2, 3, 1))


def test_partial_tiles_store_without_masked_stores():
    """A transposed tile shorter than a vector (seq's last columns) writes each row's first
    lanes with plain stores of power-of-two pieces: a masked store runs about one per 12
    cycles on Zen 3 (the key cache of a decode step spent half its transpose in them)."""
    functions = tensorc.inspect(_model(), stage="llvm").split("\ndefine ")
    main = [f for f in functions if "_fused_transpose(" in f or "_fused_transpose.par" in f]
    assert main and not any("llvm.masked.store" in f for f in main)

"""Core ops: shape rules (infer) and numpy references, against numpy and naive loops."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorc.errors import InputError, ShapeError
from tensorc.ir.graph import Graph
from tensorc.ir.types import TensorType
from tensorc.ops.build import emit, infer_types
from tensorc.ops.interpret import check_types, evaluate, run_reference
from tensorc.ops.catalog import get_op
from tensorc.ops.registry import REGISTRY, Pattern

F32 = "float32"
RNG = np.random.default_rng(0)


def t(*shape: int, dtype: str = F32) -> TensorType:
    return TensorType(shape, dtype)


def rand(*shape: int, dtype: str = F32) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape), dtype=dtype)


def infer(op: str, attrs: dict, *types: TensorType) -> list[TensorType]:
    return infer_types(op, attrs, list(types))


def test_every_family_registers_infer_reference_and_pattern():
    get_op("relu")  # loads every family
    expected = {"relu", "leaky_relu", "sigmoid", "tanh", "exp", "log", "sqrt", "neg", "abs",
                "clip", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "cast",
                "matmul", "conv", "max_pool", "avg_pool", "reduce_sum", "reduce_mean",
                "reduce_max", "reduce_min", "batch_norm", "softmax", "reshape", "transpose",
                "concat", "pad"}
    assert expected <= set(REGISTRY)
    for name in expected:
        op = REGISTRY[name]
        assert op.infer_fn and op.reference_fn and isinstance(op.pattern, Pattern), name
    assert get_op("conv").pattern == Pattern.OUT_ELEMWISE_FUSABLE
    assert get_op("add").pattern == Pattern.BROADCAST
    assert get_op("reshape").pattern == Pattern.INJECTIVE


# elementwise ----------------------------------------------------------------------------------
UNARY_NUMPY = {
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "neg": np.negative, "abs": np.abs,
    "log": lambda x: np.log(np.abs(x)), "sqrt": lambda x: np.sqrt(np.abs(x)),
}


@pytest.mark.parametrize("op", sorted(UNARY_NUMPY))
@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 5, 7)])
def test_unary(op, shape):
    x = rand(*shape)
    if op in ("log", "sqrt"):
        x = np.abs(x)
    assert infer(op, {}, t(*shape)) == [t(*shape)]
    (y,) = evaluate(op, {}, [x])
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_allclose(y, UNARY_NUMPY[op](x), rtol=1e-6)


def test_unary_attrs():
    x = np.array([-2.0, -0.5, 0.0, 3.0, 7.0], F32)
    (y,) = evaluate("leaky_relu", {"alpha": 0.1}, [x])
    np.testing.assert_allclose(y, [-0.2, -0.05, 0.0, 3.0, 7.0], rtol=1e-6)
    (y,) = evaluate("clip", {"min": 0.0, "max": 6.0}, [x])
    np.testing.assert_array_equal(y, [0, 0, 0, 3, 6])
    (y,) = evaluate("clip", {"min": None, "max": 1.0}, [x])
    np.testing.assert_array_equal(y, [-2, -0.5, 0, 1, 1])
    (y,) = evaluate("clip", {"min": -1.0, "max": None}, [np.array([-3, 4], np.int32)])
    assert y.dtype == np.int32 and y.tolist() == [-1, 4]


def test_float_only_unary_rejects_integers():
    with pytest.raises(ShapeError, match="exp: input 0 must be a float tensor, got int64"):
        infer("exp", {}, t(3, dtype="int64"))
    assert infer("abs", {}, t(3, dtype="int64")) == [t(3, dtype="int64")]
    with pytest.raises(ShapeError, match="expects 1 input"):
        infer("relu", {}, t(3), t(3))


@pytest.mark.parametrize("a, b, out", [
    ((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 3)), ((1,), (5, 1, 7), (5, 1, 7)),
    ((4, 1, 3), (5, 1), (4, 5, 3)), ((), (3, 2), (3, 2)), ((1, 64, 1, 1), (2, 64, 7, 9),
                                                          (2, 64, 7, 9)),
])
def test_binary_broadcast_infer(a, b, out):
    for op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
        assert infer(op, {}, t(*a), t(*b)) == [t(*out)]


def test_binary_errors_name_the_inputs():
    with pytest.raises(ShapeError, match=r"add: cannot broadcast input 0 float32\[2,3\] with "
                                         r"input 1 float32\[4\]"):
        infer("add", {}, t(2, 3), t(4))
    with pytest.raises(ShapeError, match="input 1 has dtype int64 but input 0 has float32"):
        infer("mul", {}, t(2), t(2, dtype="int64"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(1, 4), max_size=4), min_size=2, max_size=2))
def test_broadcast_matches_numpy(shapes):
    a, b = (tuple(s) for s in shapes)
    try:
        want = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(ShapeError):
            infer("add", {}, t(*a), t(*b))
        return
    assert infer("add", {}, t(*a), t(*b)) == [t(*want)]
    (y,) = evaluate("sub", {}, [np.ones(a, F32), np.ones(b, F32)])
    assert y.shape == want


def test_binary_references():
    a, b = rand(3, 4), rand(4) + 3
    for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                   ("div", np.divide), ("maximum", np.maximum), ("minimum", np.minimum)):
        np.testing.assert_allclose(evaluate(op, {}, [a, b])[0], fn(a, b), rtol=1e-6)
    np.testing.assert_allclose(evaluate("pow", {}, [np.abs(a), b])[0], np.abs(a) ** b,
                               rtol=1e-5)


def test_integer_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], np.int32)
    (q,) = evaluate("div", {}, [a, b])
    assert q.dtype == np.int32 and q.tolist() == [3, -3, -3, 3, 2, 0]


def test_cast():
    assert infer("cast", {"dtype": "int64"}, t(2, 3)) == [t(2, 3, dtype="int64")]
    (y,) = evaluate("cast", {"dtype": "int32"}, [np.array([1.7, -1.7], F32)])
    assert y.dtype == np.int32 and y.tolist() == [1, -1]
    with pytest.raises(ShapeError, match="unknown dtype 'float8'"):
        infer("cast", {"dtype": "float8"}, t(2))


# matmul ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, out", [
    ((2, 3), (3, 5), (2, 5)), ((7, 1, 3), (3, 1), (7, 1, 1)), ((4, 2, 3), (3, 5), (4, 2, 5)),
    ((2, 1, 5, 3), (4, 3, 6), (2, 4, 5, 6)), ((1, 1), (1, 9), (1, 9)),
])
def test_matmul(a, b, out):
    assert infer("matmul", {}, t(*a), t(*b)) == [t(*out)]
    x, y = rand(*a), rand(*b)
    np.testing.assert_allclose(evaluate("matmul", {}, [x, y])[0], np.matmul(x, y), rtol=1e-5)


def test_matmul_errors():
    with pytest.raises(ShapeError, match="inner dimensions differ"):
        infer("matmul", {}, t(2, 3), t(4, 5))
    with pytest.raises(ShapeError, match="rank >= 2"):
        infer("matmul", {}, t(3), t(3, 5))
    with pytest.raises(ShapeError, match="batch dims"):
        infer("matmul", {}, t(2, 2, 3), t(3, 3, 5))


# conv -----------------------------------------------------------------------------------------
def conv_attrs(spatial: int, strides=None, pads=None, dilations=None, groups=1) -> dict:
    return {"strides": strides or (1,) * spatial, "pads": pads or (0,) * (2 * spatial),
            "dilations": dilations or (1,) * spatial, "groups": groups}


def naive_conv(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """Direct loops over every output element: slow, obviously right."""
    n, c = x.shape[:2]
    f, cg = w.shape[:2]
    spatial = x.ndim - 2
    pads, strides, dil, groups = attrs["pads"], attrs["strides"], attrs["dilations"], \
        attrs["groups"]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial]) for i in range(spatial)])
    out = [(xp.shape[2 + i] - (w.shape[2 + i] - 1) * dil[i] - 1) // strides[i] + 1
           for i in range(spatial)]
    y = np.zeros((n, f, *out), np.float64)
    per_group = f // groups
    for b, o in itertools.product(range(n), range(f)):
        g = o // per_group
        for pos in itertools.product(*(range(s) for s in out)):
            total = 0.0
            for ci in range(cg):
                for k in itertools.product(*(range(s) for s in w.shape[2:])):
                    idx = tuple(pos[i] * strides[i] + k[i] * dil[i] for i in range(spatial))
                    total += xp[(b, g * cg + ci) + idx] * w[(o, ci) + k]
            y[(b, o) + pos] = total
    return y


@pytest.mark.parametrize("x_shape, w_shape, attrs, out", [
    ((1, 3, 7, 7), (4, 3, 3, 3), conv_attrs(2), (1, 4, 5, 5)),
    ((2, 3, 9, 8), (4, 3, 3, 2), conv_attrs(2, (2, 3), (1, 0, 2, 1)), (2, 4, 5, 3)),
    ((1, 4, 10, 10), (4, 1, 3, 3), conv_attrs(2, pads=(1, 1, 1, 1), groups=4), (1, 4, 10, 10)),
    ((1, 6, 11, 9), (4, 3, 3, 3), conv_attrs(2, dilations=(2, 1), groups=2), (1, 4, 7, 7)),
    ((2, 2, 13), (3, 2, 4), conv_attrs(1, (3,), (2, 1)), (2, 3, 5)),
    ((1, 2, 5, 6, 4), (2, 2, 2, 3, 2), conv_attrs(3, (1, 2, 1)), (1, 2, 4, 2, 3)),
])
def test_conv(x_shape, w_shape, attrs, out):
    assert infer("conv", attrs, t(*x_shape), t(*w_shape)) == [t(*out)]
    x, w = rand(*x_shape), rand(*w_shape)
    (y,) = evaluate("conv", attrs, [x, w])
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, naive_conv(x, w, attrs), rtol=1e-4, atol=1e-5)


def test_conv_errors():
    with pytest.raises(ShapeError, match="must have 4 input channels per filter"):
        infer("conv", conv_attrs(2), t(1, 4, 5, 5), t(8, 3, 3, 3))
    with pytest.raises(ShapeError, match="groups=3 must divide the 4 input channels"):
        infer("conv", conv_attrs(2, groups=3), t(1, 4, 5, 5), t(6, 1, 3, 3))
    with pytest.raises(ShapeError, match="does not fit"):
        infer("conv", conv_attrs(2), t(1, 3, 2, 2), t(4, 3, 3, 3))
    with pytest.raises(ShapeError, match="pads .* must have 4 entries"):
        infer("conv", {**conv_attrs(2), "pads": (1, 1)}, t(1, 3, 5, 5), t(4, 3, 3, 3))
    with pytest.raises(ShapeError, match="equal rank"):
        infer("conv", conv_attrs(2), t(1, 3, 5, 5), t(4, 3, 3))


# pooling --------------------------------------------------------------------------------------
def pool_attrs(kernel, strides=None, pads=None, ceil_mode=False, **extra) -> dict:
    spatial = len(kernel)
    return {"kernel_shape": kernel, "strides": strides or (1,) * spatial,
            "pads": pads or (0,) * (2 * spatial), "ceil_mode": ceil_mode, **extra}


@pytest.mark.parametrize("shape, attrs, out", [
    ((1, 2, 6, 6), pool_attrs((2, 2), (2, 2)), (1, 2, 3, 3)),
    ((1, 2, 7, 7), pool_attrs((2, 2), (2, 2)), (1, 2, 3, 3)),
    ((1, 2, 7, 7), pool_attrs((2, 2), (2, 2), ceil_mode=True), (1, 2, 4, 4)),
    ((1, 1, 5, 5), pool_attrs((3, 3), (2, 2), (1, 1, 1, 1)), (1, 1, 3, 3)),
    # ceil mode would start a window entirely in the end padding: it is dropped
    ((1, 1, 4), pool_attrs((2,), (2,), (1, 1), ceil_mode=True), (1, 1, 3)),
    ((2, 3, 5, 6, 7), pool_attrs((2, 3, 2), (1, 2, 3)), (2, 3, 4, 2, 2)),
])
def test_pool_infer(shape, attrs, out):
    assert infer("max_pool", {**attrs, "dilations": (1,) * (len(shape) - 2)},
                 t(*shape)) == [t(*out)]
    assert infer("avg_pool", {**attrs, "count_include_pad": False}, t(*shape)) == [t(*out)]


def test_max_pool_reference():
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    attrs = pool_attrs((2, 2), (2, 2), dilations=(1, 1))
    np.testing.assert_array_equal(evaluate("max_pool", attrs, [x])[0],
                                  [[[[5, 7], [13, 15]]]])
    attrs = pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), dilations=(1, 1))
    (y,) = evaluate("max_pool", attrs, [-x])  # padding never wins, even against negatives
    np.testing.assert_array_equal(y, [[[[0, -1], [-4, -5]]]])
    (y,) = evaluate("max_pool", pool_attrs((2,), dilations=(2,)),
                    [np.array([[[1, 5, 2, 0, 3]]], np.int32)])
    assert y.tolist() == [[[2, 5, 3]]]


def test_avg_pool_reference_counts():
    x = np.ones((1, 1, 3, 3), F32)
    attrs = pool_attrs((2, 2), (2, 2), (1, 1, 1, 1))
    (y,) = evaluate("avg_pool", {**attrs, "count_include_pad": True}, [x])
    np.testing.assert_allclose(y, [[[[0.25, 0.5], [0.5, 1.0]]]])
    (y,) = evaluate("avg_pool", {**attrs, "count_include_pad": False}, [x])
    np.testing.assert_allclose(y, np.ones((1, 1, 2, 2)))


def test_pool_errors():
    with pytest.raises(ShapeError, match="does not fit"):
        infer("max_pool", pool_attrs((5, 5), dilations=(1, 1)), t(1, 1, 3, 3))
    with pytest.raises(ShapeError, match="1 to 3 spatial dims"):
        infer("avg_pool", {**pool_attrs((2,)), "count_include_pad": False}, t(4, 4))
    with pytest.raises(ShapeError, match="float"):
        infer("avg_pool", {**pool_attrs((2,)), "count_include_pad": False},
              t(1, 1, 4, dtype="int32"))


# batch_norm, reductions, softmax --------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3), (1, 3, 5), (2, 3, 4, 5)])
def test_batch_norm(shape):
    c = shape[1]
    x, scale, bias, mean = rand(*shape), rand(c), rand(c), rand(c)
    var = np.abs(rand(c)) + 0.1
    types = [t(*shape)] + [t(c)] * 4
    assert infer("batch_norm", {"epsilon": 1e-5}, *types) == [t(*shape)]
    (y,) = evaluate("batch_norm", {"epsilon": 1e-3}, [x, scale, bias, mean, var])
    bc = (1, c) + (1,) * (len(shape) - 2)
    want = (x - mean.reshape(bc)) / np.sqrt(var.reshape(bc) + 1e-3) * scale.reshape(bc) \
        + bias.reshape(bc)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match=f"var must have shape \\[{c}\\]"):
        infer("batch_norm", {"epsilon": 1e-5}, *types[:4], t(c + 1))


REDUCE_NUMPY = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
                "reduce_min": np.min}


@pytest.mark.parametrize("op", sorted(REDUCE_NUMPY))
@pytest.mark.parametrize("shape, axes", [((5,), (0,)), ((3, 4), (1,)), ((2, 3, 5, 7), (2, 3)),
                                         ((2, 3, 5), (0, 2)), ((2, 3), ())])
@pytest.mark.parametrize("keepdims", [True, False])
def test_reductions(op, shape, axes, keepdims):
    x = rand(*shape)
    (y,) = evaluate(op, {"axes": axes, "keepdims": keepdims}, [x])
    want = REDUCE_NUMPY[op](x, axis=axes, keepdims=keepdims)
    assert infer(op, {"axes": axes, "keepdims": keepdims}, t(*shape)) == [t(*want.shape)]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_reduction_errors():
    with pytest.raises(ShapeError, match="axis 2 is out of range for rank 2"):
        infer("reduce_sum", {"axes": (2,), "keepdims": True}, t(2, 3))
    with pytest.raises(ShapeError, match="sorted and distinct"):
        infer("reduce_sum", {"axes": (1, 0), "keepdims": True}, t(2, 3))


@pytest.mark.parametrize("shape, axis", [((5,), 0), ((3, 7), 1), ((2, 3, 4), 1),
                                         ((2, 3, 4), 0)])
def test_softmax(shape, axis):
    x = rand(*shape) * 10
    (y,) = evaluate("softmax", {"axis": axis}, [x])
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(y, e / e.sum(axis=axis, keepdims=True), rtol=1e-5)
    assert infer("softmax", {"axis": axis}, t(*shape)) == [t(*shape)]
    with pytest.raises(ShapeError, match="out of range"):
        infer("softmax", {"axis": len(shape)}, t(*shape))


# data movement --------------------------------------------------------------------------------
def test_reshape():
    assert infer("reshape", {"shape": (6, 1, 5)}, t(2, 3, 5)) == [t(6, 1, 5)]
    x = rand(2, 3, 5)
    np.testing.assert_array_equal(evaluate("reshape", {"shape": (30,)}, [x])[0], x.ravel())
    with pytest.raises(ShapeError, match=r"cannot reshape float32\[2,3,5\] \(30 elements\)"):
        infer("reshape", {"shape": (7, 4)}, t(2, 3, 5))
    with pytest.raises(ShapeError, match="concrete"):
        infer("reshape", {"shape": (-1, 5)}, t(2, 3, 5))


def test_transpose():
    assert infer("transpose", {"perm": (2, 0, 1)}, t(2, 3, 5)) == [t(5, 2, 3)]
    x = rand(2, 3, 5)
    (y,) = evaluate("transpose", {"perm": (2, 0, 1)}, [x])
    np.testing.assert_array_equal(y, x.transpose(2, 0, 1))
    assert y.flags.c_contiguous
    with pytest.raises(ShapeError, match="not a permutation"):
        infer("transpose", {"perm": (0, 0, 1)}, t(2, 3, 5))


def test_concat():
    assert infer("concat", {"axis": 1}, t(2, 3), t(2, 1), t(2, 5)) == [t(2, 9)]
    assert infer("concat", {"axis": 0}, t(4)) == [t(4)]
    a, b = rand(2, 3), rand(2, 1)
    np.testing.assert_array_equal(evaluate("concat", {"axis": 1}, [a, b])[0],
                                  np.concatenate([a, b], 1))
    with pytest.raises(ShapeError, match="input 1 float32\\[3,3\\] must match input 0"):
        infer("concat", {"axis": 1}, t(2, 3), t(3, 3))


def test_pad():
    assert infer("pad", {"pads": (1, 0, 2, 3), "value": 0.0}, t(2, 3)) == [t(5, 6)]
    (y,) = evaluate("pad", {"pads": (0, 1, 0, 2), "value": -1.0}, [np.ones((1, 2), F32)])
    np.testing.assert_array_equal(y, [[-1, 1, 1, -1, -1]])
    with pytest.raises(ShapeError, match="non-negative"):
        infer("pad", {"pads": (0, -1, 0, 0), "value": 0.0}, t(2, 3))


# graphs: emit, run_reference, check_types -----------------------------------------------------
def mlp() -> Graph:
    g = Graph("mlp")
    x = g.add_input("x", t(4, 8))
    w = g.add_constant(rand(8, 3), "w")
    b = g.add_constant(rand(3), "b")
    y = emit(g, "relu", [emit(g, "add", [emit(g, "matmul", [x, w]), b])])
    g.outputs.append(y)
    return g


def test_emit_and_run_reference():
    g = mlp()
    x = rand(4, 8)
    w, b = g.constants.values()
    (out,) = run_reference(g, {"x": x}).values()
    np.testing.assert_allclose(out, np.maximum(x @ w + b, 0), rtol=1e-5)
    check_types(g)


def test_run_reference_rejects_bad_feeds():
    g = mlp()
    with pytest.raises(InputError, match="input 'x' .* is not fed"):
        run_reference(g, {})
    with pytest.raises(InputError, match=r"input 'x' expects float32\[4,8\], got float64\[4,8\]"):
        run_reference(g, {"x": np.zeros((4, 8))})
    with pytest.raises(InputError, match="no input named y"):
        run_reference(g, {"x": rand(4, 8), "y": rand(1)})


def test_check_types_catches_a_wrong_type():
    g = mlp()
    g.nodes[0].outputs[0].type = t(4, 4)
    with pytest.raises(ShapeError, match="node 'matmul_0' \\(matmul\\): outputs are typed"):
        check_types(g)
    g.nodes[0].op = "no_such_op"
    with pytest.raises(ShapeError, match="no core op named 'no_such_op'"):
        check_types(g)


def test_emit_raises_shape_error():
    g = Graph()
    x = g.add_input("x", t(2, 3))
    with pytest.raises(ShapeError):
        emit(g, "matmul", [x, x])
    assert not g.nodes
    with pytest.raises(KeyError, match="no core op named 'no_such_op'"):
        evaluate("no_such_op", {}, [])

"""Separable pooling windows (ops/nn/pool/separable.py) against numpy: a pass along the rows,
then one across them, exactly what the single pass computes (max pooling's ordered maximum
with its NaN rule and -inf padding, average pooling's divisors)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from helpers_kernels import run_schedule
from onnx import helper

import tensorc
from tensorc.autotune.task import extract_tasks
from tensorc.runtime.kernel import build_kernel
from tensorc.ir import te
from tensorc.ir.schedule import create_schedule
from tensorc.ops.nn.pool import strategy as pool_strategy
from tensorc.ops.catalog import get_op


@pytest.fixture
def always_separable(monkeypatch):
    """Every window with more than one tap along and across the rows takes two passes (for
    float max pooling, the form with NaN marks)."""
    monkeypatch.setattr(pool_strategy, "TWO_PASS_OVERHEAD", -1000)
    monkeypatch.setattr(pool_strategy, "NAN_SPLIT_OVERHEAD", 10**6)


@pytest.fixture
def always_nan_split(monkeypatch):
    """Every float max pooling window with more than one tap along and across the rows takes
    the NaN-split form."""
    monkeypatch.setattr(pool_strategy, "NAN_SPLIT_OVERHEAD", -1000)


def run(kind: str, x: np.ndarray, opset: int = 17, **attrs) -> np.ndarray:
    model = make_model([helper.make_node(kind, ["x"], ["y"], **attrs)],
                       [tensor_info("x", x.dtype.name, x.shape)], ["y"], opset=opset)
    return tensorc.compile(model).run({"x": x})["y"]


def loops(kind: str, shape, **attrs) -> str:
    model = make_model([helper.make_node(kind, ["x"], ["y"], **attrs)],
                       [tensor_info("x", "float32", shape)], ["y"])
    return tensorc.inspect(model, stage="loops")


def windows(x: np.ndarray, kernel, strides, pads, dilations, ceil_mode: bool):
    """For each output position: the window's taps in row-major order as (value, counted)
    pairs, counted meaning inside the input (padding and the ceil-mode overhang are not)."""
    spatial = x.ndim - 2
    sizes = x.shape[2:]
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    rounding = math.ceil if ceil_mode else math.floor
    out = [int(rounding((sizes[i] + pads[i] + pads[i + spatial] - span[i]) / strides[i])) + 1
           for i in range(spatial)]
    if ceil_mode:      # the last window starts inside the input or its begin padding
        out = [o - 1 if (o - 1) * s >= n + p else o
               for o, s, n, p in zip(out, strides, sizes, pads)]
    for o in itertools.product(*[range(m) for m in out]):
        taps = []
        for k in itertools.product(*[range(n) for n in kernel]):
            pos = [o[d] * strides[d] + k[d] * dilations[d] - pads[d] for d in range(spatial)]
            inside = all(0 <= p < n for p, n in zip(pos, sizes))
            explicit = all(-pads[d] <= pos[d] < sizes[d] + pads[d + spatial]
                           for d in range(spatial))
            taps.append((tuple(pos) if inside else None, explicit))
        yield o, taps, out


def max_pool_ref(x, kernel, strides=None, pads=None, dilations=None, ceil_mode=False):
    """The ordered maximum ``acc > v ? acc : v`` over each window in row-major order from
    -inf, padding taps -inf: a NaN tap makes the next tap restart the maximum."""
    spatial = x.ndim - 2
    strides, dilations = strides or [1] * spatial, dilations or [1] * spatial
    pads = pads or [0] * (2 * spatial)
    y = None
    for o, taps, out in windows(x, kernel, strides, pads, dilations, ceil_mode):
        if y is None:
            y = np.empty(x.shape[:2] + tuple(out), x.dtype)
        acc = np.full(x.shape[:2], -np.inf, x.dtype)
        for pos, _ in taps:
            v = x[(slice(None), slice(None), *pos)] if pos is not None else \
                np.full(x.shape[:2], -np.inf, x.dtype)
            acc = np.where(acc > v, acc, v)
        y[(slice(None), slice(None), *o)] = acc
    return y


def avg_pool_ref(x, kernel, strides=None, pads=None, dilations=None, ceil_mode=False,
                 count_include_pad=False):
    spatial = x.ndim - 2
    strides, dilations = strides or [1] * spatial, dilations or [1] * spatial
    pads = pads or [0] * (2 * spatial)
    y = None
    for o, taps, out in windows(x, kernel, strides, pads, dilations, ceil_mode):
        if y is None:
            y = np.empty(x.shape[:2] + tuple(out))
        total = sum(x[(slice(None), slice(None), *pos)].astype(np.float64)
                    for pos, _ in taps if pos is not None)
        count = sum(1 for pos, explicit in taps
                    if pos is not None or (count_include_pad and explicit))
        y[(slice(None), slice(None), *o)] = total / max(count, 1)
    return y.astype(x.dtype)


def same(kernel) -> list[int]:
    return [k // 2 for k in kernel] * 2


def with_nans(shape, seed: int, fraction: float = 0.08) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape) < fraction] = np.nan
    return x


def check_max(got: np.ndarray, want: np.ndarray) -> None:
    """Equal, NaN where the reference is NaN (which zero a max of -0 and +0 gives is open)."""
    want = np.asarray(want, np.float32)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# which windows take two passes

@pytest.mark.parametrize("kind, stage", [("MaxPool", "pool_rows"),
                                         ("AveragePool", "pool_row_sums")])
def test_large_windows_are_separable(kind, stage) -> None:
    text = loops(kind, (1, 8, 13, 13), kernel_shape=[9, 9], pads=same([9, 9]))
    assert stage in text
    if kind == "MaxPool":      # planes without NaN take the two passes, the others one
        assert "pool_has_nan" in text and "max_pool_exact" in text
        assert "pool_row_nans" not in text


@pytest.mark.parametrize("kernel", [[3, 3], [1, 9], [9, 1]])
def test_small_and_one_dimensional_windows_take_one_pass(kernel) -> None:
    assert "pool_rows" not in loops("MaxPool", (1, 8, 13, 13), kernel_shape=kernel)


def test_one_spatial_dim_takes_one_pass() -> None:
    assert "pool_rows" not in loops("MaxPool", (1, 8, 40), kernel_shape=[13], pads=[6, 6])


@pytest.mark.parametrize("kernel, strides, shape, values_per_row, expected", [
    ((9, 9), (1, 1), (1, 64, 13, 13), 2, True),
    ((7, 7), (1, 1), (1, 64, 28, 28), 2, True),
    ((5, 5), (1, 1), (1, 64, 28, 28), 2, False),    # float max: 20 taps + copies against 25
    ((5, 5), (1, 1), (1, 64, 28, 28), 1, True),     # sums, integer max: 10 + copies
    ((3, 3), (1, 1), (1, 64, 28, 28), 1, False),
    ((5, 5), (2, 2), (1, 64, 28, 28), 2, False),    # each row pass serves every second row
    ((5, 5), (2, 2), (1, 64, 28, 28), 1, True),
    ((7, 7), (2, 2), (1, 64, 28, 28), 2, True),
    ((13, 13), (1, 1), (1, 8, 200, 200), 2, False),        # the plane is too large to buffer
    ((5, 5, 5), (1, 1, 1), (1, 2, 32, 32, 32), 2, False),  # so is the volume
    ((5, 5, 5), (1, 1, 1), (1, 2, 12, 12, 12), 2, True),
])
def test_which_windows_take_two_passes(kernel, strides, shape, values_per_row,
                                       expected) -> None:
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": [k // 2 for k in kernel] * 2}
    assert pool_strategy.separable(attrs, shape, values_per_row) == expected


@pytest.mark.parametrize("kernel, strides, shape, expected", [
    ((5, 5), (1, 1), (1, 64, 13, 13), True),     # 10 taps + the NaN test against 25
    ((9, 9), (1, 1), (1, 64, 28, 28), True),
    ((3, 3), (1, 1), (1, 64, 28, 28), False),    # 6 + the NaN test against 9
    ((3, 3), (2, 2), (1, 64, 28, 28), False),
    ((2, 2), (1, 1), (1, 64, 28, 28), False),
    ((7, 7), (2, 2), (1, 64, 28, 28), True),
    ((1, 9), (1, 1), (1, 64, 28, 28), False),
    ((13, 13), (1, 1), (1, 8, 200, 200), False),        # the plane is too large to buffer
    ((5, 5, 5), (1, 1, 1), (1, 2, 12, 12, 12), True),
])
def test_which_max_pools_take_the_nan_split(kernel, strides, shape, expected) -> None:
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": [k // 2 for k in kernel] * 2}
    assert pool_strategy.nan_split(attrs, shape) == expected


def test_the_single_pass_runs_only_for_planes_with_nan() -> None:
    text = loops("MaxPool", (1, 16, 13, 13), kernel_shape=[5, 5], pads=same([5, 5]))
    head, _, rest = text.partition("if (pool_has_nan[0] != 0.0f)")
    assert rest, text
    assert "max_pool_exact.local" in rest and "max_pool_exact.local" not in head
    assert "pool_rows" in rest.split("max_pool_exact.local")[-1]


def test_both_passes_run_per_channel_plane() -> None:
    # the row pass's results are local buffers of one channel's plane, inside the loop over
    # channels (no RedundantComputeWarning: each iteration needs a plane, not the tensor)
    text = loops("MaxPool", (1, 64, 27, 27), kernel_shape=[13, 13], pads=same([13, 13]))
    allocations = [line.strip() for line in text.splitlines()
                   if line.strip().startswith("allocate pool_row")]
    assert len(allocations) >= 2
    for line in allocations:
        assert "[1, 1, " in line and line.endswith("(local)"), line


@pytest.mark.usefixtures("always_separable")
@pytest.mark.parametrize("shape, kernel, copied", [
    ((1, 4, 13, 13), 9, True),      # 8 padding rows of 9 taps each: copy the 13 rows instead
    ((1, 4, 28, 28), 5, False),     # 4 padding rows of 5 taps: cheaper than copying 32 rows
    ((1, 4, 7, 7), 3, False),
])
def test_row_pass_runs_over_padding_rows_where_cheaper(shape, kernel, copied) -> None:
    text = loops("MaxPool", shape, kernel_shape=[kernel, kernel], pads=same([kernel, kernel]))
    assert ("pool_rows_padded" in text) == copied


# ---------------------------------------------------------------------------------------------
# numbers

SIZES = [7, 13, 27]
CASES = [  # (kernel, strides, pads, dilations, ceil_mode)
    ([3, 3], [1, 1], "same", None, False),
    ([5, 5], [1, 1], "same", None, False),
    ([9, 9], [1, 1], "same", None, False),
    ([13, 13], [1, 1], "same", None, False),
    ([7, 7], [1, 1], [0, 0, 0, 0], None, False),
    ([5, 3], [2, 2], [2, 1, 1, 0], None, False),
    ([3, 5], [2, 1], [0, 2, 1, 2], None, True),
    ([5, 5], [2, 2], [1, 1, 1, 1], None, True),
    ([4, 6], [1, 2], [1, 2, 2, 3], None, False),
    ([3, 3], [1, 1], [2, 2, 2, 2], [2, 2], False),
    ([5, 4], [2, 1], [1, 0, 3, 2], [2, 3], True),
]


def _attrs(kernel, strides, pads, dilations, ceil_mode) -> dict:
    attrs = {"kernel_shape": kernel, "strides": strides,
             "pads": same(kernel) if pads == "same" else pads, "ceil_mode": int(ceil_mode)}
    if dilations:
        attrs["dilations"] = dilations
    return attrs


def _fits(size: int, attrs: dict) -> bool:
    spans = [(k - 1) * d + 1 for k, d in zip(attrs["kernel_shape"],
                                             attrs.get("dilations", [1, 1]))]
    pads = attrs["pads"]
    return all(size + pads[i] + pads[i + 2] >= spans[i] for i in range(2))


@pytest.mark.usefixtures("always_separable")
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kernel, strides, pads, dilations, ceil_mode", CASES)
def test_max_pool(size, kernel, strides, pads, dilations, ceil_mode) -> None:
    attrs = _attrs(kernel, strides, pads, dilations, ceil_mode)
    if not _fits(size, attrs):
        pytest.skip("window larger than the padded input")
    x = np.random.default_rng(size).uniform(-3, 3, (1, 3, size, size + 2)).astype(np.float32)
    got = run("MaxPool", x, **attrs)
    check_max(got, max_pool_ref(x, kernel, strides, attrs["pads"], dilations, ceil_mode))


@pytest.mark.usefixtures("always_nan_split")
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kernel, strides, pads, dilations, ceil_mode", CASES)
def test_max_pool_nan_split(size, kernel, strides, pads, dilations, ceil_mode) -> None:
    # planes without NaN (one holding -inf) take the two passes, planes with NaN the one
    attrs = _attrs(kernel, strides, pads, dilations, ceil_mode)
    if not _fits(size, attrs):
        pytest.skip("window larger than the padded input")
    x = with_nans((1, 4, size, size + 2), size, 0.1)
    x[0, 0] = np.random.default_rng(size).uniform(-3, 3, x.shape[2:])
    x[0, 1] = np.nan_to_num(x[0, 1], nan=-np.inf)
    assert "pool_has_nan" in loops("MaxPool", x.shape, **attrs)
    got = run("MaxPool", x, **attrs)
    check_max(got, max_pool_ref(x, kernel, strides, attrs["pads"], dilations, ceil_mode))


@pytest.mark.usefixtures("always_separable")
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kernel, strides, pads, dilations, ceil_mode", CASES)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(size, kernel, strides, pads, dilations, ceil_mode,
                      count_include_pad) -> None:
    attrs = _attrs(kernel, strides, pads, dilations, ceil_mode)
    if not _fits(size, attrs):
        pytest.skip("window larger than the padded input")
    x = np.random.default_rng(size).uniform(-3, 3, (2, 3, size + 1, size)).astype(np.float32)
    # (AveragePool takes dilations from opset 19)
    got = run("AveragePool", x, 19, count_include_pad=count_include_pad, **attrs)
    want = avg_pool_ref(x, kernel, strides, attrs["pads"], dilations, ceil_mode,
                        bool(count_include_pad))
    check_result(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, kernel", [((1, 4, 55, 55), 13), ((1, 5, 13, 13), 9),
                                           ((1, 3, 28, 28), 13), ((1, 7, 14, 14), 9),
                                           ((2, 3, 7, 7), 13), ((1, 4, 27, 27), 5)])
def test_spp_windows(shape, kernel) -> None:
    # YOLO's SPP: 5, 9 and 13 with stride 1 and 'same' padding, at the default threshold
    x = np.random.default_rng(kernel).standard_normal(shape).astype(np.float32)
    attrs = {"kernel_shape": [kernel, kernel], "pads": same([kernel, kernel])}
    check_max(run("MaxPool", x, **attrs), max_pool_ref(x, [kernel, kernel], None,
                                                       attrs["pads"]))
    check_result(run("AveragePool", x, **attrs),
                 avg_pool_ref(x, [kernel, kernel], None, attrs["pads"]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
def test_fused_epilogue(kind) -> None:
    # the pool's output stage computes the epilogue from the window's registers
    x = np.random.default_rng(11).standard_normal((1, 5, 13, 13)).astype(np.float32)
    nodes = [helper.make_node(kind, ["x"], ["p"], kernel_shape=[9, 9], pads=[4, 4, 4, 4]),
             helper.make_node("Neg", ["p"], ["q"]), helper.make_node("Relu", ["q"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", x.shape)], ["y"])
    compiled = tensorc.compile(model)
    assert len(compiled.kernels) == 1
    ref = max_pool_ref if kind == "MaxPool" else avg_pool_ref
    check_result(compiled.run({"x": x})["y"],
                 np.maximum(-ref(x, [9, 9], None, [4, 4, 4, 4]), 0), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# NaN: a NaN tap makes the next tap restart the running maximum, in row-major order

def nested_max(x, kernel, pads) -> np.ndarray:
    """The maximum over rows of the rows' ordered maxima, without the NaN marks (what a
    plain two-pass form would give)."""
    spatial = x.ndim - 2
    y = None
    for o, taps, out in windows(x, kernel, [1] * spatial, pads, [1] * spatial, False):
        if y is None:
            y = np.empty(x.shape[:2] + tuple(out), x.dtype)
        acc = np.full(x.shape[:2], -np.inf, x.dtype)
        for row in range(0, len(taps), kernel[-1]):
            part = np.full(x.shape[:2], -np.inf, x.dtype)
            for pos, _ in taps[row:row + kernel[-1]]:
                v = x[(slice(None), slice(None), *pos)] if pos is not None else -np.inf
                part = np.where(part > v, part, v)
            acc = np.where(acc > part, acc, part)
        y[(slice(None), slice(None), *o)] = acc
    return y


@pytest.mark.parametrize("shape, kernel, pads", [
    ((1, 8, 13, 13), [9, 9], [4, 4, 4, 4]),
    ((1, 8, 7, 7), [13, 13], [6, 6, 6, 6]),
    ((1, 4, 27, 27), [13, 13], [6, 6, 6, 6]),
    ((1, 6, 12, 11), [5, 7], [1, 3, 2, 0]),
])
@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.5])
@pytest.mark.parametrize("form, stage", [("nan split", "pool_has_nan"),
                                         ("marks", "pool_row_nans")])
def test_max_pool_nan_inputs(monkeypatch, shape, kernel, pads, fraction, form, stage) -> None:
    if form == "marks":
        monkeypatch.setattr(pool_strategy, "NAN_SPLIT_OVERHEAD", 10**6)
    x = with_nans(shape, int(fraction * 100), fraction)
    want = max_pool_ref(x, kernel, None, pads)
    if fraction >= 0.1:      # the data tells the exact rule from the nested one
        assert not np.array_equal(nested_max(x, kernel, pads), want, equal_nan=True)
    assert stage in loops("MaxPool", shape, kernel_shape=kernel, pads=pads)
    check_max(run("MaxPool", x, kernel_shape=kernel, pads=pads), want)


@pytest.mark.parametrize("form", ["marks", "nan split"])
def test_max_pool_nan_rule_by_hand(monkeypatch, always_separable, form) -> None:
    if form == "nan split":
        monkeypatch.setattr(pool_strategy, "NAN_SPLIT_OVERHEAD", -1000)
    # one 2x2 window: a NaN inside a row restarts the maximum, so 2 (after the NaN) wins
    # over 5 (in the row before); a NaN last gives NaN; padding after a NaN gives -inf
    x = np.array([[[[5, 1], [np.nan, 2]]]], np.float32)
    check_max(run("MaxPool", x, kernel_shape=[2, 2]), [[[[2]]]])
    x = np.array([[[[5, 1], [2, np.nan]]]], np.float32)
    check_max(run("MaxPool", x, kernel_shape=[2, 2]), [[[[np.nan]]]])
    x = np.array([[[[5, np.nan]]]], np.float32)
    got = run("MaxPool", x, kernel_shape=[2, 2], pads=[0, 0, 1, 1])
    check_max(got, max_pool_ref(x, [2, 2], None, [0, 0, 1, 1]))
    assert got[0, 0, 0, 0] == -np.inf and got[0, 0, 0, 1] == -np.inf


# ---------------------------------------------------------------------------------------------
# other ranks and dtypes

@pytest.mark.usefixtures("always_separable")
@pytest.mark.parametrize("shape, kernel, strides, pads", [
    ((1, 3, 6, 7, 9), [3, 3, 3], [1, 1, 1], [1, 1, 1, 1, 1, 1]),
    ((1, 2, 7, 9, 13), [2, 5, 5], [1, 2, 1], [0, 2, 2, 1, 2, 2]),
    ((2, 2, 5, 6, 8), [3, 2, 4], [2, 1, 2], [1, 0, 1, 1, 1, 2]),
])
def test_three_spatial_dims(shape, kernel, strides, pads) -> None:
    x = with_nans(shape, 3, 0.05)
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads}
    assert "pool_rows" in loops("MaxPool", shape, **attrs)
    check_max(run("MaxPool", x, **attrs), max_pool_ref(x, kernel, strides, pads))
    x = np.nan_to_num(x)
    check_result(run("AveragePool", x, **attrs), avg_pool_ref(x, kernel, strides, pads),
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_integer_max_pool(dtype) -> None:
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max, (1, 4, 13, 13)).astype(dtype)
    got = run("MaxPool", x, kernel_shape=[9, 9], pads=[4, 4, 4, 4])
    padded = np.pad(x, [(0, 0), (0, 0), (4, 4), (4, 4)], constant_values=info.min)
    want = np.lib.stride_tricks.sliding_window_view(padded, (9, 9), axis=(2, 3)).max((-2, -1))
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# every schedule computes what the unscheduled program computes

@pytest.mark.parametrize("op", ["max_pool", "avg_pool", "max_pool nan split"])
def test_unscheduled_program(monkeypatch, always_separable, op) -> None:
    if op == "max_pool nan split":
        monkeypatch.setattr(pool_strategy, "NAN_SPLIT_OVERHEAD", -1000)
        op = "max_pool"
    attrs = {"kernel_shape": (5, 4), "strides": (2, 1), "pads": (2, 1, 3, 2),
             "dilations": (1, 2), "ceil_mode": True, "count_include_pad": False}
    x = te.placeholder((1, 3, 11, 12), "float32", "x")
    out = get_op(op).compute_fn(attrs, x)
    data = with_nans(x.shape, 7, 0.1 if op == "max_pool" else 0.0)
    (got,) = run_schedule(create_schedule(out), [x, out], [data])
    want = get_op(op).reference_fn(attrs, data)[0]
    if op == "max_pool":
        check_max(got, want)
    else:
        check_result(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
def test_every_config_of_the_separable_space(kind) -> None:
    model = make_model([helper.make_node(kind, ["x"], ["y"], kernel_shape=[9, 9],
                                         pads=[4, 4, 4, 4])],
                       [tensor_info("x", "float32", (1, 3, 13, 13))], ["y"])
    (task,) = extract_tasks(model, measure=False)
    space = task.space()
    assert space.name == "pool (separable)"
    x = with_nans((1, 3, 13, 13), 9, 0.1 if kind == "MaxPool" else 0.0)
    want = task.reference([x])[0]
    traces = set()
    for config in space.configs():
        func = task.schedule(config)
        traces.add(repr(func.attrs["trace"]))
        out = np.full(want.shape, 7.0, want.dtype)
        build_kernel(func)(x, out, num_threads=1)
        if kind == "MaxPool":
            check_max(out, want)
        else:
            check_result(out, want, rtol=1e-5, atol=1e-5)
    assert len(traces) == len(list(space.configs()))

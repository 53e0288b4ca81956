"""im2col (a 2-D conv's patches) and dim_values (symbolic dims' values as a tensor): the
numpy reference against a direct conv, and the kernels, static and over symbolic dims,
against the reference."""
import numpy as np
import pytest

from tensorc.ir import te
from tensorc.ir.dim_table import DimTable
from tensorc.ir.dims import Dim
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ops.catalog import get_op
from tensorc.ops.schedules import INJECTIVE
from tensorc.passes.loop import optimize
from tensorc.runtime.kernel import build_kernel
from tensorc.target import Target

CASES = [  # kernel, strides, pads (top, left, bottom, right), dilations
    ((3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),
    ((1, 5), (1, 2), (0, 2, 0, 2), (1, 1)),
    ((3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
]


def _direct_conv(x, w, strides, pads, dilations):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    top, left, bottom, right = pads
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (wd + left + right - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    out = np.zeros((n, f, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = padded[:, :, i * dilations[0]:i * dilations[0] + strides[0] * (oh - 1) + 1:
                           strides[0],
                           j * dilations[1]:j * dilations[1] + strides[1] * (ow - 1) + 1:
                           strides[1]]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out


def _attrs(kernel, strides, pads, dilations):
    return {"kernel": kernel, "strides": strides, "pads": pads, "dilations": dilations}


@pytest.mark.parametrize("case", CASES)
def test_reference_times_weights_is_the_conv(case):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 11))
    w = rng.standard_normal((4, 3, *case[0]))
    (patches,) = get_op("im2col").reference_fn(_attrs(*case), x)
    got = np.einsum("fcij,ncijyx->nfyx", w, patches)
    want = _direct_conv(x, w, *case[1:])
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-10, atol=1e-10)


def _kernel(shape, attrs):
    x = te.placeholder(shape, "float32", name="x")
    out = get_op("im2col").compute_fn(attrs, x)
    sch = create_schedule(out)
    template = INJECTIVE["llvm"]
    template.apply(Target.host(), sch, out, None, {},
                   template.search_space(Target.host(), out, None, {}).default())
    return build_kernel(optimize(lower(sch, [x, out], "im2col")))


@pytest.mark.parametrize("case", CASES)
def test_kernel_static_and_symbolic(case):
    attrs = _attrs(*case)
    rng = np.random.default_rng(1)
    table = DimTable()      # the graph's dims: the window constraints record here
    h, w = table.declare("H", "x", 2, lo=5), table.declare("W", "x", 3, lo=5)
    with table.active():
        symbolic = _kernel((2, 3, h, w), attrs)
    for size in [(9, 11), (5, 5), (16, 7)]:
        x = rng.standard_normal((2, 3, *size)).astype(np.float32)
        (want,) = get_op("im2col").reference_fn(attrs, x)
        for kernel in (_kernel(x.shape, attrs), symbolic):
            got = np.full(want.shape, np.nan, np.float32)
            kernel(x, got, dims={"H": size[0], "W": size[1]})
            np.testing.assert_array_equal(got, want)


def test_dim_values_kernel():
    seq, past = Dim("seq"), Dim("past")
    out = get_op("dim_values").compute_fn({"values": (past, past + seq, 3, seq * 2),
                                           "shape": (2, 2), "dtype": "int64"})
    kernel = build_kernel(optimize(lower(create_schedule(out), [out], "dims")))
    got = np.zeros((2, 2), np.int64)
    kernel(got, dims={"seq": 5, "past": 11})
    np.testing.assert_array_equal(got, [[11, 16], [3, 10]])

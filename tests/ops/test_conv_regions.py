"""Dilated convs whose taps read only padding over parts of the output run as one conv per
region of the output, of the taps live there (ops/nn/conv/regions.py, split at graph level by
passes/graph/lower_for_target.py); the others of stride 1, padded by whole dilations, as an
undilated conv over the map's phases. Against a numpy reference over dilations 1-36, maps 7-64,
strides 1 and 2 and odd pads, at one and two threads; the segments against a brute-force
reading of which taps are live."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_result
from test_conv_strided import conv_model, conv_ref

import tensorc
from tensorc.ops.nn.conv import regions


def _live(o: int, size: int, kernel: int, stride: int, dilation: int, pad: int) -> set[int]:
    return {k for k in range(kernel) if 0 <= o * stride + k * dilation - pad < size}


@pytest.mark.parametrize("size", [1, 7, 16, 33, 64])
@pytest.mark.parametrize("kernel", [1, 3, 5])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("dilation", [1, 2, 5, 12, 36])
def test_segments_hold_exactly_the_live_taps(size, kernel, stride, dilation):
    for pad in sorted({0, 1, dilation * (kernel // 2), dilation * kernel}):
        span = dilation * (kernel - 1) + 1
        out = (size + 2 * pad - span) // stride + 1
        if out < 1:
            continue
        found = regions.segments(size, kernel, stride, dilation, pad, out)
        assert found[0].start == 0 and found[-1].stop == out
        for a, b in zip(found, found[1:]):
            assert a.stop == b.start and (a.tap_start, a.tap_stop) != (b.tap_start, b.tap_stop)
        for s in found:
            for o in range(s.start, s.stop):
                assert _live(o, size, kernel, stride, dilation, pad) == \
                    set(range(s.tap_start, s.tap_stop)), (o, s)


@pytest.mark.parametrize("size, dilation, stride, pad", [
    (16, 12, 1, 12), (16, 24, 1, 24), (16, 36, 1, 36), (33, 6, 1, 6), (64, 18, 2, 17),
    (7, 3, 2, 4), (40, 9, 1, 5)])
def test_planned_regions_cover_every_live_tap_and_read_inside_their_window(size, dilation,
                                                                          stride, pad):
    out = (size + 2 * pad - 2 * dilation - 1) // stride + 1
    planned = regions.plan_2d((size, size), (3, 3), (stride, stride), (dilation, dilation),
                              (pad,) * 4, (out, out), tap_flops=2 * 256 * 256)
    assert planned is not None
    for segs in planned:
        assert segs[0].start == 0 and segs[-1].stop == out
        for s in segs:
            first, length, before, after = s.input_window(stride, dilation, pad, size)
            assert 0 <= first and first + length <= size and before >= 0 and after >= 0
            for o in range(s.start, s.stop):
                assert _live(o, size, 3, stride, dilation, pad) <= \
                    set(range(s.tap_start, s.tap_stop))


def test_a_dilation_past_the_map_is_a_1x1_conv_of_the_centre_tap():
    # DeepLab's ASPP at dilation 24 on a 16x16 map: every output reads only its centre tap
    assert regions.plan_2d((16, 16), (3, 3), (1, 1), (24, 24), (24,) * 4, (16, 16)) == \
        ([regions.Segment(0, 16, 1, 2)], [regions.Segment(0, 16, 1, 2)])


def test_undilated_and_barely_dilated_convs_are_not_split():
    assert regions.plan_2d((56, 56), (3, 3), (1, 1), (1, 1), (1,) * 4, (56, 56)) is None
    assert regions.plan_2d((33, 33), (3, 3), (1, 1), (2, 2), (2,) * 4, (33, 33)) is None


# (channels, size, filters, dilation, stride, pads): maps 7-64, dilations 1-36, odd pads
CASES = [
    (8, 7, 8, 1, 1, (1, 1, 1, 1)),
    (8, 7, 12, 3, 2, (3, 2, 5, 1)),
    (16, 16, 16, 12, 1, (12, 12, 12, 12)),
    (16, 16, 8, 24, 1, (24, 24, 24, 24)),
    (8, 16, 16, 36, 1, (36, 36, 36, 36)),
    (8, 21, 8, 6, 2, (5, 7, 3, 6)),
    (12, 33, 8, 6, 1, (6, 6, 6, 6)),
    (8, 33, 8, 2, 2, (2, 2, 2, 2)),
    (8, 40, 16, 9, 1, (9, 4, 9, 13)),
    (8, 64, 8, 18, 2, (17, 18, 19, 18)),
    (8, 64, 8, 36, 1, (36, 36, 36, 36)),
    (8, 27, 8, 13, 1, (13, 13, 13, 13)),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("split", ["most", "default"])
@pytest.mark.parametrize("channels, size, filters, dilation, stride, pads", CASES)
def test_dilated_conv_regions_match_numpy(monkeypatch, threads, split, channels, size, filters,
                                          dilation, stride, pads):
    if split == "most":
        # every region that saves work split off, whatever it costs: the most pieces
        monkeypatch.setattr(regions, "REGION_OVERHEAD_FLOPS", 0)
        monkeypatch.setattr(regions, "MIN_SAVING", 0.0)
    # (by default, few channels: the regions cost more than they save, and a stride-1 conv
    # padded by whole dilations runs undilated over its phases, lower_for_target.py)
    rng = np.random.default_rng(size * 37 + dilation)
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    w = (rng.standard_normal((filters, channels, 3, 3)) * 0.3).astype(np.float32)
    model = conv_model(x, w, (stride, stride), pads, (dilation, dilation))
    got = tensorc.compile(model, num_threads=threads).run({"x": x})["y"]
    check_result(got, conv_ref(x, w, (stride,) * 2, pads, (dilation,) * 2), rtol=1e-4,
                 atol=1e-4)


def test_a_split_conv_counts_only_the_work_it_does():
    # 256 -> 256 at dilation 24 on 16x16: its FLOPs in the profile are the centre tap's
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 256, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((256, 256, 3, 3)) * 0.05).astype(np.float32)
    module = tensorc.compile(conv_model(x, w, (1, 1), (24,) * 4, (24, 24)))
    assert sum(k.flops for k in module.kernels) == 2 * 256 * 256 * 16 * 16
    check_result(module.run({"x": x})["y"], conv_ref(x, w, (1, 1), (24,) * 4, (24, 24)),
                 rtol=1e-4, atol=1e-4)
    graph = tensorc.inspect(conv_model(x, w, (1, 1), (24,) * 4, (24, 24)), stage="graph")
    assert "float32[32,256,1,1,8]" in graph or "256,1,1" in graph, graph


def test_a_barely_dilated_conv_runs_undilated_over_its_phases():
    # d2 on 33x33: too few dead taps for regions; its 2 x 2 phases (17 x 17, zero-padded)
    # stacked along the batch, one undilated conv
    x = np.zeros((1, 16, 33, 33), np.float32)
    w = np.zeros((16, 16, 3, 3), np.float32)
    graph = tensorc.inspect(conv_model(x, w, (1, 1), (2,) * 4, (2, 2)), stage="graph")
    assert graph.count("= conv(") == 1 and "dilations=(1,1)" in graph, graph
    assert "float32[4,16,17,17]" in graph, graph

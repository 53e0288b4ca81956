"""The per-kernel profiler: FLOPs and bytes of known kernels, the table, the JSON, the trace,
and ``tensorc profile`` end to end."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import helper

import models
import tensorc
from tensorc.cli.main import main
from tensorc.runtime.machine import Roofline

# a fixed roofline: the tests check arithmetic, not this machine's speed
ROOFLINE = Roofline(peak_gflops=100.0, bandwidth_gbs=20.0, threads=1, source="given")


def _conv_relu_matmul():
    """conv 3->8 (3x3, pad 1) + relu on 1x3x10x10, then a matmul [1, 800] x [800, 5]."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((800, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "b"], ["y"])]
    return make_model(nodes, [tensor_info("x", "float32", (1, 3, 10, 10))], ["y"],
                      initializers={"w": w, "b": b, "shape": np.array([1, 800])})


@pytest.fixture(scope="module")
def profile():
    mod = tensorc.compile(_conv_relu_matmul(), num_threads=1)
    return mod, mod.profile(seconds=0.05, min_runs=5, roofline=ROOFLINE, model="cm")


def test_flops_and_bytes_of_conv_and_matmul(profile) -> None:
    _, prof = profile
    by_op = {k.info.ops[0]: k for k in prof.kernels}
    conv, matmul = by_op["conv"], by_op["matmul"]
    assert conv.info.ops == ("conv", "relu")
    assert conv.info.shape == (1, 8, 10, 10)
    # 2 * outputs * (C * KH * KW), and one operation per element for the relu
    assert conv.info.flops == 2 * (8 * 10 * 10) * (3 * 3 * 3) + 8 * 10 * 10
    # input + weights (packed, same element count) + output, float32
    assert conv.info.bytes == 4 * (3 * 10 * 10 + 8 * 3 * 3 * 3 + 8 * 10 * 10)
    assert matmul.info.flops == 2 * 5 * 800
    # A + B + output; the constant B is read as the column panels it was repacked into at
    # compile time: 5 columns padded to a whole panel of 8 (AVX2) or 16 (AVX-512) lanes
    lanes = tensorc.Target.from_string("llvm").vector_lanes("float32")
    assert matmul.info.bytes == 4 * (800 + 800 * lanes + 5)


def test_an_activation_with_no_instruction_counts_its_vector_arithmetic() -> None:
    # x * sigmoid(x) on 2 x 64: the sigmoid counts the 13 operations of its exp-based form
    # per element (MATH_FLOPS), the multiply one
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    model = make_model(nodes, [tensor_info("x", "float32", (2, 64))], ["y"])
    prof = tensorc.compile(model, num_threads=1).profile(seconds=0.01, min_runs=2,
                                                         roofline=ROOFLINE, model="silu")
    (kernel,) = prof.kernels
    assert kernel.info.flops == (13 + 1) * 2 * 64


def test_timings_and_roofline_arithmetic(profile) -> None:
    _, prof = profile
    assert prof.runs >= 5 and prof.threads == 1
    for k in prof.kernels:
        assert k.seconds > 0
        assert k.gflops == pytest.approx(k.info.flops / k.seconds / 1e9)
        bound = max(k.info.flops / 100e9, k.info.bytes / 20e9)
        assert k.bound_seconds == pytest.approx(bound)
        assert k.roofline_fraction == pytest.approx(min(1.0, bound / k.seconds))
    assert prof.kernel_seconds == pytest.approx(sum(k.seconds for k in prof.kernels))
    assert prof.end_to_end_seconds > 0


def test_table_is_sorted_by_time(profile) -> None:
    _, prof = profile
    lines = prof.table().splitlines()
    assert lines[0].split() == ["#", "kernel", "ops", "shape", "ms", "share", "MFLOP", "KB",
                                "GFLOP/s", "GB/s", "roofline"]
    rows = [line.split() for line in lines[2:2 + len(prof.kernels)]]
    times = [float(r[4]) for r in rows]
    assert times == sorted(times, reverse=True)
    assert {r[2] for r in rows} == {"conv+relu", "matmul"}
    assert sum(float(r[5].rstrip("%")) for r in rows) == pytest.approx(100, abs=0.5)
    assert "kernel calls" in lines[len(rows) + 2] and "end to end" in lines[len(rows) + 2]


def test_json_and_trace(profile, tmp_path: Path) -> None:
    _, prof = profile
    data = json.loads(json.dumps(prof.to_json()))
    assert [k["ms"] for k in data["kernels"]] == sorted((k["ms"] for k in data["kernels"]),
                                                         reverse=True)
    assert data["roofline"]["peak_gflops"] == 100.0
    path = tmp_path / "trace.json"
    prof.write_trace(path)
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(prof.kernels)
    for a, b in zip(events, events[1:]):       # laid out in execution order, no overlap
        assert b["ts"] == pytest.approx(a["ts"] + a["dur"])
    assert {e["name"] for e in events} == {k.info.name for k in prof.kernels}


def test_profile_survives_save_and_load(profile, tmp_path: Path) -> None:
    mod, prof = profile
    path = tmp_path / "cm.tcz"
    mod.save(path)
    loaded = tensorc.load(path)
    assert loaded.kernels == mod.kernels
    again = loaded.profile(seconds=0.01, min_runs=2, roofline=ROOFLINE)
    assert [k.info for k in again.kernels] == [k.info for k in prof.kernels]


def test_cli_profile_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    code = main(["profile", str(models.path("lenet5")), "--threads", "1", "--seconds", "0.05",
                 "--peak-gflops", "100", "--bandwidth", "20", "--json", "--trace", str(trace)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["threads"] == 1
    assert [k["ops"][0] for k in data["kernels"]].count("conv") == 2
    assert json.loads(trace.read_text())["traceEvents"]


def test_cli_profile_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", str(models.path("mlp")), "--threads", "1", "--seconds", "0.05",
                 "--peak-gflops", "100", "--bandwidth", "20", "--top", "2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out and "roofline" in out and "more kernels" in out


def test_cli_profile_needs_both_roofline_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", str(models.path("mlp")), "--peak-gflops", "100"])
    assert code == 2
    assert "--bandwidth" in capsys.readouterr().err


def test_roofline_plot(profile, tmp_path: Path) -> None:
    _, prof = profile
    path = tmp_path / "roofline.png"
    prof.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_plot_without_matplotlib_says_how_to_get_it(profile, monkeypatch, tmp_path) -> None:
    import sys
    _, prof = profile
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(tensorc.TensorcError, match="pip install"):
        prof.plot(tmp_path / "x.png")

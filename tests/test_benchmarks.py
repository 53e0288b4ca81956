"""The layer benchmark runs end to end on one small case: it checks tensorc's direct and
default convs against onnxruntime before timing them, and prints its table. The compile-time
benchmark measures one small model, and one symbolic model beside its static compiles."""
from __future__ import annotations

import json

from benchmarks import convs


def test_conv_layer_benchmark_checks_and_prints_one_layer(capsys):
    assert convs.main(["--match", "3x3 s1 128->128 28x28", "--seconds", "0.05",
                       "--peak-gflops", "100"]) == 0
    out = capsys.readouterr().out
    assert "3x3 s1 128->128 28x28" in out and "direct:" in out
    row = next(line for line in out.splitlines() if line.startswith("3x3 s1 128->128"))
    assert row.count("ms") == 3          # direct, Winograd (this layer's default) and ort


def test_compile_time_benchmark_measures_one_model(capsys):
    """Cold and warm compile each in a new process, load and onnxruntime session times, the
    cold compile's phases; never asserts on speed."""
    from benchmarks import compile_time
    assert compile_time.main(["--models", "mlp", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["model"] == "mlp"
    for key in ("cold", "cold_cpu", "warm", "load", "ort_session", "artifact_mb"):
        assert result[key] > 0, key
    assert "LLVM optimization" in result["cold_phases"]
    assert all(seconds >= 0 for seconds in result["cold_phases"].values())
    workers, wall = result["cold_kernels"]
    assert workers >= 1 and wall > 0


def test_compile_time_benchmark_table(capsys):
    from benchmarks import compile_time
    assert compile_time.main(["--models", "mlp"]) == 0
    out = capsys.readouterr().out
    assert "cold compile" in out and "cold CPU" in out and "ort session" in out and \
        "LLVM opt" in out
    assert sum(line.startswith("mlp ") for line in out.splitlines()) == 2


def test_compile_time_benchmark_symbolic_beside_static(capsys):
    """--symbolic: a symbolic model's cold compile beside its static ones, each in a new
    process; never asserts on speed."""
    from benchmarks import compile_time
    assert compile_time.main(["--symbolic", "cnn", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["model"] == "cnn"
    assert result["symbolic"] > 0 and result["static"] > 0
    assert result["ratio"] == result["symbolic"] / result["static"]


def test_symbolic_compile_cost_benchmark_prints_both_builds(capsys):
    """The CPU-clock cost of one symbolic model's kernels beside its static build's; never
    asserts on speed."""
    from benchmarks import symbolic_compile_cost
    symbolic_compile_cost.main(["--models", "cnn", "--shape", "0"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("cnn ")]
    assert len(rows) == 2 and "symbolic" in rows[0] and "static batch=1" in rows[1]
    for row in rows:
        cells = [c.strip() for c in row.split("|")]
        assert float(cells[4]) > 0 and int(cells[5]) > 0 and int(cells[6]) > 0

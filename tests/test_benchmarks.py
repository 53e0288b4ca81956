"""The layer benchmark runs end to end on one small case: it checks tensorc's direct and
default convs against onnxruntime before timing them, and prints its table."""
from __future__ import annotations

from benchmarks import convs


def test_conv_layer_benchmark_checks_and_prints_one_layer(capsys):
    assert convs.main(["--match", "3x3 s1 128->128 28x28", "--seconds", "0.05",
                       "--peak-gflops", "100"]) == 0
    out = capsys.readouterr().out
    assert "3x3 s1 128->128 28x28" in out and "direct:" in out
    row = next(line for line in out.splitlines() if line.startswith("3x3 s1 128->128"))
    assert row.count("ms") == 3          # direct, Winograd (this layer's default) and ort

"""Latency benchmarks of tensorc against onnxruntime (run ``make bench``)."""

"""int8 kernels: the quantized GEMM and conv that the QDQ pass (passes/graph/
quantize_qdq.py) builds, and the constant dequantize it keeps until then."""

"""GPU (CUDA) schedule templates of the op families, registered for target kind "cuda".

Importing this package registers them (``ops/registry.py`` imports it after the families):
every op gets the generic template (one thread per output element), and the families whose
work is worth more get their own: injective groups (coalesced, vectorized), row reductions,
softmax and normalizations (a block per row, warp shuffles), matmul and conv (shared-memory
tiles, register tiles).
"""
from tensorc.ops.registry import get_op

get_op("matmul")    # the op families register first (this package is imported after them)

from tensorc.ops.gpu import conv, generic, injective, matmul, rows  # noqa: E402, F401

"""GPU (CUDA) schedule templates of the op families, registered for target kind "cuda".

Importing this package registers them, after the CPU families whose entries they extend:
every op gets the generic template (one thread per output element), and the families whose
work is worth more get their own: injective groups (coalesced, vectorized), row reductions,
softmax and normalizations (a block per row, warp shuffles), matmul and conv (shared-memory
tiles, register tiles).
"""
from tensorc.ops import families  # noqa: F401  (the entries these templates extend)
from tensorc.ops.gpu import conv, generic, injective, matmul, rows  # noqa: F401

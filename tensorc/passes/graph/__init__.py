"""Graph passes, each a plain function Graph -> Graph, and the default pipeline."""
from __future__ import annotations

from tensorc.passes.graph.alter_layout import alter_layout
from tensorc.passes.graph.fold_constants import fold_constants
from tensorc.passes.graph.lower_for_target import lower_for_target
from tensorc.passes.graph.normalizations import fuse_normalizations
from tensorc.passes.graph.quantize_integer import quantize_integer
from tensorc.passes.graph.quantize_lut import quantize_lut
from tensorc.passes.graph.quantize_qdq import quantize_qdq
from tensorc.passes.graph.simplify import eliminate_dead_code, simplify

# The graph pipeline, read top to bottom (`tensorc inspect --stage graph` prints its result).
GRAPH_PIPELINE = (
    quantize_qdq,          # DQ -> conv / matmul -> Q as int8 kernels; other DQs of constants fold
    quantize_lut,          # DQ -> unary float ops -> Q on 8-bit tensors as 256-entry tables
    quantize_integer,      # MatMulInteger's int32 matmul of 8-bit values as the int8 kernel
    lower_for_target,      # grouped / 3-D convs, transposed convs, few-row matmuls as faster ops
    fold_constants,        # nodes whose inputs are all constants become constants
    simplify,              # fold BatchNorm into conv weights / mul+add, drop no-op nodes
    fold_constants,        # what simplify exposed
    fuse_normalizations,   # LayerNorm / RMSNorm spelled out in elementwise ops -> normalize
    alter_layout,          # repack constant conv weights into the blocked layout kernels want
    eliminate_dead_code,
)

__all__ = ["GRAPH_PIPELINE", "alter_layout", "eliminate_dead_code", "fold_constants",
           "fuse_normalizations", "lower_for_target", "quantize_integer", "quantize_lut",
           "quantize_qdq", "simplify"]

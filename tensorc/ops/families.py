"""Every op family of the CPU: importing this module imports each family, which registers its
ops in ``ops/registry.py``. The order is the registry's: a family that extends another's
entries (activations use the elementwise rules) comes after it."""
from tensorc.ops import elementwise  # noqa: F401  unary and binary (broadcasting) ops, cast
from tensorc.ops import activations  # noqa: F401  elu, gelu, prelu, softplus, ...
from tensorc.ops import bitcast  # noqa: F401  reinterpret bits
from tensorc.ops import logic  # noqa: F401  comparisons, and / or / xor / not, isnan, where
from tensorc.ops.matmul import op as matmul  # noqa: F401  matmul
from tensorc.ops.nn.conv import op as conv  # noqa: F401  conv
from tensorc.ops.nn.pool import op as pool  # noqa: F401  max_pool, avg_pool
from tensorc.ops.nn import norm  # noqa: F401  batch_norm, normalize, lrn
from tensorc.ops.nn.pool import lp  # noqa: F401  lp_pool
from tensorc.ops.nn import conv_transpose  # noqa: F401  conv_transpose
from tensorc.ops import reduce  # noqa: F401  reduce_sum, reduce_mean, reduce_max, ...
from tensorc.ops import arg_reduce  # noqa: F401  argmax, argmin, topk
from tensorc.ops import softmax  # noqa: F401  softmax, log_softmax, hardmax
from tensorc.ops import transform  # noqa: F401  reshape, transpose, concat, pad, slice, ...
from tensorc.ops import indexing  # noqa: F401  gather*, scatter_*, one_hot, trilu, ...
from tensorc.ops import scan  # noqa: F401  cumsum, cumprod
from tensorc.ops import resample  # noqa: F401  resample_axis
from tensorc.ops import resize  # noqa: F401  resize_axis
from tensorc.ops import image  # noqa: F401  grid_sample, col2im
from tensorc.ops import dim_values  # noqa: F401  symbolic dims' values as a tensor
from tensorc.ops.nn import im2col  # noqa: F401  a conv's patches (symbolic convs as GEMMs)
from tensorc.ops import compaction  # noqa: F401  nonzero, compress (data-dependent sizes)
from tensorc.ops import value_dim  # noqa: F401  a data-dependent dim from a tensor's value
from tensorc.ops import nms  # noqa: F401  non_max_suppression
from tensorc.ops import unique  # noqa: F401  unique (data-dependent size)
from tensorc.ops import recurrence  # noqa: F401  RNN/GRU/LSTM over a run-time length
from tensorc.ops import branch_select  # noqa: F401  an If's result of a run-time shape
from tensorc.ops.quantized import qmatmul as qmatmul  # noqa: F401  int8 GEMM (QDQ models)
from tensorc.ops.quantized import dequantize  # noqa: F401  constant int8 -> float32
from tensorc.ops.quantized import qconv  # noqa: F401  int8 conv as a GEMM of patches

"""ONNX op converters, one module per op family (elementwise, nn, reduce, shape, rnn,
control, ...), each registering its converters in the table of
:mod:`tensorc.frontend.registry` when imported; importing this package imports
them all (in this order, which is the table's order).
"""
from tensorc.frontend.converters import (  # noqa: F401
    control, elementwise, nn, reduce, rnn, shape, indexing, resize, norm, einsum, losses,
    bits, attention, sampling, quantize, sequence, optional, data_dependent,
)

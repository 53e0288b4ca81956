"""Models with symbolic input dims, built the way exporters write them: ``dim_param`` names on
the inputs, and shapes computed in the graph (Shape -> Gather -> Unsqueeze -> Concat ->
Reshape, Range over a sequence length) rather than written as constants. The tests of
symbolic shape inference compare their inferred output shapes with onnxruntime's at several
sizes (tests/frontend/test_symbolic_models.py).

- ``bert_encoder``: ``input_ids``/``attention_mask`` int64 [batch, seq] -> hidden states
  [batch, seq, 64] and a pooled [batch, 64].
- ``gpt_decoder_step``: ``input_ids`` [batch, seq] and a KV cache ``past_key``/``past_value``
  [batch, 2, past, 16] -> ``logits`` [batch, seq, 100] and ``present_key``/``present_value``
  [batch, 2, past + seq, 16]; ``past`` may be 0 (an empty cache).
- ``ocr_recognizer``: ``x`` [batch, 3, 32, width] -> per-column class scores
  [batch, width//4, 40] (convs and pools, then a reshape to a sequence).
- ``crnn``: ``x`` [batch, 1, 32, width] -> ``scores`` [batch, width//4, 30]: the recognizer
  above with a bidirectional LSTM over the columns, as PyTorch exports nn.LSTM (time-major,
  its Y transposed and reshaped back from Shape).
- ``detector``: ``images`` [batch, 3, height, width] -> ``boxes`` [batch, cells, 6] (strided
  convs, a 2x nearest upsample joined to a skip connection, a head reshaped to boxes).
- ``cnn``: ``x`` [batch, 3, 32, 32] -> ``logits`` [batch, 10].

Each builder takes a seed; ``SYMBOLIC_MODELS`` maps names to builders and ``SWEEPS`` gives
each model's dims at several sizes (1, odd, primes).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from models._builder import GraphBuilder
from models.transformer import TransformerBuilder

INT64 = TensorProto.INT64


def _ints(b: GraphBuilder, name: str, values: list[int]) -> str:
    return b.constant(name, np.array(values, np.int64))


def _dim(b: GraphBuilder, x: str, axis: int) -> str:
    """Dim ``axis`` of ``x`` as a 1-element int64 tensor: Shape -> Gather -> Unsqueeze."""
    shape = b.node("Shape", [x])
    scalar = b.node("Gather", [shape, b.constant("axis", np.array(axis, np.int64))], axis=0)
    return b.node("Unsqueeze", [scalar, _ints(b, "unsqueeze_axes", [0])])


def _shape_of(b: GraphBuilder, parts: list[str | list[int]]) -> str:
    """Concat of dims taken from tensors and constant pieces: a Reshape target."""
    pieces = [_ints(b, "shape_piece", p) if isinstance(p, list) else p for p in parts]
    return b.node("Concat", pieces, axis=0)


class _Attention(TransformerBuilder):
    """Multi-head attention with the head split computed from the input's shape."""

    def split_heads(self, x: str) -> str:
        d = self.hidden // self.heads
        shape = _shape_of(self, [_dim(self, x, 0), _dim(self, x, 1), [self.heads, d]])
        return self.node("Transpose", [self.node("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    def merge_heads(self, x: str) -> str:
        moved = self.node("Transpose", [x], perm=[0, 2, 1, 3])
        shape = _shape_of(self, [_dim(self, moved, 0), _dim(self, moved, 1), [self.hidden]])
        return self.node("Reshape", [moved, shape])


def bert_encoder(seed: int = 0, hidden: int = 64, heads: int = 4, vocab: int = 200,
                 max_positions: int = 128) -> onnx.ModelProto:
    b = _Attention(seed, hidden, heads)
    words = b.weight("word_embeddings", (vocab, hidden), 0.5)
    positions = b.weight("position_embeddings", (max_positions, hidden), 0.5)
    seq = b.node("Gather", [b.node("Shape", ["input_ids"]),
                            b.constant("one", np.array(1, np.int64))], axis=0)
    position_ids = b.node("Range", [b.constant("zero", np.array(0, np.int64)), seq,
                                    b.constant("step", np.array(1, np.int64))])
    x = b.node("Add", [b.node("Gather", [words, "input_ids"], axis=0),
                       b.node("Gather", [positions, position_ids], axis=0)])
    x = b.layer_norm(x)
    mask = b.node("Cast", [b.node("Unsqueeze", ["attention_mask", _ints(b, "mask_axes",
                                                                           [1, 2])])],
                  to=TensorProto.FLOAT)
    bias = b.node("Mul", [b.node("Sub", [b.constant("one_f", np.array(1, np.float32)), mask]),
                          b.constant("neg", np.array(-10000, np.float32))])
    for _ in range(2):
        x = b.layer_norm(b.node("Add", [x, b.attention(x, bias)]))
        inner = b.linear(b.gelu_erf(b.linear(x, hidden, 2 * hidden)), 2 * hidden, hidden)
        x = b.layer_norm(b.node("Add", [x, inner]))
    b.node("Identity", [x], output="last_hidden_state")
    first = b.node("Gather", [x, b.constant("first", np.array(0, np.int64))], axis=1)
    b.node("Tanh", [b.linear(first, hidden, hidden)], output="pooled")
    ids = [helper.make_tensor_value_info(n, INT64, ["batch", "seq"])
           for n in ("input_ids", "attention_mask")]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch", "seq", hidden]),
               helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])]
    return b.model("bert_encoder", ids, outputs)


def gpt_decoder_step(seed: int = 0, hidden: int = 32, heads: int = 2, vocab: int = 100,
                     max_positions: int = 256) -> onnx.ModelProto:
    """One decoder layer over ``seq`` new tokens after ``past`` cached ones: the keys and
    values are the cache concatenated with the new ones (``past + seq``), position ids are
    ``Range(past, past + seq)``, and new token i sees cached and new positions j <= past + i."""
    b = _Attention(seed, hidden, heads)
    d = hidden // heads
    words = b.weight("word_embeddings", (vocab, hidden), 0.5)
    positions = b.weight("position_embeddings", (max_positions, hidden), 0.5)
    shape_ids = b.node("Shape", ["input_ids"])
    seq = b.node("Gather", [shape_ids, b.constant("one", np.array(1, np.int64))], axis=0)
    past = b.node("Gather", [b.node("Shape", ["past_key"]),
                             b.constant("two", np.array(2, np.int64))], axis=0)
    total = b.node("Add", [past, seq])
    step = b.constant("step", np.array(1, np.int64))
    position_ids = b.node("Range", [past, total, step])
    x = b.node("Add", [b.node("Gather", [words, "input_ids"], axis=0),
                       b.node("Gather", [positions, position_ids], axis=0)])
    h = b.layer_norm(x)
    q, k, v = (b.split_heads(b.linear(h, hidden, hidden)) for _ in range(3))
    key = b.node("Concat", ["past_key", k], output="present_key", axis=2)
    value = b.node("Concat", ["past_value", v], output="present_value", axis=2)
    scores = b.node("MatMul", [q, b.node("Transpose", [key], perm=[0, 1, 3, 2])])
    scores = b.node("Div", [scores, b.constant("scale", np.array(np.sqrt(d), np.float32))])
    # causal: query at position past + i sees key positions j <= past + i
    key_positions = b.node("Range", [b.constant("zero", np.array(0, np.int64)), total, step])
    keep = b.node("LessOrEqual", [
        b.node("Unsqueeze", [key_positions, _ints(b, "row", [0])]),
        b.node("Unsqueeze", [position_ids, _ints(b, "column", [1])])])
    scores = b.node("Where", [keep, scores, b.constant("masked", np.array(-1e4, np.float32))])
    context = b.merge_heads(b.node("MatMul", [b.node("Softmax", [scores], axis=-1), value]))
    x = b.node("Add", [x, b.linear(context, hidden, hidden)])
    b.node("MatMul", [b.layer_norm(x), b.node("Transpose", [words], perm=[1, 0])],
           output="logits")
    cache = ["batch", heads, "past", d]
    inputs = [helper.make_tensor_value_info("input_ids", INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("past_key", TensorProto.FLOAT, cache),
              helper.make_tensor_value_info("past_value", TensorProto.FLOAT, cache)]
    present = ["batch", heads, "past + seq", d]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch", "seq", vocab]),
               helper.make_tensor_value_info("present_key", TensorProto.FLOAT, present),
               helper.make_tensor_value_info("present_value", TensorProto.FLOAT, present)]
    return b.model("gpt_decoder_step", inputs, outputs)


def _conv(b: GraphBuilder, x: str, c_in: int, c_out: int, kernel: tuple[int, int] = (3, 3),
          stride: int = 1, pads: tuple[int, ...] = (1, 1, 1, 1)) -> str:
    w = b.constant("conv_weight", b.he_normal((c_out, c_in) + kernel, c_in * kernel[0]
                                              * kernel[1]))
    bias = b.constant("conv_bias", np.zeros(c_out, np.float32))
    return b.node("Relu", [b.node("Conv", [x, w, bias], kernel_shape=list(kernel),
                                  strides=[stride, stride], pads=list(pads))])


def _text_line_features(b: GraphBuilder, channels: int) -> str:
    """A recognizer's convs and 2x2 pools: [b, channels, 32, W] -> [b, 32, 1, W//4]."""
    x = _conv(b, "x", channels, 16)
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = _conv(b, x, 16, 32)
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    return _conv(b, x, 32, 32, kernel=(8, 1), pads=(0, 0, 0, 0))     # height 8 -> 1


def ocr_recognizer(seed: int = 0, classes: int = 40) -> onnx.ModelProto:
    """CRNN-style: convs and 2x2 pools take [b, 3, 32, W] to [b, 32, 1, W//4]; the feature map
    is reshaped to [b, 32, W//4] (target from Shape), transposed to a sequence of columns
    and classified per column."""
    b = GraphBuilder(seed)
    x = _text_line_features(b, 3)
    x = b.node("Reshape", [x, _shape_of(b, [_dim(b, x, 0), _dim(b, x, 1), [-1]])])
    x = b.node("Transpose", [x], perm=[0, 2, 1])
    w = b.constant("classifier", b.he_normal((32, classes), 32))
    b.node("Softmax", [b.node("MatMul", [x, w])], output="scores", axis=-1)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, "width"])]
    outputs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                             ["batch", "columns", classes])]
    return b.model("ocr_recognizer", inputs, outputs)


def crnn(seed: int = 0, classes: int = 30, hidden: int = 24) -> onnx.ModelProto:
    """A text-line recognizer as OCR packages ship it: convs and pools take a grey line
    [b, 1, 32, W] to [b, 32, 1, W//4], the columns run through a bidirectional LSTM
    (time-major: [W//4, b, 32]) whose Y [T, 2, b, H] is transposed and reshaped to
    [T, b, 2H], then classified per column and returned batch-major."""
    b = GraphBuilder(seed)
    x = _text_line_features(b, 1)
    x = b.node("Squeeze", [x, _ints(b, "axes", [2])])             # [b, 32, T]
    seq = b.node("Transpose", [x], perm=[2, 0, 1])                # [T, b, 32]
    scale = 1 / np.sqrt(hidden)
    w = b.constant("lstm_w", b.rng.uniform(-scale, scale, (2, 4 * hidden, 32))
                   .astype(np.float32))
    r = b.constant("lstm_r", b.rng.uniform(-scale, scale, (2, 4 * hidden, hidden))
                   .astype(np.float32))
    bias = b.constant("lstm_b", b.rng.uniform(-scale, scale, (2, 8 * hidden))
                      .astype(np.float32))
    name = b.fresh("lstm")
    b.nodes.append(helper.make_node("LSTM", [seq, w, r, bias], [f"{name}_y"], name=name,
                                    hidden_size=hidden, direction="bidirectional"))
    y = b.node("Transpose", [f"{name}_y"], perm=[0, 2, 1, 3])    # [T, b, 2, H]
    y = b.node("Reshape", [y, _shape_of(b, [_dim(b, y, 0), _dim(b, y, 1), [2 * hidden]])])
    head = b.constant("classifier", b.he_normal((2 * hidden, classes), 2 * hidden))
    logits = b.node("Softmax", [b.node("MatMul", [y, head])], axis=-1)
    b.node("Transpose", [logits], output="scores", perm=[1, 0, 2])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 32, "width"])]
    outputs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                             ["batch", "columns", classes])]
    return b.model("crnn", inputs, outputs)


def detector(seed: int = 0, anchors: int = 3, values: int = 6) -> onnx.ModelProto:
    """Two stride-2 convs and a third, a 2x nearest upsample of the deepest map concatenated
    with the stride-4 map (so height and width must be multiples of 8, as in YOLO), a head
    of ``anchors * values`` channels reshaped to [b, anchors, values, cells] and transposed to
    boxes [b, cells * anchors, values]."""
    b = GraphBuilder(seed)
    p1 = _conv(b, "images", 3, 8, stride=2)
    p2 = _conv(b, p1, 8, 16, stride=2)
    p3 = _conv(b, p2, 16, 16, stride=2)
    scales = b.constant("scales", np.array([1, 1, 2, 2], np.float32))
    up = b.node("Resize", [p3, "", scales], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = _conv(b, b.node("Concat", [up, p2], axis=1), 32, 16)
    w = b.constant("head", b.he_normal((anchors * values, 16, 1, 1), 16))
    head = b.node("Conv", [x, w], kernel_shape=[1, 1])
    grid = b.node("Reshape", [head, _shape_of(b, [_dim(b, head, 0), [anchors, values, -1]])])
    boxes = b.node("Transpose", [grid], perm=[0, 1, 3, 2])
    b.node("Reshape", [boxes, _shape_of(b, [_dim(b, boxes, 0), [-1, values]])],
           output="boxes")
    inputs = [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                            ["batch", 3, "height", "width"])]
    outputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT,
                                             ["batch", "boxes", values])]
    return b.model("detector_symbolic", inputs, outputs)


def segmenter(seed: int = 0, classes: int = 5) -> onnx.ModelProto:
    """Two stride-2 convs, a 2x2 transposed conv back up to stride 2, a 1x1 head and a
    bilinear Resize to the input's own height and width (sizes from its Shape, as
    F.interpolate(x, size=image.shape[2:]) exports): [b, classes, height, width]."""
    b = GraphBuilder(seed)
    p1 = _conv(b, "images", 3, 8, stride=2)
    p2 = _conv(b, p1, 8, 16, stride=2)
    w = b.constant("up_weight", b.he_normal((16, 8, 2, 2), 16 * 4))
    up = b.node("Relu", [b.node("ConvTranspose", [p2, w], kernel_shape=[2, 2],
                                strides=[2, 2])])
    head = b.constant("head", b.he_normal((classes, 8, 1, 1), 8))
    logits = b.node("Conv", [up, head], kernel_shape=[1, 1])
    size = _shape_of(b, [_dim(b, logits, 0), _dim(b, logits, 1), _dim(b, "images", 2),
                         _dim(b, "images", 3)])
    b.node("Resize", [logits, "", "", size], output="masks", mode="linear",
           coordinate_transformation_mode="half_pixel")
    inputs = [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                            ["batch", 3, "height", "width"])]
    outputs = [helper.make_tensor_value_info("masks", TensorProto.FLOAT,
                                             ["batch", classes, "height", "width"])]
    return b.model("segmenter", inputs, outputs)


def cnn(seed: int = 0, classes: int = 10) -> onnx.ModelProto:
    """Conv, BatchNorm, Relu, pool, global pool, Flatten, Gemm over a symbolic batch."""
    b = GraphBuilder(seed)
    x = b.node("Relu", [b.batch_norm(_conv(b, "x", 3, 16), 16)])
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = _conv(b, x, 16, 32, stride=2)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.gemm(x, 32, classes, gain=1.0, output="logits")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])]
    return b.model("cnn_symbolic_batch", inputs, outputs)


SYMBOLIC_MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "bert_encoder": bert_encoder, "gpt_decoder_step": gpt_decoder_step,
    "ocr_recognizer": ocr_recognizer, "crnn": crnn, "detector": detector, "segmenter": segmenter,
    "cnn": cnn,
}

# Dim values each model is checked at: 1, odd sizes, primes (and, for the cache, empty).
SWEEPS: dict[str, list[dict[str, int]]] = {
    "bert_encoder": [{"batch": 1, "seq": 1}, {"batch": 3, "seq": 7}, {"batch": 2, "seq": 13},
                     {"batch": 5, "seq": 31}],
    "gpt_decoder_step": [{"batch": 1, "seq": 1, "past": 0}, {"batch": 1, "seq": 1, "past": 17},
                         {"batch": 3, "seq": 5, "past": 0}, {"batch": 2, "seq": 1, "past": 97},
                         {"batch": 2, "seq": 7, "past": 11}],
    "ocr_recognizer": [{"batch": 1, "width": 4}, {"batch": 1, "width": 37},
                       {"batch": 3, "width": 101}, {"batch": 2, "width": 256}],
    "crnn": [{"batch": 1, "width": 4}, {"batch": 1, "width": 61}, {"batch": 3, "width": 37}],
    "detector": [{"batch": 1, "height": 8, "width": 8}, {"batch": 3, "height": 40, "width": 24},
                 {"batch": 2, "height": 64, "width": 136}],
    "segmenter": [{"batch": 1, "height": 1, "width": 1}, {"batch": 2, "height": 17, "width": 23},
                  {"batch": 1, "height": 64, "width": 48}, {"batch": 3, "height": 37, "width": 5}],
    "cnn": [{"batch": 1}, {"batch": 7}, {"batch": 13}],
}

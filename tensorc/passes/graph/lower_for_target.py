"""Rewrites for speed that run before any other graph pass: the frontend imports convs,
transposed convs and matmuls as ONNX means them; this pass turns the forms the kernels run
slowly into other core ops that run fast.

- a grouped conv of wide groups becomes one dense conv per group (with its slice of the bias),
  concatenated along the channels;
- a 3-D conv with constant weights becomes a 2-D conv over the output depths;
- a dilated 2-D conv whose taps read only padding over parts of its output becomes one conv
  per region of the output, each of the taps live there (``ops/nn/conv/regions.py``),
  concatenated;
- a transposed conv with constant weights becomes a GEMM and a col2im;
- a batched product of few rows each against one matrix becomes one GEMM over all the rows.

The ops it builds are named after the node they replace, as the frontend names every node
after the ONNX node it converts; constant inputs are folded on the spot, as the frontend does.
Every target gets the same rewrites today (they were measured on CPUs).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from tensorc.ir.dims import is_symbolic
from tensorc.ir.graph import Graph, Node, Value, rewrite
from tensorc.ops.build import emit, infer_types
from tensorc.ops.interpret import evaluate, worth_folding
from tensorc.ops.nn.conv import regions
from tensorc.passes.graph.simplify import eliminate_dead_code
from tensorc.target import Target

# a grouped conv whose groups have at least this many input channels runs as one dense conv
# per group (each under the dense conv schedules), concatenated (measured in a05c564)
SPLIT_GROUP_MIN_CHANNELS = 32

# a dilated conv whose phase maps keep at least this many rows and columns runs undilated on
# them (smaller ones: regions, or the dilated conv as it is). 36 phases of 11 x 11 ran 64->64
# d6 on 64x64 2x slower than the dilated conv; 4 of 17 x 17 ran 128->128 d2 on 33x33 faster
# (9 ms vs 25 ms), but back to back on a loaded machine the two forms were within noise
PHASE_MIN_SIZE = 16

# a batched product whose matrices have at most this many rows each is one GEMM instead (where
# B is a matrix): fewer rows than a register tile leave each product bound by streaming B
# (measured in 703833a)
MERGE_ROWS_MAX = 8


def lower_for_target(graph: Graph, target: Target) -> Graph:
    """Rewrite the convs, transposed convs and matmuls that run faster as other core ops.

    Before:  %1: float32[1,64,27,27] = conv(%x, %w) {strides=(1,1), ..., groups=2}
             %y: float32[1,64,27,27] = add(%1, %c0)
    After:   %3: float32[1,32,27,27] = slice(%x) {...}
             %4: float32[1,32,27,27] = conv(%3, %c1) {groups=1, ...}
             %5: float32[1,32,27,27] = add(%4, %c2)
             ... (the second group)
             %y: float32[1,64,27,27] = concat(%5, %8) {axis=1}

    >>> g = lower_for_target(g, Target.host())    # doctest: +SKIP
    """
    readers = _readers(graph)

    def rule(g: Graph, node: Node) -> list[Value] | None:
        lower = RULES.get(node.op)
        return lower(g, node, readers) if lower is not None else None
    return eliminate_dead_code(rewrite(graph, rule))


lower_for_target.needs_target = True


# building ------------------------------------------------------------------------------------
class _Builder:
    """Appends core ops to a graph under one node name, folding those whose inputs are all
    constants (as the frontend's ImportContext.emit does)."""

    def __init__(self, graph: Graph, name: str):
        self.graph = graph
        self.name = name

    def emit(self, op: str, inputs: list[Value], **attrs: Any) -> Value:
        arrays = [self.graph.constants.get(v) for v in inputs]
        if inputs and all(a is not None for a in arrays):
            (expected,) = infer_types(op, attrs, [v.type for v in inputs])
            if worth_folding(arrays, [expected]):
                (result,) = evaluate(op, attrs, arrays)
                return self.graph.add_constant(result)
        value = emit(self.graph, op, inputs, **attrs)
        value.producer.name = self.name
        return value

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        """Reshape, or nothing when the shape is unchanged."""
        shape = tuple(d if is_symbolic(d) else int(d) for d in shape)
        return x if shape == x.type.shape else self.emit("reshape", [x], shape=shape)

    def take(self, x: Value, axis: int, start: int, size: int) -> Value:
        """``x[..., start:start + size, ...]`` along ``axis``."""
        shape = list(x.type.shape)
        starts = [0] * len(shape)
        starts[axis], shape[axis] = start, size
        return self.emit("slice", [x], starts=tuple(starts), steps=(1,) * len(shape),
                         shape=tuple(shape))

    def add_bias(self, y: Value, bias: Value | None) -> Value:
        """``y`` plus a per-channel ``bias`` [F] (as the frontend adds a Conv's bias)."""
        if bias is None:
            return y
        shape = (1, bias.type.size) + (1,) * (y.type.ndim - 2)
        return self.emit("add", [y, self.reshape(bias, shape)])


# who reads what ------------------------------------------------------------------------------
Readers = dict[str, "list[Node] | None"]    # value name -> the nodes reading it (None: an output)


def _readers(graph: Graph) -> Readers:
    """Value name -> the nodes reading it; None for a graph output. Keyed by name: names
    survive the copy that ``rewrite`` makes, Value objects do not."""
    readers: Readers = {}
    for node in graph.nodes:
        for value in node.inputs:
            users = readers.setdefault(value.name, [])
            if users is not None and (not users or users[-1] is not node):
                users.append(node)
    for value in graph.outputs:
        readers[value.name] = None
    return readers


def _epilogue(node: Node, op: str, readers: Readers) -> Node | None:
    """The node the frontend emitted right after ``node`` for the same ONNX node (a Conv's
    bias ``add``, a MatMul's final ``reshape``): ``node``'s one reader, of op ``op`` and of
    ``node``'s name, reading it as its first input."""
    users = readers.get(node.outputs[0].name)
    if not users or len(users) != 1:
        return None
    user = users[0]
    if user.op != op or user.name != node.name or user.inputs[0].name != node.outputs[0].name:
        return None
    return user


# grouped convs -------------------------------------------------------------------------------
def _split_groups(g: Graph, conv: Node) -> bool:
    """A grouped conv of wide groups (AlexNet's 2, ShuffleNet's 3 or 8, RegNet's 48-wide):
    the grouped schedule computes each filter's group in its inner loop and runs 3x slower
    than onnxruntime there (narrow groups, as ResNeXt's 4 channels, it runs 3x faster)."""
    x, w = conv.inputs
    groups = conv.attrs["groups"]
    channels = x.type.shape[1] if x.type.ndim >= 3 else 0
    return 1 < groups < channels and channels % groups == 0 and \
        channels // groups >= SPLIT_GROUP_MIN_CHANNELS and g.is_constant(w)


def _lower_conv(g: Graph, conv: Node, readers: Readers) -> list[Value] | None:
    x, w = conv.inputs
    if _symbolic_padded_conv(g, conv) and any(conv.attrs["pads"]):
        return [_padded_first(g, conv)]
    if _split_groups(g, conv):
        if _bias_add(conv, readers) is not None:
            return None             # split where its bias is added (_grouped_conv_with_bias)
        return [_grouped_conv_as_convs(g, conv, None)]
    if x.type.ndim == 5 and conv.attrs["groups"] == 1 and g.is_constant(w) and \
            any(k > 1 for k in w.type.shape[2:]):    # (a pointwise one runs as a GEMM as it is)
        return [_conv3d_as_conv2d(g, conv)]
    planned = _dead_taps(conv)
    if planned is not None:
        return [_conv_by_regions(g, conv, *planned)]
    if _phases_undilate(conv):
        return [_conv_by_phases(g, conv)]
    return None


def _symbolic_padded_conv(g: Graph, conv: Node) -> bool:
    """A dense or depthwise 2-D float conv over symbolic dims: its kernels (a GEMM along
    output rows, ops/nn/conv/conv_gemm.py; a register tile on blocked tensors,
    conv/blocked_symbolic.py and conv/blocked_window.py) read an unpadded input."""
    x, w = conv.inputs
    groups = conv.attrs["groups"]
    depthwise = x.type.ndim == 4 and groups == x.type.shape[1] == w.type.shape[0] > 1
    return not x.type.is_static and x.type.ndim == 4 and (groups == 1 or depthwise) and \
        w.type.ndim == 4 and x.type.dtype in ("float32", "float64") \
        and not any(k in conv.attrs for k in ("kernel_block", "winograd", "layout_block"))


def _padded_first(g: Graph, conv: Node) -> Value:
    """conv(x) as conv(pad(x)) with no padding of its own: the padding a kernel of its own,
    so that the GEMM's patches are plain strided reads (a padding inside it is a select and
    a clamped load at every tap of every output)."""
    x, w = conv.inputs
    top, left, bottom, right = conv.attrs["pads"]
    builder = _Builder(g, conv.name)
    padded = builder.emit("pad", [x], pads=(0, 0, top, left, 0, 0, bottom, right),
                          mode="constant", value=0.0)
    return builder.emit("conv", [padded, w], **{**conv.attrs, "pads": (0, 0, 0, 0)})


def _bias_add(conv: Node, readers: Readers) -> Node | None:
    """The add of the Conv's bias, reshaped to [1, F, 1, ...], that follows ``conv``."""
    add = _epilogue(conv, "add", readers)
    out = conv.outputs[0].type
    if add is None or add.inputs[1].type.shape != (1, out.shape[1]) + (1,) * (out.ndim - 2):
        return None
    return add


def _grouped_conv_with_bias(g: Graph, add: Node, readers: Readers) -> list[Value] | None:
    """A split grouped conv and its bias: each group's conv adds its slice of the bias."""
    conv = add.inputs[0].producer
    if conv is None or conv.op != "conv" or not _split_groups(g, conv):
        return None
    epilogue = _bias_add(conv, readers)
    if epilogue is None or epilogue.outputs[0].name != add.outputs[0].name:
        return None
    bias = add.inputs[1]
    source = bias.producer
    if source is not None and source.op == "reshape" and source.name == conv.name and \
            source.inputs[0].type.ndim == 1:
        bias = source.inputs[0]     # a bias computed at run time: slice the vector [F]
    return [_grouped_conv_as_convs(g, conv, bias)]


def _grouped_conv_as_convs(g: Graph, conv: Node, bias: Value | None) -> Value:
    """One dense conv per group (its slice of the input, filters and bias), concatenated
    along the channels. ``bias`` is the vector [F] or, as the conv's epilogue adds it, the
    broadcast [1, F, 1, ...]. Up to 5x faster than the grouped schedule on wide groups
    (measured in a05c564)."""
    x, w = conv.inputs
    b = _Builder(g, conv.name)
    groups = conv.attrs["groups"]
    attrs = {k: conv.attrs[k] for k in ("strides", "pads", "dilations")}
    per_group, filters = x.type.shape[1] // groups, w.type.shape[0] // groups
    outs = []
    for k in range(groups):
        xg = b.take(x, 1, k * per_group, per_group)
        wg = b.take(w, 0, k * filters, filters)
        y = b.emit("conv", [xg, wg], groups=1, **attrs)
        if bias is not None and bias.type.ndim == 1:
            y = b.add_bias(y, b.take(bias, 0, k * filters, filters))
        elif bias is not None:
            y = b.emit("add", [y, b.take(bias, 1, k * filters, filters)])
        outs.append(y)
    return b.emit("concat", outs, axis=1)


# dilated convs whose taps fall in the padding ------------------------------------------------
def _dead_taps(conv: Node) -> tuple[list, list] | None:
    """A static 2-D conv with a dilation whose regions (``regions.plan_2d``) save work: the
    rows' and the columns' segments. Undilated convs are left alone (their dead taps are
    one border row, which the kernels' padding handles)."""
    x, w = conv.inputs
    attrs = conv.attrs
    if x.type.ndim != 4 or not x.type.is_static or not w.type.is_static or \
            all(d == 1 for d in attrs["dilations"]) or \
            any(k in attrs for k in ("kernel_block", "winograd", "layout_block")):
        return None
    out = conv.outputs[0].type.shape[2:]
    tap_flops = 2 * x.type.shape[0] * w.type.shape[0] * w.type.shape[1]
    return regions.plan_2d(x.type.shape[2:], w.type.shape[2:], attrs["strides"],
                           attrs["dilations"], attrs["pads"], out, tap_flops)


def _conv_by_regions(g: Graph, conv: Node, rows: list, cols: list) -> Value:
    """One conv per region of the output (a rows segment x a columns segment), of the taps
    live there, on the part of the input they read (padded only where a merged segment's
    taps leave the map), concatenated along the columns, then the rows."""
    x, w = conv.inputs
    b = _Builder(g, conv.name)
    (sh, sw), (dh, dw) = conv.attrs["strides"], conv.attrs["dilations"]
    pads, (height, width) = conv.attrs["pads"], x.type.shape[2:]
    n, channels = x.type.shape[:2]
    bands = []
    for ry in rows:
        y0, ylen, top, bottom = ry.input_window(sh, dh, pads[0], height)
        pieces = []
        for rx in cols:
            x0, xlen, left, right = rx.input_window(sw, dw, pads[1], width)
            part = x if (y0, ylen, x0, xlen) == (0, height, 0, width) else b.emit(
                "slice", [x], starts=(0, 0, y0, x0), steps=(1, 1, 1, 1),
                shape=(n, channels, ylen, xlen))
            taps = b.emit("slice", [w], starts=(0, 0, ry.tap_start, rx.tap_start),
                          steps=(1, 1, 1, 1),
                          shape=(*w.type.shape[:2], ry.taps, rx.taps))
            # (a dim of one tap is undilated: the kernels take it as the 1x1 conv it is)
            dilations = (dh if ry.taps > 1 else 1, dw if rx.taps > 1 else 1)
            pieces.append(b.emit("conv", [part, taps], strides=(sh, sw), dilations=dilations,
                                 pads=(top, left, bottom, right),
                                 groups=conv.attrs["groups"]))
        bands.append(b.emit("concat", pieces, axis=3) if len(pieces) > 1 else pieces[0])
    return b.emit("concat", bands, axis=2) if len(bands) > 1 else bands[0]


def _phases_undilate(conv: Node) -> bool:
    """A static dilated 2-D conv of stride 1 whose pads are whole dilations and whose phase
    maps (the map subsampled by the dilation) keep PHASE_MIN_SIZE rows and columns: it runs
    as an undilated conv over a batch of its phases. Its dead taps are too few for regions
    (``_dead_taps`` first), and the convs' tiles run slowly on taps a dilation apart."""
    x, w = conv.inputs
    attrs = conv.attrs
    if x.type.ndim != 4 or not x.type.is_static or not w.type.is_static or \
            any(k in attrs for k in ("kernel_block", "winograd", "layout_block")) or \
            tuple(attrs["strides"]) != (1, 1) or all(d == 1 for d in attrs["dilations"]):
        return False
    dilations, pads, sizes = attrs["dilations"], attrs["pads"], x.type.shape[2:]
    return all(pads[k] % dilations[k % 2] == 0 for k in range(4)) and \
        all(-(-sizes[k] // dilations[k]) >= PHASE_MIN_SIZE for k in range(2))


def _conv_by_phases(g: Graph, conv: Node) -> Value:
    """A dilated conv of stride 1 (dilations dh x dw, pads whole dilations) as an undilated
    one over its dh x dw phases (space-to-batch, as TensorFlow runs atrous convs): output
    (q*dh + a, r*dw + b) reads only inputs of the same phase (a, b), a tap apart there. The
    map is zero-padded to whole phases, the phases stacked along the batch, convolved with
    pads divided by the dilations, and interleaved back."""
    x, w = conv.inputs
    b = _Builder(g, conv.name)
    (dh, dw), pads = conv.attrs["dilations"], conv.attrs["pads"]
    n, channels, height, width = x.type.shape
    rows, cols = -(-height // dh), -(-width // dw)
    if (rows * dh, cols * dw) != (height, width):
        x = b.emit("pad", [x], pads=(0, 0, 0, 0, 0, 0, rows * dh - height, cols * dw - width),
                   mode="constant", value=0.0)
    phases = [b.emit("slice", [x], starts=(0, 0, a, c), steps=(1, 1, dh, dw),
                     shape=(n, channels, rows, cols)) for a in range(dh) for c in range(dw)]
    stacked = b.emit("concat", phases, axis=0) if len(phases) > 1 else phases[0]
    y = b.emit("conv", [stacked, w], strides=(1, 1), dilations=(1, 1),
               pads=(pads[0] // dh, pads[1] // dw, pads[2] // dh, pads[3] // dw),
               groups=conv.attrs["groups"])
    filters = y.type.shape[1]
    y = b.reshape(y, (dh, dw, n, filters, rows, cols))
    y = b.emit("transpose", [y], perm=(2, 3, 4, 0, 5, 1))
    y = b.reshape(y, (n, filters, rows * dh, cols * dw))
    if (rows * dh, cols * dw) != (height, width):
        y = b.emit("slice", [y], starts=(0, 0, 0, 0), steps=(1, 1, 1, 1),
                   shape=(n, filters, height, width))
    return y


# 3-D convs -----------------------------------------------------------------------------------
def _conv3d_as_conv2d(g: Graph, conv: Node) -> Value:
    """A 3-D conv as a 2-D one over the output depths: for each output depth, the input
    slices its depth taps read, stacked as channels [N * Do, kd * C, H, W], convolved with
    the weights [F, kd * C, kh, kw] (a batch of Do 2-D convs under the 2-D schedules), then
    the depths moved back beside the spatial dims. The 3-D conv runs under the generic
    schedule, about 5x slower (measured in 01f2b67)."""
    x, w = conv.inputs
    strides, pads, dilations = (conv.attrs[k] for k in ("strides", "pads", "dilations"))
    b = _Builder(g, conv.name)
    n, channels, depth = x.type.shape[:3]
    filters, taps = w.type.shape[0], w.type.shape[2]
    sd, dd = strides[0], dilations[0]
    if pads[0] or pads[3]:
        x = b.emit("pad", [x], pads=(0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0),
                   mode="constant", value=0.0)
        depth += pads[0] + pads[3]
    out_depth = (depth - dd * (taps - 1) - 1) // sd + 1
    shape = (n, channels, out_depth) + tuple(x.type.shape[3:])
    read = [b.emit("slice", [x], starts=(0, 0, k * dd, 0, 0), steps=(1, 1, sd, 1, 1),
                   shape=shape) for k in range(taps)]      # what each depth tap reads
    stacked = b.emit("concat", read, axis=1) if taps > 1 else read[0]
    planes = b.emit("transpose", [stacked], perm=(0, 2, 1, 3, 4))
    planes = b.reshape(planes, (n * out_depth, taps * channels) + tuple(x.type.shape[3:]))
    w2 = b.emit("transpose", [w], perm=(0, 2, 1, 3, 4))
    w2 = b.reshape(w2, (filters, taps * channels) + tuple(w.type.shape[3:]))
    y = b.emit("conv", [planes, w2], strides=tuple(strides[1:]),
               pads=(pads[1], pads[2], pads[4], pads[5]), dilations=tuple(dilations[1:]),
               groups=1)
    y = b.reshape(y, (n, out_depth) + tuple(y.type.shape[1:]))
    return b.emit("transpose", [y], perm=(0, 2, 1, 3, 4))


# transposed convs ----------------------------------------------------------------------------
def _conv_transpose_as_gemm(g: Graph, node: Node, readers: Readers) -> list[Value] | None:
    """A transposed conv as a GEMM and a col2im: every input pixel's contribution to each
    kernel offset, W[C, F * K]^T @ x[C, L] (the GEMM template, W packed at compile time),
    then each output pixel the sum of the contributions that land on it. The direct form
    (a conv over the input spread out by the strides) multiplies s^2 zeros per product and
    runs under the generic reduction schedule, about 19x slower (measured in 3ce10ad). Kept
    where col2im cannot place the output (groups, or an output_padding of a stride or more)
    or the weights are computed at run time."""
    x, w = node.inputs
    attrs = node.attrs
    strides, pads, dilations = attrs["strides"], attrs["pads"], attrs["dilations"]
    extra = attrs["output_padding"]
    if attrs["groups"] != 1 or not g.is_constant(w) or \
            any(e >= s for e, s in zip(extra, strides)):
        return None
    b = _Builder(g, node.name)
    spatial = x.type.ndim - 2
    kernel = w.type.shape[2:]
    n, channels, sizes = x.type.shape[0], x.type.shape[1], x.type.shape[2:]
    filters, taps = w.type.shape[1], math.prod(kernel)
    out = tuple(s * (size - 1) + e + (k - 1) * d + 1 - pads[j] - pads[j + spatial]
                for j, (s, size, e, k, d) in enumerate(zip(strides, sizes, extra, kernel,
                                                             dilations)))
    weights = b.emit("transpose", [b.reshape(w, (channels, filters * taps))], perm=(1, 0))
    cols = b.emit("matmul", [weights, b.reshape(x, (n, channels, math.prod(sizes)))])
    return [b.emit("col2im", [cols], image_shape=out, block_shape=tuple(kernel),
                   strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations))]


# few-row products ----------------------------------------------------------------------------
def _rows_merge(node: Node) -> bool:
    """A matrix B shared by a batch of products of few rows each ([T, 1, C] @ W: a
    sequence-first export): one GEMM over all the rows, not one GEMV per batch entry (each
    streaming all of B)."""
    a, b = node.inputs
    shape = a.type.shape
    if b.type.ndim != 2 or a.type.ndim < 3:
        return False
    if not all(isinstance(d, int) for d in shape):
        # symbolic batch or rows: one GEMM over all of them, whatever their number at run
        # time (never slower than a GEMM per batch entry over a shared B)
        return True
    return math.prod(shape[:-2]) > 1 and shape[-2] <= MERGE_ROWS_MAX


def _merged_rows(g: Graph, node: Node, readers: Readers) -> list[Value] | None:
    if not _rows_merge(node):
        return None
    if _epilogue(node, "reshape", readers) is not None:
        return None                 # merged where its result is reshaped (below)
    return [_merged_product(g, node, node.outputs[0].type.shape)]


def _merged_rows_reshaped(g: Graph, reshape: Node, readers: Readers) -> list[Value] | None:
    """A merged product whose result the frontend reshapes (a MatMul by a vector): one
    reshape of the GEMM's rows to the final shape."""
    product = reshape.inputs[0].producer
    if product is None or product.op != "matmul" or not _rows_merge(product):
        return None
    epilogue = _epilogue(product, "reshape", readers)
    if epilogue is None or epilogue.outputs[0].name != reshape.outputs[0].name:
        return None
    return [_merged_product(g, product, reshape.attrs["shape"])]


def _merged_product(g: Graph, node: Node, shape: Sequence[int]) -> Value:
    """A [..., M, K] @ B [K, N] as reshape(A) [rows, K] @ B, reshaped to ``shape``."""
    a, b = node.inputs
    builder = _Builder(g, node.name)
    k = b.type.shape[0]
    rows = builder.reshape(a, (math.prod(a.type.shape[:-1]), k))
    return builder.reshape(builder.emit("matmul", [rows, b], **node.attrs), shape)


# op -> its rule: fn(graph being built, node, readers) -> replacement values, or None to keep
# the node. A rule that splits a node together with its epilogue (a conv's bias add, a
# product's reshape) keeps the node and rewrites at the epilogue.
RULES = {
    "conv": _lower_conv,
    "add": _grouped_conv_with_bias,
    "conv_transpose": _conv_transpose_as_gemm,
    "matmul": _merged_rows,
    "reshape": _merged_rows_reshaped,
}

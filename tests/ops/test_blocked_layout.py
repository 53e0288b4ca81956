"""The blocked activation layout NCHW[b]c (ops/nn/blocked_layout.py, the kernels on it in
ops/nn/conv/blocked.py and friends) and the graph pass that carries it across chains of
convs, pools, concats and elementwise ops (passes/graph/alter_layout.py):
models against onnxruntime, the graph the pass leaves (transforms at the chains' boundaries
only), the ops' numpy references against the plain ops', and every config of the blocked
schedules' spaces against the unscheduled program."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import check_result, make_model, ort_run, tensor_info
from onnx import helper

import tensorc
from tensorc.autotune.task import extract_tasks
from tensorc.runtime.kernel import build_kernel
from tensorc.ops.nn import blocked_layout
from tensorc.ops.nn.conv import blocked, winograd_blocked
from tensorc.ops.nn.conv.shapes import pack_weight
from tensorc.ops.catalog import get_op
from tensorc.target import Target

AVX2 = "llvm -mcpu=znver3"
# the AVX-512 decisions are checked on the graphs and loops compiled for ZEN4, never run:
# models run on this machine's target
ZEN4 = "llvm -mcpu=znver4"


class Chain:
    """An ONNX model built node by node, with random weights."""

    def __init__(self, shape, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.shape = shape
        self.nodes, self.weights = [], {}
        self.last, self.channels, self.count = "x", shape[1], 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def conv(self, filters, kernel=3, stride=1, group=1, pads=None, src=None, act="Relu",
             dilation=1):
        src = src or self.last
        channels = self.channels
        name = self._name("conv")
        kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        pads = [kh // 2 * dilation, kw // 2 * dilation] * 2 if pads is None else pads
        self.weights[name + "_w"] = (self.rng.standard_normal(
            (filters, channels // group, kh, kw)) * 0.2).astype(np.float32)
        self.weights[name + "_b"] = self.rng.standard_normal(filters).astype(np.float32)
        self.nodes.append(helper.make_node("Conv", [src, name + "_w", name + "_b"], [name],
                                           pads=pads, strides=[stride] * 2, group=group,
                                           dilations=[dilation] * 2))
        self.last, self.channels = name, filters
        if act:
            self.unary(act)
        return self.last

    def unary(self, op):
        name = self._name(op.lower())
        self.nodes.append(helper.make_node(op, [self.last], [name]))
        self.last = name
        return name

    def binary(self, op, a, b):
        name = self._name(op.lower())
        self.nodes.append(helper.make_node(op, [a, b], [name]))
        self.last = name
        return name

    def constant(self, array) -> str:
        name = self._name("k")
        self.weights[name] = np.asarray(array, np.float32)
        return name

    def pool(self, op, kernel, stride, pads, **attrs):
        name = self._name(op.lower())
        self.nodes.append(helper.make_node(op, [self.last], [name], kernel_shape=[kernel] * 2,
                                           strides=[stride] * 2, pads=pads, **attrs))
        self.last = name
        return name

    def concat(self, *parts):
        name = self._name("concat")
        self.nodes.append(helper.make_node("Concat", list(parts), [name], axis=1))
        self.last = name
        return name

    def model(self, outputs=None):
        return make_model(self.nodes, [tensor_info("x", "float32", self.shape)],
                          outputs or [self.last], initializers=self.weights)


def graph_of(model, target=ZEN4) -> str:
    """The graph compiled (not run) for ``target``: by default AVX-512's, whose blocks of 16
    the tests count; AVX2's blocks are 8 (test_avx2_targets_use_blocks_of_eight)."""
    return tensorc.inspect(model, stage="graph", target=target)


def check_against_onnxruntime(model, shape, target="llvm", seed: int = 1, threads=None):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    got = tensorc.compile(model, target=target, num_threads=threads).run({"x": x})
    want = ort_run(model, {"x": x})
    assert sorted(got) == sorted(want)
    for name in want:
        check_result(got[name], want[name], rtol=1e-4, atol=1e-4)


def _conv_stack(shape, stride=1):
    chain = Chain(shape)
    first = chain.conv(32, kernel=3, stride=stride)
    chain.conv(32, kernel=1, act=None)
    chain.binary("Add", chain.last, first)                  # a residual
    chain.unary("Relu")
    chain.conv(48, kernel=3, stride=2, act="Sigmoid")
    return chain


@pytest.mark.parametrize("shape, stride", [((1, 16, 14, 14), 1), ((1, 32, 27, 27), 2),
                                           ((2, 16, 13, 11), 1)])
def test_a_conv_chain_runs_blocked_with_transforms_at_its_ends(shape, stride):
    model = _conv_stack(shape, stride).model()
    graph = graph_of(model)
    assert graph.count("layout_transform") == 2
    # every conv blocked, a stride-1 3x3 conv that runs as Winograd too
    assert graph.count("layout_block=16") == 3
    check_against_onnxruntime(model, shape)


def test_the_graph_output_keeps_its_name_and_its_plain_layout():
    chain = _conv_stack((1, 16, 14, 14))
    model = chain.model()
    graph = graph_of(model)
    out = chain.last
    assert f"%{out}: float32[1,48,7,7] = layout_transform(" in graph
    check_against_onnxruntime(model, (1, 16, 14, 14))


def test_pools_depthwise_convs_and_concats_stay_in_the_chain():
    chain = Chain((1, 32, 28, 28))
    chain.conv(32, kernel=3, stride=2)
    chain.pool("MaxPool", 3, 2, [1, 1, 1, 1])
    pooled = chain.last
    chain.conv(32, kernel=3, group=32, act="Sigmoid")           # depthwise
    left = chain.conv(16, kernel=1)
    chain.last, chain.channels = pooled, 32
    right = chain.conv(32, kernel=5, stride=1, group=32)        # depthwise 5x5
    chain.concat(left, right)
    chain.pool("AveragePool", 3, 1, [1, 1, 1, 1], count_include_pad=0)
    chain.channels = 48
    chain.conv(16, kernel=1)
    model = chain.model()
    graph = graph_of(model)
    assert graph.count("layout_transform") == 2, graph
    assert re.search(r"= max_pool\(.*layout_block=16", graph)
    assert "concat(" in graph and "[1,3,7,7,16] = concat" in graph
    check_against_onnxruntime(model, (1, 32, 28, 28))


@pytest.mark.parametrize("kernel, stride, pads, ceil_mode, include", [
    (3, 2, [0, 0, 0, 0], 1, 0), (2, 2, [0, 0, 0, 0], 0, 0), (5, 1, [2, 2, 2, 2], 0, 1),
    (3, 2, [1, 0, 0, 1], 1, 1)])
def test_blocked_pools_match_onnxruntime(kernel, stride, pads, ceil_mode, include):
    for op in ("MaxPool", "AveragePool"):
        chain = Chain((1, 16, 15, 15))
        chain.conv(16, kernel=1)
        extra = {"count_include_pad": include} if op == "AveragePool" else {}
        chain.pool(op, kernel, stride, pads, ceil_mode=ceil_mode, **extra)
        chain.conv(16, kernel=1)
        model = chain.model()
        assert f"{'max' if op == 'MaxPool' else 'avg'}_pool" in graph_of(model)
        assert "layout_block=16" in graph_of(model)
        check_against_onnxruntime(model, (1, 16, 15, 15))


def test_a_stem_conv_reads_its_plain_input_and_writes_blocks():
    chain = Chain((1, 3, 32, 32))
    chain.conv(16, kernel=3, stride=2, act="Sigmoid")
    chain.conv(32, kernel=3, stride=2)
    model = chain.model()
    graph = graph_of(model)
    assert "plain_input=True" in graph
    assert graph.count("layout_transform") == 1      # only back to plain at the end
    check_against_onnxruntime(model, (1, 3, 32, 32))


def test_per_channel_and_scalar_constants_are_blocked_at_compile_time():
    chain = Chain((1, 16, 9, 9))
    chain.conv(32, kernel=1, act=None)
    scale = chain.constant(np.linspace(0.5, 2.0, 32).reshape(32, 1, 1))
    chain.binary("Mul", chain.last, scale)
    chain.binary("Add", chain.last, chain.constant(np.float32(0.25)))
    chain.binary("Sub", chain.last, chain.constant(np.full((1, 32, 9, 9), 0.5)))
    chain.conv(16, kernel=1)
    model = chain.model()
    graph = graph_of(model)
    assert "float32[1,2,1,1,16]" in graph            # the scale, blocked
    assert graph.count("layout_transform") == 2
    check_against_onnxruntime(model, (1, 16, 9, 9))


def test_an_operand_from_outside_the_chain_is_converted_once():
    chain = Chain((1, 16, 10, 10))
    outside = chain.unary("Tanh")                     # not a chain op: no conv before it
    chain.conv(16, kernel=3)
    chain.conv(16, kernel=1, act=None)
    chain.binary("Add", chain.last, outside)
    chain.binary("Mul", chain.last, outside)
    model = chain.model()
    graph = graph_of(model)
    # tanh's output once for all three uses (the conv, the add and the mul), the result back
    assert graph.count("layout_transform") == 2, graph
    check_against_onnxruntime(model, (1, 16, 10, 10))


def test_chains_the_layout_does_not_pay_for_stay_plain():
    one = Chain((1, 16, 14, 14))
    one.conv(16, kernel=1)
    assert "layout_transform" not in graph_of(one.model())       # a single conv
    odd = Chain((1, 24, 14, 14))
    odd.conv(24, kernel=1)
    odd.conv(24, kernel=1)
    assert "layout_transform" not in graph_of(odd.model())       # no whole filter blocks
    assert "layout_transform" not in graph_of(_conv_stack((1, 16, 14, 14)).model(),
                                               target="cuda")


@pytest.mark.parametrize("stride", [1, 2])
def test_a_depthwise_conv_with_short_rows_runs_blocked_alone(stride):
    """Output rows of at most half a vector: the blocked layout pays for its transforms even
    around one depthwise conv; rows of 14 stay plain."""
    narrow = Chain((1, 32, 7 * stride, 7 * stride))
    narrow.conv(32, kernel=5, stride=stride, group=32)
    graph = graph_of(narrow.model(), target=ZEN4)
    assert graph.count("layout_transform") == 2 and "layout_block=16" in graph, graph
    # the numbers on this machine's target (AVX-512 code would not run on an AVX2 host)
    check_against_onnxruntime(narrow.model(), (1, 32, 7 * stride, 7 * stride))
    wide = Chain((1, 32, 14, 14))
    wide.conv(32, kernel=5, group=32)
    assert "layout_transform" not in graph_of(wide.model(), target=ZEN4)


@pytest.mark.parametrize("dilation", [2, 6])
def test_a_dilated_conv_runs_blocked_alone(dilation):
    """A dilated conv alone takes the blocked layout and its two transforms (flattened, it
    would compute rows padded by the dilation); an undilated one alone stays plain."""
    atrous = Chain((1, 32, 13, 13))
    atrous.conv(32, kernel=3, dilation=dilation)
    graph = graph_of(atrous.model(), target=ZEN4)
    assert graph.count("layout_transform") == 2 and "layout_block=16" in graph, graph
    check_against_onnxruntime(atrous.model(), (1, 32, 13, 13))     # on this machine
    plain = Chain((1, 32, 13, 13))
    plain.conv(32, kernel=3)
    assert "layout_transform" not in graph_of(plain.model(), target=ZEN4)


@pytest.mark.parametrize("groups,size", [(2, 9), (3, 14), (9, 7)])
def test_convs_of_wide_groups_run_per_group_and_match(groups, size):
    chain = Chain((1, 32 * groups, size, size))
    chain.conv(32 * groups, kernel=3, group=groups)
    chain.conv(16, kernel=1)
    check_against_onnxruntime(chain.model(), (1, 32 * groups, size, size), threads=2)


def test_pointwise_convs_on_a_narrow_map_tile_two_rows():
    """A 1x1 conv whose register tile is a whole row of a 7x7 map takes two rows per tile
    (each weight vector serves 14 outputs), its channel blocks outside the tiles of the
    map's sums; the rows overhang the map's 7, and the answer stays onnxruntime's."""
    chain = Chain((1, 64, 7, 7))
    chain.conv(256, kernel=1)           # weights larger than the map: filter blocks outer
    chain.conv(64, kernel=1, act=None)
    loops = tensorc.inspect(chain.model(), stage="loops", target=ZEN4)
    assert "allocate conv_blocked.rf: float32[1, 2, 2, 7, 16, 1] (local)" in loops, loops
    assert "allocate conv_blocked.local: float32[1, 2, 7, 7, 16] (local)" in loops
    check_against_onnxruntime(chain.model(), (1, 64, 7, 7))        # on this machine


def test_avx2_targets_use_blocks_of_eight():
    model = _conv_stack((1, 16, 14, 14)).model()
    graph = graph_of(model, target=AVX2)
    assert "layout_block=8" in graph and "layout_block=16" not in graph
    check_against_onnxruntime(model, (1, 16, 14, 14), target=AVX2)


def test_layout_transform_round_trip_and_reference():
    x = np.random.default_rng(0).standard_normal((2, 32, 5, 7)).astype(np.float32)
    op = get_op("layout_transform")
    (b,) = op.reference_fn({"block": 16, "to": "blocked"}, x)
    assert b.shape == (2, 2, 5, 7, 16)
    np.testing.assert_array_equal(b[1, 1, 3, 4, 5], x[1, 21, 3, 4])
    (back,) = op.reference_fn({"block": 16, "to": "plain"}, b)
    np.testing.assert_array_equal(back, x)
    chain = Chain((2, 32, 5, 7))
    chain.conv(32, kernel=1)
    chain.conv(32, kernel=3, group=32)
    check_against_onnxruntime(chain.model(), (2, 32, 5, 7))


def test_blocked_references_are_the_plain_ops_on_blocked_tensors():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 32, 9, 9)).astype(np.float32)
    w = rng.standard_normal((16, 32, 3, 3)).astype(np.float32)
    attrs = dict(strides=(2, 2), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1)
    conv = get_op("conv").reference_fn
    (plain,) = conv(attrs, x, w)
    packed = pack_weight(w, 16)
    (blocks,) = conv(dict(attrs, layout_block=16, kernel_block=16), blocked_layout.block(x, 16),
                     packed)
    np.testing.assert_allclose(blocked_layout.unblock(blocks, 16), plain, rtol=1e-5, atol=1e-5)
    pool = dict(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), ceil_mode=1)
    (plain,) = get_op("max_pool").reference_fn(pool, x)
    (blocks,) = get_op("max_pool").reference_fn(dict(pool, layout_block=16),
                                                 blocked_layout.block(x, 16))
    np.testing.assert_array_equal(blocked_layout.unblock(blocks, 16), plain)


def test_blocked_constant_forms():
    c = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(blocked_layout.blocked_constant(c.reshape(32, 1, 1), 32, 16)
                                  [0, 1, 0, 0], c[16:])
    assert blocked_layout.blocked_constant(np.ones((1, 1, 4, 4)), 32, 16).shape == \
        (1, 1, 4, 4, 1)
    # varies by y, x
    assert blocked_layout.blocked_constant(np.ones((32, 4, 4)), 32, 16) is None
    assert blocked_layout.blocked_constant(np.ones((2, 1, 1, 1, 1)), 32, 16) is None


def _spread(configs: list, default, most: int = 24) -> list:
    """At most ``most`` of ``configs``, evenly spread over the space's order, the default
    among them: AVX2's blocks of 8 give the chains below spaces of hundreds of configs (AVX-512's
    of 16: a few dozen), each a schedule, a lowering and an LLVM build."""
    if len(configs) <= most:
        return configs
    step = len(configs) / (most - 1)
    picked = [configs[int(k * step)] for k in range(most - 1)]
    return picked + [default] if default not in picked else picked


def _every_config(model, kind):
    tasks = [t for t in extract_tasks(model, measure=False)
             if t.space().name == kind]
    assert tasks, kind
    task = tasks[0]
    arrays = task.inputs(0)
    want = task.reference(arrays)[0]
    traces = set()
    for config in _spread(list(task.space().configs()), task.space().default()):
        func = task.schedule(config)
        traces.add(repr(func.attrs["trace"]))
        out = np.full(want.shape, 7.0, want.dtype)
        build_kernel(func)(*task.inputs_for(config, arrays), out, num_threads=1)
        check_result(out, want, rtol=1e-4, atol=1e-4)
    return traces


@pytest.mark.parametrize("build, kind", [
    (lambda c: (c.conv(32, kernel=3, stride=2), c.conv(32, kernel=1)), "conv (blocked)"),
    (lambda c: (c.conv(16, kernel=1), c.conv(16, kernel=3, group=16)), "window (blocked)"),
])
def test_every_config_of_the_blocked_spaces(build, kind):
    chain = Chain((1, 16, 7, 7))
    build(chain)
    traces = _every_config(chain.model(), kind)
    assert len(traces) > 4


def _blocked_conv_space(channels: int, filters: int, size, kernel, stride: int = 1):
    """The blocked conv space of a conv onto a padded input of size x size (or size =
    (height, width)); ``kernel``: its side, or (height, width)."""
    from tensorc.ir import te
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    h, w_ = size if isinstance(size, tuple) else (size, size)
    x = te.placeholder((1, channels // 16, h, w_, 16), "float32", "x")
    w = te.placeholder((filters // 16, channels, kh, kw, 16), "float32", "w")
    attrs = {"layout_block": 16, "strides": (stride,) * 2, "dilations": (1, 1), "groups": 1,
             "pads": (0, 0, 0, 0)}
    out = blocked.blocked_compute(attrs, x, w, ((h - kh) // stride + 1,
                                                (w_ - kw) // stride + 1))
    return blocked.blocked_tile_space(Target.from_string("llvm -mcpu=znver4"), out,
                                      out.op.input_tensors()[0], attrs)


def test_the_blocked_conv_space_fits_the_registers():
    space = _blocked_conv_space(64, 128, 14, 1)
    for config in space.configs():
        assert config["row_tile"] * config["filter_vectors"] + config["filter_vectors"] + 1 \
            <= 32
    assert space.default()["row_tile"] == 14 and not space.default()["taps_inner"]


def test_strided_convs_take_short_rows_with_the_taps_inside():
    """A 3x3 stride-2 conv's tile: at most 7 outputs of a row, the taps inside the channels
    (ResNet-50's 128 -> 128 onto 28x28: 4% faster at one thread, 7% at two); a strided 1x1
    conv and a stride-1 3x3 conv keep rows of 14."""
    for size, out_width in ((57, 28), (29, 14)):
        default = _blocked_conv_space(128, 128, size, 3, stride=2).default()
        assert default["row_tile"] == 7 and default["taps_inner"]
        assert out_width % default["row_tile"] == 0
    assert _blocked_conv_space(128, 256, 56, 1, stride=2).default()["row_tile"] == 14
    assert _blocked_conv_space(128, 128, 30, 3).default()["row_tile"] == 14


def test_a_strided_tile_wastes_no_outputs_where_a_row_divides():
    """The detector's and YOLO's strided convs: a tile that divides the row (no outputs
    computed past its end), with enough accumulators (a 12-wide tile beats a 7 x 3 one whose
    fifth piece overhangs a 32-wide row), but not a row of fewer than 4 outputs."""
    def tile(channels, filters, out_width):
        default = _blocked_conv_space(channels, filters, 2 * out_width + 1, 3,
                                      stride=2).default()
        assert default["taps_inner"]
        return default["row_tile"], default["filter_vectors"]
    assert tile(16, 32, 64) == (8, 2)
    assert tile(32, 48, 32) == (4, 3)
    assert tile(48, 64, 16) == (8, 2)
    assert tile(32, 64, 52) == (4, 4)
    assert tile(64, 64, 26) == (7, 2)       # 3 x 4 would divide 26, but reads weights 3x


@pytest.mark.parametrize("filters,size", [(32, 128), (48, 64), (64, 104)])
def test_strided_tiles_that_divide_the_row_give_the_same_answer(filters, size):
    chain = Chain((1, 16, size, size))
    chain.conv(filters, kernel=3, stride=2, act="Sigmoid")
    chain.conv(16, kernel=1)
    check_against_onnxruntime(chain.model(), (1, 16, size, size), threads=2)


def test_taps_inside_leave_registers_for_a_row_of_broadcasts():
    """Inception's 288 -> 384 3x3 s2 onto 17x17: 6 outputs x 3 filter vectors, not x 4
    (LLVM spilled 24 accumulators beside the row of broadcasts that the taps share);
    ResNet-50's 3x3 s2 tiles keep 7 outputs x 2 vectors."""
    default = _blocked_conv_space(288, 384, 35, 3, stride=2).default()
    assert (default["row_tile"], default["filter_vectors"], default["taps_inner"]) == \
        (6, 3, True)
    assert _blocked_conv_space(128, 128, 57, 3, stride=2).default()["filter_vectors"] == 2


def test_the_threads_split_rows_where_the_weights_are_the_smaller():
    # a ResNet-50 stage-1 1x1 conv: 64 filters against 56x56 outputs: rows outer
    assert _blocked_conv_space(256, 64, 56, 1).default()["row_bands"] == 56
    # a stage-3 one: 256 filters against 14x14, about the input's size: two bands; 1024
    # filters: filter blocks outer; a 3x3 conv with 9 taps per filter
    assert _blocked_conv_space(1024, 256, 14, 1).default()["row_bands"] == 2
    assert _blocked_conv_space(256, 1024, 14, 1).default()["row_bands"] == 1
    assert _blocked_conv_space(64, 64, 58, 3).default()["row_bands"] == 56
    assert _blocked_conv_space(128, 128, 30, 3).default()["row_bands"] == 2
    assert _blocked_conv_space(256, 256, 16, 3).default()["row_bands"] == 1


@pytest.mark.parametrize("bands", [1, 2, 4, 11])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_row_band_count_gives_the_same_answer_on_any_threads(bands, threads,
                                                                     monkeypatch):
    # 48 filters (3 blocks) on an odd 11x11 map: bands and per-thread ranges of uneven length
    space_of = blocked.blocked_tile_space

    def forced(*args):
        return space_of(*args).pinned(row_bands=bands)
    monkeypatch.setattr(blocked, "blocked_tile_space", forced)
    chain = Chain((1, 32, 11, 11))
    chain.conv(48, kernel=3)
    chain.conv(32, kernel=1)
    check_against_onnxruntime(chain.model(), (1, 32, 11, 11), threads=threads)


def test_a_batch_norm_inside_a_chain_keeps_its_channel_parameters_right():
    chain = Chain((1, 16, 9, 9))
    chain.conv(32, kernel=1)
    params = [chain.constant(np.linspace(lo, hi, 32)) for lo, hi in
              [(0.5, 1.5), (-1, 1), (-0.5, 0.5), (0.5, 2.0)]]
    name = chain._name("bn")
    chain.nodes.append(helper.make_node("BatchNormalization", [chain.last, *params], [name]))
    chain.last = name
    chain.conv(16, kernel=1)
    check_against_onnxruntime(chain.model(), (1, 16, 9, 9))


def test_a_squeeze_and_excite_block_keeps_the_map_blocked():
    chain = Chain((1, 32, 14, 14))
    x = chain.conv(32, kernel=1, act="Sigmoid")
    chain.conv(32, kernel=3, group=32)
    body = chain.last
    name = chain._name("gap")
    chain.nodes.append(helper.make_node("ReduceMean", [body], [name], axes=[2, 3], keepdims=1))
    chain.last = name
    chain.conv(8, kernel=1)                                     # squeeze: 8 channels, plain
    chain.conv(32, kernel=1, act="Sigmoid")                     # excite
    chain.binary("Mul", body, chain.last)                       # the scale, per channel
    chain.channels = 32
    chain.conv(32, kernel=1, act=None)
    chain.binary("Add", chain.last, x)
    model = chain.model()
    graph = graph_of(model)
    transforms = re.findall(r"(float32\[[\d,]+\]) = layout_transform", graph)
    # the map crosses no boundary but the chain's two ends: the pooled vector and the scale
    # are what is converted in between
    big = [t for t in transforms if not t.endswith(",1,1]") and not t.endswith(",1,1,16]")]
    assert len(big) == 2, graph
    assert re.search(r"= reduce_mean\(.*axes=\(2,3\)", graph)
    check_against_onnxruntime(model, (1, 32, 14, 14))


def test_convs_whose_weights_stream_from_beyond_l2_prefetch_them():
    """1x1 convs with at least a quarter of L2 of weights prefetch them 16 channels ahead,
    3x3 convs (16 too) only where the weights are several times L2 (ResNet-50: 3.6% faster
    at one thread, 4.6% at two); a tile whose channel step reads too many lines may not."""
    assert _blocked_conv_space(1024, 256, 14, 1).default()["prefetch"] == 16
    assert _blocked_conv_space(64, 64, 56, 1).default()["prefetch"] == 0
    assert _blocked_conv_space(512, 512, 9, 3).default()["prefetch"] == 16
    assert _blocked_conv_space(128, 128, 30, 3).default()["prefetch"] == 0
    space = _blocked_conv_space(512, 512, 9, 3)
    wide = space.default().replace(row_tile=5, filter_vectors=4, taps_inner=True,
                                   channels_outer=False)
    assert "36 cache lines of weights" in space.violation(wide)
    assert space.violation(wide.replace(prefetch=0)) is None
    assert space.violation(wide.replace(taps_inner=False)) is None


@pytest.mark.parametrize("taps_inner", [False, True])
def test_a_prefetching_conv_tile_gives_the_same_answer(taps_inner, monkeypatch):
    space_of = blocked.blocked_tile_space

    def forced(*args):
        return space_of(*args).pinned(prefetch=2, taps_inner=taps_inner)
    monkeypatch.setattr(blocked, "blocked_tile_space", forced)
    chain = Chain((1, 32, 11, 11))
    chain.conv(48, kernel=3, stride=2)
    chain.conv(32, kernel=1)
    check_against_onnxruntime(chain.model(), (1, 32, 11, 11), threads=2)


# ---------------------------------------------------------------------------------------------
# channel blocks outside a band's register tiles

def test_strided_and_whole_row_3x3_convs_add_up_their_channel_blocks_outside_the_tiles():
    """ResNet-50's 3x3 s2 convs (onto 28x28, 14x14, 7x7), its 512 -> 512 3x3 onto 7x7 (a
    tile that is the whole row) and its 1x1 convs onto 7x7 (two whole rows) run each
    channel block over the whole band; longer rows of 1x1 convs, rows of several 3x3 tiles
    and an input of one channel block keep the channels inside."""
    for size, filters in ((57, 128), (29, 256), (15, 512)):
        assert _blocked_conv_space(filters, filters, size, 3, stride=2).default()[
            "channels_outer"]
    # and strided convs whose tiles do not divide the row (Inception's 288 -> 384 onto 17x17)
    default = _blocked_conv_space(288, 384, 35, 3, stride=2).default()
    assert default["channels_outer"] and 17 % default["row_tile"]
    assert _blocked_conv_space(512, 512, 9, 3).default()["channels_outer"]
    assert _blocked_conv_space(2048, 512, 7, 1).default()["channels_outer"]
    assert not _blocked_conv_space(1024, 256, 14, 1).default()["channels_outer"]
    assert not _blocked_conv_space(128, 128, 30, 3).default()["channels_outer"]
    assert _blocked_conv_space(16, 32, 9, 3).knobs["channels_outer"].choices == (False,)
    # a row that the tiles do not divide: the last tile is a guarded one (loop partitioning
    # gives it its own, shorter copy), not a shifted one that would add outputs twice
    space = _blocked_conv_space(64, 64, 9, 3)
    uneven = space.default().replace(channels_outer=True, row_tile=4, filter_vectors=1)
    assert space.violation(uneven) is None


@pytest.mark.parametrize("channels, filters, size, kernel, outer", [
    (160, 160, 17, (1, 7), True),        # Inception's 7-tap convs onto 17x17: 143 KB a tile
    (160, 160, 17, (7, 1), True),
    (128, 128, 17, (1, 7), True),
    (256, 256, 19, (1, 5), True),
    (48, 64, 35, (5, 5), False),         # 51 KB of one channel block's weights
    (32, 64, 147, (3, 3), False),        # a tile's 36 KB of weights stay in L1
    (16, 64, 17, (1, 7), False),         # one channel block
    (128, 128, 30, (3, 3), False),       # 100 KB of partial sums for the map
    (96, 96, 37, (3, 3), False),         # bands of one row: the weights serve few tiles
])
def test_convs_whose_tile_weights_outrun_l1_take_their_channel_blocks_outside(
        channels, filters, size, kernel, outer):
    """A stride-1 conv whose register tile reads more weights than L1 holds, while one channel
    block's fit, runs the channel blocks outside the tiles with the taps inside each channel,
    whether or not its tiles divide the row (17 outputs: 9 + 8)."""
    kh, kw = kernel
    default = _blocked_conv_space(channels, filters, (size + kh - 1, size + kw - 1),
                                  kernel).default()
    assert default["channels_outer"] == outer
    if outer:
        assert default["taps_inner"]


# Its configs took the suite's longest single item (449 s of a loaded 2-worker run): every
# config is still built and checked, a quarter of them per item, so that the two pytest-xdist
# workers share them (SHARDS items).
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_config_of_a_conv_with_its_channel_blocks_outside(monkeypatch, shard):
    space_of = blocked.blocked_tile_space

    def outer(*args):
        space = space_of(*args)
        if len(space.knobs["channels_outer"].choices) == 1:
            return space
        return space.pinned(channels_outer=True, prefetch=0, parallel=False)
    monkeypatch.setattr(blocked, "blocked_tile_space", outer)
    chain = Chain((1, 32, 6, 6))
    chain.conv(32, kernel=1)
    chain.conv(32, kernel=3, act="Sigmoid")
    tasks = [t for t in extract_tasks(chain.model(), measure=False)
             if "sigmoid" in t.ops and t.space().knobs["channels_outer"].choices == (True,)]
    assert len(tasks) == 1
    task = tasks[0]
    arrays = task.inputs(0)
    want = task.reference(arrays)[0]
    configs = list(task.space().configs())
    assert len(configs) >= 32       # rows of 1, 2, 3, 6; 1 or 2 vectors; taps; bands; lines
    for config in configs[shard::SHARDS]:   # (Winograd's, where it picks it: repacked)
        out = np.full(want.shape, 7.0, want.dtype)
        build_kernel(task.schedule(config))(*task.inputs_for(config, arrays), out,
                                            num_threads=1)
        check_result(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, filters, stride, pins", [
    ((1, 64, 56, 56), 64, 2, {}),                                   # ResNet's s2, 28 wide
    ((1, 256, 7, 7), 256, 1, {}),                                   # a whole-row tile
    ((1, 48, 11, 11), 48, 1, {"channels_outer": True, "row_tile": 11, "filter_vectors": 1,
                              "row_bands": 4, "tile_lines": 2}),  # uneven bands and lines
    ((2, 32, 15, 15), 32, 2, {"channels_outer": True, "taps_inner": False}),    # a batch
    ((1, 48, 17, 17), 48, 1, {"channels_outer": True, "row_tile": 9, "filter_vectors": 1}),
    ((1, 48, 35, 35), 64, 2, {}),                   # s2 onto 17x17: tiles of 6, 6 and 5
])
@pytest.mark.parametrize("threads", [1, 2])
def test_convs_with_their_channel_blocks_outside_match_onnxruntime(shape, filters, stride,
                                                                  pins, threads, force_tile,
                                                                  monkeypatch):
    force_tile(0)       # no Winograd: every 3x3 conv direct
    space_of = blocked.blocked_tile_space
    taken = []

    def forced(target, out, tile, attrs):
        space = space_of(target, out, tile, attrs)
        if tile.op.reduce_axis[1].extent == 1:        # the 1x1 convs around it
            return space
        space = space.pinned(**pins)
        taken.append(space.default()["channels_outer"])
        return space
    monkeypatch.setattr(blocked, "blocked_tile_space", forced)
    chain = Chain(shape)
    chain.conv(shape[1], kernel=1)
    chain.conv(filters, kernel=3, stride=stride)
    chain.conv(16, kernel=1, act=None)
    check_against_onnxruntime(chain.model(), shape, threads=threads)
    assert True in taken
    # the padding read in place (no padded copy), decided by partitioning at the borders
    loops = tensorc.inspect(chain.model(), stage="loops")
    assert "conv_blocked.rf" in loops and "allocate pad" not in loops


@pytest.mark.parametrize("threads", [1, 2])
def test_inception_seven_tap_convs_match_onnxruntime(threads):
    """Inception's 17x17 factorized convs (1x7 then 7x1, 160 channels) by default: channel
    blocks outside the tiles, tiles of 9 and 8 outputs, the padding read in place."""
    chain = Chain((1, 160, 17, 17))
    chain.conv(160, kernel=1)
    chain.conv(160, kernel=(1, 7))
    chain.conv(160, kernel=(7, 1))
    chain.conv(32, kernel=1, act=None)
    check_against_onnxruntime(chain.model(), (1, 160, 17, 17), threads=threads)
    loops = tensorc.inspect(chain.model(), stage="loops")
    assert loops.count("allocate conv_blocked.rf") >= 4 and "allocate pad" not in loops


@pytest.mark.parametrize("threads", [1, 2])
def test_a_conv_whose_tiles_divide_the_row_reads_its_padding_in_place(threads):
    """YOLO's and the detector's 16 -> 32 3x3 s2 convs (one channel block: the plain order):
    their tiles divide the row, and they read the input in place, the padding decided at the
    borders; a conv whose row no tile divides keeps its padded copy."""
    chain = Chain((1, 16, 128, 128))
    chain.conv(16, kernel=1)
    chain.conv(32, kernel=3, stride=2)
    chain.conv(16, kernel=1, act=None)
    assert "allocate pad" not in tensorc.inspect(chain.model(), stage="loops")
    check_against_onnxruntime(chain.model(), (1, 16, 128, 128), threads=threads)
    odd = Chain((1, 16, 26, 26))
    odd.conv(16, kernel=1)
    odd.conv(32, kernel=3, stride=2)
    odd.conv(16, kernel=1, act=None)
    assert "allocate pad" in tensorc.inspect(odd.model(), stage="loops")
    check_against_onnxruntime(odd.model(), (1, 16, 26, 26), threads=threads)

# ---------------------------------------------------------------------------------------------
# Winograd convs on blocked tensors

def _winograd_stack(shape, filters):
    chain = Chain(shape)
    first = chain.conv(filters, kernel=3)
    chain.conv(filters, kernel=3, act=None)
    chain.binary("Add", chain.last, first)                  # a residual, fused
    chain.unary("Relu")
    chain.conv(shape[1], kernel=1)
    return chain


@pytest.mark.parametrize("shape, filters, m", [
    ((1, 16, 14, 14), 32, 4),
    ((2, 32, 13, 11), 32, 2),       # a batch of two, a rectangle, the last tiles short
    ((1, 48, 27, 27), 48, 4),       # panels of one vector (48 filters)
    ((1, 64, 35, 35), 80, 2),       # 80 filters: panels of one vector
    ((1, 16, 7, 7), 64, 4),         # one band holds the map: its loops on threads
])
@pytest.mark.parametrize("threads", [1, 2])
def test_winograd_convs_run_on_blocked_tensors(force_tile, shape, filters, m, threads):
    force_tile(m)
    model = _winograd_stack(shape, filters).model()
    graph = graph_of(model)
    assert graph.count(f"winograd={m}") == 2 and graph.count("layout_transform") == 2
    assert all("layout_block=16" in line for line in graph.splitlines()
               if f"winograd={m}" in line)
    check_against_onnxruntime(model, shape, threads=threads)


@pytest.mark.parametrize("m", [4, 2])
def test_winograd_convs_on_blocks_of_eight(force_tile, m):
    # AVX2: vectors of 8 channels, weight panels of up to 32 filters, 16 registers
    force_tile(m)
    model = _winograd_stack((1, 16, 14, 14), 32).model()
    graph = graph_of(model, target=AVX2)
    assert graph.count(f"winograd={m}") == 2 and graph.count("layout_block=8") == 3
    check_against_onnxruntime(model, (1, 16, 14, 14), target=AVX2, threads=2)


def test_every_config_of_the_blocked_winograd_space(force_tile):
    force_tile(4)
    traces = _every_config(_winograd_stack((1, 16, 9, 9), 16).model(),
                           "conv (winograd, blocked)")
    assert len(traces) == 12        # tiles 1-3 x band 1 or 3 x parallel, each its own loops


def test_blocked_winograd_register_tile_and_bands():
    from tensorc.ops.schedules import RegisterTileFits
    fits = RegisterTileFits(32)
    assert winograd_blocked.register_tile_of(14, (1, 2, 4), fits) == (14, 2)    # one 56x56 tile row
    assert winograd_blocked.register_tile_of(16, (1, 2, 4), fits) == (6, 4)     # 14x14's 4x4 tiles
    attrs = {"pads": (1, 1, 1, 1)}
    # weights in L2: a band per tile row; larger: the whole map where its tiles fit
    assert winograd_blocked.band_rows(attrs, (1, 64, 56, 56), 64, 4) == (1, 8)     # 258 KB a row
    assert winograd_blocked.band_rows(attrs, (1, 256, 14, 14), 256, 4) == (4, 4)
    # one tile row's transformed tiles past the stack budget: the conv stays plain
    assert winograd_blocked.band_rows(attrs, (1, 512, 200, 200), 512, 4)[1] == 0

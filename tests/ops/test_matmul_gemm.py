"""The CPU GEMM: packed constant weights, the register-tiled micro-kernel and its cache blocks.

Every value of every knob of a small matmul space (and a random sample of combinations)
builds and matches numpy, with B packed into panels and with B an input; odd sizes through
the whole compiler; the epilogue stays fused in one kernel; the micro-kernel's inner loop is
FMAs on broadcasts with no spills.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import check_result, make_model, tensor_info
from helpers_kernels import run_func
from onnx import helper

import tensorc
from tensorc.ir import expr as E
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.ir.trace import replay
from tensorc.ops.matmul.gemm import Gemm
from tensorc.ops.matmul.schedule import schedule_gemm
from tensorc.ops.matmul.space import (
    GEMV_STREAMS, K_BLOCK_MIN_ROWS, K_BLOCK_WIDE, PACKED_A_BYTES, PACKED_BLOCK_MIN_TILES,
    PANEL_REUSE_ROWS, PARALLEL_BLOCKS, WHOLE, WIDE_B_BLOCK_BYTES, gemm_space,
)
from tensorc.ops.matmul.tile import micro_tile, pack_b_panels, panel_width, unpack_b_panels
from tensorc.ops.catalog import get_op
from tensorc.target import Target

HOST = Target.host()
# the targets whose decisions (tile rows, panels, blocks) the tests name; code runs on HOST
AVX512 = Target("llvm", "x", "+avx512f,+avx2,+fma")
AVX2 = Target("llvm", "x", "+avx2,+fma")


def rand(shape, seed) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def reference(a, b, bias):
    return np.maximum(a.astype(np.float64) @ b + bias, 0).astype(np.float32)


def knob_configs(space, samples: int = 8, seed: int = 0):
    """The default, every legal single-knob change from it, and a few random configs."""
    configs = {space.default()}
    for name, knob in space.knobs.items():
        for value in knob.choices:
            config = space.default().replace(**{name: value})
            if space.is_valid(config):
                configs.add(config)
    rng = random.Random(seed)
    for _ in range(samples):
        configs.add(space.sample(rng))
    return sorted(configs, key=lambda c: c.to_json())


def build_group(m: int, k: int, n: int, packed: bool, config=None, target: Target = HOST):
    """matmul + bias + relu over A[m, k] and B (packed panels or [k, n]), scheduled by the
    CPU template for ``target`` with ``config`` (None: the space; another target than HOST
    only for its space). Returns (func or space, inputs)."""
    a, b, bias = rand((m, k), 1), rand((k, n), 2), rand((n,), 3)
    attrs = {}
    b_arg = b
    if packed:
        nr = panel_width(target, n, m)
        attrs = {"b_panel": nr, "n": n}
        b_arg = pack_b_panels(b, nr)
    A = te.placeholder(a.shape, name="A")
    B = te.placeholder(b_arg.shape, name="B")
    C = te.placeholder(bias.shape, name="bias")
    mm = get_op("matmul").compute_fn(attrs, A, B)
    out = te.compute(mm.shape, lambda i, j: E.maximum(mm[i, j] + C[j], 0.0), name="relu")
    template = get_op("matmul").template("llvm")
    space = template.search_space(target, out, mm, attrs)
    if config is None:
        return space
    assert target is HOST, "code is built to run here"
    sch = create_schedule(out)
    template.apply(HOST, sch, out, mm, attrs, space.validate(config))
    func = lower(sch, [A, B, C, out], "gemm")
    return func, [a, b_arg, bias], reference(a, b, bias)


@pytest.mark.parametrize("packed", [True, False], ids=["packed_b", "dynamic_b"])
@pytest.mark.parametrize("m,k,n", [(13, 37, 41), (1, 37, 300)], ids=["gemm", "gemv"])
def test_every_knob_value_matches_numpy(packed, m, k, n):
    # tiles and panels overhang the tensors
    space = build_group(m, k, n, packed)
    for config in knob_configs(space):
        func, inputs, want = build_group(m, k, n, packed, config)
        (got,) = run_func(func, inputs, num_threads=2)
        check_result(got, want, rtol=1e-4, atol=1e-5)


def test_block_knobs_must_divide():
    """A block that overhangs the tiles or panels would put a guard in the micro-kernel."""
    space = build_group(130, 8, 80, True)
    default = space.default()
    tiles = -(-130 // default["rows"])
    panels = -(-80 // panel_width(HOST, 80, 130))
    for knob, count in (("row_tiles", tiles), ("col_panels", panels)):
        bad = [c for c in space.knobs[knob].choices if 1 < c < count and count % c]
        for value in bad:
            reason = space.violation(default.replace(**{knob: value}))
            assert reason is not None and knob in reason
    assert any(1 < c < tiles and tiles % c for c in space.knobs["row_tiles"].choices)


def test_pack_b_panels_round_trip():
    b = rand((5, 37), 4)
    packed = pack_b_panels(b, 16)
    assert packed.shape == (3, 5, 16)
    assert not packed[2, :, 5:].any()               # the last panel is padded with zeros
    np.testing.assert_array_equal(unpack_b_panels(packed, 37), b)


def test_micro_tile_fits_the_register_file():
    for features, registers in (("+avx2,+fma", 16), ("+avx512f,+avx2,+fma", 32)):
        target = Target("llvm", "x", features)
        rows, vectors = micro_tile(target)
        assert rows * vectors + vectors + 1 <= registers
        assert rows >= 6
        # a constant B's panels: 4 vectors on AVX-512 (a 6 x 4 tile), 2 on AVX2 (6 x 2)
        lanes = target.vector_lanes("float32")
        width = panel_width(target, 768, 16)
        assert width == lanes * (4 if registers == 32 else 2)
        rows, vectors = micro_tile(target, width // lanes)
        assert rows * vectors + vectors + 1 <= registers and rows >= 6


def matmul_model(m, k, n, constant_b: bool, epilogue: bool = False):
    inputs = [tensor_info("a", "float32", (m, k))]
    inits = {}
    b = rand((k, n), 5)
    if constant_b:
        inits["b"] = b
    else:
        inputs.append(tensor_info("b", "float32", (k, n)))
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y" if not epilogue else "mm"])]
    if epilogue:
        inits["bias"] = rand((n,), 6)
        inputs.append(tensor_info("res", "float32", (m, n)))
        nodes += [helper.make_node("Add", ["mm", "bias"], ["t"]),
                  helper.make_node("Relu", ["t"], ["r"]),
                  helper.make_node("Mul", ["r", "scale"], ["s"]),
                  helper.make_node("Add", ["s", "res"], ["y"])]
        inits["scale"] = np.array(0.5, np.float32)
    return make_model(nodes, inputs, ["y"], initializers=inits), b, inits


@pytest.mark.parametrize("constant_b", [True, False], ids=["packed_b", "dynamic_b"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 77, 500), (7, 1, 7), (7, 500, 77),
                                   (77, 7, 33), (500, 33, 7), (3, 3073, 17), (16, 64, 3073)])
def test_odd_sizes(m, k, n, constant_b):
    model, b, _ = matmul_model(m, k, n, constant_b)
    a = rand((m, k), 7)
    feeds = {"a": a} if constant_b else {"a": a, "b": b}
    got = tensorc.compile(model).run(feeds)["y"]
    check_result(got, (a.astype(np.float64) @ b).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_packed_weights_are_in_the_constant_pool():
    model, b, _ = matmul_model(20, 30, 40, True)
    mod = tensorc.compile(model)
    nr = panel_width(HOST, 40)
    # only the packed copy is stored: the pool holds ceil(40/nr) panels of 30 x nr floats
    panels = -(-40 // nr)
    assert mod._pool.nbytes >= panels * 30 * nr * 4
    assert mod._pool.nbytes < panels * 30 * nr * 4 + 30 * 40 * 4


@pytest.mark.parametrize("constant_b", [True, False], ids=["packed_b", "dynamic_b"])
def test_epilogue_stays_fused(constant_b):
    m, k, n = 19, 45, 50
    model, b, inits = matmul_model(m, k, n, constant_b, epilogue=True)
    a, res = rand((m, k), 8), rand((m, n), 9)
    feeds = {"a": a, "res": res} if constant_b else {"a": a, "b": b, "res": res}
    mod = tensorc.compile(model)
    assert mod.info["kernels"] == 1
    want = np.maximum(a.astype(np.float64) @ b + inits["bias"], 0) * 0.5 + res
    check_result(mod.run(feeds)["y"], want.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_batched_matmul_both_inputs():
    a, b = rand((2, 3, 17, 40), 10), rand((2, 3, 40, 19), 11)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [tensor_info("a", "float32", a.shape),
                        tensor_info("b", "float32", b.shape)], ["y"])
    got = tensorc.compile(model).run({"a": a, "b": b})["y"]
    check_result(got, np.matmul(a.astype(np.float64), b).astype(np.float32), rtol=1e-4,
                 atol=1e-5)


@pytest.mark.parametrize("cpu,register", [("znver3", "ymm"), ("znver4", "zmm")])
def test_micro_kernel_is_fma_on_broadcasts_without_spills(cpu, register):
    """Compiled (not run) for an AVX2 and an AVX-512 CPU: the hottest loop is the register
    tile's FMAs on the target's widest registers, fed by broadcasts, with no stack traffic."""
    from tensorc.codegen.llvm.objects import optimize_module
    from tensorc.compiler.llvm import compile_graph
    from tensorc.frontend.onnx import import_onnx
    target = Target.from_string(f"llvm -mcpu={cpu}")
    model, _, _ = matmul_model(64, 256, 256, True)
    compiled = compile_graph(import_onnx(model), target)
    config = compiled.kernels[0].func.attrs["config"]
    mod, tm = optimize_module(compiled.llvm_ir, target)
    loop = _hottest_loop(tm.emit_assembly(mod))
    fmas = [line for line in loop if "vfmadd" in line and register in line]
    assert len(fmas) >= config["rows"] * config["vectors"]
    assert any("vbroadcastss" in line for line in loop)
    assert not any("rsp" in line for line in loop)      # spills and reloads


def _hottest_loop(asm: str) -> list[str]:
    """The basic block (label to back-branch) with the most FMAs."""
    blocks, current = [], []
    for line in asm.splitlines():
        if line.startswith(".LBB"):
            blocks.append(current)
            current = []
        current.append(line)
    blocks.append(current)
    return max(blocks, key=lambda b: sum("vfmadd" in line for line in b))


def test_pack_is_traced_and_replays():
    A, B = te.placeholder((29, 20), name="A"), te.placeholder((20, 24), name="B")
    mm = get_op("matmul").compute_fn({}, A, B)
    template = get_op("matmul").template("llvm")
    space = template.search_space(HOST, mm, mm, {})
    config = space.validate(space.default().replace(pack_a=True))
    sch = create_schedule(mm)
    template.apply(HOST, sch, mm, mm, {}, config)
    assert any(rec["prim"] == "pack" for rec in sch.trace)
    again = replay(create_schedule(mm), sch.trace)
    assert str(lower(again, [A, B, mm], "k")) == str(lower(sch, [A, B, mm], "k"))
    a, b = rand((29, 20), 12), rand((20, 24), 13)
    (got,) = run_func(lower(again, [A, B, mm], "k"), [a, b])
    check_result(got, (a.astype(np.float64) @ b).astype(np.float32), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("packed", [True, False], ids=["packed_b", "dynamic_b"])
def test_k_blocks_match_numpy(packed):
    """The k-blocked GEMM (a blocked rfactor; a plain matmul only) with row blocks and a
    packed A block per k block."""
    m, k, n = 80, 512, 41     # an even count of row tiles (6 or 14 rows), the last overhanging
    a, b = rand((m, k), 14), rand((k, n), 15)
    attrs, b_arg = {}, b
    if packed:
        nr = panel_width(HOST, n, m)
        attrs, b_arg = {"b_panel": nr, "n": n}, pack_b_panels(b, nr)
    A, B = te.placeholder(a.shape, name="A"), te.placeholder(b_arg.shape, name="B")
    mm = get_op("matmul").compute_fn(attrs, A, B)
    template = get_op("matmul").template("llvm")
    space = template.search_space(HOST, mm, mm, attrs)
    default = space.default()
    for k_block, pack_a, row_tiles in ((128, False, 1048576), (256, True, 1048576),
                                       (128, True, 1), (256, False, 2)):
        config = space.validate(default.replace(k_block=k_block, pack_a=pack_a,
                                                row_tiles=row_tiles))
        sch = create_schedule(mm)
        template.apply(HOST, sch, mm, mm, attrs, config)
        assert any(rec["prim"] == "rfactor" for rec in sch.trace)
        (got,) = run_func(lower(sch, [A, B, mm], "k"), [a, b_arg], num_threads=2)
        check_result(got, (a.astype(np.float64) @ b).astype(np.float32), rtol=1e-4,
                     atol=1e-4)


@pytest.mark.parametrize("packed", [True, False], ids=["packed_b", "dynamic_b"])
@pytest.mark.parametrize("threads", [1, 3])
def test_k_blocks_under_an_epilogue_match_numpy(packed, threads):
    """K in blocks under bias + relu: the epilogue passes over each column block once its
    last k block is in (a transformer FFN's second matmul, its residual and bias)."""
    # the last panel and row tile overhang; 248 columns are 4 panels of 64 on AVX-512 and 16
    # of 16 on AVX2, so that column blocks of 2 panels divide them on both
    m, k, n = 40, 512, 248
    assert -(-n // panel_width(AVX512, n, m)) == 4 and -(-n // panel_width(AVX2, n, m)) == 16
    space = build_group(m, k, n, packed)
    for k_block, col_panels in ((256, 1), (128, 2), (256, WHOLE)):
        config = space.default().replace(k_block=k_block, col_panels=col_panels)
        assert space.is_valid(config), space.violation(config)
        func, inputs, want = build_group(m, k, n, packed, config)
        (got,) = run_func(func, inputs, num_threads=threads)
        check_result(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, panels, most_cores", [(AVX512, 12, 4), (AVX2, 48, 16)],
                         ids=["avx512", "avx2"])
@pytest.mark.parametrize("cores", [1, 2, 4, 16])
def test_k_blocks_of_a_large_a_leave_one_column_block_per_core(monkeypatch, cores, target,
                                                                panels, most_cores):
    """K in blocks over an A that L2 does not hold beside B (128 x 3072, 1.5 MB): each column
    block reads all of A, so the blocks are as few as a multiple of the cores allows (the
    parallel loop is over them: never one block for all threads, never a count that leaves a
    core idle at the end), each block's B of one k block within WIDE_B_BLOCK_BYTES. Where no
    block size does that (16 cores, AVX-512's 12 panels of 64 columns; AVX2's 48 panels of 16
    split 16 ways), the blocks are PARALLEL_BLOCKS or more."""
    monkeypatch.setattr(Target, "num_cores", property(lambda self: cores))
    space = build_group(128, 3072, 768, True, target=target)
    default = space.default()
    assert -(-768 // panel_width(target, 768, 128)) == panels
    blocks = panels // min(default["col_panels"], panels)
    if cores <= most_cores:
        assert default["k_block"] == K_BLOCK_WIDE and blocks % cores == 0 and blocks >= 2
        width = panel_width(target, 768, 128)
        assert default["col_panels"] * width * K_BLOCK_WIDE * 4 <= WIDE_B_BLOCK_BYTES
    else:
        assert default["k_block"] == 256 and blocks >= PARALLEL_BLOCKS


@pytest.mark.parametrize("m,blocked", [(16, False), (32, False), (64, False), (77, True),
                                       (128, True), (256, True)])
def test_deep_k_is_blocked_over_many_rows(m, blocked):
    """K = 3072 in blocks only over K_BLOCK_MIN_ROWS rows or more, whose tiles share each
    block of B in L1 (64 rows: K whole); K = 1024 is never blocked."""
    default = gemm_space(AVX512, Gemm(m, 768, 3072, b_panel=64, k_blockable=True),
                         "float32").default()
    assert (m >= K_BLOCK_MIN_ROWS) == blocked
    assert (default["k_block"] < 3072) == blocked
    shallow = gemm_space(AVX512, Gemm(m, 768, 1024, b_panel=64, k_blockable=True), "float32")
    assert shallow.default()["k_block"] == WHOLE


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_k_blocks_per_core_match_numpy(monkeypatch, threads):
    """The default for a deep K over a large A (k blocks of K_BLOCK_WIDE, one column block
    per core of two) through the compiled GEMM, at more threads than blocks too."""
    monkeypatch.setattr(Target, "num_cores", property(lambda self: 2))
    space = build_group(96, 3072, 256, True)
    config = space.default()
    assert config["k_block"] == 512 and config["col_panels"] < 1048576
    func, inputs, want = build_group(96, 3072, 256, True, config)
    (got,) = run_func(func, inputs, num_threads=threads)
    check_result(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n,on", [(128, 3072, 3072, True), (77, 3072, 1024, True),
                                       (128, 3072, 768, False), (16, 3072, 3072, False),
                                       (1, 3072, 3072, False), (1024, 1024, 1024, False)])
def test_k_blocks_whose_b_streams_from_memory_prefetch_the_next_panel(m, k, n, on):
    """A k-blocked GEMM whose B (B_MEMORY_BYTES or more) streams from memory, with enough
    tiles per panel, asks for the next B panel's row into L2; smaller B, few tiles, GEMVs
    and unblocked K do not."""
    space = gemm_space(AVX512, Gemm(m, n, k, b_panel=32, k_blockable=True), "float32")
    default = space.default()
    assert default["prefetch_next"] == on
    assert space.violation(default.replace(prefetch_next=True, order="rows")) is not None


@pytest.mark.parametrize("k_block", [128, WHOLE])
@pytest.mark.parametrize("packed", [True, False], ids=["packed_b", "dynamic_b"])
def test_prefetching_the_next_panel_gives_the_same_answer(k_block, packed):
    """The next panel's prefetch (into L2) in the k-blocked and the plain micro-kernel: the
    same numbers as numpy, and the prefetch is in the loop IR one panel on."""
    m, k, n = 40, 256, 100          # the last panel and row tile overhang
    space = build_group(m, k, n, packed)
    config = space.default().replace(k_block=k_block, prefetch_next=True, order="panels",
                                     col_panels=WHOLE)
    assert space.is_valid(config), space.violation(config)
    func, inputs, want = build_group(m, k, n, packed, config)
    assert "into L2" in str(func)
    (got,) = run_func(func, inputs, num_threads=2)
    check_result(got, want, rtol=1e-4, atol=1e-4)


def test_gemvs_over_large_b_read_each_panel_as_two_streams():
    """A GEMV whose packed B takes GEMV_STREAMS_BYTES or more reads each panel as two streams
    (K's halves); a smaller B, more rows, or a B that is an input keep one."""
    def default(m, k, n, panel=64):
        return gemm_space(AVX512, Gemm(m, n, k, b_panel=panel, k_blockable=True),
                          "float32").default()
    big = default(1, 768, 3072)
    assert big["k_streams"] == GEMV_STREAMS and big["k_block"] == WHOLE
    assert default(1, 768, 768)["k_streams"] == 1
    assert default(16, 768, 3072, panel=32)["k_streams"] == 1
    dynamic = gemm_space(AVX512, Gemm(1, 3072, 768, k_blockable=True), "float32")
    assert dynamic.knobs["k_streams"].choices == (1,)
    odd = gemm_space(AVX512, Gemm(1, 3072, 1023, b_panel=64, k_blockable=True), "float32")
    assert odd.knobs["k_streams"].choices == (1,)       # halves of equal length only


@pytest.mark.parametrize("k", [512, 302])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemv_streams_match_numpy(k, threads):
    """Two streams under bias + relu (the last panel overhanging), at 1 and 2 threads."""
    space = build_group(1, k, 200, True)
    config = space.default().replace(k_streams=2, k_block=WHOLE)
    assert space.is_valid(config), space.violation(config)
    func, inputs, want = build_group(1, k, 200, True, config)
    assert "matmul.rf: float32[2, 1," in str(func)
    (got,) = run_func(func, inputs, num_threads=threads)
    check_result(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m", [768, 1024, 2048])
def test_packed_a_row_blocks_hold_many_rows(m):
    """A packed A's row blocks: every B panel read into L1 serves PANEL_REUSE_ROWS rows or more
    (14-row tiles in blocks of two made 1024^3 10% slower), the tile count divides into the
    blocks (768 rows: 55 tiles of 14, blocks of 5, which the block choices lacked, so it took
    blocks of one), and the threads get PARALLEL_BLOCKS of them."""
    space = gemm_space(AVX512, Gemm(m, 1024, 1024, b_panel=32, k_blockable=True), "float32")
    default = space.default()
    assert space.is_valid(default) and default["pack_a"]
    tiles = -(-m // default["rows"])
    assert default["rows"] >= 8 and tiles % default["row_tiles"] == 0
    assert default["rows"] * default["row_tiles"] >= PANEL_REUSE_ROWS
    assert tiles // default["row_tiles"] >= PARALLEL_BLOCKS
    assert default["rows"] * default["row_tiles"] * 1024 * 4 <= PACKED_A_BYTES


@pytest.mark.parametrize("m,rows", [(14, 14), (15, 8), (16, 8), (17, 9), (20, 10), (24, 12),
                                    (28, 14), (30, 10), (77, 13)])
def test_default_tile_rows(m, rows):
    """Register tiles as tall as fit, evened out over the rows (16 rows: 8 + 8, not 14 + 2,
    whose 2-row tile has too few accumulators for two FMA pipes)."""
    space = gemm_space(AVX512, Gemm(m, 768, 768, b_panel=32, k_blockable=True), "float32")
    assert space.default()["rows"] == rows


@pytest.mark.parametrize("k,order", [(256, "rows"), (128, "rows"), (384, "panels"),
                                     (3072, "panels")])
def test_shallow_matmuls_keep_the_a_strip_outer(k, order):
    """Up to K = 256 a block runs its A strips outer (each strip, in L1, meets the block's B
    panels); deeper ones run the B panels outer. The default compiles to numpy's result."""
    space = gemm_space(AVX512, Gemm(500, 3072, k, b_panel=32, k_blockable=True), "float32")
    assert space.default()["order"] == order
    func, inputs, want = build_group(40, k, 96, packed=True,
                                     config=build_group(40, k, 96, packed=True).default())
    (got,) = run_func(func, inputs)
    check_result(got, want, rtol=1e-4, atol=1e-4)


TALLEST = HOST.max_tile_rows      # 14 rows on AVX-512, 8 on AVX2


@pytest.mark.parametrize("m,rows", [(16, None), (17, None), (TALLEST + 2, TALLEST),
                                    (TALLEST + 3, TALLEST)])
def test_evened_tiles_and_a_remainder_tile_match_numpy(m, rows):
    """The default's evened tiles (8 + 8, 9 + 8) and this machine's tallest tile with a
    remainder of 2 or 3 rows (on AVX-512 16 rows as 14 + 2)."""
    space = build_group(m, 64, 96, packed=True)
    assert TALLEST == max(space.knobs["rows"].choices)
    config = space.default() if rows is None else space.default().replace(rows=rows)
    func, inputs, want = build_group(m, 64, 96, packed=True, config=config)
    (got,) = run_func(func, inputs)
    check_result(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n,packed", [(256, False), (384, False), (768, True)])
def test_a_is_packed_against_many_panels(n, packed):
    """An A larger than L2 is read in row blocks; it is packed only where a block meets
    PACK_A_MIN_PANELS B panels or more (the copy costs more than it saves against few)."""
    space = gemm_space(AVX512, Gemm(500, n, 768, b_panel=32, k_blockable=True), "float32")
    default = space.default()
    assert space.is_valid(default) and default["pack_a"] == packed
    assert default["row_tiles"] < -(-500 // default["rows"]) and default["col_panels"] == WHOLE


@pytest.mark.parametrize("m,k,n", [(500, 3072, 1024), (1024, 1024, 1024), (500, 768, 3072)])
def test_six_row_tiles_read_a_in_place(m, k, n):
    """Tiles of 6 rows (beside 64-column panels of B) read their 6 streams of A in place, in
    column blocks of B that the threads share: A is packed only for tiles of 8 rows or more,
    whose many streams the prefetchers lose."""
    space = gemm_space(AVX512, Gemm(m, n, k, b_panel=64, k_blockable=True), "float32")
    default = space.default()
    assert default["rows"] == 6 and not default["pack_a"]
    assert default["row_tiles"] == WHOLE and default["col_panels"] < WHOLE


@pytest.mark.parametrize("m,streams", [(197, False), (256, False), (512, False), (300, True),
                                       (500, True), (1024, True)])
def test_a_is_read_in_place_where_its_blocks_would_hold_one_tile(m, streams):
    """197 rows (ViT) are 15 tiles of 14, which divide into PARALLEL_BLOCKS blocks only as
    blocks of one tile, each streaming all of B: A is then read in place against column
    blocks of B (which the threads share); blocks of two tiles or more stay packed."""
    space = gemm_space(AVX512, Gemm(m, 3072, 768, b_panel=32, k_blockable=True), "float32")
    default = space.default()
    assert space.is_valid(default) and default["pack_a"] == streams
    if streams:
        assert default["row_tiles"] >= PACKED_BLOCK_MIN_TILES and default["col_panels"] == WHOLE
    else:
        assert default["row_tiles"] == WHOLE and default["col_panels"] < WHOLE


def test_packed_a_row_blocks_match_numpy():
    """Row blocks of ten 10-row tiles (the default for AVX-512: 58 tiles of 14 rows have no
    block of 96 rows or more) through the compiled GEMM."""
    m, k, n = 800, 256, 40
    space = build_group(m, k, n, True)
    config = space.default()
    tiles = -(-m // 10)
    if 10 in space.knobs["rows"].choices:
        config = config.replace(rows=10, row_tiles=10, pack_a=True, col_panels=WHOLE)
        assert space.is_valid(config), space.violation(config)
        assert tiles % 10 == 0
    func, inputs, want = build_group(m, k, n, True, config)
    (got,) = run_func(func, inputs, num_threads=2)
    check_result(got, want, rtol=1e-4, atol=1e-4)


def test_packed_a_limit_counts_one_k_block():
    """With K in blocks, A is packed one k block at a time: the PACKED_A_BYTES limit is on
    that block (it was on all of K, which rejected packing the 128 rows of a deep FFN)."""
    space = build_group(128, 3072, 64, True)
    config = space.default().replace(pack_a=True, row_tiles=WHOLE, k_block=256)
    assert space.is_valid(config), space.violation(config)
    assert not space.is_valid(config.replace(k_block=WHOLE))


def test_a_pointwise_conv_scheduled_as_a_gemm():
    """The hook a 1x1 convolution can use: out[n, f, p] = sum_c W[f, c] * X[n, c, p]."""
    n, c, f, p = 2, 24, 20, 49
    W, X = te.placeholder((f, c), name="W"), te.placeholder((n, c, p), name="X")
    r = te.reduce_axis(c, "c")
    conv = te.compute((n, f, p), lambda b, i, j: te.sum_(W[i, r] * X[b, r, j], axis=r),
                      name="conv1x1", axis_names=["n", "f", "p"])
    out = te.compute(conv.shape, lambda *i: E.maximum(conv[i], 0.0), name="relu")
    gemm = Gemm.of_matmul(out, conv, {})
    space = gemm_space(HOST, gemm, out.dtype)
    for config in (space.default(), space.default().replace(rows=space.knobs["rows"].choices[0])):
        sch = create_schedule(out)
        schedule_gemm(HOST, sch, out, conv, gemm, config)
        w, x = rand((f, c), 16), rand((n, c, p), 17)
        (got,) = run_func(lower(sch, [W, X, out], "conv1x1"), [w, x])
        want = np.maximum(np.einsum("fc,ncp->nfp", w.astype(np.float64), x), 0)
        check_result(got, want.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_a_tensor_times_itself() -> None:
    """x @ x: one input is both operands (nothing is packed: a packed copy would serve both
    reads, recomputed per block); the product matches numpy."""
    x = rand((96, 96), 11)
    model = make_model([helper.make_node("MatMul", ["x", "x"], ["y"])],
                       [tensor_info("x", "float32", (96, 96))], ["y"])
    got = tensorc.compile(model).run({"x": x})["y"]
    check_result(got, (x.astype(np.float64) @ x).astype(np.float32), rtol=1e-4, atol=1e-4)

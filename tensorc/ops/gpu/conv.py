"""GPU schedule of 2-D convolution: shared-memory tiles of the padded input and the weights,
register tiles of filters x pixels.

A block computes ``tile_f`` filters over a ``tile_y x tile_x`` patch of one image's output
(blockIdx.y: filter tile, blockIdx.x: image and patch); its threads are laid out as
(threadIdx.x: column, threadIdx.y: row, threadIdx.z: filter group), each accumulating
``thread_f`` filters x ``thread_x`` columns in registers, strided so that neighbouring threads
touch neighbouring words. The reduction over input channels runs ``tile_c`` channels at a
time: the block copies the padded input window those channels need and the matching weights
into shared memory together (the padding is computed while copying), synchronizes, and
accumulates over the channels and the kernel window from there.

Depthwise and grouped convolutions, and 1-D and 3-D ones, use the generic schedule (a thread
per output element: their windows are small and their weights are not shared among filters).
"""
from __future__ import annotations

from tensorc.ir.bounds import loop_extents
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.te import Tensor
from tensorc.ops.gpu.common import pow2_at_least
from tensorc.ops.gpu.generic import generic_space, schedule_generic
from tensorc.ops.gpu.matmul import accumulation
from tensorc.ops.registry import REGISTRY
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

TILE_F = (8, 16, 32, 64)
THREAD_F = (1, 2, 4, 8)
TILE_Y = (1, 2, 4, 8, 16)
TILE_X = (4, 8, 16, 32)
THREAD_X = (1, 2, 4)
TILE_C = (1, 2, 4, 8, 16)
TARGET_THREADS = 256


def _geometry(acc: Tensor, attrs: dict):
    n, f, ho, wo = acc.shape
    kh, kw = (r.extent for r in acc.op.reduce_axis[1:3])
    channels = acc.op.reduce_axis[0].extent
    return n, f, ho, wo, channels, kh, kw


def _tiled(acc: Tensor, attrs: dict) -> bool:
    return len(acc.shape) == 4 and attrs.get("groups", 1) == 1 and \
        len(acc.op.reduce_axis) == 3


def shared_floats(c, attrs: dict, kh: int, kw: int) -> int:
    (sy, sx), (dy, dx) = attrs["strides"], attrs["dilations"]
    rows = (c["tile_y"] - 1) * sy + (kh - 1) * dy + 1
    cols = (c["tile_x"] - 1) * sx + (kw - 1) * dx + 1
    return c["tile_c"] * (rows * cols + c["tile_f"] * kh * kw)


def conv_space(target: Target, out: Tensor, conv_t: Tensor, attrs: dict) -> SearchSpace:
    acc = accumulation(conv_t)
    if not _tiled(acc, attrs):
        space = generic_space(target, out, conv_t, attrs)
        return SearchSpace([*space.knobs.values(), Knob("tiled", (False,), False)],
                           name="gpu conv (generic)")
    n, f, ho, wo, channels, kh, kw = _geometry(acc, attrs)
    smem = target.max_shared_memory_per_block // 4
    limit = target.max_threads_per_block

    def threads_of(c) -> int:
        return (c["tile_x"] // c["thread_x"]) * c["tile_y"] * (c["tile_f"] // c["thread_f"])

    def legal(c) -> str | None:
        if c["thread_f"] > c["tile_f"] or c["thread_x"] > c["tile_x"]:
            return "a thread tile larger than the block tile"
        if c["tile_f"] // c["thread_f"] > 64:
            return "more than 64 filter groups (threadIdx.z)"
        if not 32 <= threads_of(c) <= limit:
            return f"{threads_of(c)} threads per block (32 to {limit})"
        if c["thread_f"] * c["thread_x"] > 64:
            return "more than 64 accumulators per thread"
        if shared_floats(c, attrs, kh, kw) > smem:
            return f"shared tiles over {smem * 4} bytes"
        return None

    # 16 columns (2 per thread), or 8 where that divides the rows and 16 does not (no
    # partial tiles); 4 to 8 for narrow images
    tile_x = min(16, max(4, pow2_at_least(wo)))
    if tile_x == 16 and wo % 16 and wo % 8 == 0:
        tile_x = 8
    thread_x = 2 if tile_x >= 16 else 1
    tile_y = min(max(1, pow2_at_least(ho)), max(1, 64 // tile_x), 16)
    tile_f = min(32, max(8, pow2_at_least(f)))
    pixels_per_block = (tile_x // thread_x) * tile_y
    # fewer filters per block while there are too few blocks to fill the GPU
    while tile_f > 8 and n * -(-f // tile_f) * -(-ho // tile_y) * -(-wo // tile_x) \
            < target.sm_count:
        tile_f //= 2
    groups = max(1, min(tile_f, TARGET_THREADS // pixels_per_block))
    thread_f = max(1, tile_f // groups)
    while threads_of({"tile_x": tile_x, "thread_x": thread_x, "tile_y": tile_y,
                      "tile_f": tile_f, "thread_f": thread_f}) < 32 and thread_f > 1:
        thread_f //= 2
    default = {"tile_x": tile_x, "thread_x": thread_x, "tile_y": tile_y, "tile_f": tile_f,
               "thread_f": thread_f, "tile_c": 8}
    while shared_floats(default, attrs, kh, kw) > smem and default["tile_c"] > 1:
        default["tile_c"] //= 2
    return SearchSpace(
        [Knob("tiled", (True,), True),
         Knob("tile_f", TILE_F, default["tile_f"], "filters per block"),
         Knob("thread_f", THREAD_F, default["thread_f"], "filters per thread (registers)"),
         Knob("tile_y", TILE_Y, default["tile_y"], "output rows per block"),
         Knob("tile_x", TILE_X, default["tile_x"], "output columns per block"),
         Knob("thread_x", THREAD_X, default["thread_x"], "output columns per thread"),
         Knob("tile_c", TILE_C, default["tile_c"], "input channels per shared tile")],
        [legal], name="gpu conv2d")


def schedule_conv(target: Target, sch: Schedule, out: Tensor, conv_t: Tensor, attrs: dict,
                  config) -> None:
    if not config["tiled"]:
        schedule_generic(target, sch, out, conv_t, attrs, config)
        return
    acc = accumulation(conv_t)
    data, weight = acc.op.input_tensors()
    if out is acc:
        acc = sch.cache_write(acc, "local")
    shared = [sch.cache_read(t, "shared", [acc]) for t in (data, weight)]
    st = sch[out]
    n, f, y, x = st.op_axis
    fo, fi = st.split(f, config["tile_f"])
    fii, tz = st.split(fi, nparts=config["thread_f"])
    yo, ty = st.split(y, config["tile_y"])
    xo, xi = st.split(x, config["tile_x"])
    xii, tx = st.split(xi, nparts=config["thread_x"])
    st.reorder(fo, n, yo, xo, tz, ty, tx, fii, xii)
    st.bind(fo, "blockIdx.y")
    st.bind(st.fuse(n, yo, xo), "blockIdx.x")
    st.bind(tz, "threadIdx.z")
    st.bind(ty, "threadIdx.y")
    st.bind(tx, "threadIdx.x")
    st.unroll(fii)
    st.unroll(xii)
    extents = loop_extents(st)
    threads = (extents[tx], extents[ty], extents[tz])
    acc_stage = sch[acc]
    acc_stage.compute_at(st, tx)
    cn, cf, cy, cx = acc_stage.op_axis
    rc, ry, rx = acc_stage.reduce_axis
    rco, rci = acc_stage.split(rc, config["tile_c"])
    acc_stage.reorder(cn, rco, rci, ry, rx, cf, cy, cx)
    if config["tile_c"] * acc.op.reduce_axis[1].extent * acc.op.reduce_axis[2].extent <= 64:
        acc_stage.unroll(ry)
        acc_stage.unroll(rx)
    acc_stage.unroll(cf)
    acc_stage.unroll(cx)
    for t in shared:
        sch[t].compute_at(acc_stage, rco)
        fetch_3d(sch[t], threads)


def fetch_3d(stage: Stage, threads: tuple[int, int, int]) -> None:
    """The block's threads (x, y, z) copy a shared tile together, consecutive threads taking
    consecutive elements."""
    axes = stage.op_axis
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    nx, ny, nz = threads
    _, per_block = stage.split(fused, nx * ny * nz)
    rest, fx = stage.split(per_block, nx)
    fz, fy = stage.split(rest, ny)
    stage.bind(fz, "threadIdx.z")
    stage.bind(fy, "threadIdx.y")
    stage.bind(fx, "threadIdx.x")


REGISTRY["conv"].schedule(schedule_conv, target="cuda", space=conv_space)

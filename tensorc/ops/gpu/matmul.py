"""GPU schedule of matmul: shared-memory tiles, register tiles.

Each block computes a ``tile_m x tile_n`` tile of the output (blockIdx.y, blockIdx.x; batch
on blockIdx.z); each of its threads a ``thread_m x thread_n`` register tile, rows and
columns strided by the block's thread counts (so that neighbouring threads read neighbouring
shared-memory words and write neighbouring output elements). The reduction runs in steps of
``tile_k``: the block's threads copy the A and B tiles it needs into shared memory together
(float4 where aligned), synchronize, and accumulate from there.

    for (i.o: blockIdx.y) for (j.o: blockIdx.x) for (ty: threadIdx.y) for (tx: threadIdx.x)
      C.local[thread_m, thread_n] = 0
      for (k.o)  A.shared <- A[tile];  B.shared <- B[tile];  barrier
                 for (k.i) for (i) for (j)  C.local[i, j] += A.shared[.., k.i] * B.shared[k.i, ..]
                 barrier
      C[...] = epilogue(C.local[i, j])

A matrix-vector product (a handful of rows) has no reuse to tile for: it uses the generic
schedule, one thread per output element streaming its column of B.
"""
from __future__ import annotations

from tensorc.ir.bounds import loop_extents
from tensorc.ir.schedule import Schedule, Stage
from tensorc.ir.te import Tensor
from tensorc.ops.gpu.common import pow2_at_least, size_of
from tensorc.ops.gpu.generic import generic_space, schedule_generic
from tensorc.ops.registry import REGISTRY
from tensorc.ops.space import Knob, SearchSpace
from tensorc.target import Target

TILES = (16, 32, 64, 128)
THREAD_TILES = (1, 2, 4, 8)
TILE_K = (4, 8, 16, 32)
MIN_ROWS = 8            # fewer rows: a matrix-vector product, generic schedule
# block tiles by preference (more reuse first); the first with enough blocks is the default
PREFERENCE = ((128, 128), (64, 128), (128, 64), (64, 64), (32, 64), (64, 32), (32, 32),
              (16, 64), (16, 32), (32, 16), (16, 16))


def accumulation(mm: Tensor) -> Tensor:
    """The reduction of a matmul group's anchor (half precision rounds it in a final stage)."""
    return mm if mm.op.reduce_axis else mm.op.input_tensors()[0]


def _thread_tile(tile: int) -> int:
    return 8 if tile >= 128 else 4 if tile >= 64 else 2 if tile >= 32 else 1


def default_tiles(target: Target, batch: int, m: int, n: int) -> tuple[int, int]:
    fits = [(tm, tn) for tm, tn in PREFERENCE
            if tm <= max(16, pow2_at_least(m)) and tn <= max(16, pow2_at_least(n))]
    for tm, tn in fits:
        if batch * -(-m // tm) * -(-n // tn) >= target.sm_count:
            return tm, tn
    return fits[-1] if fits else (16, 16)


def tiled_space(target: Target, m: int, n: int, k: int, batch: int, itemsize: int,
                name: str) -> SearchSpace:
    """The knobs of a shared-memory tiled GEMM-like kernel (matmul, and conv as an implicit
    GEMM reuses the constraints)."""
    tm, tn = default_tiles(target, batch, m, n)
    smem = target.max_shared_memory_per_block
    limit = target.max_threads_per_block

    def legal(c) -> str | None:
        threads = (c["tile_m"] // c["thread_m"]) * (c["tile_n"] // c["thread_n"])
        if c["thread_m"] > c["tile_m"] or c["thread_n"] > c["tile_n"]:
            return "a thread tile larger than the block tile"
        if not 32 <= threads <= limit:
            return f"{threads} threads per block (32 to {limit})"
        if c["thread_m"] * c["thread_n"] > 64:
            return "more than 64 accumulators per thread"
        if (c["tile_m"] + c["tile_n"]) * c["tile_k"] * itemsize > smem:
            return f"shared tiles over {smem} bytes"
        return None
    return SearchSpace(
        [Knob("tiled", (True,), True),
         Knob("tile_m", TILES, tm, "output rows per block"),
         Knob("tile_n", TILES, tn, "output columns per block"),
         Knob("thread_m", THREAD_TILES, _thread_tile(tm), "rows per thread (registers)"),
         Knob("thread_n", THREAD_TILES, _thread_tile(tn), "columns per thread"),
         Knob("tile_k", TILE_K, 16 if k >= 256 else 8, "reduction step (shared tiles)")],
        [legal], name=name)


def matmul_space(target: Target, out: Tensor, mm: Tensor, attrs: dict) -> SearchSpace:
    acc = accumulation(mm)
    *batch, m, n = acc.shape
    if m < MIN_ROWS:
        space = generic_space(target, out, mm, attrs)
        return SearchSpace([*space.knobs.values(), Knob("tiled", (False,), False)],
                           name="gpu matmul (matrix-vector)")
    k = acc.op.reduce_axis[0].extent
    return tiled_space(target, m, n, k, size_of(batch), 4, "gpu matmul")


def schedule_matmul(target: Target, sch: Schedule, out: Tensor, mm: Tensor, attrs: dict,
                    config) -> None:
    if not config["tiled"]:
        schedule_generic(target, sch, out, mm, attrs, config)
        return
    acc = accumulation(mm)
    operands = acc.op.input_tensors()
    if out is acc:
        acc = sch.cache_write(acc, "local")
    shared = [sch.cache_read(t, "shared", [acc]) for t in operands]
    st = sch[out]
    *batch, i, j = st.op_axis
    tx, threads = tile_output(st, batch, i, j, config)
    acc_stage = sch[acc]
    acc_stage.compute_at(st, tx)
    *cb, ci, cj = acc_stage.op_axis
    (k,) = acc_stage.reduce_axis
    ko, ki = acc_stage.split(k, config["tile_k"])
    acc_stage.reorder(*cb, ko, ki, ci, cj)
    acc_stage.unroll(ki)
    acc_stage.unroll(ci)
    acc_stage.unroll(cj)
    for t in shared:
        sch[t].compute_at(acc_stage, ko)
        cooperative_fetch(sch[t], threads)


def tile_output(st: Stage, batch: list, i, j, config):
    """Tile the output's (i, j) loops over blocks and threads (strided register tiles); the
    batch loops go to blockIdx.z. Returns the threadIdx.x loop and the block's thread counts
    (x, y)."""
    io, ii = st.split(i, config["tile_m"])
    jo, ji = st.split(j, config["tile_n"])
    iii, ty = st.split(ii, nparts=config["thread_m"])
    jii, tx = st.split(ji, nparts=config["thread_n"])
    st.reorder(*batch, io, jo, ty, tx, iii, jii)
    if batch:
        st.bind(st.fuse(*batch) if len(batch) > 1 else batch[0], "blockIdx.z")
    st.bind(io, "blockIdx.y")
    st.bind(jo, "blockIdx.x")
    st.bind(ty, "threadIdx.y")
    st.bind(tx, "threadIdx.x")
    st.unroll(iii)
    st.unroll(jii)
    extents = loop_extents(st)
    return tx, (extents[tx], extents[ty])


def cooperative_fetch(stage: Stage, threads: tuple[int, int]) -> None:
    """The block's threads copy a shared tile together: consecutive threads take
    consecutive elements (vectors of 4 where the rows allow)."""
    axes = stage.op_axis
    last = stage.tensor.shape[-1]
    loops = list(axes)
    if last % 4 == 0 and stage.tensor.dtype == "float32":
        outer, inner = stage.split(axes[-1], 4)
        stage.vectorize(inner)
        loops = [*axes[:-1], outer]
    fused = stage.fuse(*loops) if len(loops) > 1 else loops[0]
    nx, ny = threads
    rest, per_block = stage.split(fused, nx * ny)
    fy, fx = stage.split(per_block, nx)
    stage.bind(fy, "threadIdx.y")
    stage.bind(fx, "threadIdx.x")


REGISTRY["matmul"].schedule(schedule_matmul, target="cuda", space=matmul_space)

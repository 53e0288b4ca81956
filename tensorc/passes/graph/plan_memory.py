"""Static memory planning: every value gets a fixed place before the model ever runs.

Graph inputs and outputs live in the caller's arrays, constants in one aligned constant pool,
and every intermediate in one arena at an offset chosen by first-fit over the values'
lifetimes (a value dies after the last group that reads it). A view (reshape) shares its
input's storage, which then lives as long as the view does.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from tensorc.errors import SizeLimitError
from tensorc.ir import types
from tensorc.ir import te
from tensorc.ir.dims import Dim, decide, dim_max, is_symbolic
from tensorc.ir.graph import Graph, Value
from tensorc.passes.graph.fuse import FusedGroup

ALIGN = 64


@dataclass(frozen=True)
class Place:
    """Where a value's bytes are: ``kind`` is input / output / const / arena; ``index`` is the
    input or output number; ``offset`` is in bytes."""

    kind: str
    index: int
    offset: int | Dim = 0    # a Dim where sizes before it are symbolic


@dataclass
class MemoryPlan:
    places: dict[Value, Place]
    arena_size: int | Dim           # a Dim: evaluated for each run's dims
    const_pool: np.ndarray      # uint8, 64-byte aligned blocks

    def describe(self) -> str:
        return (f"arena {self.arena_size} bytes, constant pool {self.const_pool.nbytes} "
                f"bytes, {sum(p.kind == 'arena' for p in self.places.values())} intermediates")


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def plan_memory(graph: Graph, groups: list[FusedGroup]) -> MemoryPlan:
    places: dict[Value, Place] = {}
    for k, v in enumerate(graph.inputs):
        places[v] = Place("input", k)
    for k, v in enumerate(graph.outputs):
        places.setdefault(v, Place("output", k))

    # constants read by kernels go to the pool
    pool_parts: list[bytes] = []
    offset = 0
    for group in groups:
        for v in group.inputs:
            if v in graph.constants and v not in places:
                data = np.ascontiguousarray(graph.constants[v])
                if data.dtype == np.bool_:
                    data = data.astype(np.uint8)
                places[v] = Place("const", 0, offset)
                raw = data.tobytes()
                pool_parts.append(raw + b"\0" * (_align(len(raw)) - len(raw)))
                offset += _align(len(raw))
    pool = np.frombuffer(b"".join(pool_parts) or b"\0" * ALIGN, dtype=np.uint8).copy()

    # a view's storage is its base's; the base must live until the view's last reader. A
    # concat view (fuse._concats_in_place) is a base itself, whose inputs' bases are computed
    # in its slabs: it is placed when the first of them is
    base_of: dict[Value, Value] = {}
    slabs: dict[Value, tuple[Value, int]] = {}       # input base -> (concat, byte offset)
    for group in groups:
        if group.view and group.nodes[0].op == "concat":
            offset = 0
            for v in group.nodes[0].inputs:
                slabs[base_of.get(v, v)] = (group.output, offset)
                offset += v.type.nbytes
        elif group.view:
            src = group.nodes[0].inputs[0]
            base_of[group.output] = base_of.get(src, src)
    # an output that is a view: its base is computed in the caller's array
    for k, v in enumerate(graph.outputs):
        if v in base_of and base_of[v] not in places:
            places[base_of[v]] = Place("output", k)
    last_use: dict[Value, int] = {}
    for step, group in enumerate(groups):
        for v in group.inputs:
            last_use[base_of.get(v, v)] = step

    live: list[tuple[int, int, Value]] = []      # (offset, size, value)
    arena_size = 0
    for step, group in enumerate(groups):
        live = [blk for blk in live if last_use.get(blk[2], -1) >= step]
        out = group.output
        if group.view and out in base_of:
            places[out] = places[base_of[out]]
            continue
        if out in slabs and out not in places:
            concat, offset = slabs[out]
            if concat not in places:
                arena_size = _allocate(concat, places, live, arena_size, graph.dims.at_bound)
            whole = places[concat]
            places[out] = Place(whole.kind, whole.index, whole.offset + offset)
        if out in places:
            continue
        arena_size = _allocate(out, places, live, arena_size, graph.dims.at_bound)
    _check_arena(arena_size)
    return MemoryPlan(places, dim_max(arena_size, ALIGN), pool)


def _allocate(v: Value, places: dict, live: list, arena_size: int, at_bound) -> int:
    """Place ``v`` in the arena at the first gap that fits among the ``live`` blocks (first
    fit); returns the arena size. A size over data-dependent dims is taken at their bounds
    (``at_bound``): the place then holds the value at every run."""
    size = _align(at_bound(v.type.nbytes))
    if is_symbolic(size) or any(is_symbolic(b[0]) or is_symbolic(b[1]) for b in live):
        return _allocate_symbolic(v, size, places, live, arena_size)
    at = 0
    for off, sz, _ in sorted(live, key=lambda b: b[0]):
        if at + size <= off:
            break
        at = max(at, off + sz)
    places[v] = Place("arena", 0, at)
    live.append((at, size, v))
    return max(arena_size, at + size)


def _allocate_symbolic(v: Value, size, places: dict, live: list, arena_size):
    """First fit where sizes are expressions of symbolic dims: the lowest candidate place
    (0 or the end of a live block, in order of their values at the dims' hints) that the
    dims' ranges prove clear of every live block at every run; else above all of them (the
    maximum of their ends, evaluated at run time). Offsets and the arena's size are then
    expressions that the runtime evaluates for each run's dims."""
    blocks = [_block(off, sz) for off, sz, _ in live]      # (off, end, hint off, hint end)
    need = te.hint(size)
    candidates = sorted([(0, 0), *((end, he) for _, end, _, he in blocks)],
                        key=lambda c: c[1])
    at = None
    for c, h in candidates:
        # clear at the hints (cheap) before proven clear at every run
        if any(h + need > ho and he > h for _, _, ho, he in blocks):
            continue
        end = c + size
        if all(decide("le", end, off) is True or decide("le", blk_end, c) is True
               for off, blk_end, _, _ in blocks):
            at = c
            break
    if at is None:
        at = 0
        for _, blk_end, _, _ in blocks:
            at = dim_max(at, blk_end)
    places[v] = Place("arena", 0, at)
    live.append((at, size, v))
    return dim_max(arena_size, at + size)


@functools.lru_cache(maxsize=4096)
def _block(off, size) -> tuple:
    """A live block's offset and end, and their values at the hints (Dims hash by value:
    the arithmetic runs once per block, not once per candidate). The hint values only order
    and prune the candidates: a place is taken only where decide() proves it clear."""
    end = off + size
    return off, end, te.hint(off), te.hint(end)


def _check_arena(arena_size) -> None:
    """The arena is allocated when the module loads: refuse one over the size limit now
    (one of symbolic size is checked at each run, for its dims)."""
    if is_symbolic(arena_size):
        return
    if arena_size > types.MAX_TENSOR_BYTES:
        raise SizeLimitError(
            f"the model needs an arena of {arena_size / (1 << 30):.3g} GiB for its "
            f"intermediate tensors, over the limit of {types.MAX_TENSOR_BYTES / (1 << 30):.3g} "
            f"GiB; check the input shapes (a huge dim?) or raise "
            f"tensorc.ir.types.MAX_TENSOR_BYTES")

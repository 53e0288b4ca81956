"""Static memory planning: every value gets a fixed place before the model ever runs.

Graph inputs and outputs live in the caller's arrays, constants in one aligned constant pool,
and every intermediate in one arena at an offset chosen over the values' lifetimes (a value
dies after the last group that reads it) by an allocator of passes/graph/arena.py: first fit
where the sizes are known, storage tokens where they are expressions of symbolic dims. A view
(reshape) shares its input's storage, which then lives as long as the view does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorc.errors import SizeLimitError
from tensorc.ir import types
from tensorc.ir.dims import Dim, dim_max, is_symbolic
from tensorc.ir.graph import Graph, Value
from tensorc.passes.graph.arena import FirstFit, LiveBytes, StorageTokens, add_unsimplified
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


def _aligned_zeros(nbytes: int) -> np.ndarray:
    """``nbytes`` zero bytes whose first is ALIGN-aligned."""
    raw = np.zeros(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + nbytes]


def plan_memory(graph: Graph, groups: list[FusedGroup]) -> MemoryPlan:
    places: dict[Value, Place] = {}
    for k, v in enumerate(graph.inputs):
        places[v] = Place("input", k)
    for k, v in enumerate(graph.outputs):
        places.setdefault(v, Place("output", k))

    # constants read by kernels go to the pool: their places first, then one copy of each
    # into a pool allocated once, 64-byte aligned (the module uses it in place: a copy of
    # ViT-B's 346 MB of weights through bytes and a joined buffer, then an aligned copy,
    # cost 2 s of a warm compile)
    slots: list[tuple[np.ndarray, int]] = []
    offset = 0
    for group in groups:
        for v in group.inputs:
            if v in graph.constants and v not in places:
                data = np.ascontiguousarray(graph.constants[v])
                if data.dtype == np.bool_:
                    data = data.astype(np.uint8)
                places[v] = Place("const", 0, offset)
                slots.append((data, offset))
                offset += _align(data.nbytes)
    pool = _aligned_zeros(max(offset, ALIGN))
    for data, at in slots:
        pool[at:at + data.nbytes] = data.reshape(-1).view(np.uint8)

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

    lifetimes = _Lifetimes(groups, base_of, slabs, last_use, graph.dims.at_bound)
    symbolic = any(is_symbolic(graph.dims.at_bound(g.output.type.nbytes)) for g in groups)
    allocator = FirstFit()
    if symbolic:
        live = LiveBytes(graph.dims)
        lifetimes.assign(live, places)
        allocator = StorageTokens(graph.dims, live.peaks)
    arena_size, arena_places = lifetimes.assign(allocator, places)
    places.update(arena_places)
    _check_arena(arena_size)
    return MemoryPlan(places, dim_max(arena_size, ALIGN), pool)


class _Lifetimes:
    """The values the kernels compute, in order, each with the last step that reads it;
    :meth:`assign` places those that live in the arena with one allocator."""

    def __init__(self, groups, base_of, slabs, last_use, at_bound):
        self.groups, self.base_of, self.slabs = groups, base_of, slabs
        self.last_use, self.at_bound = last_use, at_bound

    def assign(self, allocator, fixed: dict[Value, Place]) -> tuple:
        """The arena's size and the places of the values it holds (views and concat slabs
        included), by ``allocator``; ``fixed``: the places outside the arena."""
        places = dict(fixed)
        held: dict[Value, tuple] = {}      # value -> (the allocator's handle, byte offset)
        for step, group in enumerate(self.groups):
            allocator.release(step)
            out = group.output
            if group.view and out in self.base_of:
                base = self.base_of[out]
                if base in held:
                    held[out] = held[base]
                else:
                    places[out] = places[base]
                continue
            if out in self.slabs and out not in places and out not in held:
                concat, offset = self.slabs[out]
                if concat not in places and concat not in held:
                    held[concat] = (self._allocate(allocator, concat), 0)
                if concat in held:
                    handle, at = held[concat]
                    held[out] = (handle, at + offset)
                else:
                    whole = places[concat]
                    places[out] = Place(whole.kind, whole.index, whole.offset + offset)
            if out not in places and out not in held:
                held[out] = (self._allocate(allocator, out), 0)
        places.update((v, Place("arena", 0, add_unsimplified(allocator.offset(handle), at)))
                      for v, (handle, at) in held.items())
        return allocator.size(), {v: p for v, p in places.items() if v not in fixed}

    def _allocate(self, allocator, v: Value):
        # a size over data-dependent dims is taken at their bounds: the place then holds
        # the value at every run
        size = _align(self.at_bound(v.type.nbytes))
        return allocator.allocate(size, self.last_use.get(v, -1))


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

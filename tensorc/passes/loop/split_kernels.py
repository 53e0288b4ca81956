"""The host/device split of a GPU kernel: one launch per loop nest at the root.

A group's PrimFunc may compute several stages at its root (a reduction, then the elementwise
pass that reads it), and a stage's threads can only read what other blocks wrote after a
grid-wide synchronization, that is in a later launch. So each root nest becomes a device
kernel of its own, launched in order; a stage the nests share lives in *workspace*, device
memory the host provides (global-scope buffers allocated at the root).

    allocate t: float32[64] (global)           device kernels:
    for (b: blockIdx.x, 0, 64) ...    t[b]  ->   f_0(x, t)  grid (64, 1, 1)  block (256, 1, 1)
    for (b: blockIdx.x, 0, 16) ...  y[.]  <-t   f_1(t, y)  grid (16, 1, 1)  block (128, 1, 1)
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorc.ir import arith
from tensorc.ir.loop import (
    Allocate, Buffer, For, PrimFunc, Seq, Stmt, buffers_used, walk_stmts,
)

AXES = ("x", "y", "z")


@dataclass
class DeviceFunction:
    """A group's kernel after the split: the device kernels to launch in order, over the
    PrimFunc's parameters and its workspace buffers."""

    name: str
    params: list[Buffer]
    workspace: list[Buffer]
    kernels: list[PrimFunc]       # attrs["grid"], attrs["block"]: (x, y, z)

    @property
    def workspace_bytes(self) -> int:
        return sum(_aligned(b.nbytes) for b in self.workspace)


WORKSPACE_ALIGN = 256


def _aligned(n: int) -> int:
    return -(-n // WORKSPACE_ALIGN) * WORKSPACE_ALIGN


def workspace_layout(workspace: list[Buffer]) -> dict[Buffer, int]:
    """Byte offsets of the workspace buffers inside one workspace region."""
    out, at = {}, 0
    for b in workspace:
        out[b] = at
        at += _aligned(b.nbytes)
    return out


def launch_dims(body: Stmt) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block): per axis, the largest extent of a loop bound to it (1 when none)."""
    grid, block = [1, 1, 1], [1, 1, 1]
    for st in walk_stmts(body):
        if isinstance(st, For) and st.kind.startswith(("blockIdx", "threadIdx")):
            n = arith.as_const_int(st.extent)
            if n is None:
                continue            # the verifier reports it
            dims = grid if st.kind.startswith("blockIdx") else block
            k = AXES.index(st.kind[-1])
            dims[k] = max(dims[k], n)
    return tuple(grid), tuple(block)


def split_kernels(func: PrimFunc) -> DeviceFunction:
    """Split ``func`` into its device kernels (one per root nest) and workspace buffers."""
    body, workspace = func.body, []
    while isinstance(body, Allocate) and body.buffer.scope == "global":
        workspace.append(body.buffer)
        body = body.body
    nests = body.stmts if isinstance(body, Seq) else [body]
    nests = [n for n in nests if n is not None]
    known = [*func.params, *workspace]
    kernels = []
    for k, nest in enumerate(nests):
        used = {id(b) for b in buffers_used(nest)}
        params = [b for b in known if id(b) in used]
        grid, block = launch_dims(nest)
        name = func.name if len(nests) == 1 else f"{func.name}_{k}"
        kernels.append(PrimFunc(name, params, nest, {"grid": grid, "block": block}))
    return DeviceFunction(func.name, list(func.params), workspace, kernels)

"""The state of the LLVM function being emitted: its builder, its alloca block, and what the
loop IR's variables and buffers are bound to in it."""
from __future__ import annotations

from llvmlite import ir

from tensorc.codegen.llvm.index_cache import IndexCache
from tensorc.codegen.llvm.ir_types import PTR


def opaque(value: ir.Value) -> ir.Value:
    """llvmlite's IR layer still types allocas and globals as typed pointers; LLVM 15+ has
    only opaque ones, so retype them."""
    value.type = PTR
    return value


class FunctionState:
    """Per LLVM-function state: builder, alloca block, variable and buffer bindings."""

    def __init__(self, fn: ir.Function, env: dict, buffers: dict):
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.builder = ir.IRBuilder(body)
        self.env = env          # Var -> ir.Value (scalar or vector)
        self.buffers = buffers  # Buffer -> ptr
        self.ranges: dict = {}  # Var -> (lo, hi) of the loops being emitted
        self.allocated: dict = {}   # local Buffer -> elements allocated (with lane padding)
        # index arithmetic emitted once per binding (index_cache.py): kernels over dims only
        self.index: IndexCache | None = None
        # local row blocks of symbolic length whose every vector starting in the row stays
        # in the block (passes/loop/allocations.py hoist_row_blocks)
        self.row_slack: set = set()

    def close(self) -> None:
        """Branch from the alloca block into the body, once the body is emitted."""
        ir.IRBuilder(self.entry).branch(self.fn.blocks[1])

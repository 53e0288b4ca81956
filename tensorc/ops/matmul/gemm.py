"""The GEMM template's view of a group: its shape and packed operands (:class:`Gemm`), and
the operands a product stage reads.

The template (``space.py``, ``schedule.py``) serves every GEMM-shaped group: a matmul, a
pointwise or im2col conv, Winograd's batched GEMMs.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorc.ir import expr as E
from tensorc.ir import te


@dataclass(frozen=True)
class Gemm:
    """What the GEMM template knows of a group: ``out[*batch, i, j] = epilogue(C)`` with
    ``C[*batch, i, j] = sum(A[.., i, k] * B[.., k, j] for k)``, M x N x K. A constant A may
    come packed into mr-row panels [M/mr, K, mr] (``a_panel``: a conv's weights), a constant
    B into nr-column panels [N/nr, K, nr] (``b_panel``); ``k_blockable``: K may be cut
    into blocks (a matmul's, with or without an epilogue, and Winograd's)."""

    m: int
    n: int
    k: int
    batched: bool = False
    a_panel: int = 0
    b_panel: int = 0
    same_operands: bool = False     # x @ x: one tensor is both A and B
    itemsize: int = 4
    packable_b: bool = True         # B is a [.., K, N] tensor that pack_b may copy in panels
    k_blockable: bool = False
    symbolic_k: bool = False        # K is a symbolic dim (m, n, k are then at the hints)
    symbolic_m: bool = False        # M is a symbolic dim (a batch * sequence of rows)
    symbolic_n: bool = False        # N is a symbolic dim

    @classmethod
    def of_matmul(cls, out: te.Tensor, mm: te.Tensor, attrs: dict) -> Gemm:
        if not mm.op.reduce_axis:
            mm = mm.op.input_tensors()[0]
        # symbolic dims at their hints (te.hint): the template's choices, valid at any value
        m, n = (te.hint(d) for d in out.shape[-2:])
        depth = mm.op.reduce_axis[0].extent
        nr = attrs.get("b_panel") or 0
        return cls(m, n, te.hint(depth), batched=out.ndim > 2, b_panel=nr,
                   k_blockable=True, symbolic_k=not isinstance(depth, int),
                   symbolic_m=not isinstance(out.shape[-2], int),
                   symbolic_n=not isinstance(out.shape[-1], int),
                   same_operands=not nr and first_operand(mm.op.body) is second_operand(mm.op.body),
                   itemsize=4 if out.dtype == "float32" else 8)


def second_operand(body) -> te.Tensor:
    """The right operand read by a product's reduction (the second tensor it loads): a
    matmul's B, a conv's weights."""
    loads = [x for x in E.walk(body.source if isinstance(body, E.Reduce) else body)
             if isinstance(x, E.Load) and isinstance(x.source, te.Tensor)]
    return loads[1].source


def first_operand(body) -> te.Tensor:
    """The left operand read by a matmul stage's reduction (the first tensor it loads)."""
    for load in E.walk(body.source if isinstance(body, E.Reduce) else body):
        if isinstance(load, E.Load) and isinstance(load.source, te.Tensor):
            return load.source
    raise ValueError("matmul stage reads no tensor")

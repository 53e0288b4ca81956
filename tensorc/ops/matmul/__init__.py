"""The matmul op (``op.py``) and the GEMM template that schedules it and every other
GEMM-shaped group (pointwise and im2col convs, Winograd's GEMMs): the register tile and B's
packed panels (``tile.py``), the group's GEMM description (``gemm.py``), the search space and
its default rules (``space.py``), the BLIS-style schedule (``schedule.py``)."""

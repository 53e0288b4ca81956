"""Convolution: the op (``op.py``), its formulations in one table (``formulations.py``), one
file each, and the strategy that picks among them (``strategy.py``)."""

"""Pooling: max_pool and avg_pool (``op.py``) with their formulations in one table
(``formulations.py``) and the choice among them (``strategy.py``), and lp_pool (``lp.py``)."""

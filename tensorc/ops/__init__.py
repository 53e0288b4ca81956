"""Core ops: each family module registers its ops in :mod:`tensorc.ops.registry`."""
from tensorc.ops.registry import REGISTRY, OpDef, Pattern, define, get_op

__all__ = ["REGISTRY", "OpDef", "Pattern", "define", "get_op"]

"""Every core op, registered, and the lookup the other layers use: the CPU families
(``ops/families.py``) and then the GPU templates that extend their entries (``ops/gpu/``).

>>> get_op("conv").pattern
<Pattern.OUT_ELEMWISE_FUSABLE: 4>
"""
from __future__ import annotations

from tensorc.ops import families, gpu  # noqa: F401  (importing them fills the registry)
from tensorc.ops.registry import REGISTRY, OpDef


def get_op(name: str) -> OpDef:
    """The registry entry of core op ``name``; a KeyError names an unknown op."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no core op named {name!r}") from None

"""Core ops: each family module registers its ops in :mod:`tensorc.ops.registry`;
:mod:`tensorc.ops.catalog` imports them all and looks ops up."""

"""The tensorc version: written into every artifact, printed by ``tensorc --version``."""

__version__ = "0.1.0"

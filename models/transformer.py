"""Transformer building blocks (tensorc/examples/transformer.py, where the example BERT is
built), shared with the GPT-2-style and ViT test models."""

from tensorc.examples.transformer import TransformerBuilder  # noqa: F401

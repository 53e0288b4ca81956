"""Transformer building blocks shared by the BERT-style and GPT-2-style test models.

Everything is spelled the way PyTorch's ONNX exporter spells it: LayerNormalization,
MatMul + Add for linear layers, Reshape/Transpose to split heads, Softmax over the last axis,
GELU as its Erf formula (BERT) or its Tanh approximation (GPT-2).
"""

from __future__ import annotations

import numpy as np

from tensorc.examples.builder import GraphBuilder


class TransformerBuilder(GraphBuilder):
    def __init__(self, seed: int, hidden: int, heads: int) -> None:
        super().__init__(seed)
        self.hidden, self.heads = hidden, heads

    def weight(self, name: str, shape: tuple[int, ...], scale: float) -> str:
        return self.constant(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        w = self.weight("linear_weight", (n_in, n_out), 1.0 / np.sqrt(n_in))
        b = self.weight("linear_bias", (n_out,), 0.02)
        return self.node("Add", [self.node("MatMul", [x, w]), b])

    def layer_norm(self, x: str) -> str:
        gamma = self.constant("ln_gamma", (1 + 0.1 * self.rng.standard_normal(self.hidden))
                              .astype(np.float32))
        beta = self.weight("ln_beta", (self.hidden,), 0.1)
        return self.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)

    def gelu_erf(self, x: str) -> str:
        """x * 0.5 * (1 + erf(x / sqrt(2)))."""
        scaled = self.node("Div", [x, self.constant("sqrt2", np.array(np.sqrt(2), np.float32))])
        one = self.constant("one", np.array(1, np.float32))
        half = self.constant("half", np.array(0.5, np.float32))
        inner = self.node("Add", [self.node("Erf", [scaled]), one])
        return self.node("Mul", [self.node("Mul", [x, half]), inner])

    def gelu_tanh(self, x: str) -> str:
        """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))."""
        cube = self.node("Pow", [x, self.constant("three", np.array(3, np.float32))])
        inner = self.node("Add", [x, self.node("Mul", [
            cube, self.constant("c", np.array(0.044715, np.float32))])])
        inner = self.node("Mul", [inner, self.constant(
            "k", np.array(np.sqrt(2 / np.pi), np.float32))])
        t = self.node("Add", [self.node("Tanh", [inner]),
                              self.constant("one", np.array(1, np.float32))])
        return self.node("Mul", [self.node("Mul", [
            x, self.constant("half", np.array(0.5, np.float32))]), t])

    def split_heads(self, x: str) -> str:
        """[B, S, H*D] -> [B, H, S, D] (the 0 in the shape copies B from the input)."""
        d = self.hidden // self.heads
        shape = self.constant("heads_shape", np.array([0, -1, self.heads, d], np.int64))
        return self.node("Transpose", [self.node("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    def merge_heads(self, x: str) -> str:
        shape = self.constant("merge_shape", np.array([0, -1, self.hidden], np.int64))
        return self.node("Reshape", [self.node("Transpose", [x], perm=[0, 2, 1, 3]), shape])

    def attention(self, x: str, bias: str | None = None, keep: str | None = None) -> str:
        """Multi-head self-attention. ``bias`` [.., S, S] is added to the scores (a padding
        mask); where the bool ``keep`` [.., S, S] is false the score becomes -10000 (a
        causal mask)."""
        q, k, v = (self.split_heads(self.linear(x, self.hidden, self.hidden)) for _ in range(3))
        scores = self.node("MatMul", [q, self.node("Transpose", [k], perm=[0, 1, 3, 2])])
        scale = self.constant("scale", np.array(np.sqrt(self.hidden // self.heads),
                                                np.float32))
        scores = self.node("Div", [scores, scale])
        if bias is not None:
            scores = self.node("Add", [scores, bias])
        if keep is not None:
            masked = self.constant("masked", np.array(-10000, np.float32))
            scores = self.node("Where", [keep, scores, masked])
        probs = self.node("Softmax", [scores], axis=-1)
        context = self.merge_heads(self.node("MatMul", [probs, v]))
        return self.linear(context, self.hidden, self.hidden)

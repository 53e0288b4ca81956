"""Transformer ops (Attention, RotaryEmbedding, SwiGLU, CausalConvWithState, LinearAttention),
compiled by tensorc and run natively, against numpy references written here."""
from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make_model, tensor_info
from onnx import TensorProto, helper

import tensorc

RTOL, ATOL = 1e-4, 1e-5


def rand(shape, seed=0, low=-1.0, high=1.0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def run_node(node, feeds: dict[str, np.ndarray], outputs, opset: int) -> dict[str, np.ndarray]:
    inputs = [tensor_info(n, a.dtype.name, a.shape) for n, a in feeds.items()]
    model = make_model([node], inputs, list(outputs), opset=opset)
    return tensorc.compile(model).run(feeds)


# ---------------------------------------------------------------------------------------------
# numpy references

def softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row of -inf only gives zeros."""
    peak = np.max(x, axis=-1, keepdims=True)
    peak = np.where(np.isneginf(peak), 0.0, peak)
    e = np.exp(x - peak)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def attention_ref(q, k, v, *, mask=None, past_k=None, past_v=None, nonpad=None, causal=False,
                  scale=None, softcap=0.0, q_heads=None, kv_heads=None, left=-1, right=-1):
    """Scaled dot-product attention in float64: (Y, present_k, present_v, qk modes 0-3)."""
    three_d = q.ndim == 3

    def heads(x, n):  # [B, S, n*D] -> [B, n, S, D]
        b, s, hidden = x.shape
        return x.reshape(b, s, n, hidden // n).transpose(0, 2, 1, 3)
    if three_d:
        q, k, v = heads(q, q_heads), heads(k, kv_heads), heads(v, kv_heads)
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    if past_k is not None:
        k = np.concatenate([past_k, k], axis=2)
        v = np.concatenate([past_v, v], axis=2)
    present_k, present_v = k, v
    batch, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    group = hq // hkv
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / math.sqrt(d) if scale is None else scale
    raw = (q @ k.transpose(0, 1, 3, 2)) * scale
    capped = softcap * np.tanh(raw / softcap) if softcap > 0 else raw
    # allowed[b, i, j]: query i of batch b may attend key j
    i = np.arange(sq)[None, :, None]
    j = np.arange(skv)[None, None, :]
    past = 0 if past_k is None else past_k.shape[2]
    offset = (np.asarray(nonpad)[:, None, None] - sq) if nonpad is not None else past
    allowed = np.ones((batch, sq, skv), dtype=bool)
    if causal:
        allowed &= j <= i + offset
    if left >= 0:
        allowed &= j >= i + offset - left
    if right >= 0:
        allowed &= j <= i + offset + right
    if nonpad is not None:
        allowed &= j < np.asarray(nonpad)[:, None, None]
    bias = np.where(allowed, 0.0, -np.inf)[:, None]  # [B, 1, Sq, Skv]
    if mask is not None:
        missing = skv - mask.shape[-1]
        widths = [(0, 0)] * (mask.ndim - 1) + [(0, missing)]
        if mask.dtype == bool:
            mask = np.pad(mask, widths, constant_values=False)
            bias = bias + np.where(mask, 0.0, -np.inf)
        else:
            bias = bias + np.pad(mask.astype(np.float64), widths, constant_values=-np.inf)
    biased = capped + bias
    probs = softmax_rows(biased)
    probs = np.where(np.isneginf(np.max(bias, axis=-1, keepdims=True)), 0.0, probs)
    y = probs @ v
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(batch, sq, -1)
    full = (batch, hq, sq, skv)
    qk = [np.broadcast_to(t, full) for t in (raw, capped, biased, probs)]
    return y, present_k, present_v, qk


def attention_node(inputs, outputs=("Y",), **attrs):
    return helper.make_node("Attention", list(inputs), list(outputs), **attrs)


def check(got, want, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------
# Attention

def test_attention_4d_multi_head():
    q, k, v = rand((2, 3, 5, 8), 1), rand((2, 3, 7, 8), 2), rand((2, 3, 7, 6), 3)
    out = run_node(attention_node("QKV"), {"Q": q, "K": k, "V": v}, ["Y"], opset=23)
    check(out["Y"], attention_ref(q, k, v)[0])


def test_attention_3d_grouped_query_causal_short_bool_mask():
    # 6 query heads share 2 kv heads; the bool mask covers 5 of the 7 keys (the rest pad to
    # False), and its first row is fully masked: that row of Y must be zeros
    q, k, v = rand((2, 4, 6 * 4), 1), rand((2, 7, 2 * 4), 2), rand((2, 7, 2 * 3), 3)
    mask = rand((4, 5), 4) > -0.3
    mask[0] = False
    node = attention_node(["Q", "K", "V", "M"], q_num_heads=6, kv_num_heads=2, is_causal=1)
    out = run_node(node, {"Q": q, "K": k, "V": v, "M": mask}, ["Y"], opset=23)
    want = attention_ref(q, k, v, mask=mask, causal=True, q_heads=6, kv_heads=2)[0]
    check(out["Y"], want)
    assert not np.any(out["Y"][:, 0]) and np.all(np.isfinite(out["Y"]))


def test_attention_past_and_present_with_rank3_float_mask():
    q, k, v = rand((2, 2, 3, 4), 1), rand((2, 2, 3, 4), 2), rand((2, 2, 3, 5), 3)
    past_k, past_v = rand((2, 2, 4, 4), 4), rand((2, 2, 4, 5), 5)
    mask = rand((2, 3, 7), 6)  # (heads, q, keys), broadcast over the batch
    node = attention_node(["Q", "K", "V", "M", "PK", "PV"], ["Y", "PKo", "PVo"], is_causal=1,
                          scale=0.3)
    feeds = {"Q": q, "K": k, "V": v, "M": mask, "PK": past_k, "PV": past_v}
    out = run_node(node, feeds, ["Y", "PKo", "PVo"], opset=23)
    y, pk, pv, _ = attention_ref(q, k, v, mask=mask, past_k=past_k, past_v=past_v,
                                 causal=True, scale=0.3)
    check(out["Y"], y)
    np.testing.assert_array_equal(out["PKo"], pk.astype(np.float32))
    np.testing.assert_array_equal(out["PVo"], pv.astype(np.float32))


def test_attention_nonpad_kv_seqlen_causal_at_run_time():
    # external cache: 6 key slots, of which 5 and 2 hold tokens; batch 1 has fewer keys
    # than queries, so its first query row sees nothing
    q, k, v = rand((2, 2, 3, 4), 1), rand((2, 2, 6, 4), 2), rand((2, 2, 6, 4), 3)
    nonpad = np.array([5, 2], dtype=np.int64)
    node = attention_node(["Q", "K", "V", "", "", "", "L"], is_causal=1)
    out = run_node(node, {"Q": q, "K": k, "V": v, "L": nonpad}, ["Y"], opset=24)
    check(out["Y"], attention_ref(q, k, v, nonpad=nonpad, causal=True)[0])
    assert not np.any(out["Y"][1, :, 0])


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_softcap_and_qk_outputs(mode):
    q, k, v = rand((1, 2, 3, 4), 1, -3, 3), rand((1, 2, 5, 4), 2, -3, 3), rand((1, 2, 5, 4), 3)
    mask = rand((3, 5), 4)
    node = attention_node(["Q", "K", "V", "M"], ["Y", "", "", "QK"], softcap=1.5,
                          qk_matmul_output_mode=mode)
    out = run_node(node, {"Q": q, "K": k, "V": v, "M": mask}, ["Y", "QK"], opset=23)
    y, _, _, qk = attention_ref(q, k, v, mask=mask, softcap=1.5)
    check(out["Y"], y)
    check(out["QK"], qk[mode])


def test_attention_sliding_window():
    q, k, v = rand((1, 2, 6, 4), 1), rand((1, 2, 6, 4), 2), rand((1, 2, 6, 4), 3)
    node = attention_node("QKV", left_window_size=1, right_window_size=2)
    out = run_node(node, {"Q": q, "K": k, "V": v}, ["Y"], opset=25)
    check(out["Y"], attention_ref(q, k, v, left=1, right=2)[0])


def test_attention_float16_softmax_in_float32():
    q, k, v = (rand(s, i, dtype=np.float16) for i, s in
               enumerate([(1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8)]))
    node = attention_node("QKV", is_causal=1, softmax_precision=TensorProto.FLOAT)
    out = run_node(node, {"Q": q, "K": k, "V": v}, ["Y"], opset=23)
    assert out["Y"].dtype == np.float16
    check(out["Y"], attention_ref(q, k, v, causal=True)[0], rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------------------------------------
# RotaryEmbedding

def rotary_ref(x, cos, sin, position_ids=None, interleaved=False, dim=0, num_heads=0):
    """RoPE in float64 on [B, S, H, D] (4-D inputs are [B, H, S, D])."""
    shape = x.shape
    x = x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(*shape[:2], num_heads, -1)
    x = x.astype(np.float64)
    dim = dim or x.shape[-1]
    if position_ids is not None:
        cos, sin = cos[position_ids], sin[position_ids]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    out = x.copy()
    evens = np.arange(0, dim, 2) if interleaved else np.arange(dim // 2)
    odds = evens + 1 if interleaved else evens + dim // 2
    a, b = x[..., evens], x[..., odds]
    out[..., evens] = cos * a - sin * b
    out[..., odds] = sin * a + cos * b
    return out.transpose(0, 2, 1, 3) if len(shape) == 4 else out.reshape(shape)


@pytest.mark.parametrize("interleaved,dim", [(0, 0), (1, 0), (0, 4), (1, 6)])
def test_rotary_embedding_4d_with_positions(interleaved, dim):
    x = rand((2, 3, 5, 10), 1)
    half = (dim or 10) // 2
    cos, sin = rand((16, half), 2), rand((16, half), 3)
    positions = np.random.default_rng(4).integers(0, 16, size=(2, 5)).astype(np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                            interleaved=interleaved, rotary_embedding_dim=dim)
    out = run_node(node, {"x": x, "cos": cos, "sin": sin, "pos": positions}, ["y"], opset=23)
    check(out["y"], rotary_ref(x, cos, sin, positions, bool(interleaved), dim))


def test_rotary_embedding_3d_without_positions():
    x = rand((2, 5, 3 * 8), 1)
    cos, sin = rand((2, 5, 4), 2), rand((2, 5, 4), 3)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], num_heads=3,
                            interleaved=1)
    out = run_node(node, {"x": x, "cos": cos, "sin": sin}, ["y"], opset=23)
    check(out["y"], rotary_ref(x, cos, sin, None, True, 0, num_heads=3))


# ---------------------------------------------------------------------------------------------
# SwiGLU, CausalConvWithState, LinearAttention

def test_swiglu_alpha():
    a, b = rand((3, 17), 1, -4, 4), rand((3, 17), 2)
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=0.7)
    out = run_node(node, {"a": a, "b": b}, ["y"], opset=28)
    a64 = a.astype(np.float64)
    check(out["y"], a64 / (1 + np.exp(-0.7 * a64)) * b)


@pytest.mark.parametrize("with_past", [False, True])
def test_causal_conv_with_state(with_past):
    x, w, bias = rand((2, 3, 5), 1), rand((3, 1, 4), 2), rand((3,), 3)
    past = rand((2, 3, 3), 4) if with_past else np.zeros((2, 3, 3), np.float32)
    names = ["x", "w", "b", "p"] if with_past else ["x", "w", "b"]
    node = helper.make_node("CausalConvWithState", names, ["y", "state"], activation="silu")
    feeds = {"x": x, "w": w, "b": bias} | ({"p": past} if with_past else {})
    out = run_node(node, feeds, ["y", "state"], opset=27)
    padded = np.concatenate([past, x], axis=2).astype(np.float64)
    conv = np.stack([sum(padded[:, :, t + i] * w[:, 0, i] for i in range(4))
                     for t in range(5)], axis=2) + bias[:, None]
    check(out["y"], conv / (1 + np.exp(-conv)))
    np.testing.assert_array_equal(out["state"], padded[:, :, -3:].astype(np.float32))


def test_linear_attention_gated_delta_grouped_with_past():
    b, t, hq, hkv, dk, dv = 2, 3, 4, 2, 3, 5
    q, k, v = rand((b, t, hq * dk), 1), rand((b, t, hkv * dk), 2), rand((b, t, hkv * dv), 3)
    decay, beta = rand((b, t, hkv), 4, -1, 0), rand((b, t, hkv), 5, 0, 1)
    past = rand((b, hkv, dk, dv), 6)
    node = helper.make_node("LinearAttention", ["q", "k", "v", "s", "g", "beta"],
                            ["y", "state"], q_num_heads=hq, kv_num_heads=hkv,
                            update_rule="gated_delta")
    feeds = {"q": q, "k": k, "v": v, "s": past, "g": decay, "beta": beta}
    out = run_node(node, feeds, ["y", "state"], opset=27)
    state = past.astype(np.float64)
    want = np.zeros((b, t, hq, dv))
    for step in range(t):
        k_t = k[:, step].reshape(b, hkv, dk)
        v_t = v[:, step].reshape(b, hkv, dv)
        state = state * np.exp(decay[:, step])[:, :, None, None]
        retrieved = np.einsum("bhkv,bhk->bhv", state, k_t)
        v_t = beta[:, step][:, :, None] * (v_t - retrieved)
        state = state + k_t[..., :, None] * v_t[..., None, :]
        q_t = q[:, step].reshape(b, hq, dk)
        shared = np.repeat(state, hq // hkv, axis=1)
        want[:, step] = np.einsum("bhk,bhkv->bhv", q_t, shared) / math.sqrt(dk)
    check(out["y"], want.reshape(b, t, hq * dv))
    check(out["state"], state)

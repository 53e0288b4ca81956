"""Converters of ONNX transformer ops: Attention, RotaryEmbedding, SwiGLU.

Each decomposes into core ops (matmul, softmax, where, slice, concat, gather, ...), so the
fusion pass sees ordinary kernels: the two matmuls of attention are the anchors, the scaling,
softcap, bias and masks fuse into their prologues and epilogues.

Masks that depend only on shapes and attributes (causal, sliding window, a past-key offset)
are built here as constants; only ``nonpad_kv_seqlen`` and a run-time ``attn_mask`` make the
bias a run-time tensor.
"""
from __future__ import annotations

import math

import numpy as np

from tensorc.errors import ShapeError
from tensorc.frontend.converters.common import reshape
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.graph import Value

# float16 and bfloat16 softmax runs as separate max / exp / sum / div ops, each rounded to the
# half type, which is what the spec's "softmax in the precision of its input" computes
HALVES = ("float16", "bfloat16")


def _cast(ctx: ImportContext, x: Value, dtype: str) -> Value:
    return x if x.type.dtype == dtype else ctx.emit("cast", [x], dtype=dtype)


def _full(ctx: ImportContext, value: float, dtype: str) -> Value:
    """A scalar constant of ``dtype`` (numpy rounds ``value`` into it)."""
    return ctx.const(np.asarray(value).astype(dtype))


def _split_heads(ctx: ImportContext, x: Value, heads: int | None, what: str) -> Value:
    """[batch, seq, heads * size] -> [batch, heads, seq, size]; 4-D inputs pass through."""
    if x.type.ndim == 4:
        return x
    if x.type.ndim != 3:
        raise ShapeError(f"Attention: {what} must be 3-D or 4-D, got {x.type}")
    batch, seq, hidden = x.type.shape
    if not heads or hidden % heads:
        raise ShapeError(f"Attention: {what} {x.type} with 3-D inputs needs q_num_heads and "
                         f"kv_num_heads that divide its hidden size (got {heads})")
    x = reshape(ctx, x, (batch, seq, heads, hidden // heads))
    return ctx.emit("transpose", [x], perm=(0, 2, 1, 3))


def _grouped_matmul(ctx: ImportContext, a: Value, b: Value) -> Value:
    """``a @ b`` for a [B, Hq, M, K] and b [B, Hkv, K, N] where query heads share key/value
    heads in groups (Hq = g * Hkv, head h reads kv head h // g): a is viewed as
    [B, Hkv, g, M, K], b as [B, Hkv, 1, K, N], so matmul broadcasting does the sharing
    without copying b g times."""
    batch, q_heads, m, k = a.type.shape
    kv_heads, n = b.type.shape[1], b.type.shape[3]
    dtype = a.type.dtype
    if dtype in HALVES:
        # accumulate in float32 and round once (the matmul kernel would accumulate in the
        # half type, losing bits the spec's reference keeps)
        a, b = _cast(ctx, a, "float32"), _cast(ctx, b, "float32")
    if q_heads == kv_heads:
        return _cast(ctx, ctx.emit("matmul", [a, b]), dtype)
    if kv_heads == 0 or q_heads % kv_heads:
        raise ShapeError(f"Attention: q_num_heads {q_heads} must be a multiple of "
                         f"kv_num_heads {kv_heads}")
    group = q_heads // kv_heads
    a5 = reshape(ctx, a, (batch, kv_heads, group, m, k))
    b5 = reshape(ctx, b, (b.type.shape[0], kv_heads, 1, k, n))
    product = reshape(ctx, ctx.emit("matmul", [a5, b5]), (batch, q_heads, m, n))
    return _cast(ctx, product, dtype)


def _pad_keys(ctx: ImportContext, mask: Value, total: int, value: float | bool) -> Value:
    """Pad the key axis (last) of ``mask`` up to ``total`` with ``value``."""
    missing = total - mask.type.shape[-1]
    if missing < 0:
        raise ShapeError(f"Attention: attn_mask {mask.type} is longer than the "
                         f"{total} keys")
    if missing == 0:
        return mask
    ndim = mask.type.ndim
    pads = (0,) * ndim + (0,) * (ndim - 1) + (missing,)
    return ctx.emit("pad", [mask], pads=pads, mode="constant", value=value)


def _allowed_keys(ctx: ImportContext, q_len: int, kv_len: int, past: int,
                  nonpad: Value | None, is_causal: bool, left: int, right: int
                  ) -> Value | None:
    """Which keys each query may attend (bool, broadcastable to [B, 1, q_len, kv_len]) from
    is_causal, the sliding window and nonpad_kv_seqlen; None when all may.

    A query at in-block index i sits at absolute position i + offset, offset being the
    number of keys before the block: the past length, or nonpad_kv_seqlen - q_len per batch
    for an external cache."""
    windowed = left >= 0 or right >= 0
    if not (is_causal or windowed or nonpad is not None):
        return None
    # diff[i, j] = j - i; every rule is a comparison of diff with the offset
    diff = np.arange(kv_len)[None, :] - np.arange(q_len)[:, None]
    if nonpad is None:
        allowed = np.ones((q_len, kv_len), dtype=bool)
        if is_causal:
            allowed &= diff <= past
        if left >= 0:
            allowed &= diff >= past - left
        if right >= 0:
            allowed &= diff <= past + right
        return ctx.const(allowed)
    batch = nonpad.type.shape[0] if nonpad.type.ndim else 1
    lengths = reshape(ctx, _cast(ctx, nonpad, "int64"), (batch, 1, 1, 1))
    keys = ctx.const(np.arange(kv_len, dtype=np.int64).reshape(1, 1, 1, kv_len))
    allowed = ctx.emit("less", [keys, lengths])  # the padding mask
    terms = []
    if is_causal or windowed:
        offset = ctx.emit("sub", [lengths, ctx.const(np.array(q_len, dtype=np.int64))])
        diff_v = ctx.const(diff.astype(np.int64))
        if is_causal:
            terms.append(ctx.emit("less_equal", [diff_v, offset]))
        if left >= 0:
            bound = ctx.emit("sub", [offset, ctx.const(np.array(left, dtype=np.int64))])
            terms.append(ctx.emit("greater_equal", [diff_v, bound]))
        if right >= 0:
            bound = ctx.emit("add", [offset, ctx.const(np.array(right, dtype=np.int64))])
            terms.append(ctx.emit("less_equal", [diff_v, bound]))
    for term in terms:
        allowed = ctx.emit("logical_and", [allowed, term])
    return allowed


def _attention_bias(ctx: ImportContext, mask: Value | None, allowed: Value | None,
                    kv_len: int, dtype: str) -> Value | None:
    """The additive bias of the scores (0 where allowed, -inf where not, plus a float mask);
    None when there is nothing to add."""
    if mask is not None and mask.type.dtype == "bool":
        mask = _pad_keys(ctx, mask, kv_len, False)
        allowed = mask if allowed is None else ctx.emit("logical_and", [mask, allowed])
        mask = None
    elif mask is not None:  # additive (an integer mask adds too)
        mask = _pad_keys(ctx, _cast(ctx, mask, dtype), kv_len, -math.inf)
    if allowed is None:
        return mask
    bias = ctx.emit("where", [allowed, _full(ctx, 0.0, dtype), _full(ctx, -math.inf, dtype)])
    return bias if mask is None else ctx.emit("add", [mask, bias])


def _softmax(ctx: ImportContext, x: Value) -> Value:
    """Softmax over the last axis."""
    axis = x.type.ndim - 1
    if x.type.dtype not in HALVES:
        return ctx.emit("softmax", [x], axis=axis)
    # one rounding per step, as the spec's half-precision softmax does
    peak = ctx.emit("reduce_max", [x], axes=(axis,), keepdims=True)
    exps = ctx.emit("exp", [ctx.emit("sub", [x, peak])])
    # the sum accumulates in float32 and is rounded once (reduce_sum would accumulate in the
    # half type)
    total = ctx.emit("reduce_sum", [_cast(ctx, exps, "float32")], axes=(axis,), keepdims=True)
    total = _cast(ctx, total, x.type.dtype)
    return ctx.emit("div", [exps, total])


def _attention(ctx: ImportContext, inputs: list[Value | None], *, is_causal: int,
               kv_num_heads: int | None, q_num_heads: int | None,
               qk_matmul_output_mode: int, scale: float | None, softcap: float,
               softmax_precision: int | None, left_window_size: int = -1,
               right_window_size: int = -1
               ) -> tuple[Value, Value, Value, Value]:
    q, k, v, mask, past_key, past_value, nonpad = (list(inputs) + [None] * 7)[:7]
    dtype = q.type.dtype
    three_d = q.type.ndim == 3
    if (past_key is None) != (past_value is None):
        raise ShapeError("Attention: past_key and past_value must be given together")
    if past_key is not None and nonpad is not None:
        raise ShapeError("Attention: nonpad_kv_seqlen (an external cache) cannot be combined "
                         "with past_key / past_value (an internal one)")
    if not q.type.ndim == k.type.ndim == v.type.ndim:
        raise ShapeError(f"Attention: Q, K and V must have the same rank, got {q.type}, "
                         f"{k.type} and {v.type}")
    q = _split_heads(ctx, q, q_num_heads, "Q")
    k = _split_heads(ctx, k, kv_num_heads, "K")
    v = _cast(ctx, _split_heads(ctx, v, kv_num_heads, "V"), dtype)
    past = 0
    if past_key is not None:
        past = past_key.type.shape[2]
        k = ctx.emit("concat", [past_key, k], axis=2)
        v = ctx.emit("concat", [_cast(ctx, past_value, dtype), v], axis=2)
    present_key, present_value = k, v
    batch, q_heads, q_len, head_size = q.type.shape
    kv_len = k.type.shape[2]

    # Q and K are each scaled by sqrt(scale), rounded to the input type, before the matmul
    scale = 1.0 / math.sqrt(head_size) if scale is None else float(scale)
    root = _full(ctx, math.sqrt(scale), dtype)
    k_t = ctx.emit("transpose", [ctx.emit("mul", [k, root])], perm=(0, 1, 3, 2))
    scores = _grouped_matmul(ctx, ctx.emit("mul", [q, root]), k_t)
    raw_scores = scores
    if softcap > 0:
        cap = _full(ctx, softcap, dtype)
        scores = ctx.emit("mul", [ctx.emit("tanh", [ctx.emit("div", [scores, cap])]), cap])

    allowed = _allowed_keys(ctx, q_len, kv_len, past, nonpad, bool(is_causal),
                            int(left_window_size), int(right_window_size))
    bias = _attention_bias(ctx, mask, allowed, kv_len, dtype)
    biased = scores if bias is None else ctx.emit("add", [scores, bias])

    precision = dtype if softmax_precision is None else ctx.dtype_name(softmax_precision)
    probs = _softmax(ctx, _cast(ctx, biased, precision))
    if bias is not None:
        # A row with no allowed key gives zeros, not NaN; decided on the bias, so that a
        # masked +inf score cannot leak through.
        peak = ctx.emit("reduce_max", [bias], axes=(bias.type.ndim - 1,), keepdims=True)
        empty = ctx.emit("equal", [peak, _full(ctx, -math.inf, dtype)])
        empty_rows = ctx.constant(empty)
        if empty_rows is None or empty_rows.any():
            probs = ctx.emit("where", [empty, _full(ctx, 0.0, precision), probs])
    probs = _cast(ctx, probs, dtype)

    y = _grouped_matmul(ctx, probs, v)
    if three_d:
        y = ctx.emit("transpose", [y], perm=(0, 2, 1, 3))
        y = reshape(ctx, y, (batch, q_len, q_heads * y.type.shape[3]))
    qk_output = {0: raw_scores, 1: scores, 2: biased, 3: probs}.get(int(qk_matmul_output_mode))
    if qk_output is None:
        raise ShapeError(f"Attention: qk_matmul_output_mode {qk_matmul_output_mode} is not "
                         f"0, 1, 2 or 3")
    qk_output = ctx.emit("broadcast_to", [qk_output], shape=(batch, q_heads, q_len, kv_len)) \
        if qk_output.type.shape != (batch, q_heads, q_len, kv_len) else qk_output
    return y, present_key, present_value, qk_output


@converter("Attention", since=23, until=24)
def attention_23(ctx: ImportContext, inputs: list[Value | None], *, is_causal: int = 0,
                 kv_num_heads: int | None = None, q_num_heads: int | None = None,
                 qk_matmul_output_mode: int = 0, scale: float | None = None,
                 softcap: float = 0.0, softmax_precision: int | None = None
                 ) -> tuple[Value, Value, Value, Value]:
    return _attention(ctx, inputs, is_causal=is_causal, kv_num_heads=kv_num_heads,
                      q_num_heads=q_num_heads, qk_matmul_output_mode=qk_matmul_output_mode,
                      scale=scale, softcap=softcap, softmax_precision=softmax_precision)


@converter("Attention", since=25)
def attention_25(ctx: ImportContext, inputs: list[Value | None], *, is_causal: int = 0,
                 kv_num_heads: int | None = None, q_num_heads: int | None = None,
                 qk_matmul_output_mode: int = 0, scale: float | None = None,
                 softcap: float = 0.0, softmax_precision: int | None = None,
                 left_window_size: int = -1, right_window_size: int = -1
                 ) -> tuple[Value, Value, Value, Value]:
    """Opset 25 adds the sliding window (left_window_size, right_window_size)."""
    if inputs[0] is not None and inputs[0].type.ndim == 4 and (q_num_heads or kv_num_heads):
        raise ShapeError("Attention: q_num_heads and kv_num_heads must not be set for 4-D "
                         "inputs")
    for name, size in (("left_window_size", left_window_size),
                       ("right_window_size", right_window_size)):
        if size < -1:
            raise ShapeError(f"Attention: {name} must be -1 or non-negative, got {size}")
    return _attention(ctx, inputs, is_causal=is_causal, kv_num_heads=kv_num_heads,
                      q_num_heads=q_num_heads, qk_matmul_output_mode=qk_matmul_output_mode,
                      scale=scale, softcap=softcap, softmax_precision=softmax_precision,
                      left_window_size=left_window_size, right_window_size=right_window_size)


# ---------------------------------------------------------------------------------------------
# rotary embedding

def _last_axis(ctx: ImportContext, x: Value, start: int, size: int, step: int = 1) -> Value:
    """x[..., start : start + size * step : step]."""
    shape = x.type.shape
    if start == 0 and step == 1 and size == shape[-1]:
        return x
    ndim = x.type.ndim
    return ctx.emit("slice", [x], starts=(0,) * (ndim - 1) + (start,),
                    steps=(1,) * (ndim - 1) + (step,), shape=shape[:-1] + (size,))


@converter("RotaryEmbedding", since=23)
def rotary_embedding(ctx: ImportContext, inputs: list[Value | None], *, interleaved: int = 0,
                     num_heads: int = 0, rotary_embedding_dim: int = 0) -> Value:
    """Rotate pairs of features by position-dependent angles.

    X is [batch, heads, seq, head_size] or [batch, seq, heads * head_size]; it is rotated in
    its own layout (cos / sin get a broadcast axis for the heads), so no transpose is needed.
    """
    x, cos, sin = inputs[:3]
    position_ids = inputs[3] if len(inputs) > 3 else None
    shape = x.type.shape
    if x.type.ndim == 4:
        batch, _, seq, head_size = shape
        work = x
    elif x.type.ndim == 3:
        batch, seq, hidden = shape
        if not num_heads or hidden % num_heads:
            raise ShapeError(f"RotaryEmbedding: a 3-D input {x.type} needs num_heads that "
                             f"divides its hidden size (got {num_heads})")
        head_size = hidden // num_heads
        work = reshape(ctx, x, (batch, seq, num_heads, head_size))
    else:
        raise ShapeError(f"RotaryEmbedding: input must be 3-D or 4-D, got {x.type}")
    rotary = rotary_embedding_dim or head_size
    half = rotary // 2
    if rotary > head_size or rotary % 2:
        raise ShapeError(f"RotaryEmbedding: rotary_embedding_dim {rotary} must be even and "
                         f"at most the head size {head_size}")
    if position_ids is not None:
        cos = ctx.emit("gather", [cos, _cast(ctx, position_ids, "int64")], axis=0)
        sin = ctx.emit("gather", [sin, _cast(ctx, position_ids, "int64")], axis=0)
    for cache in (cos, sin):
        if cache.type.shape[-1] != half:
            raise ShapeError(f"RotaryEmbedding: the cos / sin caches {cache.type} must end in "
                             f"rotary_embedding_dim / 2 = {half}")
    # [batch, seq, half] -> broadcast over the heads axis of the working layout
    heads_axis_shape = ((batch, 1, seq, half) if x.type.ndim == 4 else (batch, seq, 1, half))
    cos = reshape(ctx, _cast(ctx, cos, x.type.dtype), heads_axis_shape)
    sin = reshape(ctx, _cast(ctx, sin, x.type.dtype), heads_axis_shape)

    rotated = _last_axis(ctx, work, 0, rotary)
    if interleaved:
        x1, x2 = _last_axis(ctx, rotated, 0, half, 2), _last_axis(ctx, rotated, 1, half, 2)
    else:
        x1, x2 = _last_axis(ctx, rotated, 0, half), _last_axis(ctx, rotated, half, half)
    real = ctx.emit("sub", [ctx.emit("mul", [cos, x1]), ctx.emit("mul", [sin, x2])])
    imag = ctx.emit("add", [ctx.emit("mul", [sin, x1]), ctx.emit("mul", [cos, x2])])
    if interleaved:  # real and imag alternate: stack on a new last axis, then merge
        pairs = [reshape(ctx, t, t.type.shape + (1,)) for t in (real, imag)]
        out = reshape(ctx, ctx.emit("concat", pairs, axis=4), rotated.type.shape)
    else:
        out = ctx.emit("concat", [real, imag], axis=3)
    if rotary < head_size:
        out = ctx.emit("concat", [out, _last_axis(ctx, work, rotary, head_size - rotary)],
                       axis=3)
    return reshape(ctx, out, shape)


# ---------------------------------------------------------------------------------------------
# gated activations

@converter("SwiGLU", since=28)
def swiglu(ctx: ImportContext, inputs: list[Value], *, alpha: float = 1.0) -> Value:
    """Y = A * sigmoid(alpha * A) * B (A and B have one shape)."""
    a, b = inputs
    if a.type != b.type:
        raise ShapeError(f"SwiGLU: A {a.type} and B {b.type} must have the same shape and "
                         f"type (no broadcasting)")
    return ctx.emit("mul", [ctx.emit("swish", [a], alpha=float(alpha)), b])


# ---------------------------------------------------------------------------------------------
# recurrent (state-space style) ops

@converter("CausalConvWithState", since=27)
def causal_conv_with_state(ctx: ImportContext, inputs: list[Value | None], *,
                           activation: str = "none") -> tuple[Value, Value]:
    """Depthwise causal 1-D convolution over [past_state, input]; the new state is the last
    k - 1 positions of that concatenation."""
    x, weight = inputs[:2]
    bias = inputs[2] if len(inputs) > 2 else None
    past = inputs[3] if len(inputs) > 3 else None
    if activation not in ("none", "silu", "swish"):
        raise ShapeError(f"CausalConvWithState: activation {activation!r} is not one of "
                         f"'none', 'silu', 'swish'")
    if x.type.ndim != 3 or weight.type.ndim != 3:
        raise ShapeError(f"CausalConvWithState: input {x.type} and weight {weight.type} must "
                         f"be rank 3")
    batch, channels, length = x.type.shape
    k = weight.type.shape[2]
    if past is None:
        padded = ctx.emit("pad", [x], pads=(0, 0, k - 1, 0, 0, 0), mode="constant", value=0.0)
    else:
        padded = ctx.emit("concat", [past, x], axis=2)
    dtype = x.type.dtype
    # float32 accumulation for half types (the conv kernel would accumulate in the half type)
    wide = "float32" if dtype in HALVES else dtype
    y = ctx.emit("conv", [_cast(ctx, padded, wide), _cast(ctx, weight, wide)], strides=(1,),
                 pads=(0, 0), dilations=(1,), groups=channels)
    if bias is not None:
        y = ctx.emit("add", [y, reshape(ctx, _cast(ctx, bias, wide), (1, channels, 1))])
    y = _cast(ctx, y, dtype)
    if activation != "none":
        y = ctx.emit("swish", [y], alpha=1.0)
    total = padded.type.shape[2]
    state = ctx.emit("slice", [padded], starts=(0, 0, total - (k - 1)), steps=(1, 1, 1),
                     shape=(batch, channels, k - 1)) if k > 1 else \
        ctx.const(np.zeros((batch, channels, 0), dtype=dtype))
    return y, state


@converter("LinearAttention", since=27)
def linear_attention(ctx: ImportContext, inputs: list[Value | None], *, chunk_size: int = 64,
                     kv_num_heads: int, q_num_heads: int, scale: float = 0.0,
                     update_rule: str = "gated_delta") -> tuple[Value, Value]:
    """The linear-attention recurrence, unrolled over the (static) sequence length: per step
    the state [B, Hkv, dk, dv] decays (gated rules), takes a delta-corrected (delta rules)
    outer product k v^T, and is read by the queries. Computed in float32."""
    query, key, value, past, decay, beta = (list(inputs) + [None] * 6)[:6]
    if update_rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ShapeError(f"LinearAttention: update_rule {update_rule!r} is not one of "
                         f"'linear', 'gated', 'delta', 'gated_delta'")
    gating, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta",
                                                                             "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise ShapeError(f"LinearAttention: update_rule {update_rule!r} needs decay only for "
                         f"the gated rules and beta only for the delta rules")
    if q_num_heads <= 0 or kv_num_heads <= 0 or q_num_heads % kv_num_heads:
        raise ShapeError(f"LinearAttention: q_num_heads {q_num_heads} must be a positive "
                         f"multiple of kv_num_heads {kv_num_heads}")
    dtype = query.type.dtype
    batch, steps, _ = query.type.shape
    q = _cast(ctx, _split_heads(ctx, query, q_num_heads, "query"), "float32")
    k = _cast(ctx, _split_heads(ctx, key, kv_num_heads, "key"), "float32")
    v = _cast(ctx, _split_heads(ctx, value, kv_num_heads, "value"), "float32")
    d_k, d_v = k.type.shape[3], v.type.shape[3]
    if decay is not None:  # per key dim [B, Hkv, T, dk] or per head [B, Hkv, T, 1]
        per_head = decay.type.shape[-1] == kv_num_heads
        decay = _split_heads(ctx, decay, kv_num_heads, "decay")
        decay = ctx.emit("exp", [_cast(ctx, decay, "float32")])
        if per_head:
            decay = reshape(ctx, decay, (batch, kv_num_heads, steps, 1))
    if beta is not None:  # [B, H, T, 1] with H = Hkv or 1
        beta = ctx.emit("transpose", [reshape(ctx, _cast(ctx, beta, "float32"),
                                              beta.type.shape + (1,))], perm=(0, 2, 1, 3))
    shape = (batch, kv_num_heads, d_k, d_v)
    state = (ctx.const(np.zeros(shape, dtype=np.float32)) if past is None
             else _cast(ctx, past, "float32"))
    factor = _full(ctx, scale if scale else 1.0 / math.sqrt(d_k), "float32")

    def at(t: Value, step: int) -> Value:  # [B, H, T, n] -> [B, H, 1, n]
        b, h, _, n = t.type.shape
        return ctx.emit("slice", [t], starts=(0, 0, step, 0), steps=(1, 1, 1, 1),
                        shape=(b, h, 1, n))

    outputs = []
    for step in range(steps):
        k_t, v_t = at(k, step), at(v, step)
        if decay is not None:  # the decay scales the state's rows (key dims)
            g_t = ctx.emit("transpose", [at(decay, step)], perm=(0, 1, 3, 2))
            state = ctx.emit("mul", [state, g_t])
        if beta is not None:
            retrieved = ctx.emit("matmul", [k_t, state])  # state^T k: [B, Hkv, 1, dv]
            v_t = ctx.emit("mul", [at(beta, step), ctx.emit("sub", [v_t, retrieved])])
        outer = ctx.emit("mul", [ctx.emit("transpose", [k_t], perm=(0, 1, 3, 2)), v_t])
        state = ctx.emit("add", [state, outer])
        outputs.append(_grouped_matmul(ctx, at(q, step), state))
    out = outputs[0] if steps == 1 else ctx.emit("concat", outputs, axis=2)
    out = ctx.emit("mul", [out, factor])  # [B, Hq, T, dv]
    out = ctx.emit("transpose", [out], perm=(0, 2, 1, 3))
    out = _cast(ctx, reshape(ctx, out, (batch, steps, q_num_heads * d_v)), dtype)
    return out, _cast(ctx, state, dtype if past is None else past.type.dtype)

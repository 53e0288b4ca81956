"""recurrence{cell, hidden, reverse, activations, clip, input_forget, linear_before_reset,
has_h0, has_c0, has_peepholes, has_lens}: one direction of ONNX's RNN, GRU or LSTM as one
kernel whose time loop runs over the sequence length at run time (a symbolic dim).

Operands, in order (the optional ones present where their flag says so):
- ``xw`` [T, B, G*H]: the input projection of every step, ``X @ W^T`` plus W's bias and R's
  (R's bias of GRU's hidden gate stays out when ``linear_before_reset``: it sits inside
  ``r * (...)``); one GEMM over all steps, computed before the kernel;
- ``r_t`` [H, G*H]: the recurrent weights transposed, so that a step's product with the
  hidden state runs along contiguous rows of G*H;
- ``h0`` [B, H], ``c0`` [B, H] (LSTM), ``peepholes`` [3*H] (LSTM: input, output, forget),
  ``rb`` [G*H] (GRU with ``linear_before_reset``: R's bias), ``lens`` [B] (int32 or int64:
  steps past a sequence's length carry its state and output zeros; forward only).

G is the number of gates (RNN 1, GRU 3, LSTM 4). The output is [T + 1, B, S*H] with S = 2
for LSTM (h, then c) and 1 otherwise: row t the hidden state the op outputs at step t (Y's
row), row T the final state (Y_h, and Y_c for LSTM), so the frontend slices every output of
the op from one buffer.

The unrolled form (frontend/converters/rnn.py) serves concrete lengths; this one serves a
length known at run time. Per batch row the kernel keeps the state in two local vectors and
runs the steps in order: the recurrent product adds ``h[k] * r_t[k, :]`` for each k into the
gates (a contiguous axpy), then the gate equations of the ONNX spec update the state.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.elementwise import sigmoid_expr
from tensorc.ops.loop_kernels import allocate, extent, loop, read, seq, when, write
from tensorc.ops.registry import Pattern, define

recurrence = define("recurrence", Pattern.OPAQUE)

GATES = {"rnn": 1, "gru": 3, "lstm": 4}


def operand_names(attrs: dict) -> list[str]:
    """The operands the node takes, in order, as its flags say."""
    names = ["xw", "r_t"]
    for flag, name in (("has_h0", "h0"), ("has_c0", "c0"), ("has_peepholes", "peepholes")):
        if attrs[flag]:
            names.append(name)
    if attrs["cell"] == "gru" and attrs["linear_before_reset"]:
        names.append("rb")
    if attrs["has_lens"]:
        names.append("lens")
    return names


def _state_size(attrs: dict) -> int:
    return (2 if attrs["cell"] == "lstm" else 1) * attrs["hidden"]


@recurrence.infer
def _infer(attrs: dict, input_types: list[TensorType]) -> list[TensorType]:
    names = operand_names(attrs)
    if len(input_types) != len(names):
        raise ShapeError(f"recurrence takes {names}, got {len(input_types)} operands")
    xw = input_types[0]
    size = GATES[attrs["cell"]] * attrs["hidden"]
    if xw.ndim != 3 or xw.shape[2] != size:
        raise ShapeError(f"recurrence: xw must be [steps, batch, {size}], got {xw}")
    steps, batch = xw.shape[0], xw.shape[1]
    return [TensorType((steps + 1, batch, _state_size(attrs)), xw.dtype)]


# ---------------------------------------------------------------------------------------------
# numpy semantics

def _np_activation(name: str, x: np.ndarray) -> np.ndarray:
    if name == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if name == "tanh":
        return np.tanh(x)
    return np.maximum(x, 0)


@recurrence.reference
def _reference(attrs: dict, *arrays: np.ndarray) -> list[np.ndarray]:
    ops = dict(zip(operand_names(attrs), arrays))
    xw, r_t = ops["xw"].astype(np.float64), ops["r_t"].astype(np.float64)
    steps, batch, _ = xw.shape
    hid, cell, acts = attrs["hidden"], attrs["cell"], attrs["activations"]
    clip = attrs["clip"]

    def f(k: int, x: np.ndarray) -> np.ndarray:
        x = np.clip(x, -clip, clip) if clip is not None else x
        return _np_activation(acts[k], x)

    h = ops["h0"].astype(np.float64) if "h0" in ops else np.zeros((batch, hid))
    c = ops["c0"].astype(np.float64) if "c0" in ops else np.zeros((batch, hid))
    p = ops.get("peepholes", np.zeros(3 * hid)).astype(np.float64)
    lens = ops["lens"].astype(np.int64) if "lens" in ops else np.full(batch, steps)
    out = np.zeros((steps + 1, batch, _state_size(attrs)))
    order = range(steps - 1, -1, -1) if attrs["reverse"] else range(steps)
    for t in order:
        gates = xw[t] + (h @ r_t if cell != "gru" or attrs["linear_before_reset"] else 0)
        if cell == "rnn":
            new_h, new_c = f(0, gates), c
        elif cell == "gru":
            if attrs["linear_before_reset"]:
                hr = h @ r_t + ops["rb"]
                z = f(0, xw[t, :, :hid] + hr[:, :hid])
                r = f(0, xw[t, :, hid:2 * hid] + hr[:, hid:2 * hid])
                cand = f(1, xw[t, :, 2 * hid:] + r * hr[:, 2 * hid:])
            else:
                zr = xw[t, :, :2 * hid] + h @ r_t[:, :2 * hid]
                z, r = f(0, zr[:, :hid]), f(0, zr[:, hid:])
                cand = f(1, xw[t, :, 2 * hid:] + (r * h) @ r_t[:, 2 * hid:])
            new_h, new_c = (1 - z) * cand + z * h, c
        else:
            g = [gates[:, k * hid:(k + 1) * hid] for k in range(4)]
            i = f(0, g[0] + p[:hid] * c)
            forget = 1 - i if attrs["input_forget"] else f(0, g[2] + p[2 * hid:] * c)
            new_c = forget * c + i * f(1, g[3])
            o = f(0, g[1] + p[hid:2 * hid] * new_c)
            new_h = o * _np_activation(acts[2], new_c)
        alive = (t < lens)[:, None]
        h, c = np.where(alive, new_h, h), np.where(alive, new_c, c)
        out[t, :, :hid] = np.where(alive, h, 0)
        if cell == "lstm":
            out[t, :, hid:] = c
    out[steps, :, :hid] = h
    if cell == "lstm":
        out[steps, :, hid:] = c
    return [out.astype(ops["xw"].dtype)]


# ---------------------------------------------------------------------------------------------
# the kernel

def _activation(name: str, x: E.Expr) -> E.Expr:
    if name == "sigmoid":
        return sigmoid_expr(x)
    if name == "tanh":
        return E.call("tanh", x)
    return E.maximum(x, E.Const(0.0, x.dtype))


@recurrence.kernel
def _kernel(attrs: dict, operands: list, out: Buffer, writes: list[Buffer]) -> Stmt:
    ops = dict(zip(operand_names(attrs), operands))
    xw, r_t = ops["xw"], ops["r_t"]
    cell, hid, acts = attrs["cell"], attrs["hidden"], attrs["activations"]
    size = GATES[cell] * hid
    state = _state_size(attrs)
    dtype = xw.dtype
    steps, batch = extent(xw.shape[0]), extent(xw.shape[1])
    zero, one = E.Const(0.0, dtype), E.Const(1.0, dtype)
    h = Buffer("h", (hid,), dtype, "local")
    c = Buffer("c", (hid,), dtype, "local")
    gates = Buffer("gates", (size,), dtype, "local")
    # GRU without linear_before_reset: r * h, the hidden gate's recurrent operand
    rh = Buffer("rh", (hid,), dtype, "local")

    def f(k: int, x: E.Expr) -> E.Expr:
        if attrs["clip"] is not None:
            x = E.minimum(E.maximum(x, E.Const(-attrs["clip"], dtype)),
                          E.Const(attrs["clip"], dtype))
        return _activation(acts[k], x)

    def gate(k: int, j) -> E.Expr:
        return E.Load(gates, (j + k * hid,))

    def product(vector: Buffer, first: int, count: int) -> Stmt:
        """gates[first:first+count] += vector @ r_t[:, first:first+count]"""
        def row(k):
            value = E.Load(vector, (k,))
            return loop(count, lambda g: write(gates, g + first, E.Load(gates, (g + first,))
                                               + value * read(r_t, k * size + g + first)), "g")
        return loop(hid, row, "k")

    def batch_row(b) -> Stmt:
        def initial(buffer: Buffer, name: str) -> Stmt:
            if name in ops:
                return loop(hid, lambda j: write(buffer, j, read(ops[name], b * hid + j)), "j")
            return loop(hid, lambda j: write(buffer, j, zero), "j")

        def step(s) -> Stmt:
            t = steps - 1 - s if attrs["reverse"] else s
            base = (t * batch + b) * size
            load_gates = loop(size, lambda g: write(gates, g, read(xw, base + g)), "g")
            alive = E.Compare("lt", t, E.cast("int64", read(ops["lens"], b))) \
                if "lens" in ops else None

            def emit(j, new_h: E.Expr, new_c: E.Expr | None) -> Stmt:
                """Update the state at j (where the sequence is alive) and write the step's
                output row."""
                row = (t * batch + b) * state
                update = seq(write(h, j, new_h), *([write(c, j, new_c)] if new_c is not None
                                                   else []))
                if alive is not None:
                    update = when(alive, update)
                hv = E.Load(h, (j,))
                outs = [write(out, row + j, E.select(alive, hv, zero) if alive is not None
                              else hv)]
                if cell == "lstm":
                    outs.append(write(out, row + hid + j, E.Load(c, (j,))))
                return seq(update, *outs)

            if cell == "rnn":
                body = seq(product(h, 0, size),
                           loop(hid, lambda j: emit(j, f(0, gate(0, j)), None), "j"))
            elif cell == "lstm":
                p = ops.get("peepholes")

                def peep(k: int, j, cv: E.Expr) -> E.Expr:
                    return read(p, k * hid + j) * cv if p is not None else zero

                def lstm_j(j):
                    cv = E.Load(c, (j,))
                    i = f(0, gate(0, j) + peep(0, j, cv))
                    forget = one - i if attrs["input_forget"] else \
                        f(0, gate(2, j) + peep(2, j, cv))
                    new_c = forget * cv + i * f(1, gate(3, j))
                    o = f(0, gate(1, j) + peep(1, j, new_c))
                    return emit(j, o * _activation(acts[2], new_c), new_c)
                # the new c is computed twice (once for h, once stored); LLVM shares it
                body = seq(product(h, 0, size), loop(hid, lstm_j, "j"))
            elif attrs["linear_before_reset"]:
                rb = ops["rb"]
                # gates hold xw; the recurrent part (h @ R^T + Rb) goes into rh's place per
                # gate: z and r take it added, the candidate takes it times r
                hr = Buffer("hr", (size,), dtype, "local")

                def hr_row(k):
                    value = E.Load(h, (k,))
                    return loop(size, lambda g: write(hr, g, E.Load(hr, (g,))
                                                      + value * read(r_t, k * size + g)), "g")

                def gru_j(j):
                    hr_at = [E.Load(hr, (j + k * hid,)) for k in range(3)]
                    z = f(0, gate(0, j) + hr_at[0])
                    r = f(0, gate(1, j) + hr_at[1])
                    cand = f(1, gate(2, j) + r * hr_at[2])
                    return emit(j, (one - z) * cand + z * E.Load(h, (j,)), None)
                body = allocate([hr], seq(
                    loop(size, lambda g: write(hr, g, read(rb, g)), "g"),
                    loop(hid, hr_row, "k"), loop(hid, gru_j, "j")))
            else:
                def reset(j):
                    return write(rh, j, f(0, gate(1, j)) * E.Load(h, (j,)))

                def gru_j(j):
                    z = f(0, gate(0, j))
                    cand = f(1, gate(2, j))
                    return emit(j, (one - z) * cand + z * E.Load(h, (j,)), None)
                body = seq(product(h, 0, 2 * hid), loop(hid, reset, "j"),
                           product(rh, 2 * hid, hid), loop(hid, gru_j, "j"))
            return seq(load_gates, body)

        final = (steps * batch + b) * state
        finals = [loop(hid, lambda j: write(out, final + j, E.Load(h, (j,))), "j")]
        if cell == "lstm":
            finals.append(loop(hid, lambda j: write(out, final + hid + j, E.Load(c, (j,))),
                               "j"))
        return seq(initial(h, "h0"), initial(c, "c0"), loop(steps, step, "s"), *finals)

    return allocate([h, c, gates, rh], loop(batch, batch_row, "b"))

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
  steps past a sequence's length carry its state and output zeros; a reverse direction runs
  each sequence backwards from its own end).

G is the number of gates (RNN 1, GRU 3, LSTM 4). The output is [T + 1, B, S*H] with S = 2
for LSTM (h, then c) and 1 otherwise: row t the hidden state the op outputs at step t (Y's
row), row T the final state (Y_h, and Y_c for LSTM), so the frontend slices every output of
the op from one buffer.

The frontend (frontend/converters/rnn.py ``runs_as_kernel``) takes this op for a length known
at run time, a long concrete one, or a single batch row, and unrolls the rest. The kernel
steps tiles of ROWS batch rows (the tiles in parallel), keeping their states in local
buffers: per step the recurrent product adds UNROLL rows of R^T at a time into the gates
(contiguous, vectorized along the gates, each row of R^T read once for the tile's rows),
then the gate equations of the ONNX spec update the state.
"""
from __future__ import annotations

import numpy as np

from tensorc.errors import ShapeError
from tensorc.ir import expr as E
from tensorc.ir.loop import Buffer, For, Stmt
from tensorc.ir.types import TensorType
from tensorc.ops.elementwise import UNARY
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

@recurrence.reference
def _reference(attrs: dict, *arrays: np.ndarray) -> list[np.ndarray]:
    ops = dict(zip(operand_names(attrs), arrays))
    xw, r_t = ops["xw"].astype(np.float64), ops["r_t"].astype(np.float64)
    steps, batch, _ = xw.shape
    hid, cell, acts = attrs["hidden"], attrs["cell"], attrs["activations"]
    clip = attrs["clip"]

    def f(k: int, x: np.ndarray) -> np.ndarray:
        x = np.clip(x, -clip, clip) if clip is not None else x
        return UNARY[acts[k]].numpy({}, x)

    h = ops["h0"].astype(np.float64) if "h0" in ops else np.zeros((batch, hid))
    c = ops["c0"].astype(np.float64) if "c0" in ops else np.zeros((batch, hid))
    p = ops.get("peepholes", np.zeros(3 * hid)).astype(np.float64)
    lens = ops["lens"].astype(np.int64) if "lens" in ops else np.full(batch, steps)
    out = np.zeros((steps + 1, batch, _state_size(attrs)))
    rows = np.arange(batch)
    for s in range(steps):
        # each row's time step: a reverse direction runs each sequence backwards from its own
        # end (past it, the row's zero outputs)
        t = np.full(batch, s)
        if attrs["reverse"]:
            t = np.where(s < lens, lens - 1 - s, s) if "lens" in ops else steps - 1 - t
        x = xw[t, rows]                                   # [batch, G*H]
        if cell == "rnn":
            new_h, new_c = f(0, x + h @ r_t), c
        elif cell == "gru":
            if attrs["linear_before_reset"]:
                hr = h @ r_t + ops["rb"]
                z = f(0, x[:, :hid] + hr[:, :hid])
                r = f(0, x[:, hid:2 * hid] + hr[:, hid:2 * hid])
                cand = f(1, x[:, 2 * hid:] + r * hr[:, 2 * hid:])
            else:
                zr = x[:, :2 * hid] + h @ r_t[:, :2 * hid]
                z, r = f(0, zr[:, :hid]), f(0, zr[:, hid:])
                cand = f(1, x[:, 2 * hid:] + (r * h) @ r_t[:, 2 * hid:])
            new_h, new_c = (1 - z) * cand + z * h, c
        else:
            gates = x + h @ r_t
            g = [gates[:, k * hid:(k + 1) * hid] for k in range(4)]
            i = f(0, g[0] + p[:hid] * c)
            forget = 1 - i if attrs["input_forget"] else f(0, g[2] + p[2 * hid:] * c)
            new_c = forget * c + i * f(1, g[3])
            o = f(0, g[1] + p[hid:2 * hid] * new_c)
            new_h = o * UNARY[acts[2]].numpy({}, new_c)
        alive = (s < lens)[:, None]
        h, c = np.where(alive, new_h, h), np.where(alive, new_c, c)
        out[t, rows, :hid] = np.where(alive, h, 0)
        if cell == "lstm":
            out[t, rows, hid:] = c
    out[steps, :, :hid] = h
    if cell == "lstm":
        out[steps, :, hid:] = c
    return [out.astype(ops["xw"].dtype)]


# ---------------------------------------------------------------------------------------------
# the kernel

# batch rows stepped together: each row of R^T read from memory serves this many rows' products
ROWS = 4
# rows of R^T added per pass over the gates
UNROLL = 4


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
    # per tile of ROWS batch rows: the state, the gates' pre-activations, and (GRU) r * h or
    # the recurrent product
    h = Buffer("h", (ROWS * hid,), dtype, "local")
    c = Buffer("c", (ROWS * hid,), dtype, "local")
    gates = Buffer("gates", (ROWS * size,), dtype, "local")
    rh = Buffer("rh", (ROWS * hid,), dtype, "local")
    hr = Buffer("hr", (ROWS * size,), dtype, "local")

    def f(k: int, x: E.Expr) -> E.Expr:
        if attrs["clip"] is not None:
            x = E.minimum(E.maximum(x, E.Const(-attrs["clip"], dtype)),
                          E.Const(attrs["clip"], dtype))
        return UNARY[acts[k]].expr({}, x)

    def tile(first_row: E.Expr) -> Stmt:
        rows = E.minimum(E.const(ROWS), batch - first_row)

        def per_row(body) -> Stmt:
            return loop(rows, body, "q")

        def product(target: Buffer, vector: Buffer, first: int, count: int) -> Stmt:
            """target[q, first:first+count] += vector[q] @ r_t[:, first:first+count] for
            every row q of the tile: a row of R^T is loaded once for all of them, and each
            pass adds UNROLL rows of it (the gates are loaded and stored once per UNROLL
            products, not once per product)."""
            def k_rows(k0, width):
                def add(q, g):
                    at = q * size + g + first
                    total = E.Load(target, (at,))
                    for i in range(width):
                        total = total + E.Load(vector, (q * hid + k0 + i,)) \
                            * read(r_t, (k0 + i) * size + g + first)
                    return write(target, at, total)
                return per_row(lambda q: loop(count, lambda g: add(q, g), "g"))
            whole, rest = divmod(hid, UNROLL)
            return seq(loop(whole, lambda k: k_rows(k * UNROLL, UNROLL), "k"),
                       *([k_rows(E.const(whole * UNROLL), rest)] if rest else []))

        def initial(buffer: Buffer, name: str) -> Stmt:
            def row(q):
                return loop(hid, lambda j: write(buffer, q * hid + j, read(
                    ops[name], (first_row + q) * hid + j) if name in ops else zero), "j")
            return per_row(row)

        def step(s) -> Stmt:
            def length(q) -> E.Expr:
                return E.cast("int64", read(ops["lens"], first_row + q))

            def time_of(q) -> E.Expr:
                """The time step row q takes at step s: a reverse direction runs each
                sequence backwards from its own end; past that end, the row's zero outputs."""
                if not attrs["reverse"]:
                    return s
                if "lens" not in ops:
                    return steps - 1 - s
                return E.select(E.Compare("lt", s, length(q)), length(q) - 1 - s, s)

            def gate(q, k: int, j) -> E.Expr:
                return E.Load(gates, (q * size + k * hid + j,))

            def load_gates(q):
                base = (time_of(q) * batch + first_row + q) * size
                return loop(size, lambda g: write(gates, q * size + g, read(xw, base + g)), "g")

            def emit(q, j, new_h: E.Expr, new_c: E.Expr | None) -> Stmt:
                """Update the state of row q at j (where its sequence is alive) and write the
                step's output."""
                b = first_row + q
                at = q * hid + j
                update = seq(write(h, at, new_h), *([write(c, at, new_c)] if new_c is not None
                                                    else []))
                hv = E.Load(h, (at,))
                row = (time_of(q) * batch + b) * state
                if "lens" in ops:
                    alive = E.Compare("lt", s, length(q))
                    update, hv = when(alive, update), E.select(alive, hv, zero)
                outs = [write(out, row + j, hv)]
                if cell == "lstm":
                    outs.append(write(out, row + hid + j, E.Load(c, (at,))))
                return seq(update, *outs)

            def cells(update) -> Stmt:
                return per_row(lambda q: loop(hid, lambda j: update(q, j), "j"))

            if cell == "rnn":
                body = seq(product(gates, h, 0, size),
                           cells(lambda q, j: emit(q, j, f(0, gate(q, 0, j)), None)))
            elif cell == "lstm":
                p = ops.get("peepholes")

                def peep(k: int, j, cv: E.Expr) -> E.Expr:
                    return read(p, k * hid + j) * cv if p is not None else zero

                def lstm_cell(q, j):
                    cv = E.Load(c, (q * hid + j,))
                    i = f(0, gate(q, 0, j) + peep(0, j, cv))
                    forget = one - i if attrs["input_forget"] else \
                        f(0, gate(q, 2, j) + peep(2, j, cv))
                    new_c = forget * cv + i * f(1, gate(q, 3, j))
                    o = f(0, gate(q, 1, j) + peep(1, j, new_c))
                    # new_c is stated twice (for h and stored); LLVM computes it once
                    return emit(q, j, o * UNARY[acts[2]].expr({}, new_c), new_c)
                body = seq(product(gates, h, 0, size), cells(lstm_cell))
            elif attrs["linear_before_reset"]:
                # hr = h @ R^T + Rb: z and r add it, the candidate takes r times its part
                def gru_cell(q, j):
                    part = [E.Load(hr, (q * size + k * hid + j,)) for k in range(3)]
                    z = f(0, gate(q, 0, j) + part[0])
                    r = f(0, gate(q, 1, j) + part[1])
                    cand = f(1, gate(q, 2, j) + r * part[2])
                    return emit(q, j, (one - z) * cand + z * E.Load(h, (q * hid + j,)), None)
                rb = ops["rb"]
                body = seq(per_row(lambda q: loop(size, lambda g: write(
                               hr, q * size + g, read(rb, g)), "g")),
                           product(hr, h, 0, size), cells(gru_cell))
            else:
                def reset(q, j):
                    return write(rh, q * hid + j,
                                 f(0, gate(q, 1, j)) * E.Load(h, (q * hid + j,)))

                def gru_cell(q, j):
                    z = f(0, gate(q, 0, j))
                    cand = f(1, gate(q, 2, j))
                    return emit(q, j, (one - z) * cand + z * E.Load(h, (q * hid + j,)), None)
                body = seq(product(gates, h, 0, 2 * hid), cells(reset),
                           product(gates, rh, 2 * hid, hid), cells(gru_cell))
            return seq(per_row(load_gates), body)

        def finals(q) -> Stmt:
            final = (steps * batch + first_row + q) * state
            parts = [loop(hid, lambda j: write(out, final + j, E.Load(h, (q * hid + j,))), "j")]
            if cell == "lstm":
                parts.append(loop(hid, lambda j: write(out, final + hid + j,
                                                       E.Load(c, (q * hid + j,))), "j"))
            return seq(*parts)

        # the state and scratch this cell uses (c: LSTM; rh: GRU's r * h; hr: GRU's
        # recurrent product with linear_before_reset)
        lbr = cell == "gru" and attrs["linear_before_reset"]
        used = [h, gates, *([c] if cell == "lstm" else []),
                *([hr] if lbr else [rh] if cell == "gru" else [])]
        return allocate(used, seq(
            initial(h, "h0"), *([initial(c, "c0")] if cell == "lstm" else []),
            loop(steps, step, "s"), per_row(finals)))

    tiles = (batch + (ROWS - 1)) // ROWS
    var = E.Var("tile")
    return For(var, tiles, "parallel", tile(var * ROWS))

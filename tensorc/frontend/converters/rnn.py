"""Converters of ONNX's recurrent ops (RNN, GRU, LSTM).

A sequence length known at compile time unrolls at import: the input projection of every step is
one MatMul ``X @ W^T`` (plus both biases), and each step adds ``H @ R^T`` and applies
the gate equations of the ONNX spec with core ops. Directions forward, reverse and
bidirectional; layouts 0 ([T, B, ...]) and 1 ([B, T, ...]); LSTM peepholes, input_forget and
clip; GRU's linear_before_reset. Activations: Sigmoid, Tanh, Relu (the others are rejected
by name). A length known only at run time (a symbolic dim) runs the same equations as one
``recurrence`` kernel per direction (ops/recurrence.py) that loops over the steps at run time.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tensorc.errors import ShapeError, SymbolicDimError, UnsupportedOpError
from tensorc.frontend.converters.common import reshape
from tensorc.frontend.context import ImportContext
from tensorc.frontend.registry import converter
from tensorc.ir.dims import Dim
from tensorc.ir.graph import Value

ACTIVATIONS = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu"}

# Loop, Scan and the recurrent ops unroll at import, up to this many iterations
MAX_UNROLLED_ITERATIONS = 4096


def check_unrolled_steps(op: str, steps: int) -> None:
    """Scan and the recurrent ops unroll their time loop at import: refuse a length past
    MAX_UNROLLED_ITERATIONS before building (10^9 steps would run for hours), and a length
    known only at run time by name."""
    if isinstance(steps, Dim):
        raise SymbolicDimError(f"{op}: its time loop runs over the symbolic dim {steps}; "
                               f"tensorc unrolls recurrent ops at compile time, so the "
                               f"sequence length must be concrete: give it in input_shapes",
                               steps)
    if steps > MAX_UNROLLED_ITERATIONS:
        raise UnsupportedOpError(f"{op}: {steps} steps to unroll; tensorc unrolls the time "
                                 f"loop at compile time, up to {MAX_UNROLLED_ITERATIONS} "
                                 f"steps; shorten the sequence (or split it into chunks)")


# a concrete sequence longer than this runs as the recurrence kernel, not unrolled
KERNEL_STEPS = 64


def runs_as_kernel(steps, batch, loop_kernels: bool = True) -> bool:
    """Whether a recurrence runs as one ``recurrence`` kernel (ops/recurrence.py) rather than
    unrolled: always over a run-time length; over a concrete one, where the back end runs
    loop-IR kernels (``loop_kernels``: not CUDA's), when it is long (the
    unrolled form compiles kernels per step: 64 steps of an LSTM took 7 s, 200 steps 30-55 s,
    the kernel 0.6 s) or its batch is one row (the kernel as fast as the unrolled steps'
    GEMMs, which gain over it only by sharing each row of R among several batch rows)."""
    return isinstance(steps, Dim) or (loop_kernels and (steps > KERNEL_STEPS or batch == 1))


def take(ctx: ImportContext, x: Value, axis: int, start: int, size: int = 1,
         keep_axis: bool = True) -> Value:
    """``x[..., start:start + size, ...]`` along ``axis`` (dropping the axis when size is 1
    and not ``keep_axis``)."""
    shape = list(x.type.shape)
    starts = [0] * len(shape)
    starts[axis], shape[axis] = start, size
    out = ctx.emit("slice", [x], starts=tuple(starts), steps=(1,) * len(shape),
                   shape=tuple(shape))
    if not keep_axis and size == 1:
        out = reshape(ctx, out, shape[:axis] + shape[axis + 1:])
    return out


def _activation_op(name: str) -> str:
    """The core op of a recurrent activation named as ONNX names it."""
    op = ACTIVATIONS.get(name.lower())
    if op is None:
        raise UnsupportedOpError(f"recurrent activation {name!r} is not supported (supported: "
                                 f"Sigmoid, Tanh, Relu)")
    return op


def _activation(ctx: ImportContext, name: str, x: Value) -> Value:
    return ctx.emit(_activation_op(name), [x])


def _check_weights(x: Value, w: Value, r: Value, bias: Value | None, gates: int, hidden: int,
                   directions: int) -> None:
    """The weights' shapes follow from hidden_size, the direction and X: check them before
    any size read from an attribute is used."""
    if x.type.ndim != 3:
        raise ShapeError(f"X must be [seq_length, batch_size, input_size], got {x.type}")
    expected = {"W": (w, (directions, gates * hidden, x.type.shape[2])),
                "R": (r, (directions, gates * hidden, hidden))}
    if bias is not None:
        expected["B"] = (bias, (directions, 2 * gates * hidden))
    for name, (value, shape) in expected.items():
        if value.type.shape != shape:
            raise ShapeError(f"{name} is {value.type}, but hidden_size={hidden}, "
                             f"{directions} direction(s) and X {x.type} make it "
                             f"{list(shape)}; fix hidden_size or the weights")


class _Recurrence:
    """What the three ops share: inputs in [T, B, I] order, weights per direction, the
    unrolled time loop and the outputs Y [T, D, B, H] / Y_h [D, B, H]."""

    def __init__(self, ctx: ImportContext, inputs: Sequence[Value | None], gates: int,
                 hidden_size: int, direction: str, layout: int, activations: Sequence[str],
                 default_activations: Sequence[str], clip: float | None):
        self.ctx = ctx
        x, w, r = inputs[0], inputs[1], inputs[2]
        self.bias = inputs[3] if len(inputs) > 3 else None
        seq_lens = inputs[4] if len(inputs) > 4 else None
        self.initial_h = inputs[5] if len(inputs) > 5 else None
        if layout == 1:
            x = ctx.emit("transpose", [x], perm=(1, 0, 2))
        self.x, self.w, self.r = x, w, r
        if hidden_size is None or hidden_size < 1:
            given = "is missing" if hidden_size is None else f"is {hidden_size}"
            raise ShapeError(f"hidden_size {given}; set it to the number of hidden units "
                             f"(R's last dim, {r.type.shape[-1] if r.type.ndim else '?'})")
        _check_weights(x, w, r, self.bias, gates, hidden_size,
                       2 if direction == "bidirectional" else 1)
        self.steps, self.batch = x.type.shape[0], x.type.shape[1]
        if self.steps == 0:
            raise ShapeError(f"X {inputs[0].type} holds a sequence of length 0 (layout "
                             f"{layout}); give it at least one step")
        # a length known only at run time runs as one kernel looping over the steps; so do
        # long sequences and single rows (see runs_as_kernel)
        self.as_kernel = runs_as_kernel(self.steps, x.type.shape[1], ctx.loop_kernels)
        if not self.as_kernel:
            check_unrolled_steps(f"X {inputs[0].type}", self.steps)
        self.hidden, self.gates, self.layout = hidden_size, gates, layout
        self.directions = {"forward": [False], "reverse": [True],
                           "bidirectional": [False, True]}[direction]
        per_direction = len(default_activations)
        names = list(activations) or list(default_activations) * len(self.directions)
        if len(names) != per_direction * len(self.directions):
            raise ShapeError(f"activations {names} must name {per_direction} function(s) per "
                             f"direction, {per_direction * len(self.directions)} in all for "
                             f"direction {direction!r}")
        self.activations = [names[k * per_direction:(k + 1) * per_direction]
                            for k in range(len(self.directions))]
        self.clip = clip
        self.seq_lens = seq_lens
        if seq_lens is not None:
            lens = ctx.constant(seq_lens)
            if lens is not None and np.all(lens == self.steps):
                self.seq_lens = None       # every sequence is full: nothing to mask
            elif any(self.directions):
                # a reverse direction runs each sequence backwards from its own end: the
                # kernel's per-row time steps (the unrolled form has one step for all rows)
                if not ctx.loop_kernels:
                    raise UnsupportedOpError("sequence_lens with the reverse direction: each "
                                             "sequence runs backwards from its own end, "
                                             "which tensorc runs on CPU targets only")
                self.as_kernel = True
        self.dtype = x.type.dtype

    def const(self, value: float) -> Value:
        return self.ctx.const(np.array(value, dtype=self.dtype))

    def initial(self, value: Value | None, d: int) -> Value:
        """The [B, H] initial state of direction d (zeros when not given)."""
        if value is None:
            if isinstance(self.batch, int):
                return self.ctx.const(np.zeros((self.batch, self.hidden), self.dtype))
            zeros = self.ctx.const(np.zeros((1, self.hidden), self.dtype))
            return self.ctx.emit("broadcast_to", [zeros], shape=(self.batch, self.hidden))
        if self.layout == 1:
            value = self.ctx.emit("transpose", [value], perm=(1, 0, 2))
        return take(self.ctx, value, 0, d, keep_axis=False)

    def projections(self, d: int, fold_recurrent_bias: bool
                    ) -> tuple[Value, Value, Value | None]:
        """``X @ W[d]^T + Wb`` for all steps [T, B, G*H], ``R[d]^T`` [H, G*H] and the
        recurrent bias Rb [G*H] (added into the first instead when ``fold_recurrent_bias``)."""
        ctx = self.ctx
        w_t = ctx.emit("transpose", [take(ctx, self.w, 0, d, keep_axis=False)], perm=(1, 0))
        r_t = ctx.emit("transpose", [take(ctx, self.r, 0, d, keep_axis=False)], perm=(1, 0))
        size = self.gates * self.hidden
        # X [T, B, I] @ W^T as ONNX states it: the graph pass for the target merges the
        # steps' rows into one GEMM (passes/graph/lower_for_target.py) and the bias joins
        # its epilogue (passes/graph/simplify.py sinks the add before the rows' reshape)
        xw = ctx.emit("matmul", [self.x, w_t])
        rb = None
        if self.bias is not None:
            b = take(ctx, self.bias, 0, d, keep_axis=False)
            wb, rb = take(ctx, b, 0, 0, size), take(ctx, b, 0, size, size)
            if fold_recurrent_bias:
                wb, rb = ctx.emit("add", [wb, rb]), None
            xw = ctx.emit("add", [xw, wb])
        return xw, r_t, rb

    def clipped(self, x: Value) -> Value:
        if self.clip is None:
            return x
        return self.ctx.emit("clip", [x], min=-self.clip, max=self.clip)

    def gate(self, pre: Value, k: int) -> Value:
        """The k-th H-wide chunk of [B, G*H] pre-activations."""
        return take(self.ctx, pre, 1, k * self.hidden, self.hidden)

    def run(self, step, fold_recurrent_bias: bool = True
            ) -> tuple[list[list[Value]], list]:
        """Unroll ``step(d, xw_t, r_t, rb, state) -> (h, state)`` over time for every
        direction; returns the hidden state of every step (in time order) and the final
        states, per direction."""
        hs, finals = [], []
        for d, reverse in enumerate(self.directions):
            xw, r_t, rb = self.projections(d, fold_recurrent_bias)
            state = None
            outs: list[Value | None] = [None] * self.steps
            for t in (range(self.steps - 1, -1, -1) if reverse else range(self.steps)):
                xw_t = take(self.ctx, xw, 0, t, keep_axis=False)
                h, new_state = step(d, xw_t, r_t, rb, state)
                if self.seq_lens is not None:
                    # past a sequence's end its state is carried and its output is zero
                    h, new_state = self.mask_step(t, h, new_state, state)
                state = new_state
                outs[t] = h
            hs.append(outs)
            finals.append(state)
        return hs, finals

    def mask_step(self, t: int, h: Value, new_state, old_state):
        ctx = self.ctx
        lens = self.seq_lens
        alive = ctx.emit("less", [ctx.const(np.array(t, lens.type.dtype)), lens])
        alive = reshape(ctx, alive, (self.batch, 1))
        h = ctx.emit("where", [alive, h, self.const(0)])
        if old_state is None:
            return h, new_state
        if isinstance(new_state, tuple):
            kept = tuple(ctx.emit("where", [alive, n, o]) for n, o in zip(new_state, old_state))
        else:
            kept = ctx.emit("where", [alive, new_state, old_state])
        return h, kept

    def scan(self, cell: str, initial_c: Value | None = None, peepholes: Value | None = None,
             input_forget: int = 0, linear_before_reset: int = 0) -> tuple[Value, ...]:
        """The outputs of the op over a run-time length: per direction one ``recurrence``
        kernel (ops/recurrence.py) after the input projection of all steps; Y, Y_h (and
        Y_c) sliced from its [T + 1, B, S*H] states."""
        ctx, hid = self.ctx, self.hidden
        lstm = cell == "lstm"
        ys, finals = [], []
        for d, reverse in enumerate(self.directions):
            lbr = cell == "gru" and bool(linear_before_reset)
            xw, r_t, rb = self.projections(d, fold_recurrent_bias=not lbr)
            operands = [xw, r_t]
            h0 = self.initial_h is not None
            c0 = lstm and initial_c is not None
            if h0:
                operands.append(self.initial(self.initial_h, d))
            if c0:
                operands.append(self.initial(initial_c, d))
            if lstm and peepholes is not None:
                operands.append(take(ctx, peepholes, 0, d, keep_axis=False))
            if lbr:
                operands.append(rb if rb is not None else
                                self.const(np.zeros(self.gates * hid, self.dtype)))
            if self.seq_lens is not None:
                operands.append(self.seq_lens)
            states = ctx.emit("recurrence", operands, cell=cell, hidden=hid, reverse=reverse,
                              activations=tuple(map(_activation_op, self.activations[d])),
                              clip=None if self.clip is None else float(self.clip),
                              input_forget=int(input_forget),
                              linear_before_reset=int(bool(linear_before_reset)),
                              has_h0=h0, has_c0=c0,
                              has_peepholes=lstm and peepholes is not None,
                              has_lens=self.seq_lens is not None)
            steps = self.steps

            def part(first_step, count, first, size, states=states):
                return ctx.emit("slice", [states], starts=(first_step, 0, first),
                                steps=(1, 1, 1), shape=(count, self.batch, size))
            ys.append(reshape(ctx, part(0, steps, 0, hid), (steps, 1, self.batch, hid)))
            finals.append([part(steps, 1, k * hid, hid) for k in range(2 if lstm else 1)])
        results = [ctx.emit("concat", ys, axis=1) if len(ys) > 1 else ys[0]]
        for k in range(2 if lstm else 1):
            parts = [f[k] for f in finals]
            results.append(ctx.emit("concat", parts, axis=0) if len(parts) > 1 else parts[0])
        if self.layout == 1:
            results[0] = ctx.emit("transpose", [results[0]], perm=(2, 0, 1, 3))
            results[1:] = [ctx.emit("transpose", [s], perm=(1, 0, 2)) for s in results[1:]]
        return tuple(results)

    def outputs(self, hs: list[list[Value]], finals_h: list[Value],
                extra_finals: list[list[Value]] = ()) -> tuple[Value, ...]:
        """Y [T, D, B, H] and Y_h [D, B, H] (and more final states), in the op's layout."""
        ctx = self.ctx
        b, h = self.batch, self.hidden
        per_step = [ctx.emit("concat", [reshape(ctx, hs[d][t], (1, 1, b, h))
                                        for d in range(len(hs))], axis=1)
                    if len(hs) > 1 else reshape(ctx, hs[0][t], (1, 1, b, h))
                    for t in range(self.steps)]
        y = ctx.emit("concat", per_step, axis=0) if len(per_step) > 1 else per_step[0]
        results = [y]
        for states in [finals_h, *extra_finals]:
            parts = [reshape(ctx, s, (1, b, h)) for s in states]
            results.append(ctx.emit("concat", parts, axis=0) if len(parts) > 1 else parts[0])
        if self.layout == 1:
            results[0] = ctx.emit("transpose", [results[0]], perm=(2, 0, 1, 3))
            results[1:] = [ctx.emit("transpose", [s], perm=(1, 0, 2)) for s in results[1:]]
        return tuple(results)


@converter("RNN", since=7)
def rnn(ctx: ImportContext, inputs: list[Value | None], *, activation_alpha=(),
        activation_beta=(), activations=(), clip: float | None = None,
        direction: str = "forward", hidden_size: int | None = None, layout: int = 0
        ) -> tuple[Value, ...]:
    rec = _Recurrence(ctx, inputs, 1, hidden_size, direction, layout, activations, ["Tanh"],
                      clip)
    if rec.as_kernel:
        return rec.scan("rnn")

    def step(d, xw_t, r_t, rb, h):
        h = h if h is not None else rec.initial(rec.initial_h, d)
        pre = ctx.emit("add", [xw_t, ctx.emit("matmul", [h, r_t])])
        h = _activation(ctx, rec.activations[d][0], rec.clipped(pre))
        return h, h

    hs, finals = rec.run(step)
    return rec.outputs(hs, finals)


@converter("GRU", since=7)
def gru(ctx: ImportContext, inputs: list[Value | None], *, activation_alpha=(),
        activation_beta=(), activations=(), clip: float | None = None,
        direction: str = "forward", hidden_size: int | None = None, layout: int = 0,
        linear_before_reset: int = 0) -> tuple[Value, ...]:
    rec = _Recurrence(ctx, inputs, 3, hidden_size, direction, layout, activations,
                      ["Sigmoid", "Tanh"], clip)
    if rec.as_kernel:
        return rec.scan("gru", linear_before_reset=linear_before_reset)
    hid = hidden_size

    def step(d, xw_t, r_t, rb, h):
        h = h if h is not None else rec.initial(rec.initial_h, d)
        f, g = rec.activations[d]
        # gate order in W, R, B: update (z), reset (r), hidden (h)
        if linear_before_reset:
            hr = ctx.emit("matmul", [h, r_t])
            if rb is not None:
                hr = ctx.emit("add", [hr, rb])
        else:
            hr = ctx.emit("matmul", [h, take(ctx, r_t, 1, 0, 2 * hid)])
        z = _activation(ctx, f, rec.clipped(ctx.emit("add", [rec.gate(xw_t, 0),
                                                             rec.gate(hr, 0)])))
        r = _activation(ctx, f, rec.clipped(ctx.emit("add", [rec.gate(xw_t, 1),
                                                             rec.gate(hr, 1)])))
        if linear_before_reset:
            recurrent = ctx.emit("mul", [r, rec.gate(hr, 2)])
        else:
            recurrent = ctx.emit("matmul", [ctx.emit("mul", [r, h]),
                                            take(ctx, r_t, 1, 2 * hid, hid)])
        candidate = _activation(ctx, g, rec.clipped(ctx.emit("add", [rec.gate(xw_t, 2),
                                                                     recurrent])))
        one_minus_z = ctx.emit("sub", [rec.const(1), z])
        h = ctx.emit("add", [ctx.emit("mul", [one_minus_z, candidate]),
                             ctx.emit("mul", [z, h])])
        return h, h

    # with linear_before_reset the recurrent bias of the hidden gate sits inside r * (...)
    hs, finals = rec.run(step, fold_recurrent_bias=not linear_before_reset)
    return rec.outputs(hs, finals)


@converter("LSTM", since=7)
def lstm(ctx: ImportContext, inputs: list[Value | None], *, activation_alpha=(),
         activation_beta=(), activations=(), clip: float | None = None,
         direction: str = "forward", hidden_size: int | None = None, input_forget: int = 0,
         layout: int = 0) -> tuple[Value, ...]:
    rec = _Recurrence(ctx, inputs, 4, hidden_size, direction, layout, activations,
                      ["Sigmoid", "Tanh", "Tanh"], clip)
    initial_c = inputs[6] if len(inputs) > 6 else None
    peepholes = inputs[7] if len(inputs) > 7 else None
    if rec.as_kernel:
        return rec.scan("lstm", initial_c, peepholes, input_forget)
    hid = hidden_size

    def peephole(d: int, k: int) -> Value | None:
        if peepholes is None:
            return None
        return take(ctx, take(ctx, peepholes, 0, d, keep_axis=False), 0, k * hid, hid)

    def plus_peephole(pre: Value, d: int, k: int, c: Value) -> Value:
        p = peephole(d, k)
        return pre if p is None else ctx.emit("add", [pre, ctx.emit("mul", [p, c])])

    def step(d, xw_t, r_t, rb, state):
        h, c = state if state is not None else (rec.initial(rec.initial_h, d),
                                                rec.initial(initial_c, d))
        f, g, act_h = rec.activations[d]
        pre = ctx.emit("add", [xw_t, ctx.emit("matmul", [h, r_t])])
        # gate order in W, R, B: input, output, forget, cell
        i = _activation(ctx, f, rec.clipped(plus_peephole(rec.gate(pre, 0), d, 0, c)))
        if input_forget:
            forget = ctx.emit("sub", [rec.const(1), i])
        else:
            forget = _activation(ctx, f, rec.clipped(plus_peephole(rec.gate(pre, 2), d, 2, c)))
        cell = _activation(ctx, g, rec.clipped(rec.gate(pre, 3)))
        c = ctx.emit("add", [ctx.emit("mul", [forget, c]), ctx.emit("mul", [i, cell])])
        o = _activation(ctx, f, rec.clipped(plus_peephole(rec.gate(pre, 1), d, 1, c)))
        h = ctx.emit("mul", [o, _activation(ctx, act_h, c)])
        return h, (h, c)

    hs, finals = rec.run(step)
    return rec.outputs(hs, [s[0] for s in finals], [[s[1] for s in finals]])

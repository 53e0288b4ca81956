"""Converters of ONNX control flow: If, Loop and Scan, flattened into the graph at import.

- If with a constant condition converts only the branch taken. Otherwise both branches are
  converted and each output is ``where(cond, then, else)``: both run, the entry function picks
  the result at run time. Outputs that differ in shape (same rank and dtype) are picked by a
  branch_select kernel, their differing dims data-dependent (ops/branch_select.py);
  sequences must agree in length and element types, optionals in presence.
- Loop needs a trip count or condition known at import; its body is unrolled (a sequence it
  carries grows step by step at import). Scan outputs are stacked along a new first axis.
- Scan is unrolled over the scanned axis (scan_input_axes / directions and
  scan_output_axes / directions respected).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx

from tensorc.errors import ConstantRequiredError, ShapeError, UnsupportedOpError
from tensorc.frontend.containers import describe, is_container
from tensorc.frontend.converters.common import normalize_axis, reshape
from tensorc.frontend.converters.rnn import (
    MAX_UNROLLED_ITERATIONS, check_unrolled_steps, take,
)
from tensorc.frontend.converters.sequence import where_branches
from tensorc.frontend.context import ImportContext, graph_inputs_of
from tensorc.frontend.registry import converter
from tensorc.ir.dims import dim_max
from tensorc.ir.graph import Value


@converter("If", since=1, containers=True)
def if_(ctx: ImportContext, inputs: list[Value], *, then_branch: onnx.GraphProto,
        else_branch: onnx.GraphProto) -> tuple[Value, ...]:
    cond = inputs[0]
    known = ctx.constant(cond)
    if known is not None:
        taken = then_branch if bool(np.asarray(known).reshape(-1)[0]) else else_branch
        return tuple(ctx.inline_graph(taken, []))
    if cond.type.size != 1:
        raise ShapeError(f"If: the condition must hold one element, got {cond.type}")
    then_values = ctx.inline_graph(then_branch, [])
    else_values = ctx.inline_graph(else_branch, [])
    flag = reshape(ctx, cond, ())
    outputs = []
    for k, (a, b) in enumerate(zip(then_values, else_values)):
        if is_container(a) or is_container(b):  # element by element, where they agree
            selected = where_branches(ctx, flag, a, b)
            if selected is None:
                raise ConstantRequiredError(
                    f"If: output {k} is {describe(a)} in the then-branch but {describe(b)} "
                    f"in the else-branch, and the condition is only known at run time; "
                    f"tensorc resolves sequences and optionals while compiling",
                    _inputs_deciding(ctx, cond))
            outputs.append(selected)
            continue
        if a.type.shape != b.type.shape and a.type.ndim == b.type.ndim and \
                a.type.dtype == b.type.dtype:
            outputs.append(_select_branch(ctx, cond, a, b))
            continue
        if a.type != b.type:
            # the condition's inputs, bound to values, fold the If (see tensorc.compile's
            # input_values); the error names them
            raise ConstantRequiredError(
                f"If: output {k} is {a.type} in the then-branch but {b.type} in the "
                f"else-branch, and the condition is only known at run time; tensorc needs "
                f"static shapes",
                _inputs_deciding(ctx, cond))
        outputs.append(ctx.emit("where", [flag, a, b]))
    return tuple(outputs)


def _inputs_deciding(ctx: ImportContext, cond: Value) -> tuple[str, ...]:
    """The model inputs the condition reads: binding them to values folds the If."""
    inputs = {v.name for v in ctx.graph.inputs}
    return tuple(n for n in graph_inputs_of(cond) if n in inputs)


def _select_branch(ctx: ImportContext, cond: Value, a: Value, b: Value) -> Value:
    """The branch the run-time condition picks, where the branches differ in shape: each
    differing axis a data-dependent dim bounded by the larger (ops/branch_select.py)."""
    counts, names = [], []
    for x, y in zip(a.type.shape, b.type.shape):
        if x == y:
            counts.append(None)
            continue
        dim = ctx.graph.dims.declare_data("if", dim_max(x, y), ctx.node_name or "If")
        counts.append(dim)
        names.append(dim.expr.name)
    return ctx.emit("branch_select", [cond, a, b], counts=tuple(counts), writes=tuple(names))


def _stack(ctx: ImportContext, values: Sequence[Value], axis: int) -> Value:
    """Stack equally shaped values along a new ``axis``."""
    shape = list(values[0].type.shape)
    axis = normalize_axis(axis, len(shape) + 1)
    expanded = [reshape(ctx, v, shape[:axis] + [1] + shape[axis:]) for v in values]
    return expanded[0] if len(expanded) == 1 else ctx.emit("concat", expanded, axis=axis)


@converter("Loop", since=1, containers=True)  # sequences and optionals may be carried
def loop(ctx: ImportContext, inputs: list[Value | None], *, body: onnx.GraphProto
         ) -> tuple[Value, ...]:
    trip_count, cond, *carried = inputs
    max_trips = None
    if trip_count is not None:
        # tensorc unrolls loops: the trip count must be known when compiling
        max_trips = int(np.asarray(ctx.require_constant(trip_count, "trip count"))
                        .reshape(-1)[0])
    keep_going = True
    if cond is not None:
        keep_going = bool(np.asarray(ctx.require_constant(cond, "condition")).reshape(-1)[0])
    if max_trips is None:
        max_trips = MAX_UNROLLED_ITERATIONS
    n_carried = len(carried)
    scans: list[list[Value]] = []
    iteration = 0
    while keep_going and iteration < max_trips:
        if iteration == MAX_UNROLLED_ITERATIONS:
            raise UnsupportedOpError(f"Loop: trip count {max_trips} and the condition still "
                                     f"true after {MAX_UNROLLED_ITERATIONS} iterations; "
                                     f"tensorc unrolls loops, up to "
                                     f"{MAX_UNROLLED_ITERATIONS} iterations")
        step_inputs = [ctx.const(np.array(iteration, np.int64)),
                       ctx.const(np.array(True))] + list(carried)
        cond_out, *rest = ctx.inline_graph(body, step_inputs)
        carried = rest[:n_carried]
        scans.append(rest[n_carried:])
        known = ctx.constant(cond_out)
        if known is None:
            raise UnsupportedOpError("Loop: the body computes its continue condition at run "
                                     "time; tensorc unrolls loops and needs it constant")
        keep_going = bool(np.asarray(known).reshape(-1)[0])
        iteration += 1
    if keep_going and trip_count is None:
        raise UnsupportedOpError(f"Loop: no trip count and the condition stays true after "
                                 f"{MAX_UNROLLED_ITERATIONS} iterations")
    n_scan = len(body.output) - 1 - n_carried
    if n_scan and not scans:
        raise UnsupportedOpError("Loop: zero iterations with scan outputs (empty tensors) "
                                 "are not supported")
    stacked = [_stack(ctx, [s[k] for s in scans], 0) for k in range(n_scan)]
    return tuple(carried) + tuple(stacked)


@converter("Scan", since=9)
def scan(ctx: ImportContext, inputs: list[Value], *, body: onnx.GraphProto,
         num_scan_inputs: int, scan_input_axes: Sequence[int] = (),
         scan_input_directions: Sequence[int] = (), scan_output_axes: Sequence[int] = (),
         scan_output_directions: Sequence[int] = ()) -> tuple[Value, ...]:
    n_state = len(inputs) - num_scan_inputs
    state, scanned = list(inputs[:n_state]), inputs[n_state:]
    axes = [normalize_axis(a, v.type.ndim) for a, v in
            zip(scan_input_axes or [0] * num_scan_inputs, scanned)]
    directions = list(scan_input_directions or [0] * num_scan_inputs)
    lengths = {v.type.shape[a] for v, a in zip(scanned, axes)}
    if len(lengths) != 1:
        raise ShapeError(f"Scan: the scanned inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop()
    check_unrolled_steps("Scan", steps)
    outputs_per_step: list[list[Value]] = []
    for t in range(steps):
        slices = [take(ctx, v, a, steps - 1 - t if rev else t, keep_axis=False)
                  for v, a, rev in zip(scanned, axes, directions)]
        results = ctx.inline_graph(body, state + slices)
        state = results[:n_state]
        outputs_per_step.append(results[n_state:])
    n_out = len(body.output) - n_state
    out_axes = list(scan_output_axes or [0] * n_out)
    out_dirs = list(scan_output_directions or [0] * n_out)
    stacked = []
    for k in range(n_out):
        values = [step[k] for step in outputs_per_step]
        if out_dirs[k]:
            values.reverse()
        stacked.append(_stack(ctx, values, out_axes[k]))
    return tuple(state) + tuple(stacked)

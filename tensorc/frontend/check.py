"""What tensorc supports of a model, found without compiling it (``tensorc check``).

The check runs the importer's own pieces, so it can never disagree with ``compile``: the
structure check, the converter table (:func:`~tensorc.frontend.onnx.unsupported_reasons` over
every node, subgraphs included), the input binding, then a trial conversion of every node the
table accepts, which finds what only a converter knows (an attribute value it rejects, a
shape input computed at run time). Unlike the importer, it goes on past a failing node: the
nodes that read a failed node's outputs are left out, the others are still tried, so one run
lists every problem. Nothing is scheduled or compiled.

>>> print(check_model("model.onnx", input_shapes={"x": (1, 3, 224, 224)}))  # doctest: +SKIP
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import onnx

from tensorc.errors import (
    ConstantRequiredError, ShapeError, SymbolicDimError, TensorcError, UnsupportedOpError,
)
from tensorc.frontend.bind import (
    bind_input_values, input_value_hint, negative_dims_as_symbols,
)
from tensorc.frontend.container_inputs import flatten_container_inputs, numbered_nodes
from tensorc.frontend.containers import EmptyOptional, ImportValue, TensorSequence
from tensorc.frontend.context import ImportContext, convert_node, node_label
from tensorc.frontend.model import bound_input_note
from tensorc.frontend.registry import find_converter
from tensorc.frontend.shape_hint import ShapeHint, shape_hint
from tensorc.frontend.onnx import (
    DEFAULT_DOMAINS, _all_nodes, _check_structure, _input_specs, bind_input_shapes,
    default_opset, load_model, new_context, unsupported_reasons,
)
from tensorc.ir.dim_table import DimTable
from tensorc.ir.graph import Value
from tensorc.ir.types import TensorType, format_shape

# Issue kinds: the op itself (type, opset or domain), an attribute the converter does not
# take, a variant the converter rejects (an attribute value, an input), a shape it cannot
# decide statically.
OP, ATTRIBUTE, VARIANT, SHAPE = "op", "attribute", "variant", "shape"


@dataclass
class Issue:
    """One reason why some nodes of an op cannot be compiled."""
    kind: str
    reason: str
    nodes: list[str]
    # False where it showed up only with unbound input dims set to 1, so the real shapes
    # may make it go away; such an issue is a warning, not a failure.
    certain: bool = True


@dataclass
class OpReport:
    """One op type of the model: its nodes and what stops them from compiling."""
    op_type: str
    domain: str  # '' for the default ONNX domain
    opset: int | None  # the model's opset of the op's domain
    nodes: list[str] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)

    @property
    def supported(self) -> bool:
        """Whether tensorc has a converter for this op at this opset (attributes aside)."""
        return not any(issue.kind == OP for issue in self.issues)

    @property
    def ok(self) -> bool:
        """Whether every node of the op converts (warnings aside)."""
        return not any(issue.certain for issue in self.issues)

    @property
    def title(self) -> str:
        name = self.op_type if self.domain in DEFAULT_DOMAINS else f"{self.domain}::{self.op_type}"
        return f"{name} (opset {'?' if self.opset is None else self.opset})"


@dataclass
class InputReport:
    """One model input: its declared dims and what the given input shapes bind them to."""
    name: str
    dtype: str
    dims: list[int | str | None] | None  # as declared; None: unknown rank; str: a symbol
    shape: list[int | str | None] | None  # after binding; ints where bound
    hint: ShapeHint | None = None  # the shape to suggest, where not bound

    @property
    def bound(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def symbolic(self) -> list[dict[str, Any]]:
        """The dims not fixed by the model: index, symbol (None: unnamed), bound value."""
        if self.dims is None:
            return []
        return [{"dim": i, "symbol": d, "value": self._value(i)}
                for i, d in enumerate(self.dims) if not isinstance(d, int)]

    def _value(self, index: int) -> int | None:
        dim = self.shape[index] if self.shape is not None else None
        return dim if isinstance(dim, int) else None

    def describe(self) -> str:
        dims = "?" if self.dims is None else ",".join(
            "?" if d is None else str(d) for d in self.dims)
        text = f"{self.name}: {self.dtype}[{dims}]"
        if self.dims is None:
            given = format_shape(self.shape) if self.bound else "unbound"
            return f"{text}  rank unknown: {given}"
        if not self.symbolic:
            return f"{text}  static"
        parts = [f"dim {s['dim']}{'' if s['symbol'] is None else ' ' + repr(s['symbol'])} = "
                 f"{'unbound' if s['value'] is None else s['value']}" for s in self.symbolic]
        return f"{text}  symbolic: {', '.join(parts)}"


@dataclass
class CheckReport:
    """What :func:`check_model` found. ``str()`` is the text ``tensorc check`` prints,
    :meth:`to_json` its ``--json`` form; ``supported`` decides the exit status."""
    model: str
    ir_version: int
    opsets: dict[str, int]
    inputs: list[InputReport]
    ops: list[OpReport]
    problems: list[str]  # problems of the model as a whole (an input of an unsupported dtype)
    conversion: str  # how far the trial conversion went (see _trial_conversion)
    # nodes not tried because they read what a failed (or unsupported) node computes
    untried: list[str] = field(default_factory=list)
    # the symbolic dims of the trial conversion (DimTable.to_json(): ranges, unified dims,
    # run-time constraints), empty where every dim is bound
    dims: dict[str, Any] = field(default_factory=dict)
    # each graph output the trial conversion computed: name -> its type, dims by name
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        """Whether every op (and input) of the model is supported."""
        return not self.problems and all(op.ok for op in self.ops)

    @property
    def unbound_inputs(self) -> list[str]:
        return [i.name for i in self.inputs if not i.bound]

    def to_dict(self) -> dict[str, Any]:
        ops = [{**asdict(op), "domain": op.domain or "ai.onnx", "supported": op.supported,
                "ok": op.ok} for op in self.ops]
        inputs = [{"name": i.name, "dtype": i.dtype, "dims": i.dims, "shape": i.shape,
                   "symbolic": i.symbolic, "bound": i.bound,
                   **({"hint": i.hint.to_dict()} if i.hint else {})} for i in self.inputs]
        return {"model": self.model, "supported": self.supported,
                "ir_version": self.ir_version, "opsets": self.opsets, "inputs": inputs,
                "unbound_inputs": self.unbound_inputs, "ops": ops, "problems": self.problems,
                "conversion": self.conversion, "untried": self.untried,
                "dims": self.dims, "outputs": self.outputs}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        opsets = ", ".join(f"{domain} {version}" for domain, version in self.opsets.items())
        lines = [f"{self.model}: IR version {self.ir_version}, opsets: {opsets or 'none'}",
                 "inputs:"]
        lines += [f"  {i.describe()}" for i in self.inputs] or ["  none"]
        hints = [i.hint for i in self.inputs if not i.bound and i.hint]
        if hints:
            lines.append(f"  compiling needs their shapes, e.g. "
                         f"{' '.join(hint.cli for hint in hints)}")
            lines += [f"    {hint.note}" for hint in hints if hint.note]
        lines += self._dims_lines()
        nodes = sum(len(op.nodes) for op in self.ops)
        lines.append(f"ops: {len(self.ops)} types, {nodes} nodes")
        for op in sorted(self.ops, key=lambda op: op.ok, reverse=True):
            status = "ok" if op.ok else ("partial" if op.supported else "UNSUPPORTED")
            lines.append(f"  {status:<12}{op.title}: {_names(op.nodes, limit=4)}")
            for issue in op.issues:
                mark = "" if issue.certain else "warning: "
                lines.append(f"  {'':<14}{mark}{issue.reason}; {_names(issue.nodes)}")
        lines += [f"problem: {problem}" for problem in self.problems]
        lines.append(f"conversion: {self.conversion}")
        if self.untried:
            lines.append(f"  not tried, as they read what a failing node computes: "
                         f"{_names(self.untried, limit=10)}")
        bad = [op for op in self.ops if not op.ok]
        if self.supported:
            lines.append("result: every op is supported")
        else:
            lines.append(f"result: NOT SUPPORTED: {len(bad)} of {len(self.ops)} op types "
                         f"have problems" + (f", and {len(self.problems)} more problem(s)"
                                             if self.problems else ""))
        return "\n".join(lines)


    def _dims_lines(self) -> list[str]:
        lines = []
        if self.dims.get("symbols"):
            lines.append("symbolic dims:")
            for dim in self.dims["symbols"]:
                lo, hi = dim["range"]
                places = ", ".join(f"{i}[{a}]" for i, a in dim["inputs"])
                if "computed_by" in dim:    # a data-dependent dim (ir/dim_table.py)
                    places = f"node {dim['computed_by']!r} at run time, at most {dim['bound']}"
                lines.append(f"  {dim['name']} in [{lo}, {'inf' if hi is None else hi}]"
                             f"  (from {places})")
            lines += [f"  {name} = {keep} (unified)"
                      for name, keep in self.dims.get("unified", {}).items()]
            lines += [f"  checked at run time: {c['constraint']} ({c['reason']})"
                      for c in self.dims.get("constraints", [])]
        if self.outputs:
            lines.append("outputs:")
            lines += [f"  {name}: {type}" for name, type in self.outputs.items()]
        return lines


def _names(nodes: Sequence[str], limit: int | None = None) -> str:
    shown = list(nodes if limit is None else nodes[:limit])
    more = f", ... ({len(nodes)} in all)" if len(shown) < len(nodes) else ""
    return f"node{'s' if len(nodes) > 1 else ''} {', '.join(shown)}{more}"


def check_model(model: str | Path | onnx.ModelProto,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                input_values: Mapping[str, Any] | None = None,
                dim_ranges: Mapping[str, tuple[int, int | None]] | None = None
                ) -> CheckReport:
    """Report which ops of ``model`` tensorc supports, without compiling it; the model is
    taken as ``compile`` takes it: dims declared negative are symbolic, ``input_values`` fix
    inputs to constants.

    Raises a TensorcError only where the file is missing or broken or ``input_shapes`` does
    not fit the model's inputs; everything else goes into the report.

    >>> report = check_model("model.onnx")  # doctest: +SKIP
    >>> report.supported, [op.op_type for op in report.ops if not op.ok]  # doctest: +SKIP
    (False, ['NonZero'])
    """
    proto, label = load_model(model)
    try:  # sequence and optional inputs become tensor inputs, as compile has them
        proto, input_shapes, input_values = flatten_container_inputs(proto, input_shapes,
                                                                     input_values, label)
        containers = None
    except ShapeError as error:  # a sequence input's length not given: ops still listed
        containers = str(error).removeprefix(f"{label}: ")
    proto = bind_input_values(negative_dims_as_symbols(proto), input_values, label)
    _check_structure(proto, label)
    opset = default_opset(proto, label)
    versions = {e.domain or "ai.onnx": int(e.version) for e in proto.opset_import}
    ops: dict[tuple[str, str], OpReport] = {}
    for index, node in _all_nodes(proto.graph):
        if index < 0:
            continue  # made by tensorc from a sequence or optional input (container_inputs.py)
        op = _op_report(ops, node, opset, versions)
        op.nodes.append(_name(node, index))
        op_level = node.domain not in DEFAULT_DOMAINS or find_converter(node.op_type,
                                                                         opset) is None
        for reason in unsupported_reasons(node, opset):
            _add_issue(op, OP if op_level else ATTRIBUTE, reason, _name(node, index), True)
    problems: list[str] = []
    if containers is not None:
        return CheckReport(label, int(proto.ir_version), versions, [], list(ops.values()),
                           [containers], "not tried: a sequence input's length is not given")
    try:
        _input_specs(proto, label)
    except ShapeError as error:  # an input the model declares, not one the user gave
        problems.append(str(error).removeprefix(f"{label}: "))
        return CheckReport(label, int(proto.ir_version), versions, [], list(ops.values()),
                           problems, "not tried: the inputs are not supported")
    specs, shapes, _ = bind_input_shapes(proto, input_shapes or {}, label)
    inputs = [InputReport(s.name, s.dtype, s.dims, shapes[s.name]) for s in specs]
    for i in inputs:
        if not i.bound:
            i.hint = shape_hint(i.name, i.shape, proto)
    untried: list[str] = []
    found: dict[str, Any] = {}
    conversion = _trial_conversion(proto, opset, label, inputs, ops, versions, problems,
                                   untried, input_shapes or {}, dim_ranges, found)
    return CheckReport(label, int(proto.ir_version), versions, inputs, list(ops.values()),
                       problems, conversion, untried, found.get("dims", {}),
                       found.get("outputs", {}))


def _name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"#{index}"  # as the importer's unsupported-op error names it


def _op_report(ops: dict[tuple[str, str], OpReport], node: onnx.NodeProto, opset: int,
               versions: dict[str, int]) -> OpReport:
    key = (node.domain if node.domain not in DEFAULT_DOMAINS else "", node.op_type)
    if key not in ops:
        version = opset if not key[0] else versions.get(key[0])
        ops[key] = OpReport(node.op_type, key[0], version)
    return ops[key]


def _add_issue(op: OpReport, kind: str, reason: str, node: str, certain: bool) -> None:
    for issue in op.issues:
        if (issue.kind, issue.reason, issue.certain) == (kind, reason, certain):
            issue.nodes.append(node)
            return
    op.issues.append(Issue(kind, reason, [node], certain))


def _trial_conversion(proto: onnx.ModelProto, opset: int, label: str,
                      inputs: list[InputReport], ops: dict[tuple[str, str], OpReport],
                      versions: dict[str, int], problems: list[str], untried: list[str],
                      input_shapes: Mapping[str, Sequence[int]],
                      dim_ranges: Mapping[str, tuple[int, int | None]] | None,
                      found: dict[str, Any]) -> str:
    """Convert every node the converter table accepts, recording each failure on its op
    (and in ``untried`` the nodes left out), and in ``found`` the symbolic dims and the
    outputs' types; return how the conversion went."""
    unknown_rank = [i.name for i in inputs if i.shape is None]
    if unknown_rank:
        return (f"not tried: inputs {', '.join(unknown_rank)} have an unknown rank; pass "
                f"their shapes to check every node's variant and shapes")
    # Dims still unbound stay symbolic: shape inference runs on the dims themselves. What
    # is not ported to symbolic dims yet is a warning: concrete shapes may convert it.
    symbolic = any(not i.bound for i in inputs)
    try:
        context = new_context(proto, opset, input_shapes, label, dim_ranges, symbolic=True)
    except SymbolicDimError as error:
        problems.append(str(error).removeprefix(f"{label}: "))
        return "not tried: the input dims cannot be symbolic"
    except TensorcError as error:  # an initializer of an unsupported dtype, dim_ranges
        problems.append(str(error).removeprefix(f"{label}: "))
        return "not tried: the model's constants or dim ranges cannot be read"
    with context.graph.dims.active():
        _convert_each(context, proto, opset, label, ops, versions, untried, symbolic,
                      input_shapes)
    dims = context.graph.dims
    env = context.env
    if dims.ranges:
        found["dims"] = dims.to_json()
    found["outputs"] = {o.name: _describe_output(env[o.name], dims)
                        for o in proto.graph.output if env.get(o.name) is not None}
    if symbolic:
        return (f"tried with the unbound input dims symbolic ({', '.join(dims.symbols)}): "
                f"what is not ported to symbolic dims yet is a warning, which concrete "
                f"input shapes may remove")
    return "tried on every node the converter table accepts, with every input shape bound"


def _describe_output(value: ImportValue, dims: DimTable) -> str:
    """An output's type, dims by name; a sequence's element types, an empty optional."""
    def tensor(v: Value) -> str:
        return str(TensorType(dims.resolve_shape(v.type.shape), v.type.dtype))
    if isinstance(value, TensorSequence):
        return f"sequence [{', '.join(tensor(v) for v in value.items)}]"
    if isinstance(value, EmptyOptional):
        return f"empty optional ({value.kind})"
    return tensor(value)


def _convert_each(context: ImportContext, proto: onnx.ModelProto, opset: int, label: str,
                  ops: dict[tuple[str, str], OpReport], versions: dict[str, int],
                  untried: list[str], symbolic: bool,
                  input_shapes: Mapping[str, Sequence[int]]) -> None:
    env = context.env
    failed: set[str] = set()  # outputs of nodes that were not converted
    for index, node in numbered_nodes(proto.graph):
        # the node and the nodes of its subgraphs (If branches, Loop and Scan bodies)
        subtree = [n for _, n in _all_nodes(onnx.GraphProto(node=[node]))]
        reads = {name for n in subtree for name in n.input}
        unsupported = any(unsupported_reasons(n, opset) for n in subtree)  # reported above
        if unsupported or reads & failed:
            if not unsupported:
                untried.append(_name(node, index))
            failed.update(node.output)
            continue
        try:
            convert_node(context, node, index, env)
        except Exception as error:  # noqa: BLE001 - every failure belongs in the report
            kind, certain = _classify(error, symbolic)
            where = (f"{label}: node {node_label(node, index)} ({node.op_type}, opset "
                     f"{opset}): ")
            reason = str(error).removeprefix(where).split("\n  inputs:")[0]
            if not isinstance(error, TensorcError):
                reason = f"internal error in tensorc: {type(error).__name__}: {reason}"
            elif isinstance(error, ConstantRequiredError) and input_value_hint(error, proto):
                reason = f"{reason}. {input_value_hint(error, proto)}"
            elif isinstance(error, ShapeError) and bound_input_note(error, proto, input_shapes):
                reason = f"{reason}. {bound_input_note(error, proto, input_shapes)[1]}"
            _add_issue(_op_report(ops, node, opset, versions), kind, reason,
                       _name(node, index), certain)
            failed.update(node.output)
    producers = {name: (index, node) for index, node in numbered_nodes(proto.graph)
                 for name in node.output}
    for output in proto.graph.output:
        if output.name not in failed and env.get(output.name) is None \
                and output.name in producers:
            index, node = producers[output.name]
            _add_issue(_op_report(ops, node, opset, versions), VARIANT,
                       f"graph output {output.name!r} is an output tensorc does not compute",
                       _name(node, index), True)


def _classify(error: Exception, symbolic: bool) -> tuple[str, bool]:
    """An issue's kind, and whether it is certain (see Issue.certain): what symbolic dims
    alone cause (SymbolicDimError, a shape value of symbolic dims where a constant is
    needed) is not."""
    if isinstance(error, UnsupportedOpError):
        return VARIANT, True
    if isinstance(error, SymbolicDimError):
        return SHAPE, False
    if isinstance(error, ConstantRequiredError):  # run-time values stay so at any shape
        return SHAPE, not (symbolic and "symbolic dims" in str(error))
    if isinstance(error, ShapeError):
        return SHAPE, True
    return VARIANT, True

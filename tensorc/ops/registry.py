"""The core op registry: one entry per core op, used by every layer.

An entry holds
- ``infer(attrs, input_types) -> list[TensorType]``: shape and dtype rule;
- ``pattern``: the fusion class;
- ``reference(attrs, *arrays) -> list[np.ndarray]``: numpy semantics (constant folding, tests);
- ``compute(attrs, *te_tensors) -> list[te.Tensor]``: the tensor-expression definition
  (``compute(attrs, *te_tensors, target=...)`` where it is registered ``reads_target``: a
  formulation whose tensors follow the machine, such as the flattened conv's padding);
- ``layouts(attrs, input_types, target) -> WeightLayouts | None``: where a knob of the
  op's schedule picks the layout of a constant operand (conv's ``algorithm``, matmul's
  ``vectors``), the layouts it may pick (``ops/weight_layouts.py``);
- ``kernel(attrs, operands, output, writes) -> Stmt``: for an opaque op that no tensor
  expression can state (a compaction: NonZero, NonMaxSuppression), its kernel written
  directly as loop IR over its operands (Buffers, or the Const of a one-element constant), its
  output Buffer and, for each data-dependent dim it computes (``attrs["writes"]``), a
  one-element int64 Buffer to store that dim's value in (see ``ops/loop_kernels.py``);
- ``schedule``: per target kind ("llvm", "cuda"), a :class:`Template`: the schedule of a
  fused group whose anchor (most complex op) is this op, as a function of a config, and the
  search space that config comes from (see ``ops/space.py``).

Families fill the registry from their own modules (``ops/elementwise.py``,
``ops/nn/conv/op.py``, …) with :func:`define`, then set the pieces they own with the
decorators on :class:`OpDef`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

from tensorc.ops.space import EMPTY, SearchSpace


class Pattern(enum.IntEnum):
    """Fusion classes, ordered from easiest to hardest to fuse (as in TVM)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


@dataclass
class Template:
    """A schedule as a function of named choices.

    ``apply(target, sch, out, anchor, attrs, config)`` schedules a fused group whose output is
    ``out`` and whose anchor tensor is ``anchor``; ``space(target, out, anchor, attrs)``
    declares the knobs ``config`` takes values for (none when ``space`` is None).
    """

    apply: Callable
    space: Callable | None = None
    # whether ``apply`` and ``space`` take tensors of symbolic shape (choosing at the dims'
    # hints, te.hint); other templates' groups over symbolic dims get the generic schedule
    symbolic: bool = False

    def search_space(self, target, out, anchor, attrs: dict) -> SearchSpace:
        return EMPTY if self.space is None else self.space(target, out, anchor, attrs)


@dataclass
class OpDef:
    name: str
    pattern: Pattern
    infer_fn: Callable | None = None
    reference_fn: Callable | None = None
    compute_fn: Callable | None = None
    compute_reads_target: bool = False
    layouts_fn: Callable | None = None
    kernel_fn: Callable | None = None
    templates: dict[str, Template] = field(default_factory=dict)   # by target kind
    extra: dict[str, Any] = field(default_factory=dict)

    # decorators -------------------------------------------------------------------------------
    def infer(self, fn: Callable) -> Callable:
        self.infer_fn = fn
        return fn

    def reference(self, fn: Callable) -> Callable:
        self.reference_fn = fn
        return fn

    def compute(self, fn: Callable | None = None, *, reads_target: bool = False):
        """Register the compute: ``@op.compute``, or ``@op.compute(reads_target=True)`` for
        one that takes the target as the keyword ``target`` (None: no target, as in tests
        that build tensors alone)."""
        def register(f: Callable) -> Callable:
            self.compute_fn = f
            self.compute_reads_target = reads_target
            return f
        return register(fn) if fn is not None else register

    def layouts(self, fn: Callable) -> Callable:
        self.layouts_fn = fn
        return fn

    def kernel(self, fn: Callable) -> Callable:
        self.kernel_fn = fn
        return fn

    def schedule(self, fn: Callable | None = None, *, target: str = "llvm",
                 space: Callable | None = None, symbolic: bool = False):
        """Register the schedule template for ``target`` kind: ``op.schedule(fn)``,
        ``@op.schedule`` or ``@op.schedule(target="cuda", space=gpu_space)``; ``symbolic``:
        it takes symbolic shapes (see Template)."""
        def register(f: Callable) -> Callable:
            self.templates[target] = Template(f, space, symbolic)
            return f
        return register(fn) if fn is not None else register

    def template(self, target_kind: str) -> Template | None:
        return self.templates.get(target_kind)


REGISTRY: dict[str, OpDef] = {}


def define(name: str, pattern: Pattern) -> OpDef:
    """Create (or return the existing) registry entry for core op ``name``."""
    op = REGISTRY.get(name)
    if op is None:
        op = REGISTRY[name] = OpDef(name, pattern)
    return op

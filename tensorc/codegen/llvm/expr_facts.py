"""What the code generator asks about loop-IR expressions, answered once per expression.

The same expression objects are asked about again and again while a module is emitted: every
sub-expression of a vector loop's body asks whether it reads the loop's variable (a walk of
its whole subtree each time), and an unrolled loop emits its body once per iteration, each
time analysing the same indices (``linear_coeff``). Expressions hash by identity and are never
changed once built, so the answers are kept by identity (holding the expressions alive, so an
id is never reused) for the life of one :class:`~tensorc.codegen.llvm.codegen.LLVMCodegen`.

>>> facts = ExprFacts()
>>> facts.uses_var(i * 4 + j, j)
True
"""
from __future__ import annotations

from tensorc.codegen.llvm import index_cache
from tensorc.codegen.llvm.vector_index import strip_justified_clamps
from tensorc.ir import arith
from tensorc.ir import expr as E


class ExprFacts:
    """Memoized ``E.uses_var``, ``E.free_vars`` and ``arith.linear_coeff`` (see the module
    docstring)."""

    def __init__(self) -> None:
        self._uses: dict[E.Var, dict[E.Expr, bool]] = {}
        self._linear: dict[tuple[E.Expr, E.Var], tuple[E.Expr, int] | None] = {}
        self._free: dict[E.Expr, tuple[E.Var, ...]] = {}
        self._stripped: dict[tuple[E.Expr, E.Expr], E.Expr | None] = {}
        self._pure: dict[E.Expr, bool] = {}
        self._nonnegative: dict[E.Expr, bool] = {}
        self._structure: dict[E.Expr, int] = {}
        self._numbers: dict[tuple, int] = {}

    def pure_index(self, e: E.Expr) -> bool:
        """``index_cache.pure_index``."""
        found = self._pure.get(e)
        if found is None:
            found = self._pure[e] = index_cache.pure_index(e, self.pure_index)
        return found

    def nonnegative(self, e: E.Expr) -> bool:
        """``index_cache.nonnegative``."""
        found = self._nonnegative.get(e)
        if found is None:
            found = self._nonnegative[e] = index_cache.nonnegative(e, self.nonnegative)
        return found

    def structure(self, e: E.Expr) -> int:
        """A number for ``e``'s structure (a pure index expression's: index_cache.py), equal
        for equal expressions, variables by identity."""
        found = self._structure.get(e)
        if found is None:
            if isinstance(e, E.Var):
                key = ("var", id(e))        # (the memo keeps the Var, so its id stays its)
            elif isinstance(e, E.Const):
                key = ("const", e.dtype, e.value)
            else:
                head = (type(e).__name__, e.dtype, getattr(e, "op", None))
                key = head + tuple(self.structure(c) for c in e.children())
            found = self._numbers.setdefault(key, len(self._numbers))
            self._structure[e] = found
        return found

    def free_vars(self, e: E.Expr) -> tuple[E.Var, ...]:
        """The variables ``e`` reads (``E.free_vars``)."""
        found = self._free.get(e)
        if found is None:
            found = self._free[e] = tuple(E.free_vars(e))
        return found

    def uses_var(self, e: E.Expr, var: E.Var) -> bool:
        """Whether ``var`` occurs in ``e``; each subtree is walked once per variable."""
        memo = self._uses.get(var)
        if memo is None:
            memo = self._uses[var] = {}
        return self._uses_var(e, var, memo)

    def _uses_var(self, e: E.Expr, var: E.Var, memo: dict) -> bool:
        found = memo.get(e)
        if found is None:
            found = e is var
            if not found:
                for c in e.children():
                    if self._uses_var(c, var, memo):
                        found = True
                        break
            memo[e] = found
        return found

    def strip_justified_clamps(self, index: E.Expr, cond: E.Expr) -> E.Expr | None:
        """``vector_index.strip_justified_clamps``; the same index object each time, so that
        what is asked of it next is answered once too."""
        key = (index, cond)
        if key in self._stripped:
            return self._stripped[key]
        found = self._stripped[key] = strip_justified_clamps(index, cond)
        return found

    def linear_coeff(self, e: E.Expr, var: E.Var) -> tuple[E.Expr, int] | None:
        """``arith.linear_coeff(e, var)``: (base, stride) or None."""
        key = (e, var)
        if key in self._linear:
            return self._linear[key]
        found = self._linear[key] = arith.linear_coeff(e, var)
        return found

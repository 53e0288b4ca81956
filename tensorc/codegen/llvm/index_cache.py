"""Index arithmetic emitted once per function, at the outermost point where its variables are
bound: the code generator's value numbering.

A kernel over symbolic dims reads the same index terms in every statement: ``seq // 6``,
``seq * (b % 4) * 16``, each tail's start. Emitted where each use is, a register tile of 6
rows repeats them per row and per copy of the tile (a tail per remainder), and a floor
division is nine instructions: 90% of bert's attention-score kernel's LLVM IR was index
arithmetic (15,000 lines for 119 lines of loop IR), which LLVM's passes then spent seconds
folding back. :class:`IndexCache` emits each pure integer expression once for each binding of
the variables it reads, in the block where the innermost of them is bound: the function's
entry for the dims, a serial loop's first body block for its variable, the outlined
function's first block for what a parallel loop captures. Those blocks dominate every use
while the bindings hold, and pure integer arithmetic (divisions only by positive constants)
cannot trap, so moving it there is always legal.

Static kernels use it too: with each address split into a constant offset and the rest
(offsets.py), the unrolled loads of a Winograd transform share one
address computation instead of repeating it per load (resnet's 3x3 convs: 23,649 -> 14,233
lines of LLVM IR, LLVM's time 1.27 -> 0.80 s).

>>> cache = IndexCache()
>>> cache.bind(dim, entry_block, dim_argument)   # the dims: bound in the entry block
"""
from __future__ import annotations

from llvmlite import ir

from tensorc.ir import expr as E

# integer ops a cached expression may hold; a division or remainder needs a positive constant
# divisor (it is computed where a guard on the divisor may not have run yet)
_PURE_OPS = frozenset({"add", "sub", "mul", "min", "max", "bitand", "bitor", "bitxor",
                       "shl", "shr"})
_DIVISIONS = frozenset({"floordiv", "floormod", "truncdiv", "truncmod", "div"})


class IndexCache:
    """Per-function cache of emitted index values (see the module docstring): where each
    variable is bound (``bind``), and the value of each expression per binding."""

    def __init__(self) -> None:
        # Var -> (depth, block, value): bound to ``value`` in ``block``; a larger depth is
        # bound inside a smaller one
        self.points: dict[E.Var, tuple[int, ir.Block, ir.Value]] = {}
        self.values: dict[tuple, ir.Value] = {}
        self._depth = 0

    def bind(self, var: E.Var, block: ir.Block, value: ir.Value) -> None:
        """``var`` is ``value`` from ``block`` on (until :meth:`unbind`)."""
        self._depth += 1
        self.points[var] = (self._depth, block, value)

    def unbind(self, var: E.Var) -> None:
        self.points.pop(var, None)

    def nonnegative_vars(self, gen, e: E.Expr) -> bool:
        """Whether every variable ``e`` reads is a loop variable or a dim (never negative) or
        bound to a constant at least 0."""
        env = gen.fs.env
        for v in gen.facts.free_vars(e):
            value = env[v]
            if isinstance(value, ir.Constant):
                if not isinstance(value.constant, int) or value.constant < 0:
                    return False
            elif v not in self.points:
                return False
        return True

    def value(self, gen, e: E.Expr) -> ir.Value:
        """``e`` (a pure integer expression, :func:`pure_index`) emitted once per binding of
        its variables, at the innermost of their binding points (``gen``: the code
        generator, whose ``emit`` writes an expression where its builder stands)."""
        fs = gen.fs
        bound = []
        top = None          # (depth, block) of the innermost binding point
        here = False        # a variable bound elsewhere: emitted and kept in this block only
        for v in gen.facts.free_vars(e):
            value = fs.env[v]
            if isinstance(value, ir.Constant):
                if not isinstance(value.type, ir.IntType):
                    return gen.emit(e, None)
                bound.append((id(v), "const", value.type.width, value.constant))
                continue
            if not isinstance(value.type, ir.IntType):
                return gen.emit(e, None)
            # (an instruction or argument lives with the module: its id is never reused)
            bound.append((id(v), id(value)))
            point = self.points.get(v)
            if point is None or point[2] is not value:
                here = True
            elif top is None or point[0] > top[0]:
                top = point
        if top is None and not here:
            return gen.emit(e, None)    # constants only: folded where it stands
        block = gen.b.block
        if not here and top[1] is not block:
            if top[1].is_terminated:
                builder = ir.IRBuilder(top[1])
                builder.position_before(top[1].terminator)
            elif top[1] is fs.entry:        # (its branch into the body is added last)
                builder = ir.IRBuilder(top[1])
            else:
                here, builder = True, None
            block = top[1] if not here else block
        else:
            builder = None
        key = (gen.facts.structure(e), tuple(sorted(bound)), block if here else None)
        found = self.values.get(key)
        if found is not None:
            return found
        if builder is None:
            found = gen.emit(e, None)
        else:
            saved, fs.builder = fs.builder, builder
            try:
                found = gen.emit(e, None)
            finally:
                fs.builder = saved
        self.values[key] = found
        return found


def pure_index(e: E.Expr, ask=None) -> bool:
    """Whether ``e`` is integer (or boolean) arithmetic of variables and constants that
    cannot trap: no loads or calls, divisions only by positive constants. ``ask``: how a
    sub-expression is asked (a memoized version of this function)."""
    ask = ask or pure_index
    if isinstance(e, (E.Var, E.Const)):
        return E.is_int(e.dtype) or e.dtype == "bool"
    if isinstance(e, E.Binary):
        if not E.is_int(e.dtype):
            return False
        if e.op in _DIVISIONS:
            return isinstance(e.b, E.Const) and e.b.value > 0 and ask(e.a)
        return e.op in _PURE_OPS and ask(e.a) and ask(e.b)
    if isinstance(e, E.Compare):
        return E.is_int(e.a.dtype) and ask(e.a) and ask(e.b)
    if isinstance(e, E.Logical):
        return all(ask(a) for a in e.args)
    if isinstance(e, E.Select):
        return (E.is_int(e.dtype) or e.dtype == "bool") and ask(e.cond) and \
            ask(e.true_value) and ask(e.false_value)
    if isinstance(e, E.Cast):
        return (E.is_int(e.dtype) or e.dtype == "bool") and \
            (E.is_int(e.value.dtype) or e.value.dtype == "bool") and ask(e.value)
    return False


def nonnegative(e: E.Expr, ask=None) -> bool:
    """Whether ``e`` is at least 0 wherever its variables are (loop variables and dims
    are never negative); ``ask`` as in :func:`pure_index`."""
    ask = ask or nonnegative
    if isinstance(e, E.Var):
        return True
    if isinstance(e, E.Const):
        return isinstance(e.value, int) and e.value >= 0
    if isinstance(e, E.Binary):
        if e.op == "floormod":
            return isinstance(e.b, E.Const) and e.b.value > 0
        if e.op in ("floordiv", "truncdiv"):
            return isinstance(e.b, E.Const) and e.b.value > 0 and ask(e.a)
        if e.op in ("add", "mul", "min"):
            return ask(e.a) and ask(e.b)
        if e.op == "max":
            return ask(e.a) or ask(e.b)
    if isinstance(e, E.Select):
        return ask(e.true_value) and ask(e.false_value)
    return False

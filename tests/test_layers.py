"""The house rules of ../shared/DESIGN.md, checked on the source: layers point down, no import
cycle between tensorc's modules (imports inside functions included), no file over 600 lines,
and an import inside a function only where it says why (a start-up cost or an optional
dependency)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "tensorc"
MAX_LINES = 600

# Each top-level part of tensorc and its layer: a module may import from its own part and
# from parts of a lower layer, never from its own layer's other parts or from above.
LAYERS = {
    "errors": 0, "version": 0, "examples": 0,   # the example models: onnx only
    "ir": 1, "reference": 1,
    "target": 2,
    "ops": 3,
    "frontend": 4, "passes": 4,
    "codegen": 5,
    "runtime": 6,
    "compiler": 7,
    "autotune": 8,
    "api": 9, "benchmark": 9,                  # the public functions
    "__init__": 10, "backend": 10,             # the package's names; ONNX's Backend on them
    "cli": 11,
    "__main__": 12,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported tensorc module, line, inside a function) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module.split(".")
                    if path.name != "__init__.py":
                        package = package[:-1]
                    package = package[:len(package) - child.level + 1]
                    base = ".".join(package + ([base] if base else []))
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in MODULES else base)
            for target in targets:
                while target and target not in MODULES:
                    target = target.rpartition(".")[0]
                if target.startswith("tensorc") and target != module:
                    found.append((target, child.lineno, in_function))
            visit(child, nested)
    visit(tree, False)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def test_every_part_has_a_layer():
    assert sorted({_part(m) for m in MODULES} - set(LAYERS)) == []


def test_layers_point_down():
    wrong = []
    for module, imports in GRAPH.items():
        here = _part(module)
        for target, line, _ in imports:
            there = _part(target)
            if there != here and LAYERS.get(there, 99) >= LAYERS.get(here, -1):
                wrong.append(f"{MODULES[module].relative_to(ROOT.parent)}:{line} imports "
                             f"{target} ({there}, layer {LAYERS.get(there)}) from layer "
                             f"{LAYERS.get(here)} ({here})")
    assert wrong == []


def test_no_import_cycles():
    edges = {m: sorted({t for t, _, _ in imports}) for m, imports in GRAPH.items()}
    cycles, state, stack = [], {}, []

    def walk(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in edges.get(node, ()):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = "done"
    for module in edges:
        if module not in state:
            walk(module)
    assert cycles == []


def test_imports_inside_functions_say_why():
    """A tensorc import inside a function is allowed for a documented start-up cost: a comment
    on its line or the line above says why."""
    silent = []
    for module, imports in GRAPH.items():
        lines = MODULES[module].read_text().splitlines()
        for target, line, inside in imports:
            if inside and not _explained(lines, line - 1):
                silent.append(f"{MODULES[module].relative_to(ROOT.parent)}:{line} {target}")
    assert silent == []


def _explained(lines: list[str], k: int) -> bool:
    """Whether the import on line ``k`` (from 0), or the run of imports it stands in, has a
    comment on one of its lines or on the line above the run."""
    while k >= 0:
        text = lines[k].strip()
        if "#" in text:
            return True
        if not text.startswith(("from ", "import ")) and not text.endswith((",", "(", ")")):
            return False
        k -= 1
    return False


@pytest.mark.parametrize("module", sorted(MODULES))
def test_file_size(module):
    lines = MODULES[module].read_text().count("\n")
    assert lines <= MAX_LINES, f"{MODULES[module]} has {lines} lines: split it by concept"


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text("from tensorc.ir import expr\n\n"
                    "def f():\n    from . import graph\n    import numpy\n")
    found = _imports("tensorc.ir.fake", fake)
    assert found == [("tensorc.ir.expr", 1, False), ("tensorc.ir.graph", 4, True)]

"""The package's layering, read from the code with ``ast``: every import, at any depth of a module.

* ``gymflow/`` (the library) never imports the app layer: ``gymflow.cli``, ``gymflow.flows``,
  ``gymflow.tasks``, ``gymflow.deployments`` (nor their old top-level names);
* a package imports only the packages below it in ``LAYERS`` (``core`` at the bottom);
* no two modules of ``gymflow/`` import each other, directly or through others (no cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "gymflow"
APP = ("cli", "flows", "tasks", "deployments")
LAYERS = ["core", "env", "data", "policy", "rollout", "agent", "eval", "train", "lifecycle",
          "stack"]  # fmt: skip
"""Bottom to top: each package may import itself and those before it, never those after."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a.b import c`` counts ``a.b`` and ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in LIBRARY.rglob("*.py")}
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # gymflow.<package>[.<module>]


def test_the_library_never_imports_the_app_layer():
    offenders = []
    for path in LIBRARY.rglob("*.py"):
        for name in _imports(path):
            top = name.split(".")
            if top[0] in APP or (top[0] == "gymflow" and len(top) > 1 and top[1] in APP):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_packages_import_only_the_layers_below():
    rank = {name: i for i, name in enumerate(LAYERS)}
    offenders = []
    for module, deps in _graph().items():
        mine = _package(module)
        for dep in deps:
            theirs = _package(dep)
            if mine in rank and theirs in rank and rank[theirs] > rank[mine]:
                offenders.append(f"{module} ({mine}) imports {dep} ({theirs})")
    assert not offenders, "\n".join(sorted(offenders))


def test_every_library_module_is_in_a_layer():
    stray = [m for m in _graph() if m != "gymflow" and _package(m) not in LAYERS]
    assert not stray, f"modules outside the layered packages: {stray}"


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if dep == node or dep == node.rsplit(".", 1)[0]:
                continue  # a module and its own package's __init__
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("source", ["gymflow.flows.lifecycle", "gymflow.tasks.train"])
def test_the_checker_sees_imports(source):
    """The walker is not vacuous: app modules do import the library, and it sees that."""
    path = ROOT / Path(*source.split(".")[1:]).with_suffix(".py")
    assert any(name.startswith("gymflow.lifecycle") for name in _imports(path))

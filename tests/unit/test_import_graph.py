"""No import circles: every module of kmq/, api/ and tracker/ reads top-down.

The graph is built from the source (ast), so it counts every import a module states: at the top, inside a function,
or under `TYPE_CHECKING`. A circle hidden in a function or a type-only import still ties the two modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = (ROOT, ROOT / "api", ROOT / "tracker")  # each holds one import package: kmq, kmq_api, kmq_tracker
PACKAGES = ("kmq", "kmq_api", "kmq_tracker")


def _module_names() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for source_root, package in zip(SOURCE_ROOTS, PACKAGES, strict=True):
        for path in (source_root / package).rglob("*.py"):
            parts = path.relative_to(source_root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports: `from a.b import c` is a.b.c when that is a module, else a.b."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node.module, node.level)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {module for module in found if module in modules and module != name}


def _absolute(name: str, is_package: bool, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = name.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (level - 1)]
    return ".".join([*anchor, module] if module else anchor)


def import_graph() -> dict[str, set[str]]:
    modules = _module_names()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan), each as a path a → … → a."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_one_circle(graph, component) for component in components]


def _one_circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, for the failure message."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{sorted(component)} is no cycle")


def test_no_module_imports_one_that_imports_it_back() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_graph_sees_relative_type_only_and_function_level_imports(tmp_path: Path) -> None:
    # Given the real graph: an edge the test relies on for each kind of import statement
    graph = import_graph()
    assert "kmq.worker.core" in graph["kmq.worker.runtime"]  # a top-level `from kmq.worker.core import ...`
    assert "kmq.errors" in graph["kmq.client"]
    # When a circle exists (a synthetic graph), then it is reported as a path
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(
    ("name", "is_package", "module", "level", "expected"),
    [
        ("kmq.worker.runtime", False, "core", 1, "kmq.worker.core"),
        ("kmq.worker", True, "core", 1, "kmq.worker.core"),
        ("kmq.worker.runtime", False, None, 2, "kmq"),
        ("kmq.worker.runtime", False, "kmq.errors", 0, "kmq.errors"),
    ],
)
def test_relative_imports_resolve_against_their_package(
    name: str, is_package: bool, module: str | None, level: int, expected: str
) -> None:
    assert _absolute(name, is_package, module, level) == expected

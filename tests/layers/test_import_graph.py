"""The import graph of the core and every plugin stays one-way: no module imports, directly or
through others, a module that imports it back (function-level imports included; imports under
``if TYPE_CHECKING:`` are typing only and do not count)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "harness_core", *sorted((ROOT / "plugins").glob("*/src/*"))]


def module_name(path: Path) -> str:
    """``harness_core/kit/adapter.py`` → ``harness_core.kit.adapter``; a plugin's module is named
    from its ``src/`` folder."""
    root = next((parent for parent in path.parents if parent.name == "src"), ROOT)
    names = list(path.relative_to(root).with_suffix("").parts)
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {target for target in found if target in known and target != name}


def graph() -> dict[str, set[str]]:
    files = {module_name(path): path for source in SOURCES for path in source.rglob("*.py")}
    known = set(files)
    return {name: imports_of(path, name, known) for name, path in files.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                cycle = walk(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = walk(node)
            if cycle:
                return cycle
    return None


def test_the_import_graph_has_no_cycle() -> None:
    edges = graph()
    assert "harness_core.kit.adapter" in edges
    assert "harness_llm_openai.adapter" in edges
    cycle = find_cycle(edges)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None

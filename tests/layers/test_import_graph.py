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


LAYERS: dict[str, int] = {
    **dict.fromkeys(
        [
            "harness_core",  # the package root: lazy names only
            "harness_core._lazy",
            "harness_core.errors",
            "harness_core.abort",
            "harness_core.types",
            "harness_core.media",
            "harness_core.structured",
            "harness_core.attach",
            "harness_core.contract",
            "harness_core.assembler",
            "harness_core.adapter",
            "harness_core.embedding",
            "harness_core.callchain",
            "harness_core.fields",
            "harness_core.hookspecs",
            "harness_core.tools",
            "harness_core.secret",  # a package: _value, _forms, _redactor, _holdback, _scrubber, _masking, _logging
            "harness_core.plugininfo",
            "harness_core.entrypoints",
            "harness_core.outfile",
        ],
        0,
    ),
    **dict.fromkeys(["harness_core.sse", "harness_core.http", "harness_core.config"], 1),
    **dict.fromkeys(
        [
            "harness_core.registry",
            "harness_core.routing",
            "harness_core.closing",
            "harness_core.record",
            "harness_core.chain",
            "harness_core.boundary",
            "harness_core.runtime",
            "harness_core.conversation",
            "harness_core.sync",
            "harness_core.loader",
        ],
        2,
    ),
    **dict.fromkeys(["harness_core.kit", "harness_core.middleware", "harness_core.testing"], 3),
    "harness_core.cli": 4,
}
"""The layer of each top-level part of the core, bottom up (CONTRIBUTING.md, the map of the house):
0 the vocabulary (chunks, messages, errors, the hook specs, secrets), 1 codecs and transport (SSE,
HTTP, config values), 2 the runtime and the loader, 3 the adapter kit, the middleware face and the testing kit, 4 the
command line. A module imports only its own layer or those below."""

LAYER_NAMES = ("vocabulary", "codecs and transport", "runtime and loader", "kits", "CLI")


def part_of(module: str) -> str:
    """``harness_core.kit.blocks`` → ``harness_core.kit``; ``harness_core`` stays itself."""
    return ".".join(module.split(".")[:2])


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    """Each import of a core module from a lower layer than the importing one's part."""
    found = []
    for name, targets in sorted(edges.items()):
        for target in sorted(targets):
            if not (name.startswith("harness_core") and target.startswith("harness_core")):
                continue
            low, high = LAYERS[part_of(name)], LAYERS[part_of(target)]
            if high > low:
                found.append(f"{name} ({LAYER_NAMES[low]}) imports {target} ({LAYER_NAMES[high]})")
    return found


def test_every_part_of_the_core_has_a_layer() -> None:
    parts = {part_of(name) for name in graph() if name.startswith("harness_core")}
    assert parts - set(LAYERS) == set(), "place the new module in LAYERS (and CONTRIBUTING.md's map)"


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert upward_imports(graph()) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    edges = {"harness_core.types": {"harness_core.runtime"}, "harness_core.cli._app": {"harness_core.types", "x"}}
    assert upward_imports(edges) == [
        "harness_core.types (vocabulary) imports harness_core.runtime (runtime and loader)"
    ]

"""The public faces hold together (issue 22): the lazy export tables match ``__all__``, plugins
import no underscore module of the core, every first-party dependency is bounded above, and the
pre-commit mypy hook checks every source folder CI checks."""

from __future__ import annotations

import ast
import importlib
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from typecheck import checked_sources  # noqa: E402  (tools/ is not a package)

LAZY_PACKAGES = [
    "harness_core",
    "harness_core.kit",
    "harness_core.http",
    "harness_core.middleware",
    "harness_core.testing",
]
MOVED = {
    "harness_core.types": {"Failure": "harness_core.errors"},
    "harness_core.config": dict.fromkeys(
        ["MASK", "RedactFilter", "Redactor", "redacted_logging"], "harness_core.secret"
    ),
    "harness_core.http.errors": {"truncate": "harness_core.errors"},
    "harness_core.kit.blocks": dict.fromkeys(["SNIPPET_CHARS", "snippet"], "harness_core.errors"),
}
"""The old import paths that keep working with a ``DeprecationWarning`` (CHANGELOG.md, Unreleased)."""
FIRST_PARTY = {"harness-core", "pytest-harness"} | {
    tomllib.loads(p.read_text())["project"]["name"] for p in ROOT.glob("plugins/*/pyproject.toml")
}


def lazy_table(package: ModuleType) -> dict[str, str]:
    table: dict[str, str] = vars(package.__getattr__)["exports"]  # set by harness_core._lazy.lazy_exports
    return table


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_a_lazy_export_table_names_what_all_lists_and_each_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    table = lazy_table(package)
    assert set(table) <= set(package.__all__), f"{name}: lazy names missing from __all__"
    for export in package.__all__:
        value = getattr(package, export)  # an __all__ name neither defined nor in the table raises
        if export in table:
            assert value is getattr(importlib.import_module(table[export]), export), f"{name}.{export}"
    assert len(package.__all__) == len(set(package.__all__)), f"{name}: __all__ lists a name twice"


def _calls_in_core(function: str) -> set[str]:
    """The core modules whose source calls ``function`` (``lazy_exports`` / ``moved_names``)."""
    found = set()
    for path in sorted((ROOT / "harness_core").rglob("*.py")):
        if path.name == "_lazy.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function:
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_lazy_export_table_and_moved_table_of_the_core_is_checked() -> None:
    """A new face (``lazy_exports``) or a new deprecated path (``moved_names``) joins the lists
    above, so its table is checked against ``__all__`` / its owner."""
    assert _calls_in_core("lazy_exports") == set(LAZY_PACKAGES)
    assert _calls_in_core("moved_names") == set(MOVED)


@pytest.mark.parametrize(("old", "name"), [(old, name) for old, names in MOVED.items() for name in names])
def test_a_moved_name_warns_naming_its_owner_and_is_the_owners_object(old: str, name: str) -> None:
    owner = MOVED[old][name]
    module = importlib.import_module(old)
    assert vars(module.__getattr__)["moved"][name] == owner
    assert name not in module.__all__
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved: import it from {owner}") as caught:
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(owner), name)
    assert caught[0].filename == __file__  # attributed to the line that reads the old name
    with pytest.raises(AttributeError, match=f"module '{old}' has no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def test_the_faces_re_export_redactor_and_failure_from_their_one_owner() -> None:
    import harness_core
    from harness_core import errors, kit, middleware, secret

    assert harness_core.Failure is middleware.Failure is errors.Failure
    assert harness_core.Redactor is middleware.Redactor is secret.Redactor
    assert secret.Redactor.__module__ == "harness_core.secret._redactor"
    assert "Redactor" not in kit.__all__


def test_pytest_harness_lazy_exports_match_its_all() -> None:
    import pytest_harness

    assert set(pytest_harness._LAZY) == set(pytest_harness.__all__)
    for export in pytest_harness.__all__:
        getattr(pytest_harness, export)


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line module`` for each import of a ``harness_core`` module with an underscore part."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "harness_core" and any(part.startswith("_") for part in parts[1:]):
                found.append(f"{path.relative_to(root)}:{node.lineno} {module}")
                break
    return found


def test_no_plugin_source_imports_an_underscore_module_of_the_core() -> None:
    found = [hit for path in sorted(ROOT.glob("plugins/*/src/**/*.py")) for hit in private_imports(path)]
    assert found == []


def test_the_private_import_check_finds_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import harness_core._lazy\nfrom harness_core.cli._app import cli\n"
        "from harness_core.cli import main\nfrom . import _local\nimport _thread\n"
    )
    assert private_imports(probe, tmp_path) == ["probe.py:1 harness_core._lazy", "probe.py:2 harness_core.cli._app"]


FACES = {"harness_core", "harness_core.kit", "harness_core.http", "harness_core.middleware", "harness_core.cli"}
"""What a plugin's ``src`` may import from the core (CONTRIBUTING.md, the map of the house):
the application face, the adapter kit and its HTTP transport, the middleware face and, for a
plugin's commands, ``harness_core.cli``. pytest-harness (a pytest plugin over the testing kit)
also ``harness_core.testing``. ``harness_core.hookspecs`` is not needed: the hook types are in
the faces (``CallNext`` … in ``harness_core.middleware``, ``RegisterAdapter`` in the kit too)."""

FACES_OF = {"pytest-harness": FACES | {"harness_core.testing"}}


def non_face_imports(path: Path, faces: set[str], root: Path = ROOT) -> list[str]:
    """``file:line module`` for each import of a ``harness_core`` module that is not one of ``faces``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module]
        else:
            continue
        for module in modules:
            if module.split(".")[0] == "harness_core" and module not in faces:
                found.append(f"{path.relative_to(root)}:{node.lineno} {module}")
    return found


@pytest.mark.parametrize("plugin", sorted(p.name for p in ROOT.glob("plugins/*") if (p / "src").is_dir()))
def test_a_plugin_source_imports_only_the_faces_of_the_core(plugin: str) -> None:
    faces = FACES_OF.get(plugin, FACES)
    paths = sorted(ROOT.glob(f"plugins/{plugin}/src/**/*.py"))
    found = [hit for path in paths for hit in non_face_imports(path, faces)]
    assert found == [], "import these names from a face (CONTRIBUTING.md, the map of the house)"


def test_the_face_check_finds_an_import_of_another_module(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import harness_core.types\nfrom harness_core import Harness\nfrom harness_core.kit import BlockWriter\n"
        "from harness_core.errors import LlmError\nfrom harness_core.testing import ScriptedServer\n"
        "def f():\n    from harness_core.secret import MASK\nfrom . import local\nimport harness_corex\n"
    )
    assert non_face_imports(probe, FACES, tmp_path) == [
        "probe.py:1 harness_core.types",
        "probe.py:4 harness_core.errors",
        "probe.py:5 harness_core.testing",
        "probe.py:7 harness_core.secret",
    ]


@pytest.mark.parametrize("pyproject", sorted(ROOT.glob("plugins/*/pyproject.toml")), ids=lambda p: p.parent.name)
def test_every_first_party_dependency_is_bounded_above(pyproject: Path) -> None:
    project = tomllib.loads(pyproject.read_text())["project"]
    requirements = [Requirement(text) for text in project.get("dependencies", [])]
    unbounded = [
        str(req)
        for req in requirements
        if req.name in FIRST_PARTY and not any(spec.operator in ("<", "<=", "==", "~=") for spec in req.specifier)
    ]
    assert unbounded == [], f"{project['name']}: bound these above (`<0.2`)"


def test_the_pre_commit_mypy_hook_checks_every_source_folder_ci_checks() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"] if hook["id"] == "mypy"]
    (mypy,) = hooks
    targets = {arg for arg in mypy["args"] if not arg.startswith("-")}
    wanted = {str(path.relative_to(ROOT)) for path in checked_sources(ROOT) if path.name != "tools"}
    assert wanted - targets == set(), "add these folders to the pre-commit mypy hook's args"


def test_a_test_that_needs_the_cases_folder_loads_it_through_the_skipping_loader() -> None:
    """A clone without ``../shared/cases`` (``HARNESS_CASES_DIR``) skips those modules with the
    reason: tests load the cases with ``pytest_harness.load_cases_or_skip`` at import, never with
    ``load_cases`` (which raises) — except the loader's own tests."""
    own = {ROOT / "tests" / "testing" / "test_kit_cases.py"}
    found = []
    for path in sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("plugins/*/tests/**/*.py")]):
        if path in own:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "load_cases"
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []

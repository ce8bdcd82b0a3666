"""``tools/typecheck.py``: one mypy run over sources (strict) and every test folder (lighter), on a
small tree shaped like this repository (two ``conftest.py`` files, a hyphenated plugin folder, a
test helper imported as a top-level module)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "typecheck.py"


def load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typecheck_tool", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


typecheck = load_tool()


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


UNTYPED = "def untyped(x):\n    return x\n"

TREE = {
    "pyproject.toml": "[tool.mypy]\nstrict = true\n",
    "conftest.py": "ROOT: int = 1\n",
    "harness_core/__init__.py": "def core(x: int) -> int:\n    return x\n",
    "plugins/harness-x/pyproject.toml": "[project]\nname = 'harness-x'\n",
    "plugins/harness-x/src/harness_x/__init__.py": "from harness_core import core\n\nVALUE: int = core(1)\n",
    "plugins/harness-x/tests/x_helpers.py": "def helper(x: int) -> int:\n    return x\n",
    "plugins/harness-x/tests/conftest.py": UNTYPED,
    "plugins/harness-x/tests/test_x.py": "from x_helpers import helper\n\n\ndef test_x():\n    assert helper(1) == 1\n",
    "tools/gate.py": "import sys\n\n\ndef main(argv: list[str]) -> int:\n    return len(argv)\n",
    "tests/core/conftest.py": UNTYPED,
    "tests/core/test_core.py": "from harness_core import core\n\n\ndef test_core(value):\n    core(value)\n",
    "tests/empty/notes.txt": "no Python here: not a test folder\n",
}


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    write(root, TREE)
    monkeypatch.chdir(root)  # mypy reads pyproject.toml from the working directory, as nox runs it
    return root


def run(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = typecheck.main(["--cache-dir", str(root.parent / "cache")], root)
    out, err = capsys.readouterr()
    return status, out + err


def test_targets_are_the_sources_and_every_test_folder(tree: Path) -> None:
    assert typecheck.checked_sources(tree) == [tree / "harness_core", tree / "plugins/harness-x/src", tree / "tools"]
    assert typecheck.checked_tests(tree) == [
        tree / "plugins/harness-x/tests",
        tree / "tests/core",
        tree / "conftest.py",
    ]
    assert typecheck.conftest_name(tree / "plugins/harness-x/tests/conftest.py", tree) == (
        "conftest__plugins_harness_x_tests"
    )


def test_one_run_with_two_conftests_sources_strict_tests_lighter(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, output = run(tree, capsys)
    assert (status, output) == (0, "Success: no issues found in 9 source files\n")

    # The same untyped function is an error in a source, and allowed in a test module.
    (tree / "plugins/harness-x/src/harness_x/untyped.py").write_text(UNTYPED, encoding="utf-8")
    status, output = run(tree, capsys)
    assert status == 1
    assert "plugins/harness-x/src/harness_x/untyped.py:1: error: Function is missing a type annotation" in output
    assert output.count(": error:") == 1, output
    assert output.endswith("Found 1 errors in 1 files (checked 10 source files)\n")


def test_errors_in_a_renamed_conftest_name_its_real_path(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "tests/core/conftest.py").write_text("LIMIT: int = 'not a number'\n", encoding="utf-8")
    status, output = run(tree, capsys)
    assert status == 1
    assert "tests/core/conftest.py:1: error: Incompatible types in assignment" in output, output


def test_tests_stay_strict_beyond_the_lighter_flags(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "tests/core/test_more.py").write_text(
        "from typing import Any\n\n\ndef test_any(x: Any) -> None:\n    y: int = x.value  # type: ignore[misc]\n"
        "    assert y\n\n\ndef test_wrong() -> None:\n    z: str = 1\n",
        encoding="utf-8",
    )
    status, output = run(tree, capsys)
    assert status == 1
    assert "tests/core/test_more.py:10: error: Incompatible types in assignment" in output, output
    assert "unused" not in output  # --no-warn-unused-ignores in test modules, as before


def test_a_syntax_error_is_a_blocker(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "tests/core/test_broken.py").write_text("def broken(:\n", encoding="utf-8")
    status, output = run(tree, capsys)
    assert status == 2
    assert "tests/core/test_broken.py:1: error: " in output
    assert "blocking error" in output

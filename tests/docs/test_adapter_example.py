"""docs/writing-an-adapter.md's Acme adapter works as printed: every Python block of the page is a
whole file (marked ``<!-- adapter-example: PATH -->``); written into a temp folder, its tests pass,
its script prints what the page says, and loading the plugin or building the adapter imports no
HTTP client."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-an-adapter.md"
MARKED = re.compile(r"<!-- adapter-example: (\S+) -->\n```python\n(.*?)```", re.S)


def example_files() -> dict[str, str]:
    """``path → source`` of every marked block of the page."""
    text = PAGE.read_text(encoding="utf-8")
    files = dict(MARKED.findall(text))
    assert text.count("```python") == len(files), "a Python block of the page is not marked as a file of the example"
    return files


@pytest.fixture
def example(tmp_path: Path) -> Path:
    for name, source in example_files().items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source, encoding="utf-8")
    (tmp_path / "harness_llm_acme" / "__init__.py").touch()
    return tmp_path


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run(
        [sys.executable, *args], cwd=folder, capture_output=True, text=True, timeout=240, env=env, check=False
    )


def test_the_page_shows_every_stage_as_a_file() -> None:
    assert set(example_files()) == {
        "harness_llm_acme/wire.py",
        "harness_llm_acme/errors.py",
        "harness_llm_acme/serialize.py",
        "harness_llm_acme/translate.py",
        "harness_llm_acme/config.py",
        "harness_llm_acme/adapter.py",
        "harness_llm_acme/plugin.py",
        "test_acme_translate.py",
        "run.py",
    }


def test_the_translator_tests_pass(example: Path) -> None:
    result = run(example, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_acme_translate.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_the_script_prints_what_the_page_shows(example: Path) -> None:
    result = run(example, "run.py")
    assert result.returncode == 0, result.stderr
    shown = re.search(r"It prints:\n\n```\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert shown, "no printed output on the page"
    assert result.stdout == shown.group(1)


def test_loading_the_plugin_and_building_the_adapter_import_no_http_client(example: Path) -> None:
    script = (
        "import sys\n"
        "from harness_llm_acme.plugin import AcmePlugin\n"
        "AcmePlugin(AcmePlugin.Config(api_key=None)).make_adapter()\n"
        "print(sorted(name for name in ('httpx', 'aiohttp') if name in sys.modules))\n"
    )
    result = run(example, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"

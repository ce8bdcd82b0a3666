"""README.md examples run as printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(marker: str) -> str:
    """The fenced code block that follows ``<!-- readme-test: marker -->`` in README.md."""
    match = re.search(rf"<!-- readme-test: {marker} -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert match, f"no code block marked {marker!r} in README.md"
    return match.group(1)


def test_the_middleware_example_runs_as_printed(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_block("middleware"))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=os.environ.copy(), check=False
    )
    assert result.returncode == 0, result.stderr
    assert "TextDelta(index=0" in result.stdout
    assert "Finish(reason=FinishReason(kind='stop'" in result.stdout
    assert re.search(r"first chunk after \d+\.\d{6}s", result.stdout)


@pytest.mark.parametrize("command", ["harness run", "nox -s lint types tests"])
def test_the_two_fresh_machine_commands_are_documented(command: str) -> None:
    assert command in README.read_text()
    assert "nox -s lint types tests" in (README.parent / ".ci" / "run").read_text()

"""`harness usage`, `logs` and `cache` never run on a config they could not fully load: a failed
middleware is exit 2 with the located problem, never a fallback to the default store."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness_core.cli._app import cli


@pytest.mark.parametrize("args", [("usage",), ("logs",), ("cache", "stats"), ("cache", "clear")], ids=" ".join)
def test_a_failed_middleware_stops_the_state_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    (tmp_path / "data" / "harness" / "logs.sqlite").mkdir(parents=True)  # the prompt log cannot start
    path = tmp_path / "plugins.yaml"
    path.write_text("plugins:\n  mock: {}\n  usage: {}\n  prompt-log: {}\n  cache: {}\n", encoding="utf-8")
    result = CliRunner().invoke(cli, [*args, "-c", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:4: plugin 'prompt-log' failed to start: ValueError: prompt-log path" in result.output
    assert "fail closed" in result.output
    assert not (tmp_path / "data" / "harness" / "usage.sqlite").exists()  # no store was opened

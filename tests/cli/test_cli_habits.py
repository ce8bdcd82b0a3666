"""In-process checks of the CLI habits: short form parsing, prompt log attachment, -o parsing,
`harness models` failure paths (the subprocess tests in test_cli.py run the same code end to end)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from harness_core.cli import _promptlog
from harness_core.cli._app import cli, mistyped_command
from harness_core.cli._inspect import show_models
from harness_core.cli._options import first_code_block, parse_options, parse_tool_choice, unoffered_tool_choice
from harness_core.loader import load_config
from harness_core.testing import Reply, ScriptedServer
from harness_core.types import NamedToolChoice


def test_short_form_inserts_run_after_the_group_options(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[list[str]] = []
    monkeypatch.setattr(click.Group, "parse_args", lambda self, ctx, args: handed.append(args) or args)  # type: ignore[func-returns-value]

    def parsed(*args: str) -> list[str]:
        """The arguments the group hands to click's own parsing."""
        cli.parse_args(click.Context(cli), list(args))
        return handed[-1]

    assert parsed("hello") == ["run", "hello"]
    assert parsed("-vv", "hello") == ["-vv", "run", "hello"]
    assert parsed("--verbose", "-m", "fast", "hi") == ["--verbose", "run", "-m", "fast", "hi"]
    assert parsed("logs", "-n", "1") == ["logs", "-n", "1"]
    assert parsed("-v") == ["-v"]
    assert parsed("-c", "x.yaml", "run", "hi") == ["-c", "x.yaml", "run", "hi"]
    assert parsed("--config", "x.yaml", "hi") == ["--config", "x.yaml", "run", "hi"]
    assert parsed("--config=x.yaml", "-cy.yaml", "-v", "hi") == ["--config=x.yaml", "-cy.yaml", "-v", "run", "hi"]
    assert parsed("--help") == ["--help"]
    ctx = click.Context(cli)
    assert cli.get_command(ctx, "no-such-command") is None


def test_a_word_close_to_a_command_is_a_usage_error_not_a_prompt() -> None:
    with pytest.raises(
        click.UsageError, match=r"did you mean `harness models`\? \(to send it as a prompt: harness run modles\)"
    ):
        cli.parse_args(click.Context(cli), ["modles"])
    with pytest.raises(click.UsageError, match="did you mean `harness plugins`"):
        cli.parse_args(click.Context(cli), ["-c", "x.yaml", "plugin"])
    assert mistyped_command("hello", ["models", "plugins"]) is None
    assert mistyped_command("Modles", ["models"]) is None  # not one lowercase word: a prompt
    assert mistyped_command("modles now", ["models"]) is None
    assert unoffered_tool_choice("auto", ()) is None
    assert unoffered_tool_choice(NamedToolChoice("echo"), ["echo"]) is None


def test_options_and_tool_choice() -> None:
    assert parse_options(["k=5", "s=text", 'j={"a": [1]}', "e="]) == {"k": 5, "s": "text", "j": {"a": [1]}, "e": ""}
    with pytest.raises(ValueError, match="must be key=value"):
        parse_options(["=1"])
    assert parse_tool_choice(None) is None
    assert parse_tool_choice("required") == "required"
    assert parse_tool_choice("lookup") == NamedToolChoice("lookup")
    assert first_code_block("a\n    ```\n    not code at 4 spaces\n") == "a\n    ```\n    not code at 4 spaces\n"


def test_prompt_log_not_installed_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text("plugins:\n  mock: {}\n")
    loaded = load_config(config)
    monkeypatch.setattr(_promptlog, "installed_plugins", dict)
    assert _promptlog.attach_prompt_log(loaded, enabled=True) is None
    assert [plugin.key for plugin in loaded.plugins] == ["mock"]


def test_prompt_log_listed_in_plugins_yaml_is_used(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(f"plugins:\n  prompt-log: {{path: {tmp_path / 'mine.sqlite'}}}\n  mock: {{}}\n")
    loaded = load_config(config)
    logger = _promptlog.attach_prompt_log(loaded, enabled=False)  # listed: --no-log does not remove it
    assert logger is loaded.plugins[0].instance
    assert [plugin.key for plugin in loaded.plugins] == ["prompt-log", "mock"]


def test_models_failure_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "plugins.yaml"
    busy = Reply.json(503, {"error": {"message": "models are busy", "type": "server_error"}})
    with ScriptedServer(routes={("GET", "/v1/models"): busy}) as server:
        config.write_text(f"plugins:\n  mock: {{}}\n  openai: {{base_url: '{server.url}/v1', routes: [down]}}\n")
        assert show_models("nowhere", str(config), as_json=False) == 2
        assert "NO_ADAPTER" in capsys.readouterr().err
        assert show_models(None, str(config), as_json=True) == 1
    captured = capsys.readouterr()
    assert "error: route 'down'" in captured.err
    assert "models are busy" in captured.err
    assert '"route":"mock"' in captured.out
    config.write_text("plugins:\n  mock: {x: 1}\n")
    assert show_models(None, str(config), as_json=False) == 2

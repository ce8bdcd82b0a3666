"""``harness run --count-tokens``: the input tokens of the request that would be sent, counted by
the route's provider; nothing generated, nothing logged (issue 23)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]


def test_count_prints_the_input_tokens_of_the_whole_request(harness: Harness) -> None:
    result = harness("run", "--count-tokens", "one two three", "--system", "be brief")
    assert (result.returncode, result.stdout, result.stderr) == (0, "5\n", "")
    piped = harness("run", "--count-tokens", "-", input="from stdin here\n")
    assert (piped.returncode, piped.stdout) == (0, "3\n")


def test_count_json_names_the_route_and_model_the_defaults_chose(harness: Harness) -> None:
    result = harness("run", "--count-tokens", "--json", "a b")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"input_tokens": 2, "route": "mock", "model": "echo"}


def test_count_generates_and_logs_nothing(harness: Harness) -> None:
    assert harness("run", "logged prompt").returncode == 0
    assert harness("run", "--count-tokens", "counted prompt").returncode == 0
    logs = harness("logs", "-n", "0")
    assert "logged prompt" in logs.stdout
    assert "counted prompt" not in logs.stdout
    continued = harness("run", "-C", "--count-tokens", "and now")  # the logged history is counted too
    assert (continued.returncode, continued.stdout) == (0, "6\n"), continued.stderr  # logged prompt, its echo, and now
    assert "and now" not in harness("logs", "-n", "0").stdout


def test_count_on_a_route_that_cannot_count_is_a_usage_error(harness: Harness, config: Config) -> None:
    config(
        "plugins:\n  openai: {base_url: 'http://127.0.0.1:9/v1', api_key: null}\n  mock: {}\n"
        "defaults: {route: openai, model: gpt-test}\n"
    )
    result = harness("run", "--count-tokens", "hi")
    assert result.returncode == 2
    assert result.stdout == ""
    assert (
        "error: UNSUPPORTED from route 'openai' (openai): route 'openai' cannot count tokens (model 'gpt-test'): "
        "its adapter, of plugin 'openai', has no token counter"
    ) in result.stderr
    assert "OpenAIAdapter" not in result.stderr  # the class is no place a user can act on
    unknown = harness("run", "--count-tokens", "-r", "nowhere", "hi")
    assert unknown.returncode == 2
    assert "NO_ADAPTER" in unknown.stderr


def test_count_with_tools_selects_them_as_run_does(harness: Harness) -> None:
    offered = harness("run", "--count-tokens", "--tool", "echo", "please echo")
    assert (offered.returncode, offered.stdout) == (0, "2\n")  # the mock's count: words of the messages
    missing = harness("run", "--count-tokens", "--tool", "no_such_tool", "hi")
    assert missing.returncode == 2
    assert "no_such_tool" in missing.stderr
    assert missing.stdout == ""


def test_count_reports_an_unknown_route_as_run_does_with_its_hint(harness: Harness) -> None:
    counted = harness("run", "--count-tokens", "-r", "nowhere", "hi")
    generated = harness("run", "-r", "nowhere", "hi")
    assert counted.returncode == generated.returncode == 2
    assert counted.stdout == ""
    assert counted.stderr == generated.stderr  # the error line, then the no-plugins.yaml hint
    first, hint = counted.stderr.splitlines()
    assert first == "error: NO_ADAPTER: no adapter serves route 'nowhere'; known routes: 'mock'"
    assert hint.startswith("  no plugins.yaml was found, so the built-in default (the mock plugin) is in use; ")


def test_count_reports_a_fault_that_is_no_llm_error_as_a_plugin_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness_core.cli._app import cli
    from harness_core.runtime import Harness as Runtime

    async def broken(self: Runtime, options: object) -> int:
        raise RuntimeError("counter broke")

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(Runtime, "count_tokens", broken)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # nothing piped
    with pytest.raises(SystemExit) as exited:
        cli.main(args=["run", "--count-tokens", "hi"], prog_name="harness")
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "error: RuntimeError: counter broke (a plugin failed; run with -v for the traceback)\n"

"""`harness tools [--json]`, `--tool` globs and `--approve` (the terminal question)."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Callable

import anyio
import pytest

from harness_core.cli._approve import terminal_approval
from harness_core.cli._common import Sink
from harness_core.types import ToolCallBlock

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]


def test_tools_lists_every_tool_with_its_plugin(harness: Harness) -> None:
    result = harness("tools")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo  [mock]  Return the given text unchanged.\n"


def test_tools_json(harness: Harness) -> None:
    result = harness("tools", "--json")
    assert result.returncode == 0, result.stderr
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["name"] == "echo"
    assert row["plugin"] == "mock"
    assert row["parameters"]["required"] == ["text"]


def test_tools_without_any(harness: Harness, config: Config) -> None:
    config("plugins:\n  trace: {path: t.jsonl}\n")
    result = harness("tools")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no tools\n"


def test_tools_with_a_bad_config_exits_2(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {nope: 1}\n")
    assert harness("tools").returncode == 2


def test_a_tool_glob_offers_the_matching_tools(harness: Harness) -> None:
    result = harness("run", "--tool", "ec*", "please echo hi")
    assert result.returncode == 0, result.stderr
    assert "[tool result call_mock_1] echo: please echo hi" in result.stderr
    assert "no tool matches 'x*'" in harness("run", "--tool", "x*", "hi").stderr


def test_approve_without_a_terminal_declines_every_call(harness: Harness) -> None:
    result = harness("run", "--approve", "--tool", "echo", "please echo hi")
    assert result.returncode == 0, result.stderr
    assert "declined tool call echo: --approve needs a terminal on stdin" in result.stderr
    assert "[tool error call_mock_1] echo: the user declined this tool call" in result.stderr


def test_chat_takes_tool_globs_and_approve(harness: Harness) -> None:
    result = harness("chat", "--approve", "--tool", "e*", input="please echo hi\n")
    assert result.returncode == 0, result.stderr
    assert "declined tool call echo" in result.stderr


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "allowed"), [("y\n", True), ("YES\n", True), ("n\n", False), ("", False)])
def test_terminal_approval_asks_and_reads_one_line(answer: str, allowed: bool) -> None:
    err = io.StringIO()
    approve = terminal_approval(Terminal(answer), Sink(err))
    assert anyio.run(approve, ToolCallBlock("c1", "time_now", '{"tz": "UTC\\u001b"}')) is allowed
    assert err.getvalue() == 'approve tool call time_now({"tz": "UTC\\u001b"})? [y/N] '


def test_tools_when_a_middleware_fails_to_start_exits_2(harness: Harness, config: Config) -> None:
    config("plugins:\n  startfail: {}\n  mock: {}\n")
    result = harness("tools")
    assert result.returncode == 2
    assert "middleware plugins failed to start" in result.stderr

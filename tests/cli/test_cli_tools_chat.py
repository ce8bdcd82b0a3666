"""`harness run --tool` and `harness chat`, run as subprocesses (stdin piped, SIGINT delivered)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from harness_core import StreamChunk, ToolResultBlock

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]
SLOW_MOCK = "plugins:\n  mock: {delay: 0.2}\ndefaults: {route: mock, model: echo}\n"


# ------------------------------------------------------------------ run --tool


@pytest.mark.parametrize("setup", ["builtin", "shipped"])
def test_run_tool_echo_round_trip(harness: Harness, cli_env: dict[str, str], setup: str) -> None:
    if setup == "shipped":  # the repository's config/plugins.yaml (trace + mock), as on a fresh clone
        cli_env["HARNESS_CONFIG"] = str(Path(__file__).parents[2] / "config" / "plugins.yaml")
    result = harness("run", "--tool", "echo", "please echo hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The echo tool returned: please echo hello\n"
    lines = result.stderr.splitlines()
    call = lines.index('[tool call call_mock_1] echo({"text":"please echo hello"})')
    assert lines[call + 1] == "[tool result call_mock_1] echo: please echo hello"
    assert lines[-1].startswith("[finish: stop (stop); tokens: ")


def test_run_tool_json_shows_the_result_as_a_line(harness: Harness) -> None:
    result = harness("run", "--json", "-t", "echo", "echo me")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    result_lines = [line for line in lines if '"tool-result"' in line]
    assert [msgspec.json.decode(line, type=ToolResultBlock) for line in result_lines] == [
        ToolResultBlock("call_mock_1", "echo me")
    ]
    chunks = [msgspec.json.decode(line, type=StreamChunk) for line in lines if line not in result_lines]
    assert [type(c).__name__ for c in chunks].count("Finish") == 2


def test_run_unknown_tool_exits_2(harness: Harness) -> None:
    result = harness("run", "--tool", "nope", "hi")
    assert result.returncode == 2
    assert "unknown tool 'nope'; registered tools: echo" in result.stderr


def test_run_tool_choice_must_name_an_offered_tool(harness: Harness) -> None:
    unoffered = harness("run", "--tool-choice", "bogus", "hi")
    assert unoffered.returncode == 2
    assert "error: --tool-choice 'bogus': no tool of that name is offered (tools offered: none" in unoffered.stderr
    assert unoffered.stdout == ""
    other = harness("run", "--tool", "echo", "--tool-choice", "bogus", "hi")
    assert other.returncode == 2
    assert "--tool-choice 'bogus': no tool of that name is offered (tools offered: 'echo')" in other.stderr
    named = harness("run", "--tool", "echo", "--tool-choice", "echo", "please echo hello")
    assert named.returncode == 0, named.stderr


def test_run_tool_choice_required_needs_a_tool(harness: Harness) -> None:
    """Found by a trial: ``--tool-choice required`` with no tool offered was sent as is."""
    alone = harness("run", "--tool-choice", "required", "hi")
    assert (alone.returncode, alone.stdout) == (2, "")
    assert alone.stderr == (
        "error: --tool-choice required: the model must call a tool, but no tool is offered "
        "(offer tools with -t/--tool NAME; see `harness tools`)\n"
    )
    offered = harness("run", "--tool", "echo", "--tool-choice", "required", "please echo hello")
    assert offered.returncode == 0, offered.stderr


def test_run_max_steps_exits_1(harness: Harness) -> None:
    result = harness("run", "--tool", "echo", "--max-steps", "1", "echo loop")
    assert result.returncode == 1
    assert "[tool error call_mock_1] echo: not executed: the limit of 1 generation steps was reached" in result.stderr
    assert "error: the model still called tools after 1 generation steps (max_steps=1)" in result.stderr
    assert "raise --max-steps" in result.stderr


def test_run_tool_error_finish_exits_1(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {error: OVERLOADED, error_after: 100}\ndefaults: {route: mock, model: echo}\n")
    result = harness("run", "--tool", "echo", "echo it")
    assert result.returncode == 1
    assert "error: OVERLOADED from route 'mock' (mock): scripted mock error" in result.stderr


def test_run_tool_ctrl_c_aborts(tmp_path: Path, cli_env: dict[str, str], config: Config) -> None:
    config(SLOW_MOCK)
    words = " ".join(f"w{i}" for i in range(100))
    process = subprocess.Popen(
        [sys.executable, "-m", "harness_core.cli", "run", "--tool", "echo", f"echo {words}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
        cwd=tmp_path,
    )
    assert process.stderr is not None
    assert process.stderr.readline().startswith("[tool call call_mock_1] echo(")  # step 1 done, tool ran
    assert process.stderr.readline().startswith("[tool result call_mock_1] echo: echo w0")
    assert process.stdout is not None
    assert process.stdout.read(4) == "The "  # step 2 is streaming
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "w99" not in rest
    assert "aborted: interrupted by Ctrl-C" in err


# ------------------------------------------------------------------ chat


def test_chat_through_piped_stdin(harness: Harness, tmp_path: Path) -> None:
    script = "\n".join(
        [
            "hello there",
            "please echo this",
            "/save saved.json",
            "/clear",
            "after clear",
            "/load saved.json",
            "/help",
            "last turn",
            "/quit",
            "never sent",
        ]
    )
    result = harness("chat", "--tool", "echo", input=script + "\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "hello there",
        "The echo tool returned: please echo this",
        "after clear",
        "last turn",
    ]
    assert "saved 6 messages to saved.json" in result.stderr
    assert "history cleared" in result.stderr
    assert "loaded 6 messages from saved.json; route mock, model echo" in result.stderr
    assert "/route [ROUTE [MODEL]]" in result.stderr  # /help
    assert '[tool call call_mock_1] echo({"text":"please echo this"})' in result.stderr
    assert "[tool result call_mock_1] echo: please echo this" in result.stderr
    saved = json.loads((tmp_path / "saved.json").read_text())
    assert [m["role"] for m in saved["messages"]] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert saved["messages"][1]["source"] == "mock"


def test_chat_ends_at_end_of_input(harness: Harness) -> None:
    result = harness("chat", input="")
    assert result.returncode == 0
    assert result.stdout == ""


def test_chat_errors_keep_the_repl_running(harness: Harness, config: Config) -> None:
    config("plugins:\n  mock: {error: RATE_LIMITED}\n  mock:ok: {routes: [ok]}\ndefaults: {route: mock, model: echo}\n")
    result = harness("chat", input="fails\n/route ok echo\nworks\n")
    assert result.returncode == 0
    assert (
        "error: RATE_LIMITED from route 'mock' (mock): scripted mock error after 0 deltas "
        "(the message was not added to the history)\n"
    ) in result.stderr
    assert "route ok, model echo" in result.stderr
    assert result.stdout == "works\n"


def test_chat_unknown_tool_and_bad_config_exit_2(harness: Harness, config: Config) -> None:
    result = harness("chat", "--tool", "nope", input="")
    assert result.returncode == 2
    assert "unknown tool 'nope'; registered tools: echo" in result.stderr
    config("plugins:\n  mock: {delay: -1}\n")
    assert harness("chat", input="").returncode == 2


def test_chat_stops_when_a_middleware_fails_at_start(harness: Harness, config: Config) -> None:
    config("plugins:\n  startfail: {}\n  mock: {}\n")
    result = harness("chat", input="hi\n")
    assert result.returncode == 2
    assert "middleware plugins failed to start" in result.stderr


def test_ctrl_c_in_chat_aborts_the_reply_and_the_repl_answers_the_next_line(
    tmp_path: Path, cli_env: dict[str, str], config: Config
) -> None:
    config(SLOW_MOCK)
    process = subprocess.Popen(
        [sys.executable, "-m", "harness_core.cli", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
        cwd=tmp_path,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(" ".join(f"w{i}" for i in range(200)) + "\n")
    process.stdin.flush()
    assert process.stdout.read(3) == "w0 "  # the slow reply is streaming
    process.send_signal(signal.SIGINT)
    out, err = process.communicate("next line\n", timeout=60)
    assert process.returncode == 0, err
    assert out == "\nnext line\n"
    assert "[aborted: the partial reply is kept]" in err
    assert "Traceback" not in err

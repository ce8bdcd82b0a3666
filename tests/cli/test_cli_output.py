"""How `harness run` / `harness chat` behave as processes: closed pipes, full disks, closed stdout,
failing plugins, exit codes, error lines and redaction of everything printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness_core.testing.server import Reply, ScriptedServer

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]
TRACED = "plugins:\n  trace: {path: t.jsonl}\n  mock: {}\ndefaults: {route: mock, model: echo}\n"
BIG = " ".join(str(i) for i in range(200_000))  # far more than a pipe buffer holds
KEY = "test-key-123456"


def start(tmp_path: Path, cli_env: dict[str, str], *args: str, stdout: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness_core.cli", *args],
        stdin=subprocess.PIPE,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
        cwd=tmp_path,
    )


def read_then_close(process: subprocess.Popen[str], stdin: str, size: int = 10) -> tuple[str, str]:
    """Feed ``stdin``, read ``size`` characters of stdout, then close stdout (the reader goes away)."""
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdin.write(stdin)
    process.stdin.close()
    head = process.stdout.read(size)
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    process.wait(timeout=120)
    return head, err


def trace_finishes(tmp_path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    return [line["chunk"]["reason"] for line in lines if line["chunk"]["type"] == "finish"]


# ------------------------------------------------------------------ closed pipe, full disk, closed stdout


@pytest.mark.parametrize("as_json", [False, True])
def test_run_stops_quietly_when_the_reader_closes_the_pipe(
    tmp_path: Path, cli_env: dict[str, str], config: Config, as_json: bool
) -> None:
    config(TRACED)
    process = start(tmp_path, cli_env, "run", *(["--json"] if as_json else []), "-")
    head, err = read_then_close(process, BIG)
    assert process.returncode == 141
    assert err == ""
    assert head == ('{"type":"b' if as_json else "0 1 2 3 4 ")
    [finish] = trace_finishes(tmp_path)  # the stream was aborted through its signal, not left running
    assert finish["kind"] == "aborted"
    assert finish["failure"]["message"] == "stdout failed: Broken pipe"


def test_chat_stops_quietly_when_the_reader_closes_the_pipe(tmp_path: Path, cli_env: dict[str, str]) -> None:
    process = start(tmp_path, cli_env, "chat")
    head, err = read_then_close(process, f"{BIG}\nnever sent\n")
    assert process.returncode == 141
    assert err == ""
    assert head == "0 1 2 3 4 "


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("command", [["run", "-"], ["run", "--json", "-"], ["run", "--count-tokens", "-"], ["chat"]])
def test_a_full_disk_is_one_error_line(tmp_path: Path, cli_env: dict[str, str], command: list[str]) -> None:
    with open("/dev/full", "w") as full:
        process = start(tmp_path, cli_env, *command, stdout=full)
        _, err = process.communicate("a few words\nmore\n", timeout=120)
    assert process.returncode == 1
    assert err == "error: cannot write output: No space left on device\n"


LEDGERS = (
    "plugins:\n  usage: {path: u.sqlite}\n  cache: {path: c.sqlite}\n  mock: {}\ndefaults: {route: mock, model: echo}\n"
)
EVERY_COMMAND = [
    ["plugins"],
    ["plugins", "--json"],
    ["config", "check"],
    ["models"],
    ["chain"],
    ["chain", "--json"],
    ["--help"],
    ["run", "--help"],
    ["logs"],
    ["logs", "--json"],
    ["usage"],
    ["usage", "--json"],
    ["cache", "stats"],
    ["cache", "stats", "--json"],
]


@pytest.fixture
def ledgers(harness: Harness, config: Config) -> None:
    """A plugins.yaml with a usage ledger, a cache and a prompt log, each written once."""
    config(LEDGERS)
    assert harness("run", "fill the ledgers").returncode == 0


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("command", EVERY_COMMAND)
@pytest.mark.usefixtures("ledgers")
def test_every_command_reports_a_full_disk(tmp_path: Path, cli_env: dict[str, str], command: list[str]) -> None:
    with open("/dev/full", "w") as full:
        process = start(tmp_path, cli_env, *command, stdout=full)
        _, err = process.communicate("", timeout=120)
    assert (process.returncode, err) == (1, "error: cannot write output: No space left on device\n")


@pytest.mark.parametrize("command", EVERY_COMMAND)
@pytest.mark.usefixtures("ledgers")
def test_every_command_stops_quietly_on_a_closed_pipe(
    tmp_path: Path, cli_env: dict[str, str], command: list[str]
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader went away before the first write: every write is EPIPE
    try:
        process = start(tmp_path, cli_env, *command, stdout=write_end)
    finally:
        os.close(write_end)
    _, err = process.communicate("", timeout=120)
    assert (process.returncode, err) == (141, "")


def test_other_os_errors_are_not_output_failures() -> None:
    from harness_core.cli._common import stdout_failure

    assert stdout_failure(FileNotFoundError(2, "No such file", "x.db")) is None
    assert stdout_failure(OSError(28, "No space left on device", "other.file")) is None
    assert stdout_failure(PermissionError(13, "Permission denied")) is None


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"]])
def test_a_closed_stdout_is_one_error_line(tmp_path: Path, cli_env: dict[str, str], command: list[str]) -> None:
    result = subprocess.run(
        ["sh", "-c", 'exec "$0" "$@" >&-', sys.executable, "-m", "harness_core.cli", *command],
        input="hi\n",
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr == "error: cannot write output: stdout is closed\n"


def test_chat_with_a_closed_stdin_ends_at_once(tmp_path: Path, cli_env: dict[str, str]) -> None:
    result = subprocess.run(
        ["sh", "-c", 'exec "$0" "$@" <&-', sys.executable, "-m", "harness_core.cli", "chat"],
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=tmp_path,
        timeout=120,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# ------------------------------------------------------------------ failing plugins: one line, never a group


RAISING_MIDDLEWARE = "plugins:\n  raiser: {}\n  mock: {}\ndefaults: {route: mock, model: echo}\n"
"""A middleware that raises after the reply (``FileNotFoundError`` for '/proc/x')."""


@pytest.mark.parametrize("tool", [False, True])
def test_a_failing_middleware_is_one_error_line(harness: Harness, config: Config, tool: bool) -> None:
    config(RAISING_MIDDLEWARE)
    result = harness("run", *(["--tool", "echo"] if tool else []), "hello")
    assert result.returncode == 2
    assert result.stdout == "hello\n"
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: FileNotFoundError: [Errno 2] No such file or directory: '/proc/x")
    assert last.endswith("(middleware plugin 'raiser' failed; run with -v for the traceback)")
    assert "Traceback" not in result.stderr
    assert "ExceptionGroup" not in result.stderr


def test_verbose_shows_the_traceback(harness: Harness, config: Config) -> None:
    config(RAISING_MIDDLEWARE)
    result = harness("-v", "run", "hello")
    assert result.returncode == 2
    assert (
        "error: FileNotFoundError: [Errno 2] No such file or directory: '/proc/x' (middleware plugin 'raiser' failed)\n"
        in (result.stderr)
    )
    assert "Traceback (most recent call last)" in result.stderr
    assert "harness_fake_plugins" in result.stderr
    assert "ExceptionGroup" not in result.stderr


def test_chat_reports_a_failing_middleware_and_goes_on(harness: Harness, config: Config) -> None:
    config(RAISING_MIDDLEWARE)
    result = harness("chat", input="one\n/route\n")
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: FileNotFoundError: [Errno 2] No such file or directory: '/proc/x")
    assert lines[0].endswith("(the message was not added to the history)")
    assert lines[1] == "route mock, model echo"
    verbose = harness("-v", "chat", input="one\n")
    assert "Traceback (most recent call last)" in verbose.stderr


def test_chat_start_errors_are_one_line_plus_the_traceback_with_verbose(harness: Harness) -> None:
    result = harness("-v", "chat", "--tool", "nope", input="")
    assert result.returncode == 2
    assert result.stderr.startswith("error: CONFIG: unknown tool 'nope'; registered tools: echo\nTraceback")


# ------------------------------------------------------------------ usage errors


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--max-tokens", "0", "x"], None, "Invalid value for '--max-tokens': 0 is not in the range x>=1."),
        (["--temperature", "-0.5", "x"], None, "Invalid value for '--temperature': -0.5 is not in the range x>=0."),
        ([""], None, "error: empty prompt (nothing to send: pass PROMPT or pipe text on stdin)\n"),
        (["  \n"], None, "error: empty prompt (nothing to send: pass PROMPT or pipe text on stdin)\n"),
        (["-"], "", "error: empty prompt (nothing to send: pass PROMPT or pipe text on stdin)\n"),
    ],
)
def test_run_usage_errors(harness: Harness, args: list[str], stdin: str | None, message: str) -> None:
    result = harness("run", *args, input=stdin)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_chat_rejects_max_tokens_0(harness: Harness) -> None:
    result = harness("chat", "--max-tokens", "0", input="")
    assert result.returncode == 2
    assert "0 is not in the range x>=1" in result.stderr


# ------------------------------------------------------------------ error lines name the place; secrets never shown


@pytest.fixture
def provider(config: Config, cli_env: dict[str, str]) -> Iterator[ScriptedServer]:
    """An OpenAI-compatible server on 127.0.0.1 behind route `local` (plugin key `openai:local`),
    its API key from the environment (so a secret of the config)."""
    pytest.importorskip("harness_llm_openai")
    cli_env["CLI_KEY"] = KEY
    with ScriptedServer() as server:
        config(
            f"plugins:\n  openai:local:\n    base_url: {server.url}/v1\n    api_key: ${{{{ env.CLI_KEY }}}}\n"
            "    routes: [local]\ndefaults: {route: local, model: m1}\n"
        )
        yield server


BAD_GATEWAY = Reply(
    status=502,
    headers={"content-type": "text/html", "retry-after": "7", "x-request-id": "req-42"},
    reads=[b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"],
)
BAD_KEY = Reply(
    status=401,
    headers={"content-type": "application/json"},
    reads=[
        b'{"error":{"message":"Incorrect API key provided: ' + KEY.encode() + b'. Find your key at x",'
        b'"type":"invalid_request_error","code":"invalid_api_key"}}'
    ],
)


def test_error_line_names_route_plugin_retry_and_request_id(harness: Harness, provider: ScriptedServer) -> None:
    provider.add(BAD_GATEWAY)
    result = harness("run", "hi")
    assert result.returncode == 1
    line = "error: SERVER (HTTP 502) from route 'local' (openai:local): 502 Bad Gateway"
    assert result.stderr == f"{line} (retry after 7s; request id req-42)\n"
    provider.add(BAD_GATEWAY)
    chat = harness("chat", input="hi\n")
    assert chat.stderr == f"{line} (retry after 7s; request id req-42) (the message was not added to the history)\n"


@pytest.mark.parametrize("as_json", [False, True])
def test_secrets_are_redacted_from_everything_printed(
    harness: Harness, provider: ScriptedServer, as_json: bool
) -> None:
    provider.add(BAD_KEY)
    result = harness("run", *(["--json"] if as_json else []), "hi")
    assert result.returncode == 1
    assert KEY not in result.stdout + result.stderr
    expected = "Incorrect API key provided: **********. Find your key at x"
    assert result.stderr == f"error: AUTH (HTTP 401) from route 'local' (openai:local): {expected}\n"
    if as_json:
        finish = json.loads(result.stdout.splitlines()[-1])
        assert finish["reason"]["failure"]["message"] == expected


def test_chat_redacts_secrets(harness: Harness, provider: ScriptedServer) -> None:
    provider.add(BAD_KEY)
    result = harness("chat", input="hi\n")
    assert result.returncode == 0
    assert KEY not in result.stdout + result.stderr
    assert "provided: **********." in result.stderr


def test_model_output_is_redacted_too(harness: Harness, config: Config, cli_env: dict[str, str]) -> None:
    """The mock echoes the prompt: a secret of the config never reaches stdout, in text or JSON."""
    cli_env["CLI_KEY"] = KEY
    config("plugins:\n  strict: {name: a, token: '${{ env.CLI_KEY }}'}\n  mock: {}\ndefaults: {route: mock}\n")
    for args in (["run"], ["run", "--json"]):
        result = harness(*args, f"say {KEY} now")
        assert result.returncode == 0
        assert KEY not in result.stdout + result.stderr
        assert "**********" in result.stdout


def test_verbose_shows_the_traceback_of_an_error_finish(harness: Harness, provider: ScriptedServer) -> None:
    provider.add(BAD_KEY)
    quiet = harness("run", "hi")
    assert quiet.returncode == 1
    assert "Traceback" not in quiet.stderr
    provider.add(BAD_KEY)
    verbose = harness("-v", "run", "hi")
    assert verbose.returncode == 1
    assert "harness: INFO: route 'local' failed:\nTraceback (most recent call last)" in verbose.stderr
    assert "LlmError: AUTH (HTTP 401)" in verbose.stderr
    assert "Traceback (most recent call last)" in verbose.stderr
    assert KEY not in verbose.stderr


def test_verbose_shows_the_cause_chain_of_a_network_error(harness: Harness, config: Config) -> None:
    pytest.importorskip("harness_llm_openai")
    with ScriptedServer() as server:
        url = server.url  # a port nothing listens on once the server is closed
    config(
        f"plugins:\n  openai:local:\n    base_url: {url}/v1\n    api_key: sk-test\n"
        "    routes: [local]\ndefaults: {route: local, model: m1}\n"
    )
    result = harness("-v", "run", "hi")
    assert result.returncode == 1
    assert "error: NETWORK from route 'local' (openai:local)" in result.stderr
    assert "The above exception was the direct cause of the following exception" in result.stderr


def test_a_plugin_start_failure_is_shown_once(harness: Harness, config: Config) -> None:
    config("plugins:\n  startfail: {}\n  mock: {}\ndefaults: {route: mock}\n")
    for command in (["run", "hi"], ["config", "check"], ["plugins"], ["chain"]):
        result = harness(*command)
        shown = (result.stdout + result.stderr).count("cannot start")
        assert shown == 1, (command, result.stdout, result.stderr)
        assert "harness: ERROR" not in result.stderr
    verbose = harness("-v", "run", "hi")
    assert "Traceback (most recent call last)" in verbose.stderr


@pytest.mark.parametrize("group", ["config", "cache"])
def test_a_group_without_its_subcommand_prints_its_help(harness: Harness, group: str) -> None:
    result = harness(group)
    assert result.returncode == 2
    assert result.stderr.startswith(f"Usage: harness {group} [OPTIONS] COMMAND [ARGS]...\n")
    assert "Commands:" in result.stderr
    assert "error:" not in result.stderr


def test_an_adapter_that_fails_at_start_is_one_warning_line() -> None:
    from harness_core.cli._run import warn_start_failures
    from harness_core.plugininfo import PluginFailure

    loaded = PluginFailure(key="old", name="x", message="no key", stage="config", is_middleware=False)
    started = PluginFailure(key="acme", name="x", message="RuntimeError: boom", stage="register", is_middleware=False)
    middleware = PluginFailure(key="mw", name="x", message="boom", stage="register", is_middleware=True)
    lines: list[str] = []
    warn_start_failures(lines.append, [loaded], [loaded, started, middleware])
    assert lines == ["warning: plugin 'acme' failed to start: RuntimeError: boom; its routes are unavailable"]

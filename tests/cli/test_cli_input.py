"""`harness run` at the process boundary: signals, piped stdin, undecodable bytes, terminal output, `-c`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness_core.cli._common import Sink
from harness_core.cli._run import Renderer, read_prompt
from harness_core.cli._text import UNDECODABLE_WARNING, clean_argument, for_terminal, read_stdin, undecoded
from harness_core.types import BlockEnd, BlockStart, TextBlock, TextDelta, ToolCallBlock

Harness = Callable[..., "subprocess.CompletedProcess[str]"]
Config = Callable[[str], str]
Spawn = Callable[..., "subprocess.Popen[str]"]
WORDS = " ".join(f"w{i}" for i in range(200))


# ------------------------------------------------------------------ SIGTERM / SIGHUP


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_termination_signal_aborts_like_ctrl_c(
    tmp_path: Path, spawn: Spawn, config: Config, signum: signal.Signals
) -> None:
    """The signal mid-stream fires the abort: middleware cleanup runs (usage row 'aborted',
    trace ends with finish{aborted}), the partial output is kept, exit 128 + signal."""
    ledger = tmp_path / "usage.sqlite"
    config(
        f"plugins:\n  usage: {{path: '{ledger}'}}\n  trace: {{path: t.jsonl}}\n  mock: {{delay: 0.2}}\n"
        "defaults: {route: mock, model: echo}\n"
    )
    process = spawn("run", WORDS)
    assert process.stdout is not None
    first = process.stdout.read(3)  # "w0 " arrived: the stream is running
    process.send_signal(signum)
    rest, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum
    assert (first + rest).startswith("w0 ")
    assert "w199" not in rest
    reason = "terminated by SIGTERM" if signum == signal.SIGTERM else "hung up (SIGHUP)"
    assert f"aborted: {reason}" in err
    with sqlite3.connect(ledger) as db:
        rows = db.execute("SELECT route, status, finish_reason FROM usage").fetchall()
    assert rows == [("mock", "aborted", "aborted")]
    traced = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    finishes = [line["chunk"]["reason"] for line in traced if line["chunk"]["type"] == "finish"]
    assert [finish["kind"] for finish in finishes] == ["aborted"]


@pytest.mark.parametrize("streaming", [True, False])
def test_sigterm_in_chat_aborts_the_reply_and_leaves(
    tmp_path: Path, spawn: Spawn, config: Config, streaming: bool
) -> None:
    ledger = tmp_path / "usage.sqlite"
    config(f"plugins:\n  usage: {{path: '{ledger}'}}\n  mock: {{delay: 0.2}}\ndefaults: {{route: mock, model: echo}}\n")
    process = spawn("chat", stdin=subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write((WORDS if streaming else "w0 w1") + "\n")
    process.stdin.flush()
    assert process.stdout.read(3) == "w0 "  # the reply is streaming
    if not streaming:
        assert process.stdout.read(3) == "w1\n"  # the reply ended: the REPL waits for a line
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "terminated by SIGTERM" in err
    assert "Traceback" not in err
    assert "w199" not in out
    with sqlite3.connect(ledger) as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM usage")]
    assert statuses == (["aborted"] if streaming else ["complete"])


# ------------------------------------------------------------------ stdin and the prompt


def test_piped_text_comes_before_the_prompt(harness: Harness) -> None:
    result = harness("run", "summarize:", input="file content\n")
    assert result.returncode == 0
    assert result.stdout == "file content\n summarize:\n"


def test_piped_text_alone_is_the_prompt(harness: Harness) -> None:
    result = harness("run", input="only stdin")
    assert (result.returncode, result.stdout) == (0, "only stdin\n")


def test_dash_reads_stdin_only(harness: Harness) -> None:
    result = harness("run", "-", input="from stdin")
    assert (result.returncode, result.stdout) == (0, "from stdin\n")


def test_no_prompt_and_empty_stdin_is_a_usage_error(harness: Harness) -> None:
    result = harness("run")
    assert result.returncode == 2
    assert result.stderr == "error: empty prompt (nothing to send: pass PROMPT or pipe text on stdin)\n"


class _Terminal:
    """A stdin that is a terminal: never read."""

    def isatty(self) -> bool:
        return True

    def read(self) -> str:
        raise AssertionError("a terminal stdin must not be read")


def test_a_terminal_stdin_is_not_read() -> None:
    assert read_prompt("hello", _Terminal()) == ("hello", False)  # type: ignore[arg-type]
    assert read_prompt(None, None) == ("", False)
    assert read_prompt("closed stdin", None) == ("closed stdin", False)


# ------------------------------------------------------------------ undecodable bytes


def _cached_config(tmp_path: Path) -> None:
    """The cache middleware hashes the request: a surrogate reaching it would fail the run."""
    cache = tmp_path / "c.sqlite"
    (tmp_path / "plugins.yaml").write_text(
        f"plugins:\n  cache: {{path: '{cache}'}}\n  mock: {{}}\ndefaults: {{route: mock, model: echo}}\n"
    )


def _run_bytes(tmp_path: Path, cli_env: dict[str, str], args: list[bytes], stdin: bytes) -> tuple[int, str, str]:
    result = subprocess.run(
        [sys.executable.encode(), b"-m", b"harness_core.cli", b"run", *args],
        input=stdin,
        capture_output=True,
        env=cli_env,
        cwd=tmp_path,
        timeout=120,
    )
    return result.returncode, result.stdout.decode("utf-8"), result.stderr.decode("utf-8")


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        ([b"caf\xe9 ok"], b"", "caf\ufffd ok\n"),
        ([], b"bad \xff\xfe bytes", "bad \ufffd\ufffd bytes\n"),
        ([b"-"], b"half \xe2\x82", "half \ufffd\n"),  # a UTF-8 sequence cut short
        ([b"--system", b"s\xff", b"fine"], b"", "fine\n"),
    ],
)
def test_undecodable_bytes_become_replacement_characters(
    tmp_path: Path, cli_env: dict[str, str], args: list[bytes], stdin: bytes, expected: str
) -> None:
    """Never a surrogate to the adapter: U+FFFD and one warning line (the cache middleware
    hashes the request, so a surrogate there would fail the run)."""
    _cached_config(tmp_path)
    code, out, err = _run_bytes(tmp_path, cli_env, args, stdin)
    assert (code, out) == (0, expected)
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [UNDECODABLE_WARNING]


def test_valid_input_gives_no_warning(harness: Harness) -> None:
    result = harness("run", "café ✓", input="naïve ")
    assert (result.returncode, result.stdout) == (0, "naïve  café ✓\n")
    assert "warning" not in result.stderr


def test_clean_argument_and_read_stdin_units() -> None:
    assert clean_argument("plain") == ("plain", False)
    assert clean_argument(os.fsdecode(b"a\xffb")) == ("a\ufffdb", True)

    class TextOnly:
        """An in-memory text stream without a binary buffer."""

        def read(self) -> str:
            return "x\udcff"

    assert read_stdin(TextOnly()) == ("x\ufffd", True)  # type: ignore[arg-type]
    assert undecoded("plain é") is None
    assert undecoded(os.fsdecode(b"n\xffm\xfe")) == "n\\xffm\\xfe"


# ------------------------------------------------------------------ terminal output


def test_for_terminal_makes_control_characters_visible() -> None:
    assert for_terminal("keep\n\ttabs") == "keep\n\ttabs"
    assert for_terminal("x\x1b[31mred\r\x07\x08\x00") == "x^[[31mred^M^G^H^@"
    assert for_terminal("del\x7f csi\x9b nel\x85 é") == "del^? csi\\x9b nel\\x85 é"


class _Tty:
    """A terminal stand-in: text written is kept."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def _render(*, tty: bool, as_json: bool = False) -> tuple[str, str]:
    out, err = _Tty(), _Tty()
    renderer = Renderer(Sink(out), Sink(err), as_json=as_json, tty=tty, redact=lambda text: text)  # type: ignore[arg-type]
    renderer.feed(BlockStart(index=0, block_type="text"))
    renderer.feed(TextDelta(index=0, text="x\x1b[31mred\ttab\n"))
    renderer.feed(BlockEnd(index=0, block=TextBlock(text="x\x1b[31mred\ttab\n")))
    call = ToolCallBlock(id="c1", name="f\x1b]0;title\x07", arguments="{}")
    renderer.feed(BlockStart(index=1, block_type="tool-call", id="c1", name=call.name))
    renderer.feed(BlockEnd(index=1, block=call))
    renderer.note("error: provider said \x1b[2J")
    return out.text, err.text


def test_a_terminal_sees_no_escape_sequence_from_the_model() -> None:
    out, err = _render(tty=True)
    assert out.startswith("x^[[31mred\ttab\n")
    assert "[tool call c1] f^[]0;title^G({})" in out
    assert "\x07" not in out
    assert "\x1b[31m" not in out
    assert err == "error: provider said ^[[2J\n"


def test_pipes_and_json_keep_the_exact_text() -> None:
    out, _ = _render(tty=False)
    assert out == "x\x1b[31mred\ttab\n"
    out, _ = _render(tty=True, as_json=True)
    assert json.loads(out.splitlines()[1])["text"] == "x\x1b[31mred\ttab\n"


# ------------------------------------------------------------------ -c on the group, missing model


def test_config_given_to_the_group(harness: Harness, tmp_path: Path) -> None:
    elsewhere = tmp_path / "other.yaml"
    elsewhere.write_text("plugins:\n  mock: {routes: [picked]}\n")
    result = harness("-c", str(elsewhere), "run", "-r", "picked", "hi")
    assert (result.returncode, result.stdout) == (0, "hi\n")
    result = harness("-c", str(elsewhere), "chain")
    assert result.stdout.startswith("route: picked (the only route served")
    missing = tmp_path / "missing.yaml"
    result = harness("-c", str(missing), "run", "-c", str(elsewhere), "-r", "picked", "x")  # the subcommand's wins
    assert (result.returncode, result.stdout) == (0, "x\n")


def test_a_provider_without_a_model_says_pass_m(harness: Harness, config: Config) -> None:
    config("plugins:\n  openai: {api_key: k, base_url: 'http://127.0.0.1:9/v1'}\n  mock: {}\n")
    result = harness("run", "-r", "openai", "hi")
    assert result.returncode == 2
    assert result.stderr.startswith(
        "error: no model was given: pass -m MODEL or set defaults.model in plugins.yaml; "
        "the provider's answer: BAD_REQUEST from route 'openai' (openai): "
    )
    assert len(result.stderr.splitlines()) == 1


def test_a_default_model_for_another_route_still_needs_m(harness: Harness, config: Config) -> None:
    config(
        "plugins:\n  openai: {api_key: k, base_url: 'http://127.0.0.1:9/v1'}\n  mock: {}\n"
        "defaults: {route: mock, model: echo}\n"
    )
    result = harness("run", "-r", "openai", "hi")
    assert result.returncode == 2
    assert "pass -m MODEL or set defaults.model" in result.stderr


# ------------------------------------------------------------------ harness plugins: the status run sees


@pytest.mark.parametrize(
    ("plugin", "config_text", "reason"),
    [
        ("failinit", "{name: x}", "plugin 'failinit' failed to start: RuntimeError: cannot connect"),
        (
            "startfail",
            "{}",
            "plugin 'startfail' failed to start: RuntimeError: cannot start [middleware, stage register]",
        ),
        ("notgen", "{}", "CONFIG: plugin 'notgen': llm_stream must be an async generator function"),
    ],
)
def test_plugins_reports_a_plugin_that_cannot_start_as_failed(
    harness: Harness, config: Config, plugin: str, config_text: str, reason: str
) -> None:
    config(f"plugins:\n  mock: {{}}\n  {plugin}: {config_text}\n")
    run = harness("run", "hi")  # run refuses it (a middleware) or warns that its routes are unavailable ...
    assert f"plugin {plugin!r}" in run.stderr
    assert run.returncode == 2 or "its routes are unavailable" in run.stderr
    assert harness("config", "check").returncode == 2  # ... config check reports it ...
    result = harness("plugins")  # ... and plugins does not call it enabled
    assert result.returncode == 0
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[2:] if not line.startswith("!")}
    assert rows["mock"] == "enabled"
    assert rows[plugin] == "failed"
    assert sum(reason in line for line in result.stdout.splitlines() if line.startswith("! ")) == 1
    document = json.loads(harness("plugins", "--json").stdout)
    (entry,) = [entry for entry in document["plugins"] if entry["key"] == plugin]
    assert entry["state"] == "failed"
    assert reason in entry["message"]


def test_chat_replaces_undecodable_bytes_and_warns_once(tmp_path: Path, cli_env: dict[str, str]) -> None:
    _cached_config(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "harness_core.cli", "chat"],
        input=b"caf\xe9 one\nbad \xff two\nfine\n",
        capture_output=True,
        env={**cli_env, "LC_ALL": "C.UTF-8"},  # strict UTF-8 decoding of stdin by default
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode("utf-8") == "caf\ufffd one\nbad \ufffd two\nfine\n"
    assert result.stderr.decode("utf-8").splitlines() == [UNDECODABLE_WARNING]

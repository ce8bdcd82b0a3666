"""prompt-log: every stream in SQLite (masked), `harness logs`, continuing a conversation, and the
issue's end-to-end case: two routes, the first answering 503, through `harness run`."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from mw_helpers import (
    Script,
    collect,
    error_finish,
    finish,
    options,
    stop,
    text_chunks,
    tool_chunks,
    usage,
    usage_record,
)

from harness_core.cli._app import cli as harness_cli
from harness_core.cli._promptlog import CONVERSATION_KEY as CLI_KEY
from harness_core.record import record_of
from harness_core.testing import Reply, ScriptedServer
from harness_core.types import Message
from harness_middleware import _sqlite, promptlog
from harness_middleware.pricing import PriceBook
from harness_middleware.promptlog import CONVERSATION_KEY, PromptLog, PromptLogPlugin, default_log_path
from harness_middleware.usage import UsageLedger

pytestmark = pytest.mark.anyio

KEY = "sk-" + "abcdefghijklmnopqrstuvwxyz012345"  # built at run time: no key-shaped literal in the repo


def plugin(tmp_path: Path, **config: Any) -> PromptLogPlugin:
    config.setdefault("path", str(tmp_path / "logs.sqlite"))
    return PromptLogPlugin(msgspec.convert(config, PromptLogPlugin.Config))


async def test_a_stream_is_logged_with_usage_cost_and_timings(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    request = msgspec.structs.replace(options("what is 2+2?"), route="openai", model="gpt-4o-mini", system="terse")
    script = Script([*text_chunks("4"), *tool_chunks('{"x": 1}', index=1), usage(1200, 30), finish("tool-calls")])
    await collect(p.llm_stream(request, script))
    [entry] = p.log.entries()
    assert (entry.route, entry.model, entry.requested_route, entry.requested_model) == (
        "openai",
        "gpt-4o-mini",
        "openai",
        "gpt-4o-mini",
    )
    assert (entry.system, entry.prompt, entry.response) == ("terse", "what is 2+2?", "4")
    assert entry.message is not None
    assert entry.message["content"][1] == {
        "type": "tool-call",
        "id": "call_1",
        "name": "lookup",
        "arguments": '{"x": 1}',
    }
    assert (entry.input_tokens, entry.output_tokens, entry.finish_reason) == (1200, 30, "tool-calls")
    expected = PriceBook().cost("openai", "gpt-4o-mini", script_usage(1200, 30))
    assert expected is not None
    assert entry.cost == pytest.approx(float(expected.total))
    assert entry.price_source == expected.source
    assert entry.first_chunk_ms is not None
    assert 0 <= entry.first_chunk_ms <= entry.duration_ms
    assert entry.request["messages"][0]["content"][0]["text"] == "what is 2+2?"
    assert "abort" not in entry.request
    assert "metadata" not in entry.request
    assert abs(entry.ts - time.time()) < 3600
    assert entry.attempts is None
    assert not entry.cached


def script_usage(input_tokens: int, output_tokens: int) -> Any:
    from harness_core.types import TokenUsage

    return TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens)


async def test_secrets_are_masked_everywhere(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    p.use_redactor(lambda text: text.replace("hunter2", "**********"))
    leaked = f"my key is {KEY} and password hunter2"
    request = msgspec.structs.replace(
        options(leaked), system=leaked, provider_options={"fake": {"blob": b"\x00\x01", "note": leaked}}
    )
    await collect(
        p.llm_stream(
            request,
            Script(
                [
                    *text_chunks(leaked),
                    error_finish("SERVER", message=leaked),
                ]
            ),
        )
    )
    raw = (tmp_path / "logs.sqlite").read_bytes()
    text = json.dumps([msgspec.to_builtins(e) for e in p.log.entries()])
    for where in (raw.decode("latin-1"), text):
        assert KEY not in where
        assert "hunter2" not in where
        assert "abcdefghijklmnopqrstuvwxyz012345" not in where
    [entry] = p.log.entries()
    assert entry.prompt == "my key is [REDACTED:openai-key] and password **********"
    assert entry.error_message == entry.prompt
    assert entry.request["provider_options"]["fake"]["blob"].startswith("sha256:")


async def test_binary_provider_options_are_stored_by_digest(tmp_path: Path) -> None:
    import hashlib

    p = plugin(tmp_path)
    assert p._mask(("a", b"xyz")) == ["a", "sha256:" + hashlib.sha256(b"xyz").hexdigest()]


async def test_fallback_attempts_and_cache_hits_come_from_the_record(tmp_path: Path) -> None:
    from harness_core.errors import LlmError
    from harness_core.record import Attempt

    p = plugin(tmp_path)

    async def fell_back(opts: Any) -> Any:
        notes = record_of(opts)
        assert notes is not None
        notes.attempts.append(Attempt("a", "m1", failure=LlmError("SERVER", "503", status=503).to_failure()))
        notes.attempts.append(Attempt("b", "m2"))
        notes.served_route, notes.served_model = "b", "m2"
        for chunk in [*text_chunks("ok"), usage(), stop()]:
            yield chunk

    async def cache_hit(opts: Any) -> Any:
        notes = record_of(opts)
        assert notes is not None
        notes.cached = True
        for chunk in [*text_chunks("old"), usage(), stop()]:
            yield chunk

    await collect(p.llm_stream(options(route="a", model="m1"), fell_back))
    await collect(p.llm_stream(options(), cache_hit))
    fallback_entry, hit = p.log.entries()
    assert (fallback_entry.requested_route, fallback_entry.route, fallback_entry.model) == ("a", "b", "m2")
    assert fallback_entry.attempts is not None
    assert [a["route"] for a in fallback_entry.attempts] == ["a", "b"]
    assert fallback_entry.attempts[0]["failure"]["status"] == 503
    assert (hit.cached, hit.cost, hit.price_source) == (True, 0.0, "cache")


async def test_queries_limits_and_conversations(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    for text in ("alpha one", "beta two", "100% gamma_x"):
        await collect(p.llm_stream(options(text), Script([*text_chunks("re: " + text), stop()])))
    assert [e.prompt for e in p.log.entries(limit=2)] == ["beta two", "100% gamma_x"]
    assert [e.prompt for e in p.log.entries(limit=None, query="BETA")] == ["beta two"]
    assert [e.prompt for e in p.log.entries(query="100%")] == ["100% gamma_x"]
    assert [e.prompt for e in p.log.entries(query="a%o")] == []  # % is literal (as a wildcard: "alpha one")
    assert [e.prompt for e in p.log.entries(query="a_o")] == []  # _ too
    assert p.log.entries(since=time.time() + 60) == []
    newest = p.log.entries(limit=1)[0]
    continued = p.continuation(None)
    assert continued is not None
    assert continued.conversation_id == newest.conversation_id
    assert [m.text for m in continued.history] == ["100% gamma_x", "re: 100% gamma_x"]
    assert continued.history[1].model == "m1"
    second = msgspec.structs.replace(
        options("and then?"),
        messages=[*continued.history, Message.user("and then?")],
        metadata={CONVERSATION_KEY: continued.conversation_id},
    )
    await collect(p.llm_stream(second, Script([*text_chunks("then"), stop()])))
    turns = p.log.entries(conversation_id=continued.conversation_id, limit=None)
    assert [t.prompt for t in turns] == ["100% gamma_x", "and then?"]
    assert p.continuation("no-such-id") is None
    assert CONVERSATION_KEY == CLI_KEY


async def test_turn_without_reply_continues_with_its_messages(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    await collect(p.llm_stream(options("first"), Script([error_finish("SERVER")])))
    assert p.log.entries()[0].first_chunk_ms is None  # failed before any chunk
    continued = p.continuation(None)
    assert continued is not None
    assert [m.text for m in continued.history] == ["first"]


async def test_a_row_logged_with_the_old_provider_key_continues_on_its_route(tmp_path: Path) -> None:
    p = plugin(tmp_path)
    await collect(
        p.llm_stream(
            msgspec.structs.replace(options("first"), route="old"), Script([*text_chunks("ok"), finish("stop")])
        )
    )
    with closing(sqlite3.connect(p.log.path)) as conn, conn:  # rows before GenerateOptions.provider became .route
        [(stored,)] = conn.execute("SELECT request FROM log").fetchall()
        assert '"route":"old"' in stored
        conn.execute("UPDATE log SET request = ?", (stored.replace('"route":', '"provider":'),))
    continued = p.continuation(None)
    assert continued is not None
    assert continued.options.route == "old"
    assert "provider" not in p.log.entries()[0].request


def test_continuation_without_a_log_file(tmp_path: Path) -> None:
    assert plugin(tmp_path).continuation(None) is None


async def test_database_fault_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = plugin(tmp_path)
    (tmp_path / "logs.sqlite").mkdir()
    with caplog.at_level(logging.ERROR, logger="harness_middleware.promptlog"):
        chunks = await collect(p.llm_stream(options(), Script([*text_chunks("a"), stop()])))
    assert chunks[-1] == stop()
    assert "prompt-log: recording the stream" in caplog.text


def test_default_path() -> None:
    assert PromptLogPlugin().log.path == default_log_path()
    assert default_log_path().name == "logs.sqlite"


# ---------------------------------------------------------------------------- `harness logs`


async def filled(tmp_path: Path) -> PromptLog:
    p = plugin(tmp_path)
    await collect(p.llm_stream(options("hello", system="be brief"), Script([*text_chunks("hi"), usage(5, 1), stop()])))
    await collect(
        p.llm_stream(
            options("broken"),
            Script(
                [*text_chunks("par"), usage(5, 1, cache_read_tokens=2, reasoning_tokens=1), error_finish("NETWORK")]
            ),
        )
    )
    return p.log


async def test_logs_command_text_and_json(tmp_path: Path) -> None:
    log = await filled(tmp_path)
    from harness_core.errors import LlmError
    from harness_core.record import Attempt

    async def fell_back(opts: Any) -> Any:
        notes = record_of(opts)
        assert notes is not None
        notes.attempts += [
            Attempt("x", "m0", skipped=True),
            Attempt("a", "m1", failure=LlmError("SERVER", "down", status=503).to_failure()),
            Attempt("b", "m2"),
        ]
        notes.served_route, notes.served_model = "b", "m2"
        for chunk in [*text_chunks("ok"), stop()]:
            yield chunk

    await collect(PromptLogPlugin(PromptLogPlugin.Config(path=str(log.path))).llm_stream(options("fb"), fell_back))
    text = CliRunner().invoke(harness_cli, ["logs", "--db", str(log.path), "-n", "1"]).output
    assert "route: b/m2 (requested fake/m1)" in text
    assert "  attempt x/m0: skipped (cooling down)\n  attempt a/m1: SERVER: down\n  attempt b/m2: served" in text
    result = CliRunner().invoke(harness_cli, ["logs", "--db", str(log.path), "-n", "0"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "prompt: hello" in result.output
    assert "system: be brief" in result.output
    assert "finish: error NETWORK: boom" in result.output
    assert "(2 cache read, 1 reasoning)" in result.output
    assert "cost: unknown" in result.output
    data = json.loads(CliRunner().invoke(harness_cli, ["logs", "--db", str(log.path), "--json", "-q", "hello"]).output)
    assert [entry["prompt"] for entry in data] == ["hello"]
    cid = data[0]["conversation_id"]
    by_cid = CliRunner().invoke(harness_cli, ["logs", "--db", str(log.path), "--cid", cid, "--since", "1d"])
    assert "prompt: hello" in by_cid.output
    assert "broken" not in by_cid.output
    none = CliRunner().invoke(harness_cli, ["logs", "--db", str(log.path), "-q", "zzz"])
    assert none.output.strip() == "no entries"


def test_logs_command_errors(tmp_path: Path) -> None:
    missing = CliRunner().invoke(harness_cli, ["logs", "--db", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 2
    assert "no prompt log" in missing.output
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database" * 100)
    broken = CliRunner().invoke(harness_cli, ["logs", "--db", str(bad)])
    assert broken.exit_code == 2
    assert "cannot read the prompt log" in broken.output


def test_logs_reads_another_database_read_only(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path / "usage.sqlite")
    ledger.insert(usage_record())
    before = ledger.path.read_bytes()
    result = CliRunner().invoke(harness_cli, ["logs", "--db", str(ledger.path)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {ledger.path} is not a prompt log (it has no `log` table)\n"
    with closing(sqlite3.connect(ledger.path)) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "log" not in tables
    assert ledger.path.read_bytes() == before


def test_reading_a_missing_log_creates_nothing(tmp_path: Path) -> None:
    log = PromptLog(tmp_path / "sub" / "logs.sqlite")
    assert log.entries() == []
    assert log.continuation() is None
    assert not (tmp_path / "sub").exists()


def test_logs_says_where_plugins_yaml_disables_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness_middleware.cli.default_log_path", lambda: tmp_path / "default.sqlite")
    config = tmp_path / "plugins.yaml"
    config.write_text("plugins:\n  mock: {}\n  ~prompt-log:\n")
    off = CliRunner().invoke(harness_cli, ["logs", "-c", str(config)])
    assert off.exit_code == 2
    assert off.stdout == ""
    assert off.stderr == (
        f"error: the prompt log is disabled by `~prompt-log:` at {config}:3: harness run writes no log "
        "(remove the `~` to turn it on)\n"
    )
    _sqlite.run(tmp_path / "default.sqlite", promptlog._SCHEMA, lambda conn: None)  # made before it was turned off
    for args in (["logs", "-c", str(config)], ["-c", str(config), "logs"]):  # -c before or after `logs`
        older = CliRunner().invoke(harness_cli, args)
        assert older.exit_code == 0
        assert older.stdout == "no entries\n"
        assert (
            older.stderr
            == f"note: the prompt log is disabled by `~prompt-log:` at {config}:3: these entries were written before\n"
        )


def test_click_errors_use_the_error_prefix_of_every_harness_command(tmp_path: Path) -> None:
    for args in (["logs", "--since", "soon"], ["usage", "--bogus"], ["cache", "stats", "--db", str(tmp_path / "x")]):
        result = CliRunner().invoke(harness_cli, args)
        assert result.exit_code == 2, args
        assert result.stdout == ""
        assert "\nerror: " in f"\n{result.stderr}", result.stderr
        assert "Error:" not in result.stderr


def test_logs_path_from_plugins_yaml_or_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_middleware import cli

    config = tmp_path / "plugins.yaml"
    config.write_text(f"plugins:\n  prompt-log: {{path: {tmp_path / 'mine.sqlite'}}}\n  mock: {{}}\n")
    assert cli.prompt_log(str(config), None).path == tmp_path / "mine.sqlite"
    config.write_text("plugins:\n  mock: {}\n")
    assert cli.prompt_log(str(config), None).path == default_log_path()


# ---------------------------------------------------------------------------- end to end


def sse_reply(text: str, model: str, prompt_tokens: int, completion_tokens: int) -> Reply:
    """An OpenAI chat-completions stream: the text, the stop, then the usage chunk (empty choices)."""

    def event(choices: list[dict[str, object]], **extra: object) -> str:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": choices}
        return f"data: {json.dumps({**body, **extra})}\n\n"

    events = [
        event([{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]),
        event([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        event([], usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}),
    ]
    return Reply(reads=["".join(events).encode() + b"data: [DONE]\n\n"])


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("HARNESS_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "harness_core.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_two_routes_first_503_answered_by_the_second_and_logged(tmp_path: Path) -> None:
    pytest.importorskip("harness_llm_openai")
    unavailable = Reply.json(503, {"error": {"message": "upstream overloaded", "type": "server_error"}})
    with (
        ScriptedServer(unavailable) as first,
        ScriptedServer(sse_reply("served by backup", "gpt-4o-mini", 1000, 200)) as second,
    ):
        (tmp_path / "plugins.yaml").write_text(
            "plugins:\n"
            "  fallback:\n"
            "    targets: {primary: [backup/gpt-4o-mini]}\n"
            "  openai:\n"
            f"    base_url: {first.url}/v1\n"
            "    routes: [primary]\n"
            "  openai:b:\n"
            f"    base_url: {second.url}/v1\n"
            "    routes: [backup]\n"
            "defaults: {route: primary, model: gpt-4o-mini}\n"
        )
        result = run_cli(tmp_path, "--config", "plugins.yaml", "Say hi")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "served by backup\n"
    logs = run_cli(tmp_path, "logs", "-n", "1", "--json")
    assert logs.returncode == 0, logs.stderr
    [entry] = json.loads(logs.stdout)
    assert (entry["requested_route"], entry["route"], entry["model"]) == ("primary", "backup", "gpt-4o-mini")
    assert [(a["route"], a.get("failure", {}).get("status")) for a in entry["attempts"]] == [
        ("primary", 503),
        ("backup", None),
    ]
    assert (entry["input_tokens"], entry["output_tokens"]) == (1000, 200)
    price = PriceBook().cost("backup", "gpt-4o-mini", script_usage(1000, 200))
    assert price is not None
    assert price.price_id == "openai/gpt-4o-mini"
    assert entry["cost"] == pytest.approx(float(price.total))
    assert entry["price_source"].startswith("genai-prices ")
    assert entry["response"] == "served by backup"


async def test_files_are_stored_by_digest_and_named_when_continued(tmp_path: Path) -> None:
    import hashlib

    from harness_core.types import FileBlock, TextBlock

    p = plugin(tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    message = Message(
        role="user",
        content=[
            TextBlock("what is this?"),
            FileBlock("image/png", data=png, filename="x.png"),
            FileBlock("image/png", url="https://example.com/y.png"),
        ],
    )
    await collect(
        p.llm_stream(msgspec.structs.replace(options(), messages=[message]), Script([*text_chunks("a cat"), stop()]))
    )
    assert png not in (tmp_path / "logs.sqlite").read_bytes()
    [entry] = p.log.entries()
    digest = "sha256:" + hashlib.sha256(png).hexdigest()
    assert entry.request["messages"][0]["content"][1]["data"] == digest
    continued = p.continuation(None)
    assert continued is not None
    first = continued.history[0]
    assert first.content[1] == TextBlock(
        f"[file x.png (image/png, {digest}) was attached; the prompt log keeps no bytes]"
    )
    assert first.content[2] == FileBlock("image/png", url="https://example.com/y.png")


async def test_files_in_a_tool_result_are_stored_by_digest_and_named_when_continued(tmp_path: Path) -> None:
    import hashlib

    from harness_core.types import FileBlock, ToolCallBlock, ToolResultBlock

    p = plugin(tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    linked = FileBlock("image/png", url="https://example.com/y.png")
    results = [
        ToolResultBlock("c1", "a chart", files=(FileBlock("image/png", data=png), linked)),
        ToolResultBlock("c2", "", files=(FileBlock("image/png", data=png),)),
        ToolResultBlock("c3", "only a link", files=(linked,)),
        ToolResultBlock("c4", "text"),
    ]
    calls = Message(role="assistant", content=[ToolCallBlock(r.tool_call_id, "draw", "{}") for r in results])
    history = [Message.user("draw"), calls, *(Message(role="tool", content=[r]) for r in results)]
    await collect(
        p.llm_stream(msgspec.structs.replace(options(), messages=history), Script([*text_chunks("ok"), stop()]))
    )
    assert png not in (tmp_path / "logs.sqlite").read_bytes()
    digest = "sha256:" + hashlib.sha256(png).hexdigest()
    continued = p.continuation(None)
    assert continued is not None
    note = f"[file (image/png, {digest}) was attached; the prompt log keeps no bytes]"
    assert [m.content[0] for m in continued.history[2:6]] == [
        ToolResultBlock("c1", f"a chart\n\n{note}", files=(linked,)),
        ToolResultBlock("c2", note),
        results[2],
        results[3],
    ]


def test_logs_name_the_model_served_when_none_was_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "plugins.yaml"
    config.write_text("plugins:\n  prompt-log: {path: log.sqlite}\n  mock: {}\ndefaults: {route: mock}\n")
    ran = CliRunner().invoke(harness_cli, ["-c", str(config), "run", "hi"])
    assert ran.exit_code == 0, ran.output
    shown = CliRunner().invoke(harness_cli, ["-c", str(config), "logs"])
    assert shown.exit_code == 0, shown.output
    assert "\nroute: mock/echo\n" in shown.stdout  # the mock's default model, never "None"
    assert "None" not in shown.stdout

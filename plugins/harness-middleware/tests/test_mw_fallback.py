"""fallback: next target only before the first content chunk; after it, an error finish naming every
attempt and nothing replayed; cooldown shared by streams; composition with retry both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from mw_helpers import Script, collect, error_finish, options, stop, text_chunks, tool_chunks, usage

from harness_core import Harness
from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.record import Attempt, open_record
from harness_core.testing import CheckedStream, Reply, ScriptedServer, check_stream
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    Message,
    TextBlock,
    TextDelta,
    ToolCallBlock,
)
from harness_middleware.fallback import Cooldowns, FallbackPlugin, parse_target, shared_cooldowns
from harness_middleware.retry import RetryPlugin

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fallback(clock: Clock | None = None, **config: Any) -> FallbackPlugin:
    config.setdefault("targets", {"fake": ["backup/b1", "third"]})
    return FallbackPlugin(msgspec.convert(config, FallbackPlugin.Config), cooldowns=Cooldowns(clock or Clock()))


def served(script: Script) -> list[tuple[str | None, str | None]]:
    return [(call.route, call.model) for call in script.calls]


def failure_message(chunks: list[Any]) -> str:
    final = chunks[-1]
    assert isinstance(final, Finish)
    assert final.reason.failure is not None
    return final.reason.failure.message


async def test_first_target_503_second_answers() -> None:
    reply = [*text_chunks("hi"), usage(), stop()]
    script = Script([error_finish("SERVER", message="HTTP 503 overloaded")], reply)
    plugin = fallback()
    opts, notes = open_record(options())
    chunks = check_stream(await collect(plugin.llm_stream(opts, script)))
    assert chunks == reply
    assert served(script) == [("fake", "m1"), ("backup", "b1")]
    assert (notes.served_route, notes.served_model) == ("backup", "b1")
    assert [(a.route, a.model, a.failure.code if a.failure else None) for a in notes.attempts] == [
        ("fake", "m1", "SERVER"),
        ("backup", "b1", None),
    ]
    assert script.closed == 2


async def test_mid_stream_failure_ends_with_every_attempt_named_and_no_replay() -> None:
    broken = [*tool_chunks('{"cmd": "rm -rf /tmp/x', id="c1")[:2], error_finish("NETWORK", message="reset")]
    script = Script([error_finish("OVERLOADED", message="busy")], broken, [*text_chunks("never"), stop()])
    chunks = check_stream(await collect(fallback().llm_stream(options(), script)))
    assert served(script) == [("fake", "m1"), ("backup", "b1")]  # the third target is never called
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "ToolCallDelta", "BlockEnd", "Finish"]
    assert chunks[2] == BlockEnd(0, ToolCallBlock(id="c1", name="lookup", arguments='{"cmd": "rm -rf /tmp/x'))
    message = failure_message(chunks)
    assert message.startswith("reset (fallback attempts: ")
    assert "fake/m1: OVERLOADED 'busy'" in message
    assert "backup/b1: failed after content was sent: NETWORK 'reset'" in message
    assert chunks[-1].reason.failure.code == "NETWORK"  # type: ignore[union-attr]


async def test_raised_errors_before_and_after_content() -> None:
    script = Script([LlmError("RATE_LIMITED", "slow")], [*text_chunks("a", "b")[:2], LlmError("TIMEOUT", "idle")])
    chunks = check_stream(await collect(fallback().llm_stream(options(), script)))
    assert chunks[:2] == text_chunks("a", "b")[:2]
    assert chunks[2] == BlockEnd(0, TextBlock("a"))  # the open block closed with what it holds
    assert "fake/m1: RATE_LIMITED" in failure_message(chunks)
    with pytest.raises(LlmError, match="denied"):
        await collect(fallback().llm_stream(options(), Script([LlmError("AUTH", "denied")])))


async def test_held_block_start_is_not_leaked_from_a_failed_target() -> None:
    reply = [*text_chunks("ok"), stop()]
    script = Script([BlockStart(index=0, block_type="text"), error_finish("SERVER")], reply)
    chunks = check_stream(await collect(fallback().llm_stream(options(), script)))
    assert chunks == reply


async def test_failure_that_does_not_move_on_names_the_attempts() -> None:
    script = Script([error_finish("SERVER")], [error_finish("AUTH", message="bad key")])
    chunks = await collect(fallback().llm_stream(options(), script))
    assert len(chunks) == 1
    assert served(script) == [("fake", "m1"), ("backup", "b1")]
    message = failure_message(chunks)
    assert message.startswith("bad key (fallback attempts: fake/m1: SERVER")
    assert message.endswith("backup/b1: AUTH 'bad key')")  # nothing was sent: no "after content"
    assert "after content" not in message


async def test_a_route_without_targets_keeps_its_failure_unchanged() -> None:
    plugin = fallback(targets={"other": ["backup"]})  # "fake" has no fallback targets
    bad_request = error_finish("BAD_REQUEST", message="HTTP 400 no")
    for failure in (bad_request, error_finish("SERVER", message="HTTP 503 busy")):
        opts, notes = open_record(options())
        assert await collect(plugin.llm_stream(opts, Script([failure]))) == [failure]
        assert [attempt.route for attempt in notes.attempts] == ["fake"]  # still recorded for the logs
    broken = [*text_chunks("a", "b")[:2], error_finish("NETWORK", message="reset")]
    chunks = await collect(plugin.llm_stream(options(), Script(broken)))
    assert failure_message(chunks) == "reset"


async def test_every_target_failing_ends_with_the_last_failure() -> None:
    script = Script([error_finish("SERVER", message="one")], [error_finish("RATE_LIMITED", message="two")])
    chunks = await collect(fallback().llm_stream(options(), script))
    assert served(script) == [("fake", "m1"), ("backup", "b1"), ("third", "m1")]  # no model = requested model
    [final] = chunks
    assert final.reason.failure.code == "RATE_LIMITED"  # type: ignore[union-attr]
    assert "third/m1: RATE_LIMITED 'two'" in failure_message(chunks)


async def test_statuses_and_codes_are_configurable() -> None:
    auth = LlmError("AUTH", "expired", status=401).to_failure()
    script = Script([Finish(FinishReason(kind="error", failure=auth))], [stop()])
    opts, notes = open_record(options())
    chunks = await collect(fallback(statuses=[401], codes=[]).llm_stream(opts, script))
    assert chunks == [stop()]
    assert notes.attempts[0] == Attempt("fake", "m1", failure=auth)
    only_server = fallback(codes=["SERVER"])
    chunks = await collect(only_server.llm_stream(options(), Script([error_finish("RATE_LIMITED")], [stop()])))
    assert chunks[-1].reason.kind == "error"  # type: ignore[union-attr]


async def test_cooldown_is_shared_and_expires() -> None:
    clock = Clock()
    cooldowns = Cooldowns(clock)
    config = msgspec.convert({"targets": {"fake": ["backup/b1"]}, "cooldown": 10}, FallbackPlugin.Config)
    one, two = FallbackPlugin(config, cooldowns=cooldowns), FallbackPlugin(config, cooldowns=cooldowns)
    script = Script([error_finish("SERVER")], [stop()])
    await collect(one.llm_stream(options(), script))
    opts, notes = open_record(options())
    second = Script([stop()])
    assert await collect(two.llm_stream(opts, second)) == [stop()]
    assert served(second) == [("backup", "b1")]  # fake/m1 is cooling down: skipped
    assert notes.attempts == [Attempt("fake", "m1", skipped=True), Attempt("backup", "b1")]
    failing = Script([error_finish("SERVER", message="down too")])
    chunks = await collect(two.llm_stream(options(), failing))
    assert "fake/m1: skipped (cooling down); backup/b1: SERVER 'down too'" in failure_message(chunks)
    clock.now += 10
    assert not cooldowns.cooling(("fake", "m1"))
    third = Script([stop()])
    await collect(two.llm_stream(options(), third))
    assert served(third) == [("fake", "m1")]


async def test_all_targets_cooling_are_all_tried() -> None:
    cooldowns = Cooldowns(Clock())
    cooldowns.cool(("fake", "m1"), 5)
    cooldowns.cool(("fake", "m1"), 1)  # never shortens a running cooldown
    cooldowns.cool(("backup", "b1"), 5)
    plugin = FallbackPlugin(
        msgspec.convert({"targets": {"fake": ["backup/b1"]}}, FallbackPlugin.Config), cooldowns=cooldowns
    )
    script = Script([error_finish("SERVER")], [stop()])
    assert await collect(plugin.llm_stream(options(), script)) == [stop()]
    assert served(script) == [("fake", "m1"), ("backup", "b1")]
    assert cooldowns.cooling(("fake", "m1"))


async def test_no_cooldown_when_zero() -> None:
    cooldowns = Cooldowns(Clock())
    plugin = FallbackPlugin(
        msgspec.convert({"targets": {"fake": ["backup"]}, "cooldown": 0}, FallbackPlugin.Config), cooldowns=cooldowns
    )
    await collect(plugin.llm_stream(options(), Script([error_finish("SERVER")], [stop()])))
    assert not cooldowns.cooling(("fake", "m1"))


async def test_abort_stops_moving_on() -> None:
    abort = AbortSignal()
    script = Script([lambda: abort.fire("user"), error_finish("SERVER")], [stop()])
    chunks = await collect(fallback().llm_stream(options(abort=abort), script))
    assert len(script.calls) == 1
    assert chunks[-1].reason.kind == "error"  # type: ignore[union-attr]


async def test_default_targets_dedup_and_routes_without_a_list() -> None:
    plugin = fallback(targets={"x": ["x/m1"]}, default=["backup"])
    assert plugin.targets_for("x", "m1") == [("x", "m1")]
    assert plugin.targets_for("other", "m9") == [("other", "m9"), ("backup", "m9")]
    assert plugin.describe_chain("other") == "targets other -> backup; cooldown 30s"
    assert fallback().describe_chain("fake") == "targets fake -> backup/b1 -> third; cooldown 30s"
    none = FallbackPlugin(cooldowns=Cooldowns())
    script = Script([error_finish("SERVER", message="busy")])
    assert await collect(none.llm_stream(options(), script)) == [error_finish("SERVER", message="busy")]
    assert FallbackPlugin().cooldowns is shared_cooldowns()


def test_targets_are_checked() -> None:
    assert parse_target("openrouter/meta-llama/llama-3") == ("openrouter", "meta-llama/llama-3")
    assert parse_target("groq") == ("groq", None)
    for bad in ("", "/m", "r/"):
        with pytest.raises(ValueError, match="must be 'route' or 'route/model'"):
            parse_target(bad)
    with pytest.raises(msgspec.ValidationError, match="in the list of 'default'"):
        msgspec.convert({"default": ["r/"]}, FallbackPlugin.Config)


async def read_all(stream: Any) -> list[Any]:
    """Every chunk, unchecked: these inner streams break the protocol on purpose."""
    return [chunk async for chunk in stream]


async def test_stream_ending_without_finish_is_passed_on() -> None:
    # the runtime's terminal guard reports a stream without finish; fallback adds nothing
    assert await read_all(fallback().llm_stream(options(), Script(text_chunks("a")))) == text_chunks("a")
    assert await read_all(fallback().llm_stream(options(), Script([]))) == []


async def test_error_finish_without_failure_passes_through() -> None:
    bare = Finish(FinishReason(kind="error"))
    chunks = await read_all(fallback().llm_stream(options(), Script([*text_chunks("a"), bare])))
    assert chunks[-1] == bare


# ---------------------------------------------------------------------------- over the wire


def sse_reply(text: str, model: str) -> Reply:
    def event(delta: dict[str, object], finish: str | None = None, **extra: object) -> str:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": model}
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        body.update(extra)
        return f"data: {json.dumps(body)}\n\n"

    final = event({}, "stop", usage={"prompt_tokens": 12, "completion_tokens": 3})
    return Reply(reads=[(event({"role": "assistant", "content": text}) + final + "data: [DONE]\n\n").encode()])


def unavailable() -> Reply:
    return Reply.json(503, {"error": {"message": "upstream overloaded", "type": "server_error"}})


openai = pytest.importorskip("harness_llm_openai")


def adapter(key: str, route: str, server: ScriptedServer) -> tuple[str, Any]:
    config = openai.OpenAIPlugin.Config(base_url=f"{server.url}/v1", routes=[route])
    return key, openai.OpenAIPlugin(config)


async def test_two_routes_over_http_first_503() -> None:
    with (
        ScriptedServer(unavailable()) as first,
        ScriptedServer(sse_reply("from backup", "gpt-4o-mini"), sse_reply("from backup", "gpt-4o-mini")) as second,
    ):
        plugin = FallbackPlugin(
            msgspec.convert({"targets": {"primary": ["backup/gpt-4o-mini"]}}, FallbackPlugin.Config),
            cooldowns=Cooldowns(Clock()),
        )
        harness = Harness(
            [("fallback", plugin), adapter("openai:a", "primary", first), adapter("openai:b", "backup", second)]
        )
        async with harness:
            request = msgspec.structs.replace(options(), route="primary", model="gpt-4o")
            result = await harness.generate(request)
            async with harness.stream(request) as chunks:  # primary cools down: straight to backup
                streamed = [c async for c in CheckedStream(chunks)]
        assert result.text == "from backup"
        assert (result.message.route, result.message.source, result.message.model) == (
            "backup",
            "openai:b",
            "gpt-4o-mini",
        )
        assert [r.json()["model"] for r in first.requests] == ["gpt-4o"]
        assert [r.json()["model"] for r in second.requests] == ["gpt-4o-mini", "gpt-4o-mini"]
        assert TextDelta(0, "from backup") in streamed


@pytest.mark.parametrize("fallback_outside", [True, False])
async def test_composes_with_retry_in_both_orders(fallback_outside: bool) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await anyio.lowlevel.checkpoint()

    # primary: 503 twice (then a success never reached); backup: 503 once, then success.
    with (
        ScriptedServer(unavailable(), unavailable(), sse_reply("p", "m")) as first,
        ScriptedServer(unavailable(), sse_reply("from backup", "m")) as second,
    ):
        retry = RetryPlugin(RetryPlugin.Config(max_attempts=2, jitter=False, initial_delay=0.5), sleep=sleep)
        plugin = FallbackPlugin(
            msgspec.convert({"targets": {"primary": ["backup"]}, "cooldown": 0}, FallbackPlugin.Config),
            cooldowns=Cooldowns(Clock()),
        )
        layers: list[tuple[str, Any]] = [("fallback", plugin), ("retry", retry)]
        if not fallback_outside:
            layers.reverse()
        harness = Harness([*layers, adapter("openai:a", "primary", first), adapter("openai:b", "backup", second)])
        async with harness:
            result = await harness.generate(msgspec.structs.replace(options(), route="primary", model="m"))
        assert (len(first.requests), len(second.requests)) == (2, 2)
        assert result.text == "from backup"
        assert result.message.route == "backup"
        if fallback_outside:
            # retry inside: each target is retried (one wait each) before fallback moves on
            assert waits == [0.5, 0.5]
        else:
            # retry outside: a whole fallback pass (primary 503, backup 503) fails, one wait,
            # then a second pass (primary 503, backup answers)
            assert waits == [0.5]


async def test_conversation_history_keeps_the_served_model() -> None:
    message = Message(role="assistant", content=[TextBlock("x")], route="backup", model="b1")
    assert msgspec.json.decode(msgspec.json.encode(message), type=Message) == message


def test_harness_chain_lists_the_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness_core.cli._inspect import show_chain

    config = tmp_path / "plugins.yaml"
    config.write_text(
        "plugins:\n  fallback:\n    targets: {mock: [b/other]}\n    cooldown: 5\n  mock: {}\n  mock:b: {routes: [b]}\n"
        "  ~prompt-log: {}\n"  # else the prompt log on by default is the first link
    )
    assert show_chain("mock", str(config), as_json=False) == 0
    assert capsys.readouterr().out.splitlines() == [
        "route: mock (outermost first)",
        "1. fallback (normal): targets mock -> b/other; cooldown 5s",
        "2. mock (adapter)",
        "embedding calls (outermost first):",  # fallback also serves embedding calls
        "1. fallback (normal)",
        "token counts (outermost first):",  # and token counts
        "1. fallback (normal)",
    ]
    assert show_chain("mock", str(config), as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["chain"][0] == {
        "key": "fallback",
        "tier": "normal",
        "detail": "targets mock -> b/other; cooldown 5s",
    }


async def test_mid_stream_failure_over_http_is_not_replayed() -> None:
    whole = sse_reply("half an ans", "m").reads[0]
    assert isinstance(whole, bytes)
    first_event = whole.split(b"\n\n")[0] + b"\n\n"  # the text delta; then the connection drops
    cut = Reply(reads=[first_event], end="abrupt")
    with ScriptedServer(cut) as first, ScriptedServer(sse_reply("never", "m")) as second:
        plugin = FallbackPlugin(
            msgspec.convert({"targets": {"primary": ["backup"]}}, FallbackPlugin.Config), cooldowns=Cooldowns(Clock())
        )
        harness = Harness(
            [("fallback", plugin), adapter("openai:a", "primary", first), adapter("openai:b", "backup", second)]
        )
        async with harness, harness.stream(msgspec.structs.replace(options(), route="primary", model="m")) as chunks:
            got = [c async for c in CheckedStream(chunks)]
        assert second.requests == []  # content was sent: nothing is tried again elsewhere
    texts = [c.text for c in got if isinstance(c, TextDelta)]
    assert texts == ["half an ans"]
    final = got[-1]
    assert isinstance(final, Finish)
    assert final.reason.kind == "error"
    assert final.reason.failure is not None
    assert "primary/m: failed after content was sent: NETWORK" in final.reason.failure.message


# ---------------------------------------------------------------------------- the command line


def run_cli_in_process(config: Path, *args: str) -> Any:
    from click.testing import CliRunner

    from harness_core.cli._app import cli as harness_cli

    return CliRunner().invoke(harness_cli, ["run", "-c", str(config), *args], catch_exceptions=False)


FALLBACK_CLI = (
    "plugins:\n"
    "  fallback: {{targets: {{busy: [mock]}}}}\n"
    "  mock:busy: {{routes: [busy], error: SERVER}}\n"
    "  mock:bad: {{routes: [bad], error: {bad_code}}}\n"
    "  mock: {{}}\n"
)


def test_cli_finish_line_names_the_target_that_served(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(FALLBACK_CLI.format(bad_code="BAD_REQUEST"), encoding="utf-8")
    result = run_cli_in_process(config, "-r", "busy", "-m", "echo", "hi there")
    assert result.exit_code == 0, result.output
    assert "served by mock/echo]" in result.stderr
    direct = run_cli_in_process(config, "-r", "mock", "hi")
    assert direct.exit_code == 0, direct.output
    assert "served by" not in direct.stderr


def test_cli_error_of_a_route_without_targets_has_no_fallback_note(tmp_path: Path) -> None:
    config = tmp_path / "plugins.yaml"
    config.write_text(FALLBACK_CLI.format(bad_code="BAD_REQUEST"), encoding="utf-8")
    result = run_cli_in_process(config, "-r", "bad", "hi")
    assert result.exit_code != 0
    assert "BAD_REQUEST" in result.stderr
    assert "fallback attempts" not in result.stderr
    assert "after content" not in result.stderr


async def test_committed_reads_its_stream_to_the_end_after_the_finish() -> None:
    """After a good finish the committed stream is read to its end, so the inner generator ends by
    itself (closing it costs nothing); what a broken stream sends after its finish is passed on
    for the runtime's guard to drop and log, never swallowed here."""
    from harness_middleware.fallback import committed, until_content

    late = TextDelta(index=0, text="late")

    async def inner() -> Any:
        for chunk in [*text_chunks("hi"), stop(), late]:
            yield chunk

    stream = inner()
    held = await until_content(stream, lambda failure: True)
    attempts: list[Attempt] = []

    async def failed(attempt: Attempt, failure: Any) -> None:
        raise AssertionError("nothing failed")

    passed = [chunk async for chunk in committed(stream, held, Attempt("a", "m"), attempts, named=True, failed=failed)]
    assert passed == [*text_chunks("hi"), stop(), late]
    assert stream.ag_frame is None  # ended: nothing left to close
    assert attempts == [Attempt("a", "m")]

"""Conversation: history, the tool-call round trip, abort, limits, save/load with replay state."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conversation_kit import AdapterPlugin, FakeAdapter, Recorder, parallel_calls

from harness_core import (
    AbortSignal,
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmError,
    Message,
    StreamChunk,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    hookimpl,
)
from harness_core.conversation import Conversation, ConversationState, MaxStepsExceeded, Reply, _add_usage
from harness_core.testing.fake import Raise, Stall, Step, text_reply, tool_call_reply
from harness_core.tools import Tool, tool
from harness_core.types import BlockEnd, BlockStart, TextDelta, ToolCallDelta
from harness_llm_mock import MockConfig, MockPlugin

pytestmark = pytest.mark.anyio


def tool_messages(options: GenerateOptions) -> list[ToolResultBlock]:
    """The tool results in the history of ``options``, each checked to sit alone in a tool message."""
    found = []
    for message in options.messages:
        if message.role == "tool":
            assert len(message.content) == 1
            block = message.content[0]
            assert isinstance(block, ToolResultBlock)
            found.append(block)
    return found


# ------------------------------------------------------------------ the mock's echo round trip


async def test_echo_round_trip_through_the_mock_and_the_tools_hook() -> None:
    recorder = Recorder()
    async with Harness([("rec", recorder), ("mock", MockPlugin(MockConfig()))]) as harness:
        assert harness.tools.names() == ["echo"]
        assert harness.tools.owner("echo") == "mock"
        seen: list[StreamChunk] = []
        results: list[tuple[ToolCallBlock, ToolResultBlock]] = []
        conversation = Conversation(harness, route="mock", model="echo", tools=harness.tools.select(["echo"]))
        reply = await conversation.send(
            "please echo hello",
            on_chunk=seen.append,
            on_tool_result=lambda call, result: results.append((call, result)),
        )
    assert reply.text == "The echo tool returned: please echo hello"
    assert reply.finish.kind == "stop"
    assert reply.steps == 2
    call = ToolCallBlock(id="call_mock_1", name="echo", arguments='{"text":"please echo hello"}')
    result = ToolResultBlock(tool_call_id="call_mock_1", content="please echo hello")
    assert results == [(call, result)]
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool", "assistant"]
    first = conversation.messages[1]
    assert first.content == [call]
    assert (first.route, first.source) == ("mock", "mock")
    # turn 1 offered the tool; turn 2 carried the call and its result back to the model
    assert len(recorder.options) == 2
    assert [spec.name for spec in recorder.options[0].tools] == ["echo"]
    assert recorder.options[0].messages == [Message.user("please echo hello")]
    assert recorder.options[1].messages[:2] == conversation.messages[:2]
    assert tool_messages(recorder.options[1]) == [result]
    # both steps streamed through the callback; usage is summed over them
    assert sum(isinstance(c, Finish) for c in seen) == 2
    assert reply.usage is not None
    assert reply.usage.output_tokens == 2 + 7  # one tool call in two pieces, then seven words


async def test_without_tools_the_mock_just_answers() -> None:
    async with Harness([("mock", MockPlugin(MockConfig()))]) as harness:
        conversation = Conversation(harness, route="mock", model="echo")
        first = await conversation.send("please echo hello")
        second = await conversation.send("again")
    assert (first.text, second.text) == ("please echo hello", "again")
    assert [m.role for m in conversation.messages] == ["user", "assistant", "user", "assistant"]


async def test_a_second_echo_request_calls_the_tool_again() -> None:
    async with Harness([("mock", MockPlugin(MockConfig()))]) as harness:
        conversation = Conversation(harness, route="mock", model="echo", tools=list(harness.tools))
        await conversation.send("echo one")
        reply = await conversation.send("echo two")
    assert reply.text == "The echo tool returned: echo two"
    assert reply.steps == 2


# ------------------------------------------------------------------ tool failures go back to the model


def fake_harness(adapter: FakeAdapter, *more: tuple[str, object], key: str = "fake") -> Harness:
    return Harness([*more, (key, AdapterPlugin(adapter))])


async def test_invalid_arguments_become_an_error_result_sent_back() -> None:
    ran: list[str] = []

    @tool
    def echo(text: str) -> str:
        ran.append(text)
        return text

    adapter = FakeAdapter(tool_call_reply("c1", "echo", '{"text": '), text_reply("sorry"))
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[echo])
        reply = await conversation.send("go")
    assert reply.text == "sorry"
    assert ran == []
    [result] = tool_messages(adapter.calls[1])
    assert result.tool_call_id == "c1"
    assert result.is_error
    assert "not valid JSON" in result.content
    # the raw arguments travelled back unchanged
    assert adapter.calls[1].messages[1].content == [ToolCallBlock("c1", "echo", '{"text": ')]


async def test_a_raising_tool_becomes_an_error_result_sent_back() -> None:
    @tool
    async def explode() -> str:
        raise RuntimeError("kaboom")

    adapter = FakeAdapter(tool_call_reply("c1", "explode"), text_reply("handled"))
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[explode])
        reply = await conversation.send("go")
    assert reply.text == "handled"
    assert tool_messages(adapter.calls[1]) == [
        ToolResultBlock("c1", "tool 'explode' failed: RuntimeError: kaboom", is_error=True)
    ]


@pytest.mark.parametrize(("tools", "listed"), [(["echo"], "echo"), ([], "none")])
async def test_an_unknown_tool_becomes_an_error_result(tools: list[str], listed: str) -> None:
    @tool
    def echo(text: str) -> str:
        return text

    adapter = FakeAdapter(tool_call_reply("c1", "missing"), text_reply("ok"))
    async with fake_harness(adapter) as harness:
        offered = [echo] if tools else []
        reply = await Conversation(harness, route="fake", tools=offered).send("go")
    assert reply.text == "ok"
    assert tool_messages(adapter.calls[1]) == [
        ToolResultBlock("c1", f"unknown tool 'missing'; available tools: {listed}", is_error=True)
    ]


# ------------------------------------------------------------------ parallel calls


async def test_parallel_calls_run_concurrently_and_results_keep_call_order() -> None:
    first_started = anyio.Event()
    second_done = anyio.Event()

    @tool
    async def first() -> str:
        first_started.set()
        await second_done.wait()  # only a concurrent `second` can set this
        return "first result"

    @tool
    async def second() -> str:
        await first_started.wait()  # only a concurrent `first` can set this
        second_done.set()
        return "second result"

    reported: list[str] = []
    adapter = FakeAdapter(parallel_calls(("a", "first", "{}"), ("b", "second", "{}")), text_reply("both"))
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[second, first])
        with anyio.fail_after(30):  # a deadlock guard: sequential execution would hang
            reply = await conversation.send(
                "go", on_tool_result=lambda call, result: reported.append(f"{call.id}={result.content}")
            )
    assert reply.text == "both"
    # `second` finished first, yet the results follow the order of the calls
    assert tool_messages(adapter.calls[1]) == [
        ToolResultBlock("a", "first result"),
        ToolResultBlock("b", "second result"),
    ]
    assert reported == ["a=first result", "b=second result"]
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool", "tool", "assistant"]


# ------------------------------------------------------------------ max_steps


async def test_max_steps_stops_a_tool_loop_with_a_clear_error() -> None:
    runs: list[str] = []

    @tool
    def again() -> str:
        runs.append("ran")
        return "more"

    adapter = FakeAdapter(tool_call_reply("c1", "again"), tool_call_reply("c2", "again"), text_reply("done"))
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[again], max_steps=2)
        with pytest.raises(MaxStepsExceeded, match=r"after 2 generation steps \(max_steps=2\)") as caught:
            await conversation.send("loop")
        assert len(adapter.calls) == 2
        assert runs == ["ran"]  # the calls of the last step are not executed ...
        declined = conversation.messages[-1].content[0]
        assert isinstance(declined, ToolResultBlock)
        assert declined.is_error
        assert declined.tool_call_id == "c2"
        assert "not executed: the limit of 2 generation steps" in declined.content
        assert caught.value.max_steps == 2
        assert caught.value.reply.steps == 2
        # ... but answered, so the history stays valid and the conversation goes on
        reply = await conversation.send("stop now")
    assert reply.text == "done"
    assert [m.role for m in conversation.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]


def test_max_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_steps must be at least 1, not 0"):
        Conversation(Harness(), max_steps=0)
    with pytest.raises(ValueError, match="offered more than once: echo"):
        Conversation(Harness(), tools=[Tool(lambda: "a", name="echo"), Tool(lambda: "b", name="echo")])


# ------------------------------------------------------------------ abort


async def test_abort_during_a_tool_run_stops_cleanly() -> None:
    started = anyio.Event()
    cancelled: list[bool] = []

    quick_done = anyio.Event()

    @tool
    async def slow() -> str:
        await quick_done.wait()
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(True)
        return "never"

    @tool
    async def quick() -> str:
        quick_done.set()
        return "quick result"

    abort = AbortSignal()
    adapter = FakeAdapter(parallel_calls(("q", "quick", "{}"), ("s", "slow", "{}")), text_reply("after"))
    replies: list[Reply] = []
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[quick, slow])

        async def send() -> None:
            replies.append(await conversation.send("go", abort=abort))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(send)
                await started.wait()
                abort.fire("user pressed stop")
        [reply] = replies
        assert reply.finish.kind == "aborted"
        assert reply.finish.failure is not None
        assert reply.finish.failure.message == "user pressed stop"
        assert cancelled == [True]
        assert len(adapter.calls) == 1  # no further generation after the abort
        results = [m.content[0] for m in conversation.messages if m.role == "tool"]
        assert results == [
            ToolResultBlock("q", "quick result"),
            ToolResultBlock("s", "aborted before the tool finished", is_error=True),
        ]
        # every call has its answer: the next send works
        assert (await conversation.send("next")).text == "after"
    assert tool_messages(adapter.calls[1]) == results


async def test_abort_during_a_stream_keeps_the_text_and_drops_incomplete_calls() -> None:
    abort = AbortSignal()
    script: list[Step] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="partial"),
        BlockStart(index=1, block_type="tool-call", id="c1", name="echo"),
        ToolCallDelta(index=1, id="c1", arguments_delta='{"te'),
        Stall(),
    ]

    def fire_on_call(chunk: StreamChunk) -> None:
        if isinstance(chunk, ToolCallDelta):
            abort.fire("stop streaming")

    @tool
    def echo(text: str) -> str:
        return text  # never called: the call was incomplete

    adapter = FakeAdapter(script)
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[echo])
        with anyio.fail_after(30):
            reply = await conversation.send("go", abort=abort, on_chunk=fire_on_call)
    assert reply.finish.kind == "aborted"
    assert reply.message.content == [TextBlock("partial")]
    assert conversation.messages == [
        Message.user("go"),
        Message(role="assistant", content=[TextBlock("partial")], route="fake", source="fake"),
    ]


async def test_an_abort_before_any_output_keeps_only_the_user_message() -> None:
    abort = AbortSignal()
    abort.fire()
    async with fake_harness(FakeAdapter(text_reply("never"))) as harness:
        conversation = Conversation(harness, route="fake")
        reply = await conversation.send("go", abort=abort)
    assert reply.finish.kind == "aborted"
    assert conversation.messages == [Message.user("go")]


async def test_an_abort_signal_fired_as_the_tools_start_answers_every_call() -> None:
    abort = AbortSignal()

    @tool
    def echo(text: str) -> str:
        return text  # never called: the abort wins before the tool runs

    def fire_at_finish(chunk: StreamChunk) -> None:
        if isinstance(chunk, Finish):
            abort.fire()

    adapter = FakeAdapter(tool_call_reply("c1", "echo", '{"text":"x"}'))
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[echo])
        reply = await conversation.send("go", abort=abort, on_chunk=fire_at_finish)
    assert reply.finish.kind == "aborted"
    assert reply.finish.failure is not None
    assert reply.finish.failure.message == "aborted by the caller"
    assert conversation.messages[-1].content == [
        ToolResultBlock("c1", "aborted before the tool finished", is_error=True)
    ]


# ------------------------------------------------------------------ errors roll the send back


async def test_an_error_finish_rolls_the_history_back() -> None:
    ran: list[str] = []

    @tool
    def side_effect() -> str:
        ran.append("x")
        return "done"

    adapter = FakeAdapter(
        text_reply("first answer"),
        tool_call_reply("c1", "side_effect"),
        [Raise(LlmError("RATE_LIMITED", "slow down"))],
        tool_call_reply("c2", "side_effect"),
        text_reply("second answer"),
    )
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake", tools=[side_effect])
        await conversation.send("one")
        before = list(conversation.messages)
        with pytest.raises(LlmError) as caught:
            await conversation.send("two")
        assert caught.value.code == "RATE_LIMITED"
        assert conversation.messages == before
        assert ran == ["x"]  # a tool that ran is not undone
        reply = await conversation.send("two")  # the same send, retried
    assert reply.text == "second answer"
    assert ran == ["x", "x"]


async def test_cancellation_rolls_the_history_back() -> None:
    script: list[Step] = [BlockStart(index=0, block_type="text"), TextDelta(index=0, text="x"), Stall()]
    adapter = FakeAdapter(script)
    async with fake_harness(adapter) as harness:
        conversation = Conversation(harness, route="fake")
        with anyio.CancelScope() as scope:
            await conversation.send("go", on_chunk=lambda chunk: scope.cancel())
    assert scope.cancelled_caught
    assert conversation.messages == []
    assert adapter.finalized == adapter.started == 1


class Breaker:
    """A middleware rewriting the finish: drop it, strip its failure, or claim tool calls."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            if not isinstance(chunk, Finish):
                yield chunk
            elif self.mode == "error-without-failure":
                yield Finish(FinishReason(kind="error"))
            elif self.mode == "tool-calls-without-calls":
                yield Finish(FinishReason(kind="tool-calls"))


@pytest.mark.parametrize(
    ("mode", "code", "message"),
    [
        ("drop", "PROTOCOL", r"the middleware chain \('breaker'\) ended the stream without a finish"),
        ("error-without-failure", "INTERNAL", "error finish without a failure"),
    ],
)
async def test_broken_streams_raise(mode: str, code: str, message: str) -> None:
    async with fake_harness(FakeAdapter(text_reply("x")), ("breaker", Breaker(mode))) as harness:
        conversation = Conversation(harness, route="fake")
        with pytest.raises(LlmError, match=message) as caught:
            await conversation.send("go")
    assert caught.value.code == code
    assert conversation.messages == []


async def test_a_tool_calls_finish_without_calls_ends_the_send() -> None:
    async with fake_harness(FakeAdapter(text_reply("x")), ("breaker", Breaker("tool-calls-without-calls"))) as h:
        reply = await Conversation(h, route="fake", tools=[Tool(lambda: "y", name="y")]).send("go")
    assert reply.finish.kind == "tool-calls"
    assert reply.steps == 1


async def test_an_empty_reply_is_not_added_to_the_history() -> None:
    async with fake_harness(FakeAdapter(text_reply())) as harness:
        conversation = Conversation(harness, route="fake")
        reply = await conversation.send("go")
    assert reply.message.content == []
    assert conversation.messages == [Message.user("go")]


# ------------------------------------------------------------------ settings and callbacks


async def test_settings_template_and_async_callbacks() -> None:
    adapter = FakeAdapter(tool_call_reply("c1", "echo", '{"text":"x"}'), text_reply("ok"))
    chunks: list[StreamChunk] = []
    results: list[ToolResultBlock] = []

    async def on_chunk(chunk: StreamChunk) -> None:
        chunks.append(chunk)

    async def on_tool_result(call: ToolCallBlock, result: ToolResultBlock) -> None:
        results.append(result)

    template = GenerateOptions(route="fake", model="m1", system="be brief", max_tokens=7, metadata={"k": 1})
    async with fake_harness(adapter) as harness:

        def echo(text: str) -> str:
            return text

        conversation = Conversation(harness, options=template, tools=[Tool(echo)])
        await conversation.send(Message.user("go"), on_chunk=on_chunk, on_tool_result=on_tool_result)
        conversation.model = "m2"
        conversation.clear()
        await conversation.send("again")
    first, second, third = adapter.calls
    metadata = {key: value for key, value in first.metadata.items() if key != "harness.record"}  # the core's
    assert (first.route, first.model, first.system, first.max_tokens, metadata) == (
        "fake",
        "m1",
        "be brief",
        7,
        {"k": 1},
    )
    assert second.model == "m1"
    assert third.model == "m2"
    assert third.messages == [Message.user("again")]
    assert results == [ToolResultBlock("c1", "x")]
    assert sum(isinstance(c, Finish) for c in chunks) == 2


async def test_defaults_of_the_harness_apply_when_nothing_is_set() -> None:
    adapter = FakeAdapter(text_reply("ok"))
    from harness_core.plugininfo import Defaults

    harness = Harness([("fake", AdapterPlugin(adapter))], defaults=Defaults(route="fake", model="dm"))
    async with harness:
        reply = await Conversation(harness).send("go")
    assert reply.message.route == "fake"
    assert (adapter.calls[0].route, adapter.calls[0].model) == ("fake", "dm")


def test_usage_is_summed_and_unknown_counts_stay_unknown() -> None:
    a = TokenUsage(10, 2, cache_read_tokens=4)
    b = TokenUsage(5, 3)
    assert _add_usage(None, None) is None
    assert _add_usage(a, None) == a
    assert _add_usage(None, b) == b
    assert _add_usage(a, b) == TokenUsage(15, 5)
    assert _add_usage(a, a) == TokenUsage(20, 4, cache_read_tokens=8)


# ------------------------------------------------------------------ save and load


def replaying_adapter(log: list[object]) -> FakeAdapter:
    """Turn 1 emits replay state; later turns log the replay state they received."""

    def later(options: GenerateOptions) -> list[StreamChunk]:
        log.append([m.replay_state for m in options.messages if m.role == "assistant"])
        return text_reply("later")

    return FakeAdapter(text_reply("first", replay_state={"signature": "sig-1", "n": [1, 2]}), later)


async def test_save_load_continue_hands_the_replay_state_back(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    async with fake_harness(replaying_adapter([]), key="fake:work") as harness:
        conversation = Conversation(harness, route="fake", model="m", system="sys")
        await conversation.send("hi")
        conversation.save(path)
    saved = json.loads(path.read_text())
    assert (saved["version"], saved["route"]) == (2, "fake")
    assert "provider" not in saved
    assert saved["messages"][1]["replay_state"] == {"signature": "sig-1", "n": [1, 2]}
    assert saved["messages"][1]["source"] == "fake:work"
    assert not (tmp_path / "chat.json.tmp").exists()

    log: list[object] = []
    adapter = replaying_adapter(log)
    adapter.calls.append(GenerateOptions())  # skip the first script: this harness only continues
    async with fake_harness(adapter, key="fake:work") as harness:
        loaded = Conversation.load(path, harness, max_steps=3)
        assert (loaded.route, loaded.model, loaded.system, loaded.max_steps) == ("fake", "m", "sys", 3)
        assert loaded.messages == conversation.messages
        reply = await loaded.send("more")
    assert reply.text == "later"
    assert log == [[{"signature": "sig-1", "n": [1, 2]}]]


async def test_a_loaded_conversation_replays_only_to_the_same_plugin_instance(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    async with fake_harness(replaying_adapter([]), key="fake:work") as harness:
        conversation = Conversation(harness, route="fake")
        await conversation.send("hi")
        conversation.save(str(path))
    log: list[object] = []
    adapter = replaying_adapter(log)
    adapter.calls.append(GenerateOptions())
    async with fake_harness(adapter, key="fake:home") as harness:
        loaded = Conversation.load(path, harness, route="fake", model="other")
        assert loaded.model == "other"
        await loaded.send("more")
    assert log == [[None]]


def test_a_version_1_file_saved_the_route_as_provider_and_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"version": 1, "provider": "p", "model": "m", "messages": []}))
    loaded = Conversation.load(path, Harness())
    assert (loaded.route, loaded.model) == ("p", "m")
    path.write_text(json.dumps({"version": 1, "model": "m"}))
    assert Conversation.load(path, Harness()).route is None


def test_provider_is_the_deprecated_old_name_of_route() -> None:
    with pytest.warns(DeprecationWarning, match=r"Conversation\(provider=\.\.\.\) is deprecated: pass route=") as seen:
        conversation = Conversation(Harness(), provider="p")
    assert seen[0].filename == __file__
    assert conversation.route == "p"
    with pytest.raises(TypeError, match="Conversation: give route= only"):
        Conversation(Harness(), route="a", provider="b")
    with pytest.raises(TypeError, match="unexpected keyword argument 'routes'"):
        Conversation(Harness(), routes="a")
    with pytest.warns(DeprecationWarning, match=r"Conversation\.provider is deprecated: use Conversation\.route"):
        assert conversation.provider == "p"
    with pytest.warns(DeprecationWarning, match=r"Conversation\.provider is deprecated"):
        conversation.provider = "q"
    assert conversation.route == "q"
    state = ConversationState(route="s")
    with pytest.warns(DeprecationWarning, match=r"Conversation\.from_state\(provider=\.\.\.\) is deprecated"):
        assert Conversation.from_state(state, Harness(), provider="t").route == "t"
    with pytest.warns(DeprecationWarning, match=r"ConversationState\(provider=\.\.\.\) is deprecated"):
        old = ConversationState(provider="s")  # type: ignore[call-arg]
    assert old == state
    with pytest.warns(DeprecationWarning, match=r"ConversationState\.provider is deprecated"):
        assert old.provider == "s"


def test_from_state_and_to_state_round_trip() -> None:
    state = ConversationState(route="p", messages=[Message.user("x")])
    conversation = Conversation.from_state(state, Harness(), model="m")
    assert (conversation.route, conversation.model, conversation.system) == ("p", "m", None)
    assert conversation.to_state() == ConversationState(route="p", model="m", messages=[Message.user("x")])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot load a conversation from .*missing.json"),
        (b"{not json", "cannot load a conversation from .*: JSON is malformed"),
        (
            b'{"messages": [{"role": "robot", "content": []}]}',
            r"Invalid enum value 'robot' - at `\$.messages\[0\].role`",
        ),
        (b'{"version": 3}', "unsupported conversation version 3 \\(known: 2\\)"),
    ],
)
def test_load_errors_name_the_file(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "missing.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(LlmError, match=message) as caught:
        Conversation.load(path, Harness())
    assert caught.value.code == "CONFIG"


async def test_tool_calls_cut_by_the_length_limit_are_dropped_not_executed() -> None:
    ran: list[str] = []

    @tool
    def echo(text: str) -> str:
        ran.append(text)
        return text

    script: list[Step] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="calling"),
        BlockEnd(index=0, block=TextBlock("calling")),
        BlockStart(index=1, block_type="tool-call", id="c1", name="echo"),
        ToolCallDelta(index=1, id="c1", arguments_delta='{"text": "trunc'),
        BlockEnd(index=1, block=ToolCallBlock("c1", "echo", '{"text": "trunc')),
        Finish(FinishReason(kind="length", raw="max_tokens")),
    ]
    async with fake_harness(FakeAdapter(script)) as harness:
        conversation = Conversation(harness, route="fake", tools=[echo])
        reply = await conversation.send("go")
    assert reply.finish.kind == "length"
    assert ran == []
    assert conversation.messages[-1].content == [TextBlock("calling")]
